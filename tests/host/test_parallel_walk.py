"""The host walk in forked workers (``host/parwalk.py``) gives the one-process walk's view."""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from gpusbom.cli.app import main
from gpusbom.collect import build_matcher, select_collectors
from gpusbom.errors import UnsafeArchiveError
from gpusbom.fsview.types import Limits, Spool
from gpusbom.host import parwalk
from gpusbom.host.walk import host_view

from .conftest import HOSTS
from .test_host_modes import _copy, _run_as_nobody, open_tmp  # noqa: F401 - the fixture

_ = _run_as_nobody  # its checks (root, setpriv) are the ones the unprivileged test needs


def _tree(root: Path) -> Path:
    """A host root with directories large enough to be split (more than ``_SLICE``
    entries), package databases, Python environments, links and a FIFO."""
    lib = root / "usr/lib/x86_64-linux-gnu"
    lib.mkdir(parents=True)
    for i in range(parwalk._SLICE * 2 + 37):
        (lib / f"libz{i:04d}.so.1").write_bytes(b"\x7fELF" + bytes([i % 251]))
    (lib / "libcudart.so.12.4.127").write_bytes(b"\x7fELF cudart")
    (lib / "libcudart.so.12").symlink_to("libcudart.so.12.4.127")
    (lib / "sub").mkdir()
    (lib / "sub" / "libnvidia-ml.so.550.54.15").write_bytes(b"\x7fELF nvml")
    os.mkfifo(lib / "a-fifo")
    for env in ("usr/lib/python3/dist-packages", "opt/venv/lib/python3.12/site-packages"):
        sp = root / env
        for n in range(3):
            di = sp / f"pkg{n}-1.{n}.dist-info"
            di.mkdir(parents=True)
            meta = f"Metadata-Version: 2.1\nName: pkg{n}\nVersion: 1.{n}\n".encode()
            (di / "METADATA").write_bytes(meta)
            sha = base64.urlsafe_b64encode(hashlib.sha256(meta).digest()).rstrip(b"=").decode()
            (di / "RECORD").write_text(f"pkg{n}/__init__.py,,\n"
                                       f"pkg{n}-1.{n}.dist-info/METADATA,sha256={sha},{len(meta)}\n")
            (sp / f"pkg{n}").mkdir()
            (sp / f"pkg{n}" / "__init__.py").write_text("")
    dpkg = root / "var/lib/dpkg/info"
    dpkg.mkdir(parents=True)
    (root / "var/lib/dpkg/status").write_text(
        "Package: zlib1g\nStatus: install ok installed\nVersion: 1:1.2.13\nArchitecture: amd64\n\n")
    (dpkg / "zlib1g:amd64.list").write_text("/usr/lib/x86_64-linux-gnu/libz0000.so.1\n")
    # a package that lists a file named "status" (its row is the status file's own digest)
    (dpkg / "zlib1g:amd64.md5sums").write_text(
        "0" * 32 + "  usr/lib/x86_64-linux-gnu/libz0000.so.1\n" + "a" * 32 + "  var/lib/dpkg/status\n")
    (root / "etc").mkdir()
    (root / "etc/os-release").write_text('ID=debian\nVERSION_ID="12"\n')
    (root / "etc/deep/a/b/c").mkdir(parents=True)
    (root / "etc/deep/a/b/c/f").write_text("x")
    (root / "lib").symlink_to("usr/lib")
    return root


def _view(root: Path, workers: int, limits: Limits | None = None) -> tuple[Any, ...]:
    lim = limits or Limits()
    matcher = build_matcher(select_collectors(None))
    with Spool(lim) as spool:
        v = host_view(str(root), matcher, spool, lim, workers=workers)
        entries = {p: (e.kind, e.size, e.mode, e.linkname, e.uid, e.gid, e.mtime, e.matched,
                       e.history, e.analysis, e.content.read() if e.content else None)
                   for p, e in v._entries.items()}
        return entries, list(v.unreadable), v.file_count


def test_parallel_walk_is_the_serial_walk(tmp_path: Path) -> None:
    root = _tree(tmp_path / "root")
    serial = _view(root, 1)
    assert serial[0]["/usr/lib/x86_64-linux-gnu/libcudart.so.12.4.127"][7]  # matched
    meta = "/opt/venv/lib/python3.12/site-packages/pkg2-1.2.dist-info/METADATA"
    assert serial[0][meta][-1] == b"Metadata-Version: 2.1\nName: pkg2\nVersion: 1.2\n"
    assert serial[2] > parwalk._SLICE * 2
    for workers in (2, 3, 5):
        assert _view(root, workers) == serial


