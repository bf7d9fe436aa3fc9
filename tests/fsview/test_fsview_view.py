"""squash + FsView: layer semantics, chroot-like link resolution, reading, globbing."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from fsview_util import D, F, H, L, gz, make_tar, read, view_of, zst

from gpusbom.errors import UnsafeArchiveError
from gpusbom.fsview import (
    EntryKind,
    FsView,
    Limits,
    NotCapturedError,
    PathMatcher,
    PathSpec,
    Spool,
    squash,
)


def test_files_deleted_by_later_layer_are_gone() -> None:
    base = make_tar(
        [
            D("etc"),
            F("etc/passwd", b"root"),
            F("etc/group", b"g"),
            D("opt/app"),
            F("opt/app/a.txt", b"a"),
            F("opt/app/sub/b.txt", b"b"),
        ]
    )
    upper = make_tar([F("etc/.wh.passwd", b""), F("opt/.wh.app", b"")])
    v = view_of([gz(base), zst(upper)])
    assert not v.exists("/etc/passwd")
    assert v.read_text("/etc/group") == "g"
    assert not v.exists("/opt/app") and not v.exists("/opt/app/sub/b.txt")
    assert v.listdir("/etc") == ["group"]
    with pytest.raises(FileNotFoundError):
        v.read_bytes("/etc/passwd")


def test_opaque_dir_hides_lower_but_not_same_layer() -> None:
    base = make_tar([F("opt/app/old.txt", b"old"), F("opt/app/keep/x", b"x"), F("opt/other", b"o")])
    upper = make_tar([D("opt/app"), F("opt/app/.wh..wh..opq", b""), F("opt/app/new.txt", b"new")])
    v = view_of([base, upper])
    assert v.listdir("/opt/app") == ["new.txt"]
    assert v.read_text("/opt/app/new.txt") == "new"
    assert v.exists("/opt/other")
    assert not v.exists("/opt/app/keep/x")


def test_whiteout_and_recreate_in_same_layer() -> None:
    base = make_tar([F("etc/conf", b"v1")])
    upper = make_tar([F("etc/.wh.conf", b""), F("etc/conf", b"v2")])
    v = view_of([base, upper])
    assert v.read_text("/etc/conf") == "v2"
    assert v.layer_of("/etc/conf") == v.layers[1].diff_id


def test_file_replacing_dir_removes_subtree() -> None:
    base = make_tar([D("opt/tool"), F("opt/tool/version.txt", b"1"), D("opt/tool/lib")])
    upper = make_tar([F("opt/tool", b"now a file")])
    v = view_of([base, upper])
    assert v.is_file("/opt/tool")
    assert not v.exists("/opt/tool/version.txt") and not v.exists("/opt/tool/lib")


def test_unmatched_file_replacing_dir_or_link_removes_it() -> None:
    base = make_tar(
        [
            D("opt/tool"),
            F("opt/tool/version.txt", b"1"),
            L("usr/local/cuda", "cuda-12.4"),
            F("usr/local/cuda-12.4/version.json", b"{}"),
        ]
    )
    upper = make_tar([F("opt/tool", b"now a file"), F("usr/local/cuda", b"file")])
    v = view_of([base, upper], [PathSpec("/opt/tool/*"), PathSpec("/usr/local/**/version.json")])
    assert not v.exists("/opt/tool/version.txt")
    assert not v.exists("/usr/local/cuda/version.json")
    assert v.exists("/usr/local/cuda-12.4/version.json")


def test_dir_over_dir_keeps_lower_children() -> None:
    v = view_of(
        [
            make_tar([D("usr/lib"), F("usr/lib/a", b"a")]),
            make_tar([D("usr/lib"), F("usr/lib/b", b"b")]),
        ]
    )
    assert v.listdir("/usr/lib") == ["a", "b"]
    assert v.layer_of("/usr/lib/a") == v.layers[0].diff_id


def test_symlinks_resolve_inside_root() -> None:
    tar = make_tar(
        [
            D("usr/lib"),
            L("lib", "usr/lib"),
            F("usr/lib/libcuda.so.1", b"ELF1"),
            D("usr/local/cuda-12.4/lib64"),
            L("usr/local/cuda", "cuda-12.4"),
            F("usr/local/cuda-12.4/version.json", b'{"cuda": "12.4"}'),
            L("usr/local/cuda-12.4/lib64/libcudart.so", "libcudart.so.12"),
            F("usr/local/cuda-12.4/lib64/libcudart.so.12", b"rt"),
            L("etc/alternatives/x", "/usr/local/cuda/version.json"),
            L("usr/bin/dots", "../../../../../../usr/lib/libcuda.so.1"),
        ]
    )
    v = view_of([tar])
    assert v.read_bytes("/lib/libcuda.so.1") == b"ELF1"
    assert v.realpath("/lib/libcuda.so.1") == "/usr/lib/libcuda.so.1"
    assert v.read_text("/usr/local/cuda/version.json") == '{"cuda": "12.4"}'
    assert (
        v.realpath("/usr/local/cuda/lib64/libcudart.so")
        == "/usr/local/cuda-12.4/lib64/libcudart.so.12"
    )
    assert v.read_bytes("/etc/alternatives/x").startswith(b'{"cuda"')
    assert v.read_bytes("/usr/bin/dots") == b"ELF1"
    link = v.lookup("/usr/local/cuda", follow=False)
    assert link is not None and link.kind is EntryKind.SYMLINK
    assert v.is_dir("/usr/local/cuda") and v.is_dir("/lib")
    assert v.glob("/usr/local/cuda/lib64/*.so*") == [
        "/usr/local/cuda-12.4/lib64/libcudart.so",
        "/usr/local/cuda-12.4/lib64/libcudart.so.12",
    ]
    assert v.listdir("/lib") == ["libcuda.so.1"]
    assert v.layer_of("/lib/libcuda.so.1") == v.layers[0].diff_id


def test_absolute_symlink_never_reads_host(tmp_path: Path) -> None:
    tar = make_tar(
        [
            L("etc/shadow-link", "/etc/shadow"),
            L("etc/passwd-link", "../../../../etc/passwd"),
            F("etc/passwd", b"image-passwd"),
        ]
    )
    v = view_of([tar])
    assert v.realpath("/etc/shadow-link") == "/etc/shadow"
    assert v.lookup("/etc/shadow-link") is None
    with pytest.raises(FileNotFoundError):
        v.read_bytes("/etc/shadow-link")
    assert v.read_bytes("/etc/passwd-link") == b"image-passwd"
    assert v.realpath("/etc/passwd-link") == "/etc/passwd"
    # with the image's own /etc/shadow present, that is what is read
    v2 = view_of([tar, make_tar([F("etc/shadow", b"image-shadow")])])
    assert v2.read_bytes("/etc/shadow-link") == b"image-shadow"


def test_relative_dotdot_clamps_at_root() -> None:
    v = view_of([make_tar([L("a/b/c", "../../../../../../../etc/passwd"), F("etc/passwd", b"p")])])
    assert v.realpath("/a/b/c") == "/etc/passwd"
    assert v.read_bytes("/a/b/c") == b"p"
    assert v.realpath("/../../../etc/passwd") == "/etc/passwd"


def test_symlink_loop() -> None:
    v = view_of([make_tar([L("a", "/b"), L("b", "a"), L("self", "self")])])
    with pytest.raises(UnsafeArchiveError, match=r"^symlink loop at /a \(/a -> /b -> /a\)$"):
        v.lookup("/a")
    with pytest.raises(UnsafeArchiveError, match="symlink loop at /self"):
        v.read_bytes("/self/x")
    assert not v.exists("/a") and not v.is_file("/a")
    assert v.lookup("/a", follow=False) is not None


def test_long_chain_over_hop_limit() -> None:
    items = [L(f"l{i}", f"l{i + 1}") for i in range(10)] + [F("l10", b"end")]
    v = view_of([make_tar(items)])
    assert v.read_bytes("/l0") == b"end"
    v2 = view_of([make_tar(items)], limits=Limits(max_symlink_hops=5))
    with pytest.raises(UnsafeArchiveError, match="symlink loop at /l0"):
        v2.lookup("/l0")


def test_file_in_middle_of_path() -> None:
    v = view_of([make_tar([F("etc/passwd", b"x")])])
    assert v.lookup("/etc/passwd/x") is None
    assert not v.exists("/etc/passwd/x")


def test_hardlinks() -> None:
    tar = make_tar(
        [F("usr/lib/libfoo.so.1.2", b"foo"), H("usr/lib/libfoo.so.1", "usr/lib/libfoo.so.1.2")]
    )
    v = view_of([tar])
    assert v.read_bytes("/usr/lib/libfoo.so.1") == b"foo"
    assert v.is_file("/usr/lib/libfoo.so.1")
    # the target deleted by a later layer: the link keeps its content
    v2 = view_of([tar, make_tar([F("usr/lib/.wh.libfoo.so.1.2", b"")])])
    assert v2.read_bytes("/usr/lib/libfoo.so.1") == b"foo"


def test_not_captured() -> None:
    tar = make_tar([F("usr/share/doc/readme", b"r"), F("opt/big", b"x" * 100)])
    v = view_of([tar], [PathSpec("/opt/*", max_size=10)])
    assert v.exists("/opt/big")
    with pytest.raises(NotCapturedError, match="larger than"):
        v.read_bytes("/opt/big")
    assert v.lookup("/opt/big").size == 100  # type: ignore[union-attr]
    assert not v.exists("/usr/share/doc/readme")  # unmatched files are not kept
    with pytest.raises(IsADirectoryError):
        v.read_bytes("/opt")


def test_history_across_layers() -> None:
    specs = [PathSpec("/var/lib/dpkg/status", history=True), PathSpec("/etc/os-release")]
    layers = [
        make_tar([F("var/lib/dpkg/status", b"v1"), F("etc/os-release", b"a")]),
        make_tar([F("usr/bin/x", b"")]),
        make_tar([F("var/lib/dpkg/status", b"v2"), F("etc/os-release", b"b")]),
        make_tar([F("var/lib/dpkg/status", b"v3")]),
    ]
    v = view_of(layers, specs)
    h = v.history("/var/lib/dpkg/status")
    assert [e.content.read() for e in h] == [b"v1", b"v2", b"v3"]  # type: ignore[union-attr]
    assert [e.layer for e in h] == [0, 2, 3]
    assert [e.content.read() for e in v.history("/etc/os-release")] == [b"b"]  # type: ignore[union-attr]
    assert v.history("/nope") == []
    # deleted and recreated: history restarts
    v2 = view_of(
        layers
        + [
            make_tar([F("var/lib/dpkg/.wh.status", b"")]),
            make_tar([F("var/lib/dpkg/status", b"v9")]),
        ],
        specs,
    )
    assert [e.layer for e in v2.history("/var/lib/dpkg/status")] == [5]


def test_entries_glob_listdir() -> None:
    v = view_of(
        [
            make_tar(
                [
                    F("usr/lib/python3/dist-packages/a-1.dist-info/METADATA", b"A"),
                    F("usr/lib/python3/dist-packages/b-2.dist-info/METADATA", b"B"),
                    F("opt/conda/lib/python3.11/site-packages/c-3.dist-info/METADATA", b"C"),
                ]
            )
        ]
    )
    assert v.glob("/**/*.dist-info/METADATA") == [
        "/opt/conda/lib/python3.11/site-packages/c-3.dist-info/METADATA",
        "/usr/lib/python3/dist-packages/a-1.dist-info/METADATA",
        "/usr/lib/python3/dist-packages/b-2.dist-info/METADATA",
    ]
    assert v.glob("/usr/lib/python3/dist-packages/*/METADATA")[0].endswith("a-1.dist-info/METADATA")
    assert v.glob("/nothing/*") == []
    paths = [e.path for e in v.entries()]
    assert paths == sorted(paths) and paths[0] == "/"
    assert v.listdir("/") == ["opt", "usr"]
    with pytest.raises(NotADirectoryError):
        v.listdir("/usr/lib/python3/dist-packages/a-1.dist-info/METADATA")
    with pytest.raises(FileNotFoundError):
        v.listdir("/nope")
    with v.open("/usr/lib/python3/dist-packages/a-1.dist-info/METADATA") as f:
        assert f.read() == b"A"


def test_glob_in_a_large_directory_is_the_regex_scan() -> None:
    """A glob whose literal directory holds many paths is answered through the base-name
    index (``FsView._glob_raw``): the same paths, in the same order, as testing every path
    of the view against the glob's regex."""
    import re

    from gpusbom.fsview.spec import glob_to_regex
    from gpusbom.fsview.viewglob import _BASE_INDEX_OVER

    lib = "usr/lib/x86_64-linux-gnu"
    files = [F(f"{lib}/libz{i:04d}.so.1", b"z") for i in range(_BASE_INDEX_OVER * 3)]
    files += [F(f"{lib}/libamdhip64.so.6.2.60200", b"h"), F(f"{lib}/libamdhip64.so.6", b"h"),
              F(f"{lib}/sub/libamdhip64.so.5", b"h"), F("usr/lib/libamdhip64.so", b"h"),
              F(f"{lib}/libamdhip64.sox", b"h"), F("opt/rocm/lib/libamdhip64.so.6", b"h")]
    v = view_of([make_tar(files)])
    every = [e.path for e in v.entries()]
    for pattern in (f"/{lib}/libamdhip64.so*", f"/{lib}/libamdhip64.so.?", "/usr/lib/libamdhip64.so*",
                    f"/{lib}/libz00[0-4]*.so.1", f"/{lib}/lib*.so.6", f"/{lib}/*/libamdhip64.so*",
                    f"/{lib}/libnothing.so*", "/usr/lib/*/libamdhip64.so.6"):
        rx = re.compile("^" + glob_to_regex(pattern) + "$")
        assert v.glob(pattern) == [p for p in every if rx.match(p)], pattern
    assert v.glob(f"/{lib}/libamdhip64.so*") == [f"/{lib}/libamdhip64.so.6",
                                                  f"/{lib}/libamdhip64.so.6.2.60200",
                                                  f"/{lib}/libamdhip64.sox"]


