"""File ownership: every package cataloger claims the files its packages own
(``CollectContext.claim``), so stack collectors can ask ``ctx.owner(path)`` and
fusion can merge GPU evidence into the owning package.

Oracles are real where this machine has the data:

* dpkg: this machine's own ``/var/lib/dpkg/info/*.list`` and ``*.md5sums``, with
  ``dpkg -S`` as the oracle; merged-/usr is proved with a ``/lib -> usr/lib``
  symlink layer (dpkg on Debian 12 lists ``/lib/x86_64-linux-gnu/libc.so.6``;
  the file is under ``/usr/lib``);
* rpm: a package built with rpmbuild and installed with ``--justdb``, ``rpm -ql``
  as the oracle;
* python: the pinned PyPI wheel's RECORD (``test_python_dist``) with the wheel's
  own file list as the oracle, and the dist-infos of this test interpreter's
  environment with ``importlib.metadata`` as the oracle;
* apk and conda: the hand-written records of ``test_apk`` / ``test_conda``.

The end-to-end test runs ``gpusbom.scan.run_collectors`` with a tiny stack
collector (phase 2) defined here.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sysconfig
import zipfile
from collections.abc import Iterable
from pathlib import Path

import pytest
import test_apk
import test_conda
import test_pkg_collectors_fsview as fsv
import test_python_dist
import test_rpm
from test_pkg_collectors_fsview import DEBIAN_OS, Link, image, matcher

from gpusbom.collectors import CollectContext, Collector, all_collectors
from gpusbom.collectors.base import OwnershipIndex
from gpusbom.collectors.dpkg import parse_dpkg_list, parse_dpkg_md5sums
from gpusbom.collectors.osrelease import read_os_release
from gpusbom.collectors.python import parse_installed_files, parse_record
from gpusbom.collectors.rpm import (
    TAG_BASENAMES,
    TAG_DIRINDEXES,
    TAG_DIRNAMES,
    header_files,
    read_rpmdb_file,
)
from gpusbom.fsview.spec import PathSpec
from gpusbom.fsview.types import Limits, Spool
from gpusbom.fsview.view import FsView
from gpusbom.model import Component, ComponentType, Target, own_product_version
from gpusbom.scan import build_matcher, run_collectors

INFO = Path("/var/lib/dpkg/info")
CUDART_WHL = "nvidia_cuda_runtime_cu12-12.4.127-py3-none-manylinux2014_x86_64.whl"
SITE = "/usr/local/lib/python3.11/site-packages"

needs_dpkg = pytest.mark.skipif(
    not fsv.HOST_STATUS.is_file() or shutil.which("dpkg") is None or not INFO.is_dir(),
    reason="no host dpkg database",
)
needs_rpm = pytest.mark.skipif(
    shutil.which("rpm") is None or shutil.which("rpmbuild") is None,
    reason="rpm and rpmbuild are not installed (Debian/Ubuntu: apt-get install rpm)",
)


@pytest.fixture
def spool() -> Spool:
    s = Spool()
    yield s
    s.close()


def run_owned(cid: str, fs: FsView) -> tuple[list[Component], CollectContext]:
    ctx = CollectContext(
        fs=fs,
        target=Target(kind="image", reference="test", os_release=read_os_release(fs)),
        collector_id=cid,
        ownership=OwnershipIndex(fs),
    )
    comps = list(all_collectors()[cid]().collect(ctx))
    return comps, ctx


# -- dpkg ---------------------------------------------------------------------------------------


def _host_list(pkg: str) -> Path:
    """The host's .list file of ``pkg`` (``<pkg>:<arch>.list`` for Multi-Arch: same)."""
    hits = sorted(INFO.glob(f"{pkg}:*.list")) or sorted(INFO.glob(f"{pkg}.list"))
    assert hits, f"no .list for {pkg}"
    return hits[0]


def _dpkg_S(paths: Iterable[str]) -> dict[str, set[str]]:
    """``dpkg -S`` oracle: path -> owning package names (arch qualifiers dropped)."""
    paths = list(paths)
    r = subprocess.run(["dpkg", "-S", *paths], capture_output=True, text=True, check=False)
    out: dict[str, set[str]] = {}
    for line in r.stdout.splitlines():
        if line.startswith("diversion by "):
            continue
        owners, sep, path = line.partition(": ")
        if sep:
            out[path] = {o.strip().split(":", 1)[0] for o in owners.split(",")}
    return out


