"""Large files analysed on the layer's analysis thread (``fsview.offload``).

A layer read with inflate threads hands the stream analyzers of its large files to a thread
of their own; the entries, their analyses (hard links to analysed files included) and the
verdicts on bad input must be those of the inline path. The size threshold is lowered so
that small test files take that path.
"""

from __future__ import annotations

import hashlib
import io
import random
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fsview_util import F, H, L, make_tar

from gpusbom.errors import LayerError
from gpusbom.fsview import layer as layer_mod
from gpusbom.fsview.layer import index_members
from gpusbom.fsview.spec import PathMatcher, PathSpec
from gpusbom.fsview.tarstream import iter_tar
from gpusbom.fsview.types import Limits, Spool


class _Digest:
    """A stream analyzer: SHA-256 and size of what it was fed, and the chunk count."""

    def __init__(self) -> None:
        self.h = hashlib.sha256()
        self.n = 0

    def feed(self, chunk: bytes) -> None:
        self.h.update(chunk)
        self.n += len(chunk)

    def close(self) -> dict[str, Any]:
        return {"sha256": self.h.hexdigest(), "bytes": self.n}


class _Head:
    """Done after its first bytes unless they start with ``ELF``: the inline path stops
    feeding there, the thread must stop at the same point."""

    def __init__(self) -> None:
        self.seen = 0
        self.elf: bool | None = None

    @property
    def done(self) -> bool:
        return self.elf is False

    def feed(self, chunk: bytes) -> None:
        if self.elf is None:
            self.elf = chunk[:3] == b"ELF"
        self.seen += len(chunk)

    def close(self) -> dict[str, Any]:
        return {"elf": self.elf, "seen": self.seen}


_POOL = ThreadPoolExecutor(2)


class _Later:
    """Leaves its digest as a ``Future`` when asked to defer (as the GPU code scanner's
    SHA-256 does): resolved once the layer is read, for hard links to the file too."""

    can_defer = True

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def feed(self, chunk: bytes) -> None:
        self.parts.append(bytes(chunk))

    def close(self, defer: bool = False) -> dict[str, Any]:
        fut = _POOL.submit(lambda: hashlib.md5(b"".join(self.parts)).hexdigest())
        return {"md5": fut if defer else fut.result()}


class _Boom:
    def feed(self, chunk: bytes) -> None:
        raise RuntimeError("analyzer bug")

    def close(self) -> dict[str, Any]:
        return {}


SPECS = [
    PathSpec("/**/*.so", max_size=0, stream=(_Digest, _Head, _Later)),
    PathSpec("/**/*.so.1", max_size=0, stream=_Head),
    PathSpec("/**/*.bad", max_size=0, stream=(_Boom, _Digest)),
    PathSpec("/**/small.txt"),
]


def _blob(n: int, seed: int, head: bytes = b"") -> bytes:
    return head + random.Random(seed).randbytes(n - len(head))


def _index(tar: bytes, offload: bool, threads: int = 1) -> dict[str, Any]:
    limits = Limits()
    with Spool(limits) as spool:
        entries, whiteouts, opaque, shadow, count = index_members(
            iter_tar(io.BytesIO(tar), limits=limits, name="t"),
            index=0,
            name="t",
            matcher=PathMatcher(SPECS),
            spool=spool,
            limits=limits,
            offload=offload,
            offload_threads=threads,
        )
    return {
        "entries": {
            p: (e.kind, e.size, e.linkname, e.analysis,
                e.content.read() if e.content is not None else None)
            for p, e in entries.items()
        },
        "whiteouts": whiteouts,
        "opaque": opaque,
        "shadow": list(shadow),
        "count": count,
    }


@pytest.fixture(autouse=True)
def _small_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(layer_mod, "OFFLOAD_MIN", 1 << 10)  # the name layer.py reads
    monkeypatch.setattr(layer_mod, "STREAM_CHUNK", 1 << 12)  # many chunks per file


