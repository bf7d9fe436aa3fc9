"""The CLI pauses the cyclic garbage collector only while a command loads (``gpusbom._gc``):
it runs again during the command's own work and after ``main`` returns, whatever the outcome,
and a collector that a library user disabled stays disabled."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from gpusbom.cli.app import main


@pytest.fixture(autouse=True)
def _gc_enabled() -> None:
    gc.enable()
    yield
    gc.enable()


def test_resumed_after_every_outcome(tmp_path: Path) -> None:
    assert main(["scan", f"oci:{tmp_path / 'missing'}", "-q", "-o", "json=-"]) == 3
    assert gc.isenabled()
    assert main(["scan", "--no-such-option"]) == 2
    assert gc.isenabled()
    assert main(["advisories", "status"]) == 0
    assert gc.isenabled()


def test_runs_during_the_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``scan`` resumes it once loaded (before reading the target); other commands at their
    start."""
    from gpusbom import pipeline

    seen: list[bool] = []
    real = pipeline.scan

    def spy(*a: object, **k: object) -> object:
        seen.append(gc.isenabled())
        return real(*a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(pipeline, "scan", spy)
    main(["scan", f"oci:{tmp_path / 'missing'}", "-q", "-o", "json=-"])
    assert seen == [True]


def test_library_user_keeps_it_disabled(tmp_path: Path) -> None:
    gc.disable()
    main(["scan", f"oci:{tmp_path / 'missing'}", "-q", "-o", "json=-"])
    assert not gc.isenabled()
