"""The date is read in one place: ``gpusbom.clock`` (issue #30).

A report that says "N days old" or "expired" must be the same on every day its test runs,
so every date and age goes through ``clock.now()`` (fixed by ``SOURCE_DATE_EPOCH``) or
``clock.wall()`` (cache bookkeeping). Durations use ``time.monotonic``/``perf_counter``,
which this test does not look for.
"""

from __future__ import annotations

import re
from pathlib import Path

import gpusbom

SRC = Path(gpusbom.__file__).parent
CLOCK = SRC / "clock.py"
# the wall-clock and today's-date readings of the standard library
READS = re.compile(
    r"\b(?:datetime|_dt\.datetime|dt\.datetime)\.(?:now|utcnow|today)\s*\("
    r"|\b(?:date|_dt\.date|dt\.date)\.today\s*\("
    r"|\btime\.(?:time|time_ns|gmtime|localtime|ctime|asctime|strftime)\s*\("
    r"|\bfrom\s+time\s+import\s+[^\n]*\b(?:time|time_ns|gmtime|localtime|ctime|strftime)\b")


def offenders() -> list[str]:
    out = []
    for path in sorted(SRC.rglob("*.py")):
        if path == CLOCK:
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            if READS.search(code):
                out.append(f"{path.relative_to(SRC)}:{n}: {line.strip()}")
    return out


def test_no_date_read_outside_the_clock() -> None:
    assert offenders() == []


def test_the_pattern_finds_each_kind_of_read(tmp_path: Path) -> None:
    # the test can fail: each reading the rule forbids is caught, durations are not
    for bad in ("t = time.time()", "d = _dt.datetime.now(_dt.timezone.utc)",
                "x = datetime.utcnow()", "y = date.today()", "z = time.strftime('%Y')",
                "from time import time", "w = dt.datetime.today()"):
        assert READS.search(bad), bad
    for fine in ("t0 = time.monotonic()", "t = time.perf_counter()", "time.sleep(1)",
                 "from .clock import now", "when = clock.now()"):
        assert not READS.search(fine), fine