@pytest.mark.parametrize("threads", [1, 3])
def test_offload_matches_inline(threads: int) -> None:
    """With one analysis thread or several (files analysed side by side), the same."""
    items = [
        F("usr/lib/liba.so", _blob(300_000, 1, b"ELF")),
        F("usr/lib/notelf.so.1", _blob(200_000, 2, b"TXT")),  # its analyzer stops early
        F("usr/lib/elf.so.1", _blob(200_000, 6, b"ELF")),
        H("usr/lib/liba-link.so", "usr/lib/liba.so"),  # takes liba's analysis
        F("usr/lib/tiny.so", b"ELFx"),  # under the threshold: inline either way
        F("usr/lib/x.bad", _blob(50_000, 3)),  # one analyzer raises, the other goes on
        F("etc/small.txt", b"hello"),
        F("usr/share/other.bin", _blob(100_000, 4)),
        L("usr/lib/libb.so", "liba.so"),
        F("usr/lib/liba.so", _blob(120_000, 5, b"ELF")),  # a later copy replaces the first
        H("usr/lib/liba-2.so", "usr/lib/liba.so"),
    ]
    tar = make_tar(items)
    inline = _index(tar, offload=False)
    offloaded = _index(tar, offload=True, threads=threads)
    assert offloaded == inline
    got = inline["entries"]
    assert got["/usr/lib/liba.so"][3]["bytes"] == 120_000
    assert got["/usr/lib/liba-2.so"][3] == got["/usr/lib/liba.so"][3]
    liba = next(it.data for it in reversed(items) if it.name == "usr/lib/liba.so")  # type: ignore[union-attr]
    assert got["/usr/lib/liba-2.so"][3]["md5"] == hashlib.md5(liba).hexdigest()
    assert got["/usr/lib/liba-link.so"][3]["bytes"] == 300_000
    assert got["/usr/lib/notelf.so.1"][3]["elf"] is False
    assert got["/usr/lib/notelf.so.1"][3]["seen"] < 200_000  # stopped early
    assert got["/usr/lib/elf.so.1"][3] == {"elf": True, "seen": 200_000}
    assert "analyzer_errors" in got["/usr/lib/x.bad"][3]
    assert got["/usr/lib/x.bad"][3]["bytes"] == 50_000


def test_offload_truncated_layer_fails_the_same() -> None:
    tar = make_tar([F("usr/lib/liba.so", _blob(300_000, 1, b"ELF")), F("etc/small.txt", b"x")])
    cut = tar[:200_000]  # inside liba.so's data
    errors = []
    for offload, threads in ((False, 1), (True, 1), (True, 3)):
        with pytest.raises(LayerError) as ei:
            _index(cut, offload=offload, threads=threads)
        errors.append(str(ei.value))
    assert errors[0] == errors[1] == errors[2]
    assert "truncated" in errors[0]


class _Fatal(BaseException):
    pass


class _Dies:
    """Raises what ``Analyzers`` does not isolate (not an ``Exception``)."""

    def feed(self, chunk: bytes) -> None:
        raise _Fatal("analyzer thread dies")

    def close(self) -> dict[str, Any]:
        return {}


def test_offload_thread_failure_surfaces_without_hanging(monkeypatch: pytest.MonkeyPatch) -> None:
    specs = [PathSpec("/**/*.so", max_size=0, stream=_Dies)]
    # many files and chunks after the failure: the reader must not wait on a dead thread
    tar = make_tar([F(f"usr/lib/l{i}.so", _blob(60_000, i, b"ELF")) for i in range(20)])
    limits = Limits()
    for offload, threads in ((False, 1), (True, 1), (True, 3)):
        with Spool(limits) as spool, pytest.raises(_Fatal):
            index_members(
                iter_tar(io.BytesIO(tar), limits=limits, name="t"),
                index=0,
                name="t",
                matcher=PathMatcher(specs),
                spool=spool,
                limits=limits,
                offload=offload,
                offload_threads=threads,
            )


class _Where:
    """Records the thread that analysed its file."""

    def __init__(self) -> None:
        import threading

        self.name = ""
        self._threading = threading

    def feed(self, chunk: bytes) -> None:
        self.name = self._threading.current_thread().name
        self._threading.Event().wait(0.002)  # slow enough that the reader runs ahead

    def close(self) -> dict[str, Any]:
        return {"thread": self.name}


def test_several_analysis_threads_analyse_files_side_by_side() -> None:
    specs = [PathSpec("/**/*.so", max_size=0, stream=_Where)]
    tar = make_tar([F(f"usr/lib/l{i}.so", _blob(20_000, i, b"ELF")) for i in range(24)])
    limits = Limits()
    with Spool(limits) as spool:
        entries, *_ = index_members(
            iter_tar(io.BytesIO(tar), limits=limits, name="t"), index=0, name="t",
            matcher=PathMatcher(specs), spool=spool, limits=limits, offload=True,
            offload_threads=3)
    names = {e.analysis["thread"] for e in entries.values() if e.analysis}
    assert len([e for e in entries.values() if e.analysis]) == 24
    assert names <= {"gpusbom-analysis-0", "gpusbom-analysis-1", "gpusbom-analysis-2"}
    assert len(names) >= 2, names
