"""What ``gpusbom version`` reports: the gpusbom version, the commit it was built from, the
Python and platform it runs on, and the advisory database a scan would match against.

The commit is ``git rev-parse HEAD`` when gpusbom runs from a checkout (an editable
install), else what the wheel's build recorded in ``gpusbom/data/build-info.json``
(``setup.py``'s ``build_py``); None when neither is known.
"""

from __future__ import annotations

import json
import platform
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from . import __version__

#: the file the wheel's build writes (setup.py); absent in a checkout
BUILD_INFO = "build-info.json"


def _git_commit(root: Path) -> str | None:
    git = shutil.which("git")
    if git is None or not (root / ".git").exists():
        return None
    try:
        out = subprocess.run([git, "-C", str(root), "rev-parse", "HEAD"],  # noqa: S603 - git, fixed arguments
                             capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip()
    return commit if out.returncode == 0 and len(commit) == 40 else None


def build_info() -> dict[str, Any]:
    """``{"commit": ...}`` as the build recorded it; ``{}`` without a record."""
    try:
        text = resources.files("gpusbom").joinpath("data", BUILD_INFO).read_text("utf-8")
        got = json.loads(text)
    except (OSError, ValueError):
        return {}
    return got if isinstance(got, dict) else {}


def commit() -> str | None:
    """The commit gpusbom was built from (see the module docstring)."""
    here = Path(__file__).resolve().parent  # src/gpusbom in a checkout
    found = _git_commit(here.parents[1]) if here.parent.name == "src" else None
    if found:
        return found
    recorded = build_info().get("commit")
    return recorded if isinstance(recorded, str) and recorded else None


def advisory_db_info() -> dict[str, Any]:
    """The active advisory database: source, build date, newest record's date, counts."""
    from .advisories.db import age_days, load_active

    db = load_active()
    cves = {v.id for a in db for v in a.vulnerabilities}
    age = age_days(db)
    return {"source": db.source, "built": db.built, "data": db.newest,
            "age_days": None if age is None else int(age),
            "advisories": len(db), "vulnerabilities": len(cves)}


def version_info() -> dict[str, Any]:
    """Everything ``gpusbom version -o json`` prints (``schema: gpusbom/version/1``)."""
    return {
        "schema": "gpusbom/version/1",
        "version": __version__,
        "commit": commit(),
        "python": {"version": platform.python_version(),
                   "implementation": platform.python_implementation(),
                   "executable": sys.executable},
        "platform": {"system": platform.system(), "release": platform.release(),
                     "machine": platform.machine(), "description": platform.platform()},
        "advisory_db": advisory_db_info(),
    }


def version_text(info: dict[str, Any]) -> str:
    """``version_info`` as aligned ``Key: value`` lines (as ``syft version`` prints)."""
    db = info["advisory_db"]
    rows = [
        ("Application", "gpusbom"),
        ("Version", info["version"]),
        ("Commit", info["commit"] or "unknown"),
        ("Python", f"{info['python']['version']} ({info['python']['implementation']})"),
        ("Platform", info["platform"]["description"]),
        ("Advisory DB", db["source"]),
        ("DB built", db["built"] or "unknown"),
        ("DB data", db["data"] or "unknown"),
        ("DB records", f"{db['advisories']} advisories, {db['vulnerabilities']} vulnerabilities"),
    ]
    width = max(len(k) for k, _ in rows) + 1
    return "".join(f"{k + ':':<{width}} {v}\n" for k, v in rows)
