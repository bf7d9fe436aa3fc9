"""Pinned PyPI wheels for tests: downloaded once with pip into a cache outside the repo,
checked against their sha256; the test skips when pip cannot fetch them."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

CACHE = Path(os.environ.get("GPUSBOM_TEST_CACHE", Path.home() / ".cache" / "gpusbom-test"))
#: pip arguments for a manylinux x86-64 CPython 3.11 wheel, whatever runs the tests
LINUX_311 = ("--platform", "manylinux2014_x86_64", "--python-version", "3.11")


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def pinned_wheel(filename: str, requirement: str, sha256: str, *, dest: Path = CACHE,
                 pip_args: tuple[str, ...] = (), timeout: int = 300) -> Path:
    """``filename`` (``requirement``, pinned by ``sha256``) from ``dest`` or the cache root,
    downloaded into ``dest`` with ``pip download --no-deps --only-binary=:all:`` when
    missing or not the pinned bytes."""
    for d in dict.fromkeys((dest, CACHE)):
        if (d / filename).is_file() and sha256_file(d / filename) == sha256:
            return d / filename
    dest.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
         *pip_args, requirement, "-d", str(dest)],
        check=False, capture_output=True, text=True, timeout=timeout,
    )
    path = dest / filename
    if r.returncode != 0 or not path.is_file():
        pytest.skip(f"cannot download {requirement}: {r.stderr.strip()[-200:]}")
    got = sha256_file(path)
    assert got == sha256, f"{path}: sha256 {got} != pinned {sha256}"
    return path