def _host_files(pkg: str, limit: int = 400) -> list[str]:
    """Non-directory paths the host's dpkg lists for ``pkg`` (links included)."""
    out = []
    for p in parse_dpkg_list(_host_list(pkg).read_bytes()):
        if os.path.lexists(p) and not os.path.isdir(p):
            out.append(p)
            if len(out) >= limit:
                break
    return out


HOST_PKGS = ("libc6", "coreutils", "bash", "dpkg", "libstdc++6")
ROOT_LINKS = ("bin", "lib", "lib32", "lib64", "sbin")


def _dpkg_layers(pkgs: Iterable[str]) -> tuple[dict[str, str | bytes], dict[str, Link]]:
    """Layer 0: dpkg status + the host's .list files of ``pkgs``; layer 1: the host's
    merged-/usr links (``/lib -> usr/lib``, ...)."""
    st = fsv._host_stanzas()
    pkgs = [p for p in pkgs if p in st]
    files: dict[str, str | bytes] = {
        "/etc/os-release": DEBIAN_OS,
        "/var/lib/dpkg/status": "\n".join(st[p] for p in pkgs),
    }
    for p in pkgs:
        lst = _host_list(p)
        files[f"/var/lib/dpkg/info/{lst.name}"] = lst.read_bytes()
    links = {f"/{n}": Link(os.readlink(f"/{n}")) for n in ROOT_LINKS if os.path.islink(f"/{n}")}
    return files, links


@needs_dpkg
def test_dpkg_lists_match_dpkg_S_through_merged_usr_layer(spool: Spool) -> None:
    base, links = _dpkg_layers(HOST_PKGS)
    assert "/lib" in links, "test host is expected to be merged-/usr"
    fs = image([base, links], spool)
    comps, ctx = run_owned("dpkg", fs)
    assert ctx.unknowns == []
    got = fsv.by_name(comps)
    assert set(got) == set(HOST_PKGS)
    own = ctx.ownership
    assert own is not None
    checked = moved = 0
    for pkg in HOST_PKGS:
        paths = _host_files(pkg)
        oracle = _dpkg_S(paths)
        for p in paths:
            want = oracle.get(p)
            if not want:  # diverted away, or owned by a package not in this image
                continue
            o = own.owner(p)
            assert o is not None and o.name in want, (p, want, o and o.name)
            # the same file, where it really is on this (merged-/usr) machine
            real = os.path.join(os.path.realpath(os.path.dirname(p)), os.path.basename(p))
            assert own.owner(real) is o, (p, real)
            checked += 1
            moved += real != p
    assert checked > 300 and moved > 50
    # the brief's example: dpkg lists /lib/..., the file lives in /usr/lib/...
    assert _dpkg_S(["/lib/x86_64-linux-gnu/libc.so.6"]) == {
        "/lib/x86_64-linux-gnu/libc.so.6": {"libc6"}
    }
    assert ctx.owner("/usr/lib/x86_64-linux-gnu/libc.so.6") is got["libc6"]
    assert ctx.owner("/lib/x86_64-linux-gnu/libc.so.6") is got["libc6"]
    assert ctx.owner("/usr/lib/x86_64-linux-gnu/no-such-lib.so.1") is None
    assert ctx.owner("/") is None  # "/." is not claimed


@needs_dpkg
def test_dpkg_without_the_link_layer_only_the_listed_path_is_owned(spool: Spool) -> None:
    base, _ = _dpkg_layers(["libc6"])
    fs = image([base], spool)
    comps, ctx = run_owned("dpkg", fs)
    (libc,) = comps
    assert ctx.owner("/lib/x86_64-linux-gnu/libc.so.6") is libc
    # like `dpkg -S /usr/lib/x86_64-linux-gnu/libc.so.6` on a non-merged system
    assert ctx.owner("/usr/lib/x86_64-linux-gnu/libc.so.6") is None


