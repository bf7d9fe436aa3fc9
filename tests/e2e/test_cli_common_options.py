"""Options every command has, as in syft, grype and trivy: ``gpusbom --version``, ``-h`` on
the root and on every command, and ``-q`` accepted by every command (added in one place,
``cli.app.command``)."""

from __future__ import annotations

import subprocess
import sys

from gpusbom import __version__
from gpusbom.cli.app import command


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpusbom", *args], capture_output=True,
                          text=True, timeout=120, check=False)


def _leaves(cmd: object, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    subs = getattr(cmd, "commands", None)
    if subs is None:
        return [path]
    return [leaf for name, sub in sorted(subs.items()) for leaf in _leaves(sub, (*path, name))]


def test_version_and_help() -> None:
    p = _run("--version")
    assert (p.returncode, p.stdout) == (0, f"gpusbom {__version__}\n"), p.stderr
    p = _run("-h")
    assert p.returncode == 0 and p.stdout.startswith("Usage: ") and "gpusbom" in p.stdout.splitlines()[0] and "--version" in p.stdout


def test_every_command_takes_h_and_q() -> None:
    leaves = _leaves(command())
    assert ("check",) in leaves and ("inventory", "query") in leaves and ("scan",) in leaves
    from gpusbom.cli.app import main

    for leaf in leaves:
        # -q is parsed before -h acts: an unknown -q would be a usage error (exit 2)
        assert main([*leaf, "-q", "-h"]) == 0, leaf
