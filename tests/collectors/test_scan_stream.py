"""``collectors/_libs.scan_stream`` with a needle (the regex's literal start) finds what the
regex alone finds: the same first match, where a chunk boundary cuts the text too."""

from __future__ import annotations

import io

import pytest

from gpusbom.collectors import _libs, triton

_SAY = b"Cuda compilation tools, release 12.4, V12.4.131"


@pytest.mark.parametrize("at", [0, 100, _libs._CHUNK - 20, _libs._CHUNK - 300,
                                 2 * _libs._CHUNK - 5, 3 * _libs._CHUNK + 7, None])
def test_needle_finds_what_the_regex_finds(at: int | None) -> None:
    data = bytearray(b"\0" * (4 * _libs._CHUNK))
    if at is not None:
        data[at : at + len(_SAY)] = _SAY
    data[-len(_SAY) :] = _SAY.replace(b"12.4", b"99.9")  # a later one is never the answer

    def scan(needle: bytes | None) -> tuple[str, str] | None:
        return triton.tool_release(_libs.scan_stream(io.BytesIO(bytes(data)), triton._TOOL_RX,
                                                     triton._TOOL_MAX, needle))

    got = scan(triton._TOOL_NEEDLE)
    assert got == scan(None)
    assert got is not None and got[0] == ("99.9.131" if at is None else "12.4.131")
