"""Layers read by forked worker processes (the default on 4+ cores; forced here with
GPUSBOM_LAYER_PROCESSES): the same output as threads, and a bad layer in a worker is still
one error line, exit 3, no output file."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures import imagetools as it
from fixtures.build import ensure

from test_bad_inputs import GOOD_LAYER, assert_input_error  # tests/e2e is on sys.path


def _scan(ref: str, out: Path, procs: str) -> None:
    env = {**os.environ, "GPUSBOM_LAYER_PROCESSES": procs, "SOURCE_DATE_EPOCH": "1767225600"}
    p = subprocess.run([sys.executable, "-m", "gpusbom", "scan", ref, "-q",
                        "-o", f"cyclonedx-json={out}"], capture_output=True, text=True,
                       timeout=300, env=env, check=False)
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("form", ["oci", "docker-archive", "oci-archive"])
def test_worker_processes_give_the_same_sbom(form: str, tmp_path: Path) -> None:
    paths = ensure("multilayer")
    ref = {"oci": paths.oci_ref, "docker-archive": f"docker-archive:{paths.docker_archive}",
           "oci-archive": f"oci-archive:{paths.oci_archive}"}[form]
    _scan(ref, tmp_path / "threads.json", "0")
    _scan(ref, tmp_path / "procs.json", "3")
    assert (tmp_path / "threads.json").read_bytes() == (tmp_path / "procs.json").read_bytes()


def test_bad_layer_in_a_worker_process(tmp_path: Path) -> None:
    good = gzip.compress(it.tar_bytes(GOOD_LAYER), mtime=0)
    corrupt = good[:20] + bytes(b ^ 0x5A for b in good[20:60]) + good[60:]
    bad = it.Layer(b"", "gzip")
    bad.__dict__["_blob"] = corrupt
    image = it.Image(layers=[it.Layer(it.tar_bytes(GOOD_LAYER), "gzip"), bad])
    layout = it.write_oci_layout(tmp_path / "layout", image, tag="t")
    assert_input_error(f"oci:{layout}:t", tmp_path, "layer",
                       env={"GPUSBOM_LAYER_PROCESSES": "2"})


def test_worker_processes_leave_no_temp_files(tmp_path: Path) -> None:
    """A file spooled by a layer worker (a captured file over 1 MiB in each layer) lands in
    the scan's own temp directory, which is removed at the end: nothing is left in TMPDIR.
    (A worker once made a directory of its own on its first spooled file, unknown to the
    scan and never removed: one per worker and scan.)"""
    big = b"".join(b" line %07d of a long description\n" % k for k in range(40_000))
    layers = [
        it.Layer(it.tar_bytes([("/etc/os-release", b'ID=debian\nVERSION_ID="12"\n')]), "gzip"),
        *(it.Layer(it.tar_bytes([("/var/lib/dpkg/status",
                                  b"Package: pkg%d\nStatus: install ok installed\nVersion: 1.%d\n"
                                  b"Architecture: amd64\nDescription: padded\n" % (k, k) + big)]),
                   "gzip") for k in range(3)),
    ]
    assert len(big) > 1 << 20  # over fsview.types.Limits.max_memory_content: spooled
    layout = it.write_oci_layout(tmp_path / "layout", it.Image(layers=layers), tag="t")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    out = tmp_path / "out.json"
    env = {**os.environ, "GPUSBOM_LAYER_PROCESSES": "3", "TMPDIR": str(tmp)}
    p = subprocess.run([sys.executable, "-m", "gpusbom", "scan", f"oci:{layout}:t", "-q",
                        "--offline", "--no-cache", "-o", f"json={out}"],
                       capture_output=True, text=True, timeout=300, env=env, check=False)
    assert p.returncode == 0, p.stderr
    assert "pkg2" in out.read_text()  # the top layer's spooled status was read
    assert sorted(os.listdir(tmp)) == []


@pytest.mark.parametrize(("sig", "code", "word"), [("SIGTERM", 143, "terminated"),
                                                   ("SIGINT", 130, "interrupted")])
def test_a_stopped_scan_stops_its_workers_and_leaves_nothing(sig: str, code: int, word: str,
                                                             tmp_path: Path) -> None:
    """SIGTERM (``kill``, ``timeout``, a job or pod stopped) ends a scan as Ctrl-C does: its
    layer workers stop, its temp directory goes, no output file is written, and the exit
    status says which (143, 130). Before, SIGTERM killed the scan at once and its forked
    workers went on, their spool directory left in TMPDIR."""
    import signal
    import time

    paths = ensure("nvidia-wheels")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    out = tmp_path / "out.json"
    env = {**os.environ, "GPUSBOM_LAYER_PROCESSES": "3", "TMPDIR": str(tmp)}
    p = subprocess.Popen([sys.executable, "-m", "gpusbom", "scan", f"oci-archive:{paths.oci_archive}",
                          "-q", "--offline", "--no-cache", "-o", f"json={out}"],
                         stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    children = Path(f"/proc/{p.pid}/task/{p.pid}/children")
    deadline = time.monotonic() + 60
    while not children.read_text().split():  # its layer workers are forked: the scan runs
        assert p.poll() is None, "the scan ended before its workers were seen"
        assert time.monotonic() < deadline
        time.sleep(0.005)
    p.send_signal(getattr(signal, sig))
    _, err = p.communicate(timeout=60)
    assert p.returncode == code, err
    assert err.strip().splitlines()[-1] == f"gpusbom: {word}"
    assert not out.exists()
    deadline = time.monotonic() + 10
    while True:  # every process of its group has ended (a zombie is reaped by init)
        ps = subprocess.run(["ps", "-o", "stat=", "-g", str(p.pid)], capture_output=True, text=True)
        running = [s for s in ps.stdout.split() if not s.startswith("Z")]
        if not running or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert running == []
    assert sorted(os.listdir(tmp)) == []