def test_implicit_parent_dirs() -> None:
    # a tar without directory entries still gives a navigable tree
    v = view_of([make_tar([F("a/b/c/d.txt", b"d")])])
    assert v.is_dir("/a/b") and v.listdir("/a/b") == ["c"]
    assert v.read_bytes("/a/b/../b/c/./d.txt") == b"d"


def test_kept_records_limit_over_layers() -> None:
    layers = [read(make_tar([D(f"l{n}/d{i}") for i in range(8)]), index=n) for n in range(3)]
    with pytest.raises(UnsafeArchiveError, match="kept records"):
        squash(layers, Limits(max_kept_records=20))


def test_spooled_content_readable_through_view() -> None:
    big = os.urandom(2 << 20)
    limits = Limits(max_memory_content=1 << 16)
    with Spool(limits) as sp:
        v = view_of(
            [gz(make_tar([F("usr/lib/libbig.so", big), L("usr/lib/libbig.so.1", "libbig.so")]))],
            limits=limits,
            spool=sp,
        )
        assert v.read_bytes("/usr/lib/libbig.so.1") == big
        with v.open("/usr/lib/libbig.so") as f:
            assert f.read(10) == big[:10]


# -- from_directory ------------------------------------------------------------------------------


def test_from_directory(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc/os-release").write_text("ID=debian\n")
    (root / "usr/lib").mkdir(parents=True)
    (root / "usr/lib/libx.so.1").write_bytes(b"ELF")
    (root / "lib").symlink_to("usr/lib")
    (root / "etc/shadow-link").symlink_to("/etc/shadow")
    (root / "etc/escape").symlink_to("../../../../../../etc/passwd")
    (root / "usr/share").mkdir()
    (root / "usr/share/unmatched").write_text("x")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("host secret")
    (root / "mnt").symlink_to(outside)  # a link to a host directory is recorded, not followed
    os.mkfifo(root / "etc/fifo")
    with Spool() as sp:
        m = PathMatcher([PathSpec("/etc/*"), PathSpec("/usr/lib/*"), PathSpec("/mnt/**")])
        v = FsView.from_directory(root, m, sp)
        assert v.read_text("/etc/os-release") == "ID=debian\n"
        assert v.read_bytes("/lib/libx.so.1") == b"ELF"
        assert v.lookup("/etc/shadow-link") is None  # the host's /etc/shadow is never read
        assert v.realpath("/etc/escape") == "/etc/passwd" and not v.exists("/etc/escape")
        assert not v.exists("/mnt/secret")
        assert v.lookup("/mnt", follow=False).kind is EntryKind.SYMLINK  # type: ignore[union-attr]
        assert not v.exists("/usr/share/unmatched")
        assert v.lookup("/etc/fifo").kind is EntryKind.OTHER  # type: ignore[union-attr]
        assert v.layers[0].index == 0 and v.layers[0].diff_id is None
        assert v.unreadable == []


def test_from_directory_unreadable() -> None:
    """Real EACCES: the view is built by an unprivileged process (root reads everything, so
    as root the child drops to nobody with setpriv)."""
    import json
    import pwd
    import shutil
    import subprocess
    import sys
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="gpusbom-unreadable-"))  # tmp_path is 0700
    os.chmod(base, 0o755)
    root = base / "root"
    (root / "etc").mkdir(parents=True)
    secret = root / "etc/secret.conf"
    secret.write_text("x")
    secret.chmod(0)
    closed = root / "closed"
    closed.mkdir()
    closed.chmod(0)
    code = ("import json, sys\n"
            "from gpusbom.fsview import FsView, PathMatcher, PathSpec, Spool\n"
            "with Spool() as sp:\n"
            "    v = FsView.from_directory(sys.argv[1], PathMatcher([PathSpec('/**')]), sp)\n"
            "print(json.dumps(sorted(v.unreadable)))\n")
    cmd = [sys.executable, "-c", code, str(root)]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        assert setpriv is not None, "setpriv (util-linux) is needed to drop root"
        nobody = pwd.getpwnam("nobody")
        cmd = [setpriv, f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}",
               "--clear-groups", *cmd]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd="/",
                              timeout=60, check=False)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout) == ["/closed", "/etc/secret.conf"]
    finally:
        closed.chmod(stat.S_IRWXU)
        shutil.rmtree(base, ignore_errors=True)


