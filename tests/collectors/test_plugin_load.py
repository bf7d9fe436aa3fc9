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


def _plugin(site: Path, name: str, body: str) -> None:
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[gpusbom.collectors]\n{name} = {name}\n")
    (site / f"{name}.py").write_text(body)


_TOY = """
from gpusbom.collectors import Collector, register


@register
class Toy(Collector):
    id = "{id}"

    def collect(self, ctx):
        return []
"""


def test_plugin_list_is_kept_and_follows_installs(tmp_path: Path) -> None:
    """The entry points are listed once per installation (user cache, keyed by sys.path and
    its entries' mtimes): a plug-in installed or removed later is seen at once."""
    import shutil

    site, cache = tmp_path / "site", tmp_path / "cache"
    site.mkdir()
    env = {**os.environ, "GPUSBOM_CACHE_DIR": str(cache),
           "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}

    def loaded() -> list[str]:
        code = ("import json; from gpusbom.collectors import all_collectors, load_failures; "
                "print(json.dumps([sorted(i for i in all_collectors() if i.startswith('toy')), "
                "load_failures()]))")
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env=env, timeout=120, check=True)
        ids, failures = json.loads(proc.stdout)
        assert failures == []
        return list(ids)

    assert loaded() == []
    _plugin(site, "toy_one", _TOY.format(id="toy-one"))
    assert loaded() == ["toy-one"]
    assert "toy_one" in (cache / "plugins.json").read_text()
    assert loaded() == ["toy-one"]  # from the kept list
    _plugin(site, "toy_two", _TOY.format(id="toy-two"))
    assert loaded() == ["toy-one", "toy-two"]
    shutil.rmtree(site / "toy_one-1.0.dist-info")
    (site / "toy_one.py").unlink()
    assert loaded() == ["toy-two"]
