"""Consistency findings, unprivileged and GPU-less modes, snapshots and the CLI."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpusbom.cli.app import main
from gpusbom.host import scan_host, snapshot_host
from gpusbom.host.consistency import cuda_support
from gpusbom.host.snapshot import is_secret

from .conftest import HOSTS


def _copy(name: str, tmp_path: Path) -> Path:
    dst = tmp_path / name
    shutil.copytree(HOSTS / name, dst, symlinks=True)
    return dst


def test_cuda_support_table() -> None:
    assert cuda_support("13.0", "580.159.04") is None
    assert cuda_support("12.4.1", "550.54.14") is None
    sev, why = cuda_support("13.0", "575.51.03") or ("", "")
    assert sev == "high" and "580.65.06" in why
    sev, _ = cuda_support("12.8", "560.28.03") or ("", "")
    assert sev == "low"  # minor-version compatibility (>= 525)
    assert cuda_support("13.9", "580.65.06") is not None  # newer than the table: at least 13.2's


def test_userspace_kernel_mismatch_and_old_driver(tmp_path: Path) -> None:
    """The H200 snapshot with its kernel module rolled back to 575.51.03."""
    root = _copy("h200", tmp_path)
    for p in ("sys/module/nvidia/version", "sys/module/nvidia_uvm/version"):
        (root / p).write_text("575.51.03\n")
    v = root / "proc/driver/nvidia/version"
    v.write_text(v.read_text().replace("580.159.04", "575.51.03"))
    result = scan_host(str(root))
    ids = {f.id for f in result.findings}
    assert "host/driver-userspace-kernel-mismatch" in ids
    assert "host/driver-nvml-kernel-mismatch" in ids  # nvml.json still says 580.159.04
    newer = [f for f in result.findings if f.id == "host/cuda-newer-than-driver"]
    assert newer and all(f.severity == "high" for f in newer)
    assert any("CUDA toolkit 13.0" in f.title for f in newer)
    assert any("torch" in f.title for f in newer)
    mism = [f for f in result.findings if f.id == "host/driver-userspace-kernel-mismatch"]
    assert any("libcuda 580.159.04" in f.title and "575.51.03" in f.title for f in mism)
    assert all(f.components for f in mism)


def test_uvm_mismatch_and_health(tmp_path: Path) -> None:
    root = _copy("h200", tmp_path)
    (root / "sys/module/nvidia_uvm/version").write_text("570.0\n")
    nv = root / "gpusbom-snapshot/nvml.json"
    data = json.loads(nv.read_text())
    data["devices"][0]["remapped_rows"]["pending"] = True
    nv.write_text(json.dumps(data))
    ids = [f.id for f in scan_host(str(root)).findings]
    assert "host/driver-uvm-mismatch" in ids and "host/gpu-row-remapping" in ids


def test_gpu_less_without_sysfs(tmp_path: Path) -> None:
    """A root with no /proc, no /sys at all: says so, inventories what is there."""
    root = tmp_path / "bare"
    (root / "etc").mkdir(parents=True)
    (root / "etc/os-release").write_text('ID=debian\nVERSION_ID="12"\n')
    result = scan_host(str(root))
    assert [f.title for f in result.findings] == ["no GPU devices found"]
    reasons = " ".join(u.reason for u in result.unknowns)
    assert "/sys/bus/pci/devices not present" in reasons and "/proc/modules" in reasons
    assert result.target.os_release["ID"] == "debian"


@pytest.fixture()
def open_tmp() -> Iterator[Path]:
    """A temporary directory an unprivileged user can reach (pytest's tmp_path is 0700)."""
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="gpusbom-host-"))
    os.chmod(d, 0o777)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _run_as_nobody(args: list[str], cwd: str) -> subprocess.CompletedProcess[str]:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to drop to an unprivileged user")
    nobody = pwd.getpwnam("nobody")
    env = {"PATH": "/usr/bin:/bin", "SOURCE_DATE_EPOCH": "1767225600",
           "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    cmd = ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups",
           sys.executable, "-m", "gpusbom", *args]
    return subprocess.run(cmd, check=False, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_unprivileged_replay_reports_skipped(open_tmp: Path) -> None:
    """A real unprivileged process: root-only files and directories become 'skipped'."""
    tmp_path = open_tmp
    root = _copy("h200", tmp_path)
    info = root / "proc/driver/nvidia/gpus/0000:00:06.0/information"
    os.chmod(info, 0o600)  # like debugfs or a locked-down procfs entry
    os.chmod(root / "opt/torch", 0o700)  # like another user's environment
    out = tmp_path / "out.json"
    proc = _run_as_nobody(["scan", "--root", str(root), "-q", "-o", f"json={out}"], "/")
    assert proc.returncode == 0, proc.stderr
    d = json.loads(out.read_text())
    skipped = {(u["path"], u["reason"]) for u in d["unknowns"]}
    assert ("/proc/driver/nvidia/gpus/0000:00:06.0/information",
            "skipped: permission denied (needs root)") in skipped
    assert ("/opt/torch", "skipped: permission denied (needs root)") in skipped
    # the GPUs are still found (sysfs and NVML's recording are readable)
    assert sum(1 for c in d["components"] if c["type"] == "device") == 2
    assert not any(c["name"] == "torch" for c in d["components"])
    # --strict turns the skipped reads into exit 4
    proc = _run_as_nobody(["scan", "--root", str(root), "-q", "--strict", "-o", "json=/dev/null"], "/")
    assert proc.returncode == 4


def test_unprivileged_live_host_scan(open_tmp: Path) -> None:
    """``scan --host`` on this machine as an unprivileged user finishes and degrades."""
    out = open_tmp / "live.json"
    proc = _run_as_nobody(["scan", "--host", "-q", "-o", f"json={out}"], "/")
    assert proc.returncode == 0, proc.stderr
    d = json.loads(out.read_text())
    assert d["target"]["kind"] == "host"
    if not any(c["type"] == "device" for c in d["components"]):
        assert any(f["title"] == "no GPU devices found" for f in d.get("findings", []))
    # /root/.local (0700 root) or other root-only places are reported, never fatal
    if os.path.isdir("/root/.local") and (os.stat("/root").st_mode & 0o005) != 0o005:
        assert any(u["path"] == "/root/.local" and "needs root" in u["reason"]
                   for u in d["unknowns"])


def test_snapshot_replays_and_never_takes_secrets(tmp_path: Path) -> None:
    src = _copy("cpu-only", tmp_path)
    # secrets a careless capture could take, at paths collectors look at
    (src / "etc/shadow").write_text("root:$6$secret:19000:0:99999:7:::\n")
    (src / "etc/OpenCL/vendors").mkdir(parents=True, exist_ok=True)
    (src / "etc/OpenCL/vendors/token.icd").write_text("libsecret.so\n")
    lib = src / "usr/lib/x86_64-linux-gnu/libcuda.so.580.1.2"
    lib.write_bytes(b"\x7fELF" + b"\0" * 100)
    out = tmp_path / "snap"
    m = snapshot_host(str(out), root=str(src), use_nvml=False)
    assert not (out / "etc/shadow").exists()
    assert not (out / "etc/OpenCL/vendors/token.icd").exists()
    assert {"path": "/etc/OpenCL/vendors/token.icd",
            "reason": "looks like a secret: never captured"} in m["skipped"]
    placeholder = out / "usr/lib/x86_64-linux-gnu/libcuda.so.580.1.2"
    assert placeholder.is_file() and placeholder.stat().st_size == 0
    for dp, _dn, fns in os.walk(out):
        for fn in fns:
            p = os.path.join(dp, fn)
            if not os.path.islink(p):
                with open(p, "rb") as f:
                    assert b"\0" not in f.read(4096) or fn == "ld.so.cache", p
    (src / "etc/OpenCL/vendors/token.icd").unlink()  # what the snapshot rightly left out
    a = scan_host(str(src))
    b = scan_host(str(out))
    key = lambda r: sorted((c.name, c.version or "", c.type.value) for c in r.components)
    assert key(a) == key(b)
    assert a.stack_text() == b.stack_text()


def test_snapshot_size_bound(tmp_path: Path) -> None:
    out = tmp_path / "snap"
    m = snapshot_host(str(out), root=str(HOSTS / "cpu-only"), use_nvml=False, max_bytes=50_000)
    assert m["bytes"] <= 50_000
    assert any("size limit" in s["reason"] for s in m["skipped"])
    with pytest.raises(Exception, match="not an empty directory"):
        snapshot_host(str(out), root=str(HOSTS / "cpu-only"))


def test_is_secret() -> None:
    for p in ("/etc/shadow", "/etc/gshadow-", "/root/.ssh/id_rsa", "/home/a/.docker/config.json",
              "/etc/ssl/private/x.key", "/opt/app/server.pem", "/home/a/.netrc"):
        assert is_secret(p), p
    for p in ("/opt/v/site-packages/tokenizers-0.23.2.dist-info/METADATA",
              "/var/lib/dpkg/status", "/usr/lib/x86_64-linux-gnu/libcuda.so.1"):
        assert not is_secret(p), p


def test_cli_root_and_snapshot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "h.json"
    assert main(["scan", "--root", str(HOSTS / "h200"), "-q", "-o", f"json={out}",
                 "-o", "table"]) == 0
    table = capsys.readouterr().out
    assert "NVIDIA H200" in table and "Findings (1):" in table
    assert json.loads(out.read_text())["target"]["kind"] == "host"
    assert main(["scan", "--host", "some-image"]) == 2
    snap = tmp_path / "snap"
    assert main(["host-snapshot", "--out", str(snap), "--root", str(HOSTS / "cpu-only"),
                 "--no-nvml"]) == 0
    assert (snap / "gpusbom-snapshot/manifest.json").is_file()
