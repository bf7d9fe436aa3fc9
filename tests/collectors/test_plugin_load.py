"""A collector plug-in (entry point group ``gpusbom.collectors``) that fails to load is an
unknown of every scan, with its name and error, not silence."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def test_broken_plugin_is_an_unknown(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "broken_gpu_plugin-1.0.dist-info").mkdir(parents=True)
    (site / "broken_gpu_plugin-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: broken-gpu-plugin\nVersion: 1.0\n")
    (site / "broken_gpu_plugin-1.0.dist-info" / "entry_points.txt").write_text(
        "[gpusbom.collectors]\nbroken = broken_gpu_plugin\n")
    (site / "broken_gpu_plugin.py").write_text("raise RuntimeError('no GPU table here')\n")
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "os-release").write_text("ID=debian\nVERSION_ID=12\n")
    out = tmp_path / "scan.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "gpusbom", "scan", f"dir:{root}", "-q",
                           "-o", f"json={out}"], capture_output=True, text=True, env=env,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    unknowns = json.loads(out.read_text())["unknowns"]
    assert {"collector": "plugin:broken",
            "reason": "collector plug-in did not load: RuntimeError: no GPU table here",
            "path": None} in unknowns
    strict = subprocess.run([sys.executable, "-m", "gpusbom", "scan", f"dir:{root}", "-q",
                             "--strict", "-o", f"json={out}"], capture_output=True, text=True,
                            env=env, timeout=120, check=False)
    assert strict.returncode == 4, strict.stderr