@needs_dpkg
def test_dpkg_distroless_md5sums_from_host(spool: Spool) -> None:
    st = fsv._host_stanzas()
    md5 = sorted(INFO.glob("libc6:*.md5sums")) or sorted(INFO.glob("libc6.md5sums"))
    assert md5
    data = md5[0].read_bytes()
    paths = parse_dpkg_md5sums(data)
    assert "/lib/x86_64-linux-gnu/libc.so.6" in paths
    strip = "\n".join(ln for ln in st["libc6"].split("\n") if not ln.startswith("Status:"))
    fs = image(
        [
            {"/var/lib/dpkg/status.d/libc6": strip, "/var/lib/dpkg/status.d/libc6.md5sums": data},
            {"/lib": Link("usr/lib")},
        ],
        spool,
    )
    comps, ctx = run_owned("dpkg", fs)
    assert ctx.unknowns == []
    (libc,) = comps
    oracle = _dpkg_S(paths[:200])
    for p in paths[:200]:
        if oracle.get(p):
            assert ctx.owner(p) is libc and "libc6" in oracle[p]
    assert ctx.owner("/usr/lib/x86_64-linux-gnu/libc.so.6") is libc


def test_dpkg_list_and_md5sums_parsers() -> None:
    assert parse_dpkg_list(b"/.\n/usr\n/usr/share/a file with spaces\n\n") == [
        "/usr",
        "/usr/share/a file with spaces",
    ]
    s = "d41d8cd98f00b204e9800998ecf8427e"
    assert parse_dpkg_md5sums(f"{s}  usr/lib/x\n{s} *usr/bin/y z\nshort\n".encode()) == [
        "/usr/lib/x",
        "/usr/bin/y z",
    ]


@needs_dpkg
def test_full_host_dpkg_database_claims(tmp_path: Path, spool: Spool) -> None:
    """The whole host database (every .list) through from_directory: every listed
    non-directory path is owned, and by a package dpkg -S names for a sample."""
    root = tmp_path / "root"
    info = root / "var/lib/dpkg/info"
    info.mkdir(parents=True)
    shutil.copyfile(fsv.HOST_STATUS, root / "var/lib/dpkg/status")
    n_lists = 0
    for lst in INFO.glob("*.list"):
        shutil.copyfile(lst, info / lst.name)
        n_lists += 1
    for n in ROOT_LINKS:
        if os.path.islink(f"/{n}"):
            os.symlink(os.readlink(f"/{n}"), root / n)
    fs = FsView.from_directory(root, matcher(), spool, Limits())
    comps, ctx = run_owned("dpkg", fs)
    assert ctx.unknowns == []
    assert ctx.ownership is not None and len(ctx.ownership) > 10_000
    sample = _host_files("libc6", 50) + _host_files("coreutils", 50)
    oracle = _dpkg_S(sample)
    for p in sample:
        if oracle.get(p):
            o = ctx.owner(p)
            assert o is not None and o.name in oracle[p], p
    # every path of every installed package's list is owned by some package
    names = {c.name for c in comps}
    listed = 0
    for lst in info.iterdir():
        pkg = lst.name[: -len(".list")].split(":", 1)[0]
        if pkg not in names:  # a removed package's leftover list (config-files state)
            continue
        for p in parse_dpkg_list(lst.read_bytes()):
            assert ctx.owner(p) is not None, (lst.name, p)
            listed += 1
    assert listed > 10_000 and n_lists > 100


# -- rpm ----------------------------------------------------------------------------------------

GPU_FILES_SPEC = """Name: gpu-files
Version: 1.0
Release: 1
Summary: Owns files in several directories
License: MIT
BuildArch: noarch
%description
Files.
%install
mkdir -p %{buildroot}/usr/lib64 %{buildroot}/usr/local/cuda-12.4/bin %{buildroot}/etc/gpu
echo a > %{buildroot}/usr/lib64/libgpufoo.so.1.2
ln -s libgpufoo.so.1.2 %{buildroot}/usr/lib64/libgpufoo.so.1
echo b > %{buildroot}/usr/local/cuda-12.4/bin/tool
echo c > "%{buildroot}/etc/gpu/with space.conf"
%files
%dir /etc/gpu
/usr/lib64/libgpufoo.so.1.2
/usr/lib64/libgpufoo.so.1
/usr/local/cuda-12.4/bin/tool
"/etc/gpu/with space.conf"
"""


