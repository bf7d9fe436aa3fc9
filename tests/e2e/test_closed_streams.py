"""gpusbom started with standard output or standard error closed (a cron job, a service with
``StandardOutput=null`` gone wrong): a clear usage error when the output has nowhere to go,
a normal scan when it goes to a file; never an internal error (exit 70)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path


def _run_closed(redirect: str, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = " ".join(shlex.quote(a) for a in (sys.executable, "-m", "gpusbom", *args))
    return subprocess.run(["sh", "-c", f"{cmd} {redirect}"], capture_output=True, text=True,
                          timeout=120, check=False,
                          env=dict(os.environ, GPUSBOM_DB_AUTO_UPDATE="0"))


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "os-release").write_text('ID=debian\nVERSION_ID="12"\n')
    return root


def test_stdout_closed(tmp_path: Path) -> None:
    root, out = _root(tmp_path), tmp_path / "out.json"
    p = _run_closed(">&-", "scan", f"dir:{root}", "-q", "-o", f"json={out}")
    assert p.returncode == 0, p.stderr
    assert json.loads(out.read_text())["target"]["os_release"]["ID"] == "debian"
    p = _run_closed(">&-", "scan", f"dir:{root}", "-q")
    assert p.returncode == 2, p.stderr
    assert "standard output is closed" in p.stderr


def test_stderr_closed(tmp_path: Path) -> None:
    root, out = _root(tmp_path), tmp_path / "out.json"
    p = _run_closed("2>&-", "scan", f"dir:{root}", "-o", f"json={out}")
    assert p.returncode == 0
    assert out.is_file()
