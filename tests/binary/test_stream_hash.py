"""The SHA-256 a stream scanner computes beside its search is the file's, whatever the piece
sizes, when files are ended without waiting (``close(defer=True)``: the digest is a future
while the next files stream), and when the bytes waiting to be hashed hit their bound."""

from __future__ import annotations

import hashlib
import random
from concurrent.futures import Future

import pytest
from gpubin_oracles import make_elf, make_fatbin, make_fatbin_entry

from gpusbom.binary import streamhash
from gpusbom.binary.stream import GpuCodeScanner
from gpusbom.fsview import types as fstypes
from gpusbom.fsview.layer import resolve_deferred


def _pieces(data: bytes, rng: random.Random) -> list[bytes]:
    out, i = [], 0
    while i < len(data):
        n = rng.choice((rng.randint(1, 64), rng.randint(65, 1 << 16), rng.randint(1 << 16, 1 << 20)))
        out.append(data[i : i + n])
        i += n
    return out


@pytest.fixture
def small_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Jobs of 64 KiB and 256 KiB in flight (instead of MiBs): the bound is hit often."""
    monkeypatch.setattr(streamhash, "_HASH_BATCH", 64 << 10)
    monkeypatch.setattr(fstypes, "ANALYZER_BACKLOG", 256 << 10)
    monkeypatch.setattr(streamhash, "_HASH_INLINE_MAX", 32 << 10)


@pytest.mark.parametrize("size", [4, 1000, 40_000, 300_000, 3_000_000])
def test_digest_is_the_files(small_bounds: None, size: int) -> None:
    rng = random.Random(size)
    data = rng.randbytes(size)
    pieces = _pieces(data, rng)
    h = streamhash.StreamSha256(pieces[0])
    for p in pieces[1:]:
        h.update(p)
    assert h.hexdigest() == hashlib.sha256(data).hexdigest()


def test_files_ended_without_waiting(small_bounds: None) -> None:
    """Twelve files (2 KiB .. 2 MiB) ended with digest_later one after another, 9 MiB in
    all against a 256 KiB bound: every digest, a string or a future, is its file's."""
    rng = random.Random(7)
    files = [rng.randbytes(rng.choice((2048, 50_000, 700_000, 2_000_000))) for _ in range(12)]
    digests: list[str | Future[str]] = []
    for data in files:
        pieces = _pieces(data, rng)
        h = streamhash.StreamSha256(pieces[0])
        for p in pieces[1:]:
            h.update(p)
        digests.append(h.digest_later())
        # the bound holds: what waits is at most one job over it
        st = streamhash.hash_state()
        assert st.inflight_bytes <= fstypes.ANALYZER_BACKLOG + (2 << 20)
    assert any(isinstance(d, Future) for d in digests)
    assert any(isinstance(d, str) for d in digests)  # the 2 KiB ones: hashed inline
    results = [{"sha256": d} for d in digests]
    resolve_deferred(results)
    assert [r["sha256"] for r in results] == [hashlib.sha256(f).hexdigest() for f in files]


def test_scanner_deferred_close_reports_the_digest(small_bounds: None) -> None:
    """A CUDA library (an ELF with a fatbin) of 1.5 MB: close(defer=True) gives its targets
    now and a future digest; close() gives the same digest as a string."""
    rng = random.Random(3)
    fat = make_fatbin([make_fatbin_entry(2, 90)])
    data = make_elf([(".text", rng.randbytes(1_500_000)), (".nv_fatbin", fat)])
    results = []
    for defer in (True, False):
        s = GpuCodeScanner(sha256=True)
        for p in _pieces(data, rng):
            s.feed(p)
        results.append(s.close(defer=defer))
    deferred, plain = results
    assert deferred is not None and plain is not None
    assert isinstance(deferred["sha256"], Future)
    resolve_deferred([deferred])
    assert deferred == plain
    assert plain["sha256"] == hashlib.sha256(data).hexdigest()
    assert plain["cuda"]["sass"] == ["sm_90"]


def test_a_failed_hash_job_is_never_a_digest(small_bounds: None) -> None:
    """A piece the hash cannot take (a str) fails its job on the hashing thread: the digest
    raises instead of covering the other bytes only, and the layer's resolve step drops the
    value and names the error."""
    h = streamhash.StreamSha256(b"x" * 100)
    h.update("not bytes" * 10_000)  # type: ignore[arg-type]
    h.update(b"y" * (300 << 10))
    d = h.digest_later()
    assert isinstance(d, Future)
    with pytest.raises(TypeError):
        d.result()
    result: dict[str, object] = {"sha256": d, "cuda": {"sass": ["sm_90"]}}
    resolve_deferred([result])
    assert "sha256" not in result and result["cuda"] == {"sass": ["sm_90"]}
    assert "TypeError" in str(result["analyzer_errors"])
