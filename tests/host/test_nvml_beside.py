"""NVML is asked in a forked process while the host walk runs (``host/nvml.query_beside``):
the answer, an error, or a process that died come back as they would in this process."""

from __future__ import annotations

import os

import pytest

from gpusbom.host import nvml


def _died(status: int) -> tuple[str, int]:
    return "died", os.waitstatus_to_exitcode(status)


def test_value_comes_from_another_process() -> None:
    wait = nvml.in_child(lambda: {"pid": os.getpid(), "devices": [{"index": 0}]}, _died)
    got = wait()
    assert got["pid"] != os.getpid() and got["devices"] == [{"index": 0}]


def test_error_is_raised_here() -> None:
    def boom() -> None:
        raise ValueError("no such device")

    with pytest.raises(ValueError, match="no such device"):
        nvml.in_child(boom, _died)()


def test_a_process_that_dies_is_an_answer() -> None:
    assert nvml.in_child(lambda: os._exit(3), _died)() == ("died", 3)


def test_query_beside_answers_as_query() -> None:
    """Whatever this machine answers (no pynvml, no driver, or GPUs), asked either way."""
    got = nvml.query_beside()()
    want = nvml.query()
    if got[0] is not None and want[0] is not None:  # a GPU machine: the same devices
        assert [d.get("uuid") for d in got[0]["devices"]] == [
            d.get("uuid") for d in want[0]["devices"]]
    else:
        assert got == want
