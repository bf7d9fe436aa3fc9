"""`gpusbom scan --root ROOT --probe`: allowed only when ROOT is this running machine's root
(a node's / mounted in a container with its /proc, as the Kubernetes DaemonSet does): the
kernel boot id under ROOT/proc must be this kernel's. A snapshot or another node is refused."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
SNAPSHOT = Path(__file__).resolve().parents[2] / "fixtures" / "hosts" / "h200"


def _gpusbom(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpusbom", *args], capture_output=True,
                          text=True, timeout=300, check=False)


def test_probe_refused_on_a_snapshot(tmp_path: Path) -> None:
    out = tmp_path / "h.json"
    p = _gpusbom("scan", "--root", str(SNAPSHOT), "--probe", "-q", "-o", f"json={out}")
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and "is not this machine's root" in p.stderr
    assert not out.exists()


@pytest.mark.skipif(not BOOT_ID.exists(), reason="no /proc/sys/kernel/random/boot_id here")
@pytest.mark.skipif(shutil.which("clinfo") is None and not Path("/etc/OpenCL/vendors").is_dir(),
                    reason="no OpenCL ICD here")
def test_probe_runs_when_the_root_is_this_machine(tmp_path: Path) -> None:
    # a mounted root of this machine, reduced to what the check reads: its /proc boot id
    root = tmp_path / "host"
    (root / "proc/sys/kernel/random").mkdir(parents=True)
    shutil.copyfile(BOOT_ID, root / "proc/sys/kernel/random/boot_id")
    out = tmp_path / "h.json"
    p = _gpusbom("scan", "--root", str(root), "--probe", "--probe-backend", "opencl", "-q",
                 "-o", f"json={out}")
    assert p.returncode == 0, p.stderr
    probes = json.loads(out.read_text())["probes"]
    assert any(pr["backend"] == "opencl" and pr["outcome"] == "pass" for pr in probes), probes