@pytest.fixture(scope="module")
def gpu_rpmdb(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[str]]]:
    if shutil.which("rpm") is None or shutil.which("rpmbuild") is None:
        pytest.skip("rpm and rpmbuild are not installed")
    root = tmp_path_factory.mktemp("rpmown")
    (root / "base").mkdir()
    built = test_rpm.build_rpmdbs(root / "base")  # base-lib, hello-gpu, cuda-stub
    top = root / "top"
    spec = root / "gpu-files.spec"
    spec.write_text(GPU_FILES_SPEC)
    test_rpm._run(
        "rpmbuild", "--define", f"_topdir {top}", "--define", "_db_backend sqlite", "-bb", str(spec)
    )
    (rpm,) = (top / "RPMS").rglob("gpu-files-*.rpm")
    dbdir = root / "db"
    dbdir.mkdir()
    shutil.copyfile(built["db3"], dbdir / "rpmdb.sqlite")
    common = ["--dbpath", str(dbdir), "--define", "_db_backend sqlite"]
    test_rpm._run("rpm", "-i", "--justdb", "--nodeps", "--noscripts", *common, str(rpm))
    oracle: dict[str, list[str]] = {}
    for name in ("gpu-files", "hello-gpu", "base-lib", "cuda-stub"):
        out = test_rpm._run("rpm", *common, "-ql", name)
        oracle[name] = [
            ln
            for ln in out.splitlines()
            if ln.startswith("/")  # "(contains no files)"
        ]
    return dbdir / "rpmdb.sqlite", oracle


@needs_rpm
def test_rpm_file_lists_match_rpm_ql(
    gpu_rpmdb: tuple[Path, dict[str, list[str]]], spool: Spool
) -> None:
    db, oracle = gpu_rpmdb
    assert sorted(oracle["gpu-files"]) == [
        "/etc/gpu",
        "/etc/gpu/with space.conf",
        "/usr/lib64/libgpufoo.so.1",
        "/usr/lib64/libgpufoo.so.1.2",
        "/usr/local/cuda-12.4/bin/tool",
    ]
    assert oracle["hello-gpu"] == ["/usr/share/hello/hi.txt"]
    assert oracle["base-lib"] == [] and oracle["cuda-stub"] == []
    pkgs, problems = read_rpmdb_file(str(db), files=True)
    assert problems == []
    assert {p.name: sorted(p.files) for p in pkgs} == {k: sorted(v) for k, v in oracle.items()}
    # without files=True the lists are not decoded (layer-history snapshots)
    assert all(p.files == [] for p in read_rpmdb_file(str(db))[0])

    fs = image(
        [
            {"/etc/os-release": fsv.RHEL_OS, "/var/lib/rpm/rpmdb.sqlite": db.read_bytes()},
            {"/lib64": Link("usr/lib64"), "/usr/lib64/libgpufoo.so.1.2": b"a"},
        ],
        spool,
    )
    comps, ctx = run_owned("rpm", fs)
    assert ctx.unknowns == []
    got = fsv.by_name(comps)
    for name, paths in oracle.items():
        for p in paths:
            assert ctx.owner(p) is got[name], p
    assert ctx.owner("/lib64/libgpufoo.so.1.2") is got["gpu-files"]  # through the link
    assert ctx.owner("/usr/share/hello") is None  # not in hello-gpu's %files


def test_rpm_header_files_bounded() -> None:
    ok = {
        TAG_DIRNAMES: ["/usr/lib/", "/etc/"],
        TAG_DIRINDEXES: [0, 1, 0],
        TAG_BASENAMES: ["a", "b", "c"],
    }
    assert header_files(ok) == ["/usr/lib/a", "/etc/b", "/usr/lib/c"]
    # arrays that disagree own nothing rather than the wrong files
    assert header_files({**ok, TAG_DIRINDEXES: [0, 2, 0]}) == []
    assert header_files({**ok, TAG_DIRINDEXES: [0, 1]}) == []
    assert header_files({**ok, TAG_DIRINDEXES: [0, -1, 0]}) == []
    assert header_files({TAG_BASENAMES: ["a"]}) == []
    assert header_files({}) == []


# -- python -------------------------------------------------------------------------------------


