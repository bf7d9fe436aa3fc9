"""Records the commit the wheel is built from in ``gpusbom/data/build-info.json`` (read by
``gpusbom version``, ``gpusbom.about``); everything else is in pyproject.toml."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


def _commit() -> str | None:
    git = shutil.which("git")
    if git is None or not (HERE / ".git").exists():
        return None
    out = subprocess.run([git, "-C", str(HERE), "rev-parse", "HEAD"], capture_output=True,  # noqa: S603
                         text=True, check=False)
    return out.stdout.strip() or None if out.returncode == 0 else None


class BuildPyWithCommit(build_py):
    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / "gpusbom" / "data" / "build-info.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps({"commit": _commit()}) + "\n", encoding="utf-8")


setup(cmdclass={"build_py": BuildPyWithCommit})
