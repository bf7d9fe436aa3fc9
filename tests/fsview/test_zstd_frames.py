"""Multi-frame zstd layers decompressed on several threads (``fsview.zstd_frames``) next to
the sequential path: the same bytes, blob digest and verdict on bad input.

Blobs are made with the real zstandard library (one frame per piece, content size in each
frame header, as ``pzstd`` and ``zstd:chunked`` writers do); the size threshold is lowered
so that small test blobs take the parallel path.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import zstandard
from test_parallel_inflate import _payload  # the same compressible text payload

from gpusbom.errors import LayerError, UnsafeArchiveError
from gpusbom.fsview import decompress, zstd_frames
from gpusbom.fsview.types import Limits


@pytest.fixture(autouse=True)
def _small_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(decompress, "ZSTD_PARALLEL_MIN_SIZE", 1)


def _frames(data: bytes, piece: int = 256 << 10, checksum: bool = True) -> bytes:
    c = zstandard.ZstdCompressor(level=3, write_content_size=True, write_checksum=checksum)
    return b"".join(c.compress(data[i : i + piece]) for i in range(0, len(data), piece))


def _read(
    path: Path, parallel: int, limits: Limits | None = None
) -> tuple[str, bytes, str | None, bool]:
    """(verdict, output, raw digest, took the parallel path) of reading ``path``."""
    f = open(path, "rb", buffering=1 << 20)  # noqa: SIM115 - closed below
    s = decompress.open_decompressed(
        f, path.name, limits=limits, raw_digest="sha256", threaded=True, parallel=parallel
    )
    took = s._p.parallel_zstd is not None
    try:
        out = s.read()
        verdict = "ok"
    except (LayerError, UnsafeArchiveError) as e:
        out = b""
        verdict = f"{type(e).__name__}: {e}"
    finally:
        s.close()
        f.close()
    return verdict, out, s.raw_digest() if verdict == "ok" else None, took


def test_frames_are_found_and_decompressed_in_parallel(tmp_path: Path) -> None:
    data = _payload(6 << 20)
    blob = _frames(data)
    p = tmp_path / "layer.zst"
    p.write_bytes(blob)
    with open(p, "rb") as f:
        frames = zstd_frames.plan_frames(decompress.BlobSpan(f.fileno(), 0, len(blob)))
    assert frames is not None and len(frames) == len(range(0, len(data), 256 << 10))
    assert sum(fr[1] for fr in frames) == len(blob)
    assert sum(fr[2] for fr in frames) == len(data)
    seq, par = _read(p, 0), _read(p, 3)
    assert not seq[3] and par[3]
    assert seq[0] == par[0] == "ok"
    assert seq[1] == par[1] == data
    assert seq[2] == par[2] == "sha256:" + hashlib.sha256(blob).hexdigest()


def test_skippable_frames_between(tmp_path: Path) -> None:
    data = _payload(2 << 20)
    blob = _frames(data[: 1 << 20]) + b"\x50\x2a\x4d\x18" + (5).to_bytes(4, "little") + b"skip!"
    blob += _frames(data[1 << 20 :])
    p = tmp_path / "layer.zst"
    p.write_bytes(blob)
    seq, par = _read(p, 0), _read(p, 2)
    assert par[3] and seq[:3] == par[:3] and par[1] == data


@pytest.mark.parametrize("mangle", ["truncated", "garbage", "flipped", "checksum", "size"])
def test_bad_blobs_get_the_sequential_verdict(tmp_path: Path, mangle: str) -> None:
    data = _payload(3 << 20)
    blob = bytearray(_frames(data))
    if mangle == "truncated":
        blob = blob[: len(blob) - 1000]
    elif mangle == "garbage":
        blob += b"not zstd at all"
    elif mangle == "flipped":  # a byte inside a compressed block of the second frame
        blob[len(blob) // 2] ^= 0xFF
    elif mangle == "checksum":  # the last frame's checksum
        blob[-1] ^= 0xFF
    elif mangle == "size":  # a frame header that declares one byte more than it holds
        c = zstandard.ZstdCompressor(write_content_size=True)
        one = bytearray(c.compress(data[: 1 << 20]))
        params = zstandard.get_frame_parameters(bytes(one))
        assert params.content_size == 1 << 20
        good = bytes(one)
        fcs_pos = good.index((1 << 20).to_bytes(4, "little"))
        one[fcs_pos : fcs_pos + 4] = ((1 << 20) + 1).to_bytes(4, "little")
        blob = bytearray(bytes(one) + _frames(data[1 << 20 :]))
    p = tmp_path / "bad.zst"
    p.write_bytes(bytes(blob))
    seq, par = _read(p, 0), _read(p, 3)
    assert seq[0] != "ok", seq[0]
    assert par[0] == seq[0]
    assert par[2] is None


def test_blobs_that_stay_sequential(tmp_path: Path) -> None:
    data = _payload(2 << 20)
    one_frame = zstandard.ZstdCompressor(write_content_size=True).compress(data)
    no_size = b"".join(
        zstandard.ZstdCompressor(write_content_size=False).compress(data[i : i + (1 << 20)])
        for i in range(0, len(data), 1 << 20)
    )
    for name, blob in (("one", one_frame), ("nosize", no_size)):
        p = tmp_path / f"{name}.zst"
        p.write_bytes(blob)
        seq, par = _read(p, 0), _read(p, 3)
        assert not par[3], name
        assert seq[:3] == par[:3] and par[1] == data


def test_bomb_limits_hold(tmp_path: Path) -> None:
    data = b"\0" * (8 << 20)
    p = tmp_path / "zeros.zst"
    p.write_bytes(_frames(data, piece=1 << 20))
    lim = Limits(max_layer_uncompressed=4 << 20)
    seq, par = _read(p, 0, lim), _read(p, 3, lim)
    assert par[3]
    assert seq[0].startswith("UnsafeArchiveError") and par[0] == seq[0]