def _plan(root: Path) -> list[Any]:
    """The walk's pieces for ``root``, as the scanning process plans them."""
    from gpusbom.host.walker import HOST_ROOTS, _HostWalker, _walk_roots, expand_roots

    lim = Limits()
    with Spool(lim) as spool:
        walker = _HostWalker(build_matcher(select_collectors(None)), spool, lim, skip_host=True)
        walker.defer = []
        roots = expand_roots(str(root), HOST_ROOTS)
        _walk_roots(walker, str(root), roots)
        return list(parwalk._plan(walker, str(root), roots))


def test_plan_splits_large_directories(tmp_path: Path) -> None:
    root = _tree(tmp_path / "root")
    tasks = _plan(root)
    slices = [t for t in tasks if t[0] == "/usr/lib/x86_64-linux-gnu"]
    assert [t[3] for t in slices] == [0, 1, 2] and all(t[4] == 3 for t in slices)
    # every directory is walked by exactly one piece
    whole = [t[0] for t in tasks if t[3] < 0]
    assert len(whole) == len(set(whole)) and "/usr/lib/x86_64-linux-gnu/sub" in whole


def test_triton_tools_are_a_parse_piece_taken_first(tmp_path: Path) -> None:
    """The tools Triton bundles (read whole for their release string: the workers' longest
    parse) are a piece of their own at the head of the queue, not part of a ``triton``
    piece taken late; the view is the one-process walk's."""
    root = _tree(tmp_path / "root")
    triton = root / "opt/venv/lib/python3.12/site-packages/triton"
    (triton / "backends/nvidia/bin").mkdir(parents=True)
    (triton / "backends/nvidia/bin/ptxas").write_bytes(
        b"\x7fELF ... Cuda compilation tools, release 12.8, V12.8.93\x00")
    (triton / "language").mkdir()
    (triton / "language/core.py").write_text("")
    tasks = _plan(root)
    order = [tasks[i][0] for i in parwalk._queue_order(tasks)]
    bin_dir = "/opt/venv/lib/python3.12/site-packages/triton/backends/nvidia/bin"
    first_plain = next(i for i, p in enumerate(order) if not parwalk._PARSED.fullmatch(p))
    assert bin_dir in order[:first_plain]
    serial = _view(root, 1)
    assert serial[0][bin_dir + "/ptxas"][7]  # captured (matched)
    assert _view(root, 3) == serial


