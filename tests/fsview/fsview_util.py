"""Helpers for the fsview tests: build real tar / gzip / zstd layers in memory."""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import zstandard

from gpusbom.fsview import (
    LayerIndex,
    Limits,
    NullProgress,
    PathMatcher,
    PathSpec,
    Spool,
    read_layer,
    squash,
)
from gpusbom.fsview.view import FsView


@dataclass
class F:
    """A file."""

    name: str
    data: bytes = b""
    mode: int = 0o644


@dataclass
class D:
    name: str


@dataclass
class L:
    """A symlink."""

    name: str
    target: str


@dataclass
class H:
    """A hard link."""

    name: str
    target: str


def make_tar(items: Iterable[F | D | L | H], fmt: int = tarfile.PAX_FORMAT) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tf:
        for it in items:
            ti = tarfile.TarInfo(it.name)
            ti.mtime = 1_700_000_000
            if isinstance(it, F):
                ti.size = len(it.data)
                ti.mode = it.mode
                tf.addfile(ti, io.BytesIO(it.data))
                continue
            if isinstance(it, D):
                ti.type = tarfile.DIRTYPE
                ti.mode = 0o755
            elif isinstance(it, L):
                ti.type = tarfile.SYMTYPE
                ti.linkname = it.target
            else:
                ti.type = tarfile.LNKTYPE
                ti.linkname = it.target
            tf.addfile(ti)
    return buf.getvalue()


def gz(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=1, mtime=0)


def zst(data: bytes) -> bytes:
    return zstandard.ZstdCompressor(level=1).compress(data)


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


class Progress(NullProgress):
    def __init__(self) -> None:
        self.total = 0

    def advance(self, nbytes: int) -> None:
        self.total += nbytes


ALL = [PathSpec("/**")]


def read(
    blob: bytes,
    specs: Sequence[PathSpec] = ALL,
    *,
    limits: Limits | None = None,
    spool: Spool | None = None,
    index: int = 0,
    name: str = "layer0",
    threaded: bool = True,
    **kw: object,
) -> LayerIndex:
    limits = limits or Limits()
    own = spool is None
    sp = spool or Spool(limits)
    try:
        return read_layer(
            io.BytesIO(blob),
            index=index,
            name=name,
            matcher=PathMatcher(list(specs)),
            spool=sp,
            limits=limits,
            progress=NullProgress(),
            threaded=threaded,
            **kw,  # type: ignore[arg-type]
        )
    finally:
        if own:
            pass  # in-memory content only unless a spool is passed


def view_of(
    layers: Sequence[bytes],
    specs: Sequence[PathSpec] = ALL,
    *,
    limits: Limits | None = None,
    spool: Spool | None = None,
) -> FsView:
    limits = limits or Limits()
    idx = [
        read(b, specs, limits=limits, spool=spool, index=i, name=f"layer{i}")
        for i, b in enumerate(layers)
    ]
    return squash(idx, limits)
