"""Parallel inflate of one large gzip layer (rapidgzip) next to the sequential ISA-L path.

Every blob is read both ways; the bytes, the blob digest and the verdict on bad input must
be the same. The size threshold is lowered so that small test blobs take the parallel path.
"""

from __future__ import annotations

import hashlib
import io
import zlib
from pathlib import Path

import pytest

from gpusbom.errors import LayerError, UnsafeArchiveError
from gpusbom.fsview import decode, decompress
from gpusbom.fsview.types import Limits
from gpusbom.sources.schedule import schedule_layers


@pytest.fixture(autouse=True)
def _small_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(decompress, "PARALLEL_MIN_SIZE", 1)


def _payload(n: int = 8 << 20) -> bytes:
    # compressible but not trivially so: real-looking text with counters
    rows = (
        f"/usr/lib/python3/site-packages/pkg{i % 977}/mod_{i}.py {i * 7919}\n"
        for i in range(n // 40)
    )
    return "".join(rows).encode()[:n]


def _gzip(data: bytes, level: int = 6) -> bytes:
    c = zlib.compressobj(level, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


def _read(
    path: Path, parallel: int, limits: Limits | None = None
) -> tuple[str, bytes, str | None, str | None]:
    """(verdict, output, raw digest, fallback reason) of reading ``path``."""
    f = open(path, "rb", buffering=1 << 20)  # noqa: SIM115 - closed below
    s = decompress.open_decompressed(
        f, path.name, limits=limits, raw_digest="sha256", threaded=True, parallel=parallel
    )
    try:
        out = s.read()
        verdict = "ok"
    except (LayerError, UnsafeArchiveError) as e:
        out = b""
        verdict = f"{type(e).__name__}: {e}"
    finally:
        s.close()
        f.close()
    return verdict, out, s.raw_digest() if verdict == "ok" else None, s._p.fallback


def _both(path: Path, limits: Limits | None = None) -> tuple[tuple, tuple]:
    return _read(path, 0, limits), _read(path, 3, limits)


def test_good_blob_same_bytes_and_digest(tmp_path: Path) -> None:
    data = _payload()
    blob = _gzip(data)
    p = tmp_path / "layer.gz"
    p.write_bytes(blob)
    seq, par = _both(p)
    assert seq[0] == par[0] == "ok"
    assert seq[1] == par[1] == data
    assert seq[2] == par[2] == "sha256:" + hashlib.sha256(blob).hexdigest()
    assert par[3] is None  # the parallel path was taken and trusted


@pytest.mark.parametrize(
    "mangle",
    ["truncated", "garbage", "crc", "isize", "flipped", "zeros", "members"],
)
def test_bad_or_odd_blob_same_verdict(tmp_path: Path, mangle: str) -> None:
    data = _payload(8 << 20)
    blob = bytearray(_gzip(data))
    if mangle == "truncated":
        blob = blob[: len(blob) // 2]
    elif mangle == "garbage":
        blob += b"trailing garbage"
    elif mangle == "crc":
        blob[-6] ^= 1
    elif mangle == "isize":
        blob[-3] ^= 1
    elif mangle == "flipped":
        for i in range(len(blob) // 2, len(blob) // 2 + 64):
            blob[i] ^= 0x55
    elif mangle == "zeros":
        blob += bytes(4096)  # padding Docker tolerates
    elif mangle == "members":
        blob += _gzip(b"second member")
    p = tmp_path / "layer.gz"
    p.write_bytes(bytes(blob))
    seq, par = _both(p)
    assert par[0] == seq[0]
    assert par[1] == seq[1]
    assert par[2] == seq[2]
    if mangle in ("zeros", "members"):
        assert seq[0] == "ok"
    else:
        assert seq[0].startswith("LayerError")
    if mangle in ("truncated", "members", "crc", "flipped", "garbage", "isize"):
        # the parallel reader gave way; the sequential one judged
        assert par[3] is not None


def test_ratio_gives_way_to_the_bounded_reader(tmp_path: Path) -> None:
    data = bytes(96 << 20)  # ~1000:1
    p = tmp_path / "zeros.gz"
    p.write_bytes(_gzip(data, 9))
    seq, par = _both(p)
    assert par[0] == seq[0] == "ok"
    assert par[1] == seq[1]
    assert par[3] == "ratio"


def test_bomb_check_counts_the_whole_blob(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The 1000:1 check (after RATIO_CHECK_AFTER bytes of output) must not see 0 raw bytes
    on the parallel path, where rapidgzip reads the blob itself."""
    monkeypatch.setattr(decode, "RATIO_CHECK_AFTER", 1)  # the name decode.py reads
    p = tmp_path / "layer.gz"
    data = _payload(4 << 20)
    p.write_bytes(_gzip(data))
    seq, par = _both(p)
    assert seq[0] == par[0] == "ok"
    assert par[1] == data
    assert par[3] is None


def test_size_limit_still_applies(tmp_path: Path) -> None:
    p = tmp_path / "big.gz"
    p.write_bytes(_gzip(_payload(8 << 20)))
    lim = Limits(max_layer_uncompressed=1 << 20)
    seq, par = _both(p, lim)
    assert seq[0] == par[0]
    assert "exceeds the limit" in par[0]


def test_span_of_a_slice(tmp_path: Path) -> None:
    """A blob inside an archive (offset > 0) is read sequentially, with the same result."""
    from gpusbom.sources.archive import _SliceReader

    data = _payload(4 << 20)
    blob = _gzip(data)
    p = tmp_path / "arch"
    p.write_bytes(b"x" * 1000 + blob + b"y" * 1000)
    with open(p, "rb") as f:
        raw = io.BufferedReader(_SliceReader(f, 1000, len(blob), "arch"), 1 << 20)
        span = decompress.blob_span(raw)
        assert span is not None and not span.whole_file
        s = decompress.open_decompressed(
            raw, "slice", raw_digest="sha256", threaded=True, parallel=2
        )
        assert s._p.parallel is None  # a part of a file: the sequential path
        assert s.read() == data
        s.close()
        assert s.raw_digest() == "sha256:" + hashlib.sha256(blob).hexdigest()


def test_schedule_largest_first_within_memory() -> None:
    mib = 1 << 20
    sizes = [400 * mib, 2000 * mib, None, 50 * mib] + [400 * mib] * 10
    sched = schedule_layers(sizes, cpus=16, max_memory=4 << 30)
    assert sched.order[0] == 1  # the largest starts first
    assert sched.order[-1] == 2  # unknown size last
    assert sched.threads[1] >= 4  # the layer that would bound the scan gets cores
    assert all(t == 1 for i, t in enumerate(sched.threads) if i != 1)
    assert sched.memory_mib() <= 4096
    default = schedule_layers(sizes, cpus=16)
    assert default.memory_mib() <= 1024
    assert default.processes >= 3  # workers are the last thing given up
    tight = schedule_layers(sizes, cpus=16, max_memory=512 << 20)
    assert tight.memory_mib() <= 512 or (tight.processes <= 2 and max(tight.threads) <= 1)
    assert schedule_layers(sizes, cpus=2).threads == [1] * len(sizes)
