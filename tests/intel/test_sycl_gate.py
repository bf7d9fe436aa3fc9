"""The SYCL scanner's gate (``__sycl_register_lib`` in the first 64 MiB of an ELF file) is
found wherever it lies against the chunks' edges, with the chunks not joined to the tail
while it has not been seen (``SyclScanner._gate_near``): the same targets whatever the
chunking, and none when the gate is absent or comes after the window."""

from __future__ import annotations

import random

import pytest

from gpusbom.binary.sycl_stream import GATE, GATE_WINDOW, SyclScanner

_ELF = b"\x7fELF\x02\x01\x01" + bytes(57)
_TARGET = b"sycl-spir64_gen-unknown-unknown.kern\x00"


def _scan(data: bytes, chunks: list[int]) -> dict | None:  # type: ignore[type-arg]
    s = SyclScanner("t")
    i = 0
    for n in chunks:
        s.feed(data[i : i + n])
        i += n
    s.feed(data[i:])
    return s.close()


def _file(gate_at: int, size: int, target_at: int) -> bytes:
    rnd = random.Random(gate_at ^ size)
    buf = bytearray(_ELF + bytes(rnd.getrandbits(8) for _ in range(size - len(_ELF))))
    buf[gate_at : gate_at + len(GATE)] = GATE
    buf[target_at : target_at + len(_TARGET)] = _TARGET
    return bytes(buf)


@pytest.mark.parametrize("chunk", [7, 18, 19, 20, 64, 4093, 1 << 16])
def test_the_gate_across_every_edge(chunk: int) -> None:
    size = 3 * (1 << 16)
    for gate_at in (64, chunk - 5, chunk - 1, chunk, 2 * chunk - len(GATE) + 1, 1 << 16 - 3):
        gate_at = max(64, gate_at)
        data = _file(gate_at, size, size - 200)
        got = _scan(data, [chunk] * (size // chunk))
        assert got is not None and got["intel"]["sycl"] == ["spir64_gen"], (chunk, gate_at)
        assert got == _scan(data, [size])  # one piece: the same
    no_gate = _file(64, size, size - 200).replace(GATE, b"x" * len(GATE))
    assert _scan(no_gate, [chunk] * (size // chunk)) is None


def test_a_gate_after_the_window_is_not_looked_for() -> None:
    head = _ELF + bytes(GATE_WINDOW)
    s = SyclScanner("t")
    s.feed(head[: 1 << 20])
    for i in range(1 << 20, len(head), 4 << 20):
        s.feed(head[i : i + (4 << 20)])
    assert s.done  # past the window: off, nothing more is read
    s.feed(GATE + _TARGET)
    assert s.close() is None
