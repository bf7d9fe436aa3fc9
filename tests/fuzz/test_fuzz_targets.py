"""Every fuzz target: its findings stay fixed, and a short coverage-guided run finds nothing.

- ``fuzz/regressions/<target>/*``: every input a fuzzing run found (crash, timeout), plus
  hand-made hostile inputs of the same classes; each must now be a clean rejection or a
  result, quickly;
- the seed corpus (``fuzz/seeds.py``, built from the fixtures) parses cleanly;
- a short atheris run of every target (``GPUSBOM_FUZZ_SECONDS``, default 15 s each; the
  long runs are ``scripts/fuzz --minutes N``) ends with no finding.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
FUZZ = ROOT / "fuzz"
sys.path.insert(0, str(FUZZ))

import targets  # noqa: E402

SECONDS = int(os.environ.get("GPUSBOM_FUZZ_SECONDS", "15"))
NAMES = sorted(targets.TARGETS)


@pytest.fixture(scope="session")
def seeds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import seeds as seedmod

    out = tmp_path_factory.mktemp("fuzz-seeds")
    counts = seedmod.build(out)
    assert set(counts) == set(NAMES), set(NAMES) ^ set(counts)
    return out


def _inputs(d: Path) -> list[Path]:
    return sorted(p for p in d.iterdir() if p.is_file()) if d.is_dir() else []


def test_every_target_has_regressions_or_seeds_only_where_expected() -> None:
    # the classes found by fuzzing so far keep their inputs
    for name in ("csaf", "cve5", "osv", "registry-http", "policy-yaml", "image-json", "sbom-in"):
        assert _inputs(FUZZ / "regressions" / name), name


@pytest.mark.parametrize("name", NAMES)
def test_regressions_and_seeds_replay_cleanly(name: str, seeds: Path) -> None:
    files = _inputs(FUZZ / "regressions" / name) + _inputs(seeds / name)
    assert files
    for f in files:
        t0 = time.monotonic()
        targets.call(name, f.read_bytes())  # raises on anything but a clean rejection
        took = time.monotonic() - t0
        assert took < 30, (f, took)  # the timeouts found took 20 s+ on a fast machine, growing exponentially


@pytest.mark.parametrize("name", NAMES)
def test_short_fuzz_run_finds_nothing(
    name: str, seeds: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    record_property: Any,
) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for f in _inputs(seeds / name) + _inputs(FUZZ / "regressions" / name):
        (corpus / f.name).write_bytes(f.read_bytes())
    found = tmp_path / "found"
    found.mkdir()
    # libFuzzer's -rss_limit_mb reads the process's peak RSS (ru_maxrss), and a child started
    # by vfork inherits the peak of this test process (the kernel records the old memory
    # map's high-water mark at exec): after a test that read a 749 MB library, every fuzz
    # run "used" 2587 MB from its first input. A forked child starts from this process's
    # current RSS instead (the escape hatch the subprocess documentation gives).
    monkeypatch.setattr(subprocess, "_USE_VFORK", False)
    proc = subprocess.run(
        [sys.executable, str(FUZZ / "run.py"), name, str(corpus), f"-max_total_time={SECONDS}",
         "-timeout=10", "-rss_limit_mb=2048", f"-artifact_prefix={found}/",
         "-print_final_stats=1", "-max_len=65536"],
        capture_output=True, text=True, errors="replace", timeout=SECONDS + 120,
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-6000:]
    assert not list(found.iterdir()), log[-6000:]
    assert "stat::number_of_executed_units" in log
    import re

    runs = int(re.findall(r"stat::number_of_executed_units: (\d+)", log)[-1])
    assert runs > 0
    # the figure of each target, printed at the end of the session (tests/conftest.py: the
    # report carries it from an xdist worker to the session's summary)
    record_property("figure", f"fuzz {name}: {runs} executions in {SECONDS} s, 0 crashes")