def _wheel_names(whl: str) -> list[str]:
    with zipfile.ZipFile(test_python_dist.real_wheel(whl)) as z:
        return [n for n in z.namelist() if not n.endswith("/")]


def test_python_record_of_pinned_wheel(tmp_path: Path, spool: Spool) -> None:
    root = tmp_path / "root"
    site = root / SITE.lstrip("/")
    site.mkdir(parents=True)
    fsv._extract_dist_info(CUDART_WHL, site)
    lib = site / "nvidia/cuda_runtime/lib"
    lib.mkdir(parents=True)
    (lib / "libcudart.so.12").write_bytes(b"\x7fELF")
    fs = FsView.from_directory(root, matcher(), spool, Limits())
    comps, ctx = run_owned("python", fs)
    assert ctx.unknowns == []
    (dist,) = comps
    assert dist.name == "nvidia-cuda-runtime-cu12"
    assert ctx.owner(f"{SITE}/nvidia/cuda_runtime/lib/libcudart.so.12") is dist
    names = _wheel_names(CUDART_WHL)
    assert "nvidia/cuda_runtime/lib/libcudart.so.12" in names
    for n in names:  # every file of the wheel, RECORD itself included
        assert ctx.owner(f"{SITE}/{n}") is dist, n
    assert ctx.owner(f"{SITE}/nvidia/cudnn/lib/libcudnn.so.9") is None


def test_python_record_dotdot_and_egg_info_installed_files(tmp_path: Path, spool: Spool) -> None:
    root = tmp_path / "root"
    site = root / SITE.lstrip("/")
    di = site / "tool-1.0.dist-info"
    di.mkdir(parents=True)
    (di / "METADATA").write_text("Metadata-Version: 2.1\nName: tool\nVersion: 1.0\n")
    (di / "RECORD").write_text(
        "tool/__init__.py,sha256=abc,10\n"
        '"tool/odd,name.py",,\n'
        "../../../bin/tool,sha256=def,20\n"
        "../../../../../../../../etc/escaped,,\n"
        "tool-1.0.dist-info/RECORD,,\n"
    )
    egg = root / "usr/lib/python3/dist-packages/legacy-2.0.egg-info"
    egg.mkdir(parents=True)
    (egg / "PKG-INFO").write_text("Metadata-Version: 1.1\nName: legacy\nVersion: 2.0\n")
    (egg / "installed-files.txt").write_text(
        "../legacy/__init__.py\nPKG-INFO\n../../../../bin/leg\n"
    )
    fs = FsView.from_directory(root, matcher(), spool, Limits())
    comps, ctx = run_owned("python", fs)
    assert ctx.unknowns == []
    got = fsv.by_name(comps)
    tool, legacy = got["tool"], got["legacy"]
    assert ctx.owner(f"{SITE}/tool/__init__.py") is tool
    assert ctx.owner(f"{SITE}/tool/odd,name.py") is tool
    assert ctx.owner("/usr/local/bin/tool") is tool
    assert ctx.owner("/etc/escaped") is tool  # ".." stops at the image root
    assert ctx.owner(f"{SITE}/tool-1.0.dist-info/RECORD") is tool
    assert ctx.owner("/usr/lib/python3/dist-packages/legacy/__init__.py") is legacy
    assert ctx.owner("/usr/lib/python3/dist-packages/legacy-2.0.egg-info/PKG-INFO") is legacy
    assert ctx.owner("/usr/bin/leg") is legacy


def test_python_record_parsers() -> None:
    assert list(parse_record("a/b.py,,\n../../bin/x,,\n/abs/y,,\n\n", "/s/lib/site")) == [
        "/s/lib/site/a/b.py",
        "/s/bin/x",
        "/abs/y",
    ]
    assert list(
        parse_installed_files("../p/__init__.py\n\n../../../../../..\n", "/a/b.egg-info")
    ) == ["/a/p/__init__.py"]


