"""``gpusbom.forkmap``: results of forked workers, read back as data only; a lost worker or
an error ends the map instead of hanging it."""

from __future__ import annotations

import os
import signal
import time

import msgpack
import pytest

from gpusbom import _wire
from gpusbom.errors import LayerError
from gpusbom.forkmap import WorkerLost, fork_map


def _square(i: int) -> dict[str, int]:
    return {"i": i, "sq": i * i}


def test_every_task_once_from_several_workers() -> None:
    got = dict(fork_map(_square, list(range(40)), 3, {}))
    assert got == {i: {"i": i, "sq": i * i} for i in range(40)}


def test_large_results_cross_the_pipe_whole() -> None:
    got = dict(fork_map(lambda i: bytes([i]) * (3 << 20), [1, 2, 3], 2, {}))
    assert {k: (len(v), v[:1]) for k, v in got.items()} == {k: (3 << 20, bytes([k])) for k in (1, 2, 3)}


def test_a_workers_error_is_raised_in_the_parent() -> None:
    def fail_on_5(i: int) -> int:
        if i == 5:
            raise LayerError(f"layer {i} is truncated")
        return i

    with pytest.raises(LayerError, match="layer 5 is truncated"):
        list(fork_map(fail_on_5, list(range(8)), 2, {}))


def test_a_killed_worker_ends_the_map_without_hanging() -> None:
    def die_on_3(i: int) -> int:
        if i == 3:
            os.kill(os.getpid(), signal.SIGKILL)
        return i

    t0 = time.monotonic()
    with pytest.raises(WorkerLost):
        list(fork_map(die_on_3, list(range(6)), 2, {}))
    assert time.monotonic() - t0 < 30


class _Planted:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, ("true",))


def test_a_worker_result_naming_code_is_refused(tmp_path, monkeypatch) -> None:
    # a subverted worker (simulated: its result's class would have pickle call os.system, and
    # its raw bytes name os:system) cannot make the parent call anything
    with pytest.raises(_wire.WireError, match="_Planted"):
        list(fork_map(lambda i: _Planted(), [0], 1, {}))
    marker = tmp_path / "ran"
    raw = msgpack.packb(msgpack.ExtType(4, msgpack.packb(["os:system", [f"touch {marker}"]])))
    real = _wire.dumps
    monkeypatch.setattr(_wire, "dumps", lambda v: v.data if isinstance(v, _Raw) else real(v))
    with pytest.raises(_wire.WireError, match="os:system"):
        list(fork_map(lambda i: _Raw(raw), [0], 1, {}))
    assert not marker.exists()


class _Raw:
    """A value whose bytes reach the parent as they are (the worker's ``dumps`` replaced)."""

    def __init__(self, data: bytes) -> None:
        self.data = data


def _children() -> set[int]:
    return {int(p) for p in os.listdir("/proc") if p.isdigit() and _ppid(int(p)) == os.getpid()}


def test_no_worker_is_left_behind() -> None:
    before = _children()  # the test session's own (servers a fixture started)
    gen = fork_map(lambda i: (time.sleep(0.2), os.getpid())[1], list(range(6)), 3, {})
    first = next(gen)[1]
    during = _children() - before
    assert first in during and len(during) <= 3  # the workers, alive while tasks remain
    gen.close()  # the consumer stops early: the others are killed and reaped
    assert _children() - before == set()


def _ppid(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return -1
