"""``layer_nice``: the workers of the smaller layers give the largest one (inflated in
parallel: the scan's critical path) the cores first. Each case runs in a forked process,
as a layer worker does: a niceness once raised cannot be lowered again."""

from __future__ import annotations

import multiprocessing
import os

import pytest

from gpusbom.sources.image import layers
from gpusbom.sources.schedule import LayerSchedule

# layer 2 is the largest (order[0]) and has 8 inflate threads
PARALLEL = LayerSchedule(order=[2, 0, 1], processes=3, threads=[1, 1, 8])
SEQUENTIAL = LayerSchedule(order=[2, 0, 1], processes=3, threads=[1, 1, 1])


def _raised_by(i: int, sched: LayerSchedule | None, nice: str, q: object) -> None:
    os.environ["GPUSBOM_LAYER_NICE"] = nice
    before = os.nice(0)
    layers._yield_to_critical(i, sched)
    layers._yield_to_critical(i, sched)  # once per worker
    q.put(os.nice(0) - before)  # type: ignore[attr-defined]


def _in_fork(i: int, sched: LayerSchedule | None, nice: str) -> int:
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_raised_by, args=(i, sched, nice, q))
    p.start()
    got = q.get(timeout=60)
    p.join(60)
    assert p.exitcode == 0
    return int(got)


@pytest.mark.parametrize(("i", "sched", "nice", "raised"), [
    (0, PARALLEL, "5", 5),  # a smaller layer's worker yields
    (1, PARALLEL, "7", 7),
    (2, PARALLEL, "5", 0),  # the largest layer's own worker does not
    (0, SEQUENTIAL, "5", 0),  # no parallel inflate: no critical layer to favour
    (0, PARALLEL, "0", 0),  # the default: priorities left alone
    (0, None, "5", 0),
])
def test_smaller_layers_yield_to_the_parallel_largest(i: int, sched: LayerSchedule | None,
                                                      nice: str, raised: int) -> None:
    if os.nice(0) + raised > 19:
        pytest.fail("this test process runs at niceness >= 12: cannot check")
    assert _in_fork(i, sched, nice) == raised