def test_parallel_walk_limit_and_worker_failures(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    root = _tree(tmp_path / "root")
    small = Limits(max_kept_records=100)
    for workers in (1, 3):
        with pytest.raises(UnsafeArchiveError, match="more than 100 kept records"):
            _view(root, workers, small)
    serial = _view(root, 1)
    # a worker that dies without a word: the parent walks everything itself
    monkeypatch.setattr(parwalk, "_worker", lambda *a: os._exit(9))
    assert _view(root, 3) == serial
    monkeypatch.undo()

    # a worker that fails: its exception is the scan's
    def boom(*a: Any) -> None:
        raise ValueError("walk failed in a worker")

    monkeypatch.setattr(parwalk, "_walk_task", boom)
    with pytest.raises(ValueError, match="walk failed in a worker"):
        _view(root, 3)


def test_scan_output_is_the_same_with_workers(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    root = _copy("h200", tmp_path)
    many = root / "usr/lib/many"  # a directory split over the workers
    many.mkdir(parents=True)
    for i in range(parwalk._SLICE + 9):
        (many / f"libm{i}.so.1").write_bytes(b"\x7fELF")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    outs = []
    for workers in ("1", "4"):
        monkeypatch.setenv("GPUSBOM_HOST_WALKERS", workers)
        out = tmp_path / f"w{workers}.json"
        assert main(["scan", "--root", str(root), "-q", "-o", f"json={out}"]) == 0
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] and b'"torch"' in outs[0]


def test_unprivileged_parallel_walk_reports_the_same(open_tmp: Path) -> None:  # noqa: F811
    """Directories a worker cannot read are reported as the one-process walk reports them,
    in the same order."""
    import pwd
    import subprocess
    import sys

    root = _copy("h200", open_tmp)
    for d in ("opt/torch", "etc/deep", "usr/lib/many/b"):
        (root / d).mkdir(parents=True, exist_ok=True)
        os.chmod(root / d, 0o700)
    nobody = pwd.getpwnam("nobody")
    outs = []
    for workers in ("1", "3"):
        out = open_tmp / f"w{workers}.json"
        env = {"PATH": "/usr/bin:/bin", "SOURCE_DATE_EPOCH": "1767225600",
               "GPUSBOM_HOST_WALKERS": workers,
               "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        cmd = ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}",
               "--clear-groups", sys.executable, "-m", "gpusbom", "scan", "--root", str(root),
               "-q", "-o", f"json={out}"]
        proc = subprocess.run(cmd, check=False, cwd="/", env=env, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    assert outs[0].count(b"skipped: permission denied (needs root)") >= 3
    assert HOSTS.is_dir()


def test_workers_parse_package_files_the_collectors_way(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """What workers parse (``collectors/_premade.py``) is what the collectors would parse,
    and the collectors use it."""
    from gpusbom.collect import run_collectors
    from gpusbom.collectors import _digests, _libs, cuda, dpkg, python, triton
    from gpusbom.collectors.strategies import headers, packages
    from gpusbom.model import Target

    root = _tree(tmp_path / "root")
    (root / "var/lib/dpkg/info/broken.list").write_bytes(b"/usr/x\n")
    inc = root / "usr/local/cuda-12.4/include"
    inc.mkdir(parents=True)
    (inc / "cuda.h").write_text("#pragma once\n#define CUDA_VERSION 12040\n")
    (inc / "cudnn_version_v9.h").write_text(
        "#define CUDNN_MAJOR 9\n#define CUDNN_MINOR 1\n#define CUDNN_PATCHLEVEL 0\n")
    tri = root / "opt/venv/lib/python3.12/site-packages/triton"
    (tri / "backends/nvidia/bin").mkdir(parents=True)
    (tri / "__init__.py").write_text('__version__ = "3.1.0"\n')
    (tri.parent / "triton-3.1.0.dist-info").mkdir()
    (tri.parent / "triton-3.1.0.dist-info/METADATA").write_text(
        "Metadata-Version: 2.1\nName: triton\nVersion: 3.1.0\n")
    # past the in-memory size (a spooled capture), the release string past a chunk's end
    (tri / "backends/nvidia/bin/ptxas").write_bytes(
        b"\x7fELF" + b"\0" * (1 << 21) + b"Cuda compilation tools, release 12.4, V12.4.131\0")
    (tri / "backends/nvidia/bin/nvdisasm").write_bytes(b"\x7fELF no release here")
    meta = "/usr/lib/python3/dist-packages/pkg1-1.1.dist-info/METADATA"
    record = "/usr/lib/python3/dist-packages/pkg1-1.1.dist-info/RECORD"
    lim = Limits()
    classes = select_collectors(None)
    matcher = build_matcher(classes)
    with Spool(lim) as spool:
        serial = host_view(str(root), matcher, spool, lim, workers=1)
        par = host_view(str(root), matcher, spool, lim, workers=3)
        assert serial.premade == {}
        made = par.premade
        assert made["py-metadata", meta] == python.parse_core_metadata(serial.read_text(meta))
        # file lists come grouped by directory (claimed per directory: collectors/base.py)
        assert sorted(made["py-record", record]) == sorted(python.parse_record(
            serial.read_text(record), "/usr/lib/python3/dist-packages"))
        assert made["dpkg-status", dpkg.STATUS] == dpkg._parse_status_file(serial)
        assert made["manifest-digests", record] == list(_digests.parse_record_digests(
            serial.read_text(record), "/usr/lib/python3/dist-packages", {"METADATA"}))
        sums = "/var/lib/dpkg/info/zlib1g:amd64.md5sums"
        assert made["manifest-digests", sums] == list(_digests.parse_md5sums_digests(
            serial.read_text(sums), {"status"})) == [("/var/lib/dpkg/status", "md5:" + "a" * 32)]
        lst = "/var/lib/dpkg/info/zlib1g:amd64.list"
        assert sorted(made["dpkg-list", lst]) == sorted(dpkg.parse_dpkg_list(serial.read_bytes(lst)))
        assert len([k for k in made if k[0] == "py-metadata"]) == 7
        for h in ("cuda.h", "cudnn_version_v9.h"):
            hp = "/usr/local/cuda-12.4/include/" + h
            assert made["cuda-header", hp] == cuda.header_versions(h, serial.read_text(hp))
        assert made["cuda-header", "/usr/local/cuda-12.4/include/cuda.h"] == {
            "cuda-toolkit": "12.4"}
        bin_ = "/opt/venv/lib/python3.12/site-packages/triton/backends/nvidia/bin/"
        with serial.open(bin_ + "ptxas") as f:
            assert made["triton-tool", bin_ + "ptxas"] == (triton.tool_release(
                _libs.scan_stream(f, triton._TOOL_RX, triton._TOOL_MAX)),)
        assert made["triton-tool", bin_ + "ptxas"] == (
            ("12.4.131", "Cuda compilation tools, release 12.4, V12.4.131"),)
        assert made["triton-tool", bin_ + "nvdisasm"] == (None,)
        want = run_collectors(serial, Target(kind="host", reference="host:/"), classes)
        # the parallel view's collectors parse nothing themselves
        for mod, name in ((python, "parse_core_metadata"), (python, "parse_record"),
                          (dpkg, "parse_dpkg_status"), (packages, "parse_core_metadata"),
                          (headers, "versions"), (triton, "scan_bytes")):
            monkeypatch.setattr(mod, name, lambda *a, **k: (_ for _ in ()).throw(
                AssertionError("parsed again")))
        got = run_collectors(par, Target(kind="host", reference="host:/"), classes)
    assert [c.purl for c in got[0]] == [c.purl for c in want[0]]
    assert [(c.name, c.version, c.properties) for c in got[0]] == [
        (c.name, c.version, c.properties) for c in want[0]]
    assert [[(e.path, e.declared_digest) for e in c.evidence] for c in got[0]] == [
        [(e.path, e.declared_digest) for e in c.evidence] for c in want[0]]
    assert sum(e.declared_digest is not None for c in got[0] for e in c.evidence) >= 6
    assert any(c.properties.get("triton:bundled:ptxas") == "12.4.131" for c in got[0])
    assert any(c.name == "cudnn" and c.version == "9.1.0" for c in got[0])
    assert any(c.name == "pkg2" for c in got[0]) and any(c.name == "zlib1g" for c in got[0])
    assert [u.reason for u in got[1]] == [u.reason for u in want[1]]


def test_walk_when_workers_cannot_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No process to fork (a pids limit), or only some: the same view."""
    root = _tree(tmp_path / "root")
    serial = _view(root, 1)
    real_fork = os.fork
    forks = {"left": 0}

    def fork() -> int:
        if forks["left"] <= 0:
            raise BlockingIOError(11, "Resource temporarily unavailable")
        forks["left"] -= 1
        return real_fork()

    monkeypatch.setattr(parwalk.os, "fork", fork)
    assert _view(root, 4) == serial  # none started
    forks["left"] = 1
    assert _view(root, 4) == serial  # one of four started: it takes every piece
    assert forks["left"] == 0


def test_workers_that_spool_leave_no_temp_files(tmp_path: Path) -> None:
    """A matched file over 1 MiB (a real host's dpkg status often is) is spooled by the walk
    worker that reads it, into the scan's own temp directory, removed at the end: nothing is
    left in TMPDIR. (A worker once made a directory of its own there, never removed.)"""
    import subprocess
    import sys

    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc/os-release").write_text('ID=debian\nVERSION_ID="12"\n')
    (root / "var/lib/dpkg").mkdir(parents=True)
    big = "".join(f" line {k:07d} of a long description\n" for k in range(40_000))
    (root / "var/lib/dpkg/status").write_text(
        "Package: padded-pkg\nStatus: install ok installed\nVersion: 1.0\n"
        "Architecture: amd64\nDescription: padded\n" + big)
    assert (root / "var/lib/dpkg/status").stat().st_size > 1 << 20  # spooled, not in memory
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    out = tmp_path / "out.json"
    env = {**os.environ, "GPUSBOM_HOST_WALKERS": "3", "TMPDIR": str(tmp)}
    p = subprocess.run([sys.executable, "-m", "gpusbom", "scan", "--root", str(root), "-q",
                        "--offline", "-o", f"json={out}"], capture_output=True, text=True,
                       timeout=120, env=env, check=False)
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""  # no worker failed (none asked for a directory of its own)
    assert '"padded-pkg"' in out.read_text()
    assert sorted(os.listdir(tmp)) == []


def test_a_spool_directory_is_not_made_in_a_forked_process(tmp_path: Path) -> None:
    """Asked for first in a forked worker, the directory would be that worker's, removed by
    nobody: the spool refuses; read before the fork, the worker uses the owner's."""
    spool = Spool(Limits())
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            _ = spool.dir
            os.write(w, b"made")
        except RuntimeError:
            os.write(w, b"refused")
        finally:
            os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    assert os.read(r, 16) == b"refused"
    os.close(r)
    made = spool.dir  # the owner makes it, and removes it on close
    assert os.path.isdir(made)
    spool.close()
    assert not os.path.exists(made)