def test_from_directory_unreadable_simulated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EACCES on a file or a directory is counted, not fatal (simulated: tests may run as root)."""
    import errno

    from gpusbom.fsview import view as view_mod

    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc/secret.conf").write_text("x")
    (root / "etc/ok.conf").write_text("ok")
    (root / "closed").mkdir()
    (root / "closed/inner").write_text("y")
    real_open = os.open

    def fake_open(path, flags, mode=0o777, *, dir_fd=None):  # type: ignore[no-untyped-def]
        if os.fspath(path) in ("secret.conf", "closed"):
            raise PermissionError(errno.EACCES, "denied", path)
        return real_open(path, flags, mode, dir_fd=dir_fd)

    monkeypatch.setattr(view_mod.os, "open", fake_open)
    with Spool() as sp:
        v = FsView.from_directory(root, PathMatcher([PathSpec("/**")]), sp)
    assert sorted(v.unreadable) == ["/closed", "/etc/secret.conf"]
    assert v.read_text("/etc/ok.conf") == "ok"


def test_from_directory_skips_proc_sys_dev_on_host_root(tmp_path: Path) -> None:
    from gpusbom.fsview.rootwalk import DirWalker

    for d in ("proc", "sys", "dev", "etc"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "f").write_text(d)
    with Spool() as sp:
        w = DirWalker(PathMatcher([PathSpec("/**")]), sp, Limits(), skip_host=True)
        w.walk(str(tmp_path))
    assert sorted(w.entries) == ["/", "/etc", "/etc/f"]


def test_views_without_a_children_map_answer_the_same() -> None:
    """A host's or a directory's view has no children map (``squash`` makes one): whether a
    path is a directory that holds entries, and what it lists, come from the sorted paths,
    the same as from the map (implicit parents, names sorting just before and after "/")."""
    files = [F(n, b"x") for n in (
        "a/b/c", "a/b-c/d", "a/b.c", "a/b0", "a/b/c2/d/e", "x", "x-y/z", "p/q!/s", "p/q",
        "é/ü", "a/b/\U0010fffe", "deep/1/2/3/4/5/6")]
    files += [L("lnk", "a/b"), L("a/up", "../x-y")]
    v = view_of([make_tar(files)])
    assert v._children is not None
    bare = FsView(dict(v._entries), v.layers, v.limits)  # the same entries, no map
    probes = {"/", "/a", "/a/b", "/a/b-c", "/a/b/c2", "/a/b/c2/d", "/x", "/x-y", "/p", "/p/q",
              "/p/q!", "/é", "/zz", "/a/b0", "/a/b.", "/deep/1/2/3", "/lnk", "/lnk/c2",
              "/a/up", "/a/up/z", "/a/b/c/nothing", "/deep/1/2/3/4/5/6/7"}
    for p in sorted(probes):
        assert bare.exists(p) == v.exists(p), p
        assert bare.is_dir(p) == v.is_dir(p), p
        assert bare.lookup(p) == v.lookup(p), p
        if v.is_dir(p):
            assert bare.listdir(p) == v.listdir(p), p
    assert bare.listdir("/") == ["a", "deep", "lnk", "p", "x", "x-y", "é"]
    assert bare.listdir("/a") == ["b", "b-c", "b.c", "b0", "up"]
    assert bare.listdir("/lnk") == ["c", "c2", "\U0010fffe"]
    assert bare.is_dir("/deep/1/2") and not bare.exists("/deep/1/7")


def test_glob_component_starts_narrow_candidates_not_matches() -> None:
    """A glob's candidates are narrowed by the literal start of each component before its
    regex is compiled (``FsView._matching``): the same paths as testing every path."""
    import re

    from gpusbom.fsview.spec import glob_to_regex

    names = ["opt/v/lib/python3/site-packages/tensorrt-10.dist-info/METADATA",
             "opt/v/lib/python3/site-packages/tensorrt_libs-10.dist-info/METADATA",
             "opt/v/lib/python3/site-packages/torch-2.dist-info/METADATA",
             "usr/lib/x86_64-linux-gnu/libcudart.so.12", "usr/lib/x86_64-linux-gnu/sub/libcudart.so.1",
             "usr/local/lib/x86_64-linux-gnu/libze_loader.so.1", "conda-meta/x.json",
             "o/conda-meta/y.json", "o/conda-meta-z/y.json", "a/[b]/c", "a/b*/c",
             "usr/lib/x86_64-linux-gnu-extra", "usr/lib/x86_64-linux-gnu.d/f", "usr/lib/i386-linux-gnu/g",
             "usr/lib/python3/x-linux-gnu/h"]
    v = view_of([make_tar([F(n, b"m") for n in names])])
    every = [e.path for e in v.entries()]
    for pattern in ("/**/tensorrt*.dist-info/METADATA", "/**/tensorrt-*.dist-info/METADATA",
                    "/**/mkl-*.dist-info/METADATA", "/usr/lib/*-linux-gnu/libcudart.so*",
                    "/usr/local/lib/*-linux-gnu*", "/usr/lib/x86_64-linux-gnu/libcudart.so*",
                    "/**/conda-meta/*.json", "/**/*.json", "/**/libze_*.so.?", "/a/*/c",
                    "/a/[!x]*/c", "/**/x86_64-linux-gnu/**/libcudart.so*", "/usr/**",
                    "/opt/v/**/METADATA", "/usr/lib/*-linux-gnu*", "/usr/lib/*", "/usr/lib/x86_64-linux-gnu*",
                    "/usr/lib/?386-linux-gnu", "/usr/lib/x86_64-linux-gnu/*"):
        rx = re.compile("^" + glob_to_regex(pattern) + "$")
        assert v.glob(pattern) == [p for p in every if rx.match(p)], pattern
