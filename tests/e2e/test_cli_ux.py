"""CLI behaviour a person sees: progress only on a terminal, exit codes, usage errors."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.build import FixturePaths, ensure


@pytest.fixture(scope="module")
def demo() -> FixturePaths:
    return ensure("demo")


def _run_with_tty_stderr(args: list[str]) -> tuple[int, bytes]:
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpusbom", *args],
        stdout=subprocess.DEVNULL,
        stderr=slave,
        env={**os.environ, "TERM": "xterm", "COLUMNS": "120"},
    )
    os.close(slave)
    data = b""
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO once the child closed its end
            break
        if not chunk:
            break
        data += chunk
    os.close(master)
    return proc.wait(timeout=60), data


def test_progress_on_a_terminal(demo: FixturePaths, tmp_path: Path) -> None:
    rc, err = _run_with_tty_stderr(["scan", demo.oci_ref, "-o", f"json={tmp_path / 'a.json'}"])
    assert rc == 0, err
    assert b"3 layers" in err or (b"layer 1/3" in err and b"layer 3/3" in err)


def test_no_progress_with_quiet(demo: FixturePaths, tmp_path: Path) -> None:
    rc, err = _run_with_tty_stderr(
        ["scan", demo.oci_ref, "--quiet", "-o", f"json={tmp_path / 'a.json'}"]
    )
    assert rc == 0, err
    assert b"layer" not in err


def test_no_progress_when_stderr_is_not_a_terminal(demo: FixturePaths, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "gpusbom", "scan", demo.oci_ref, "-o", f"json={tmp_path / 'a.json'}"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0
    assert proc.stderr == ""


@pytest.mark.parametrize(
    "args",
    [
        ["scan"],
        ["scan", "--no-such-flag", "x"],
        ["scan", "x", "-o", "nonsense"],
        ["scan", "x", "-o", "json", "-o", "table"],
        ["scan", "x", "--cyclonedx-version", "1.2"],
        ["scan", "x", "--collector", "no-such-collector"],
    ],
)
def test_usage_errors_exit_2(args: list[str], tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "gpusbom", *args], capture_output=True, text=True, cwd=tmp_path
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    missing = tmp_path / "missing.tar"
    proc = subprocess.run(
        [sys.executable, "-m", "gpusbom", "scan", f"docker-archive:{missing}", "--debug"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 3
    assert "Traceback" in proc.stderr
    assert proc.stderr.rstrip().splitlines()[-1].startswith("gpusbom: error:")


def test_library_never_exits(tmp_path: Path) -> None:
    """The library raises typed errors; only the CLI maps them to exit codes."""
    from gpusbom.errors import InputError
    from gpusbom.scan import scan

    with pytest.raises(InputError):
        scan(f"docker-archive:{tmp_path / 'missing.tar'}")


@pytest.mark.parametrize("args", [["--help"], ["scan", "--help"], ["version"]])
def test_help_and_version(args: list[str]) -> None:
    proc = subprocess.run([sys.executable, "-m", "gpusbom", *args], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip()
    assert proc.stderr == ""