def test_python_environment_records_match_importlib(tmp_path: Path, spool: Spool) -> None:
    """This interpreter's own installed distributions (real RECORDs written by pip):
    each file importlib.metadata lists is owned by its distribution."""
    purelib = Path(sysconfig.get_paths()["purelib"])
    dists = [
        d for d in importlib.metadata.distributions(path=[str(purelib)]) if d.read_text("RECORD")
    ][:15]
    if not dists:
        pytest.skip("no dist-info with a RECORD in this environment")
    root = tmp_path / "root"
    site = root / SITE.lstrip("/")
    listed: dict[str, set[str]] = {}  # image path -> distributions listing it
    for d in dists:
        di = Path(str(d._path))  # type: ignore[attr-defined]
        shutil.copytree(di, site / di.name)
        for f in d.files or []:
            listed.setdefault(os.path.normpath(os.path.join(SITE, str(f))), set()).add(
                d.metadata["Name"]
            )
    fs = FsView.from_directory(root, matcher(), spool, Limits())
    comps, ctx = run_owned("python", fs)
    assert ctx.unknowns == []
    assert len(comps) == len(dists)
    for path, want in listed.items():
        o = ctx.owner(path)
        assert o is not None and o.name in want, path
    assert len(listed) > 100


# -- conda --------------------------------------------------------------------------------------


def test_conda_files_relative_to_prefix(tmp_path: Path, spool: Spool) -> None:
    root = tmp_path / "root"
    base = root / "opt/conda/conda-meta"
    env = root / "opt/conda/envs/ml/conda-meta"
    base.mkdir(parents=True)
    env.mkdir(parents=True)
    (base / "cuda-cudart-12.4.127-h95ffa78_0.json").write_text(json.dumps(test_conda.CUDART))
    # a record without "files": paths_data.paths[]._path is used
    numpy = dict(test_conda.NUMPY_OLD_STYLE)
    numpy["paths_data"] = {
        "paths_version": 1,
        "paths": [
            {"_path": "lib/python3.11/site-packages/numpy/__init__.py", "path_type": "hardlink"},
            {"_path": "bin/f2py", "path_type": "hardlink"},
        ],
    }
    (env / "numpy-1.26.4-py311h64a7726_0.json").write_text(json.dumps(numpy))
    fs = FsView.from_directory(root, matcher(), spool, Limits())
    comps, ctx = run_owned("conda", fs)
    assert ctx.unknowns == []
    got = fsv.by_name(comps)
    for f in test_conda.CUDART["files"]:
        assert ctx.owner(f"/opt/conda/{f}") is got["cuda-cudart"]
    assert ctx.owner("/opt/conda/lib/libcudart.so.12") is got["cuda-cudart"]
    assert ctx.owner("/opt/conda/envs/ml/lib/libcudart.so.12") is None
    assert (
        ctx.owner("/opt/conda/envs/ml/lib/python3.11/site-packages/numpy/__init__.py")
        is got["numpy"]
    )
    assert ctx.owner("/opt/conda/envs/ml/bin/f2py") is got["numpy"]


# -- apk ----------------------------------------------------------------------------------------


def test_apk_files(spool: Spool) -> None:
    fs = image(
        [{"/etc/os-release": fsv.ALPINE_OS, "/lib/apk/db/installed": test_apk.INSTALLED}], spool
    )
    comps, ctx = run_owned("apk", fs)
    assert ctx.unknowns == []
    got = fsv.by_name(comps)
    assert got["musl"].name == "musl"
    assert ctx.owner("/lib/ld-musl-x86_64.so.1") is got["musl"]
    assert ctx.owner("/lib/libc.musl-x86_64.so.1") is got["musl"]
    assert ctx.owner("/lib/libcrypto.so.3") is got["libcrypto3"]
    assert ctx.owner("/bin/busybox") is got["busybox"]
    assert ctx.owner("/usr/bin/ssl_client") is got["ssl_client"]
    assert ctx.owner("/usr/bin/busybox") is None
    assert [p.files for p in test_apk.parse_apk_installed(test_apk.INSTALLED)[0]][3] == [
        "/usr",
        "/usr/bin",
        "/usr/bin/ssl_client",
    ]


# -- end to end: run_collectors + a phase-2 stack collector + fusion -----------------------------


OWNED = "/usr/lib/x86_64-linux-gnu/libc.so.6"  # dpkg lists it as /lib/x86_64-linux-gnu/...
CUDART = f"{SITE}/nvidia/cuda_runtime/lib/libcudart.so.12"  # the wheel's RECORD lists it
LOOSE = "/opt/vendor/lib/libcudart.so.12"  # nobody's


