"""Bounded reading of an SBOM file or of standard input."""

from __future__ import annotations

import os
import sys
from typing import BinaryIO

from ..errors import InputError

#: inputs larger than this are refused: the largest real SBOMs (a 5,000-package image
#: with file listings) are tens of MB; 512 MiB leaves room and bounds memory use
MAX_SBOM_BYTES = 512 * 1024 * 1024

_CHUNK = 1 << 20


def display_name(path: str) -> str:
    return "<stdin>" if path == "-" else path


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):.0f} MiB"


def read_input(path: str, *, max_bytes: int = MAX_SBOM_BYTES) -> bytes:
    """The bytes of ``path`` (``-``: stdin), at most ``max_bytes``; InputError otherwise."""
    name = display_name(path)
    if path == "-":
        stream = sys.stdin.buffer if sys.stdin is not None else None
        if stream is None:
            raise InputError(f"{name}: no standard input to read the SBOM from")
        return _read_bounded(stream, name, max_bytes)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError(f"{name}: SBOM file not found") from None
    except OSError as exc:
        raise InputError(f"{name}: cannot read SBOM: {exc.strerror or exc}") from None
    if os.path.isdir(path):
        raise InputError(f"{name}: is a directory, not an SBOM file")
    if st.st_size > max_bytes:
        raise InputError(
            f"{name}: SBOM is {_mib(st.st_size)}, larger than the {_mib(max_bytes)} limit"
        )
    try:
        with open(path, "rb") as f:
            return _read_bounded(f, name, max_bytes)
    except OSError as exc:
        raise InputError(f"{name}: cannot read SBOM: {exc.strerror or exc}") from None


def _read_bounded(stream: BinaryIO, name: str, max_bytes: int) -> bytes:
    chunks: list[bytes] = []
    total = 0
    read = stream.read
    while True:
        chunk = read(min(_CHUNK, max_bytes + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
        if total > max_bytes:
            # a FIFO or stdin does not say its size up front
            raise InputError(f"{name}: SBOM is larger than the {_mib(max_bytes)} limit")
    return b"".join(chunks)