class _TinyStack(Collector):
    """A stack collector for the test: observes three files by name."""

    id = "test-tiny-stack"
    phase = 2
    paths = (PathSpec(OWNED), PathSpec(CUDART), PathSpec(LOOSE))

    def collect(self, ctx: CollectContext) -> Iterable[Component]:
        out = []
        for path, name, ver, stack, loc in (
            (OWNED, "glibc", "2.36", "test-libc", "/usr/lib/x86_64-linux-gnu"),
            (CUDART, "cudart", "12.4.127", "cuda", f"{SITE}/nvidia/cuda_runtime"),
            (LOOSE, "cudart", "12.4.127", "cuda", "/opt/vendor"),
        ):
            if not ctx.fs.exists(path):
                continue
            out.append(
                Component(
                    name=name,
                    version=ver,
                    type=ComponentType.LIBRARY,
                    purl=f"pkg:generic/test/{name}@{ver}",
                    properties={"stack": stack, "product": name, "location": loc},
                    evidence=[ctx.evidence("soname", path, f"owner={_owner_name(ctx, path)}")],
                    ecosystem="generic",
                )
            )
        return out


def _owner_name(ctx: CollectContext, path: str) -> str:
    o = ctx.owner(path)
    return o.name if o is not None else "-"


@needs_dpkg
def test_end_to_end_fusion_through_run_collectors(tmp_path: Path, spool: Spool) -> None:
    base, links = _dpkg_layers(["libc6"])
    assert "/lib" in links
    root = tmp_path / "root"
    for p, data in base.items():
        f = root / p.lstrip("/")
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(data.encode() if isinstance(data, str) else data)
    for p, target in links.items():
        os.symlink(str(target), root / p.lstrip("/"))
    site = root / SITE.lstrip("/")
    site.mkdir(parents=True)
    fsv._extract_dist_info(CUDART_WHL, site)
    for p in (OWNED, CUDART, LOOSE):
        f = root / p.lstrip("/")
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(b"\x7fELF")
    reg = all_collectors()
    classes = [reg["dpkg"], reg["python"], reg["os-release"], _TinyStack]
    fs = FsView.from_directory(root, build_matcher(classes), spool, Limits())
    target = Target(kind="image", reference="dir:test", os_release=read_os_release(fs))
    comps, unknowns = run_collectors(fs, target, classes)
    assert unknowns == []
    by = {(c.ecosystem, c.name): c for c in comps}
    assert len(by) == len(comps)
    assert set(by) == {
        ("os", "debian"),
        ("deb", "libc6"),
        ("pypi", "nvidia-cuda-runtime-cu12"),
        ("generic", "cudart"),
    }

    libc = by[("deb", "libc6")]
    assert libc.purl and libc.purl.startswith("pkg:deb/debian/libc6@")
    ev = [e for e in libc.evidence if e.collector == "test-tiny-stack"]
    assert [(e.method, e.path, e.detail) for e in ev] == [("soname", OWNED, "owner=libc6")]
    assert libc.stack == "test-libc"
    assert libc.product_name == "glibc"
    assert own_product_version(libc) == "2.36"
    assert libc.evidence[0].collector == "dpkg"  # the package record stays first

    wheel = by[("pypi", "nvidia-cuda-runtime-cu12")]
    ev = [e for e in wheel.evidence if e.collector == "test-tiny-stack"]
    assert [(e.path, e.detail) for e in ev] == [(CUDART, "owner=nvidia-cuda-runtime-cu12")]
    assert wheel.stack == "cuda"
    assert wheel.product_name == "cudart"
    assert "product-version" not in wheel.properties  # same version as the wheel

    # the unowned copy stays a stand-alone generic component
    loose = [c for c in comps if c.ecosystem == "generic"]
    assert len(loose) == 1
    (lc,) = loose
    assert lc.name == "cudart" and lc.purl == "pkg:generic/test/cudart@12.4.127"
    assert lc.properties["location"] == "/opt/vendor"
    assert [(e.path, e.detail) for e in lc.evidence] == [(LOOSE, "owner=-")]
    assert not any(c.name == "glibc" for c in comps)
