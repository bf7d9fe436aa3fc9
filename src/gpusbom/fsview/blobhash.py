"""The sha256 of a blob on its own thread while a parallel decoder reads it out of order.

Used by both parallel paths of ``fsview.decompress``: rapidgzip in a child process and
``fsview.zstd_frames``; the digest is of the blob in order, whatever the decoder does.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from ..errors import LayerError

if TYPE_CHECKING:
    from .blobspan import BlobSpan

#: blob bytes per hash step: few hand-offs of the interpreter lock (about 1,100 for a 4.57 GB
#: blob), and a small buffer (16 MiB steps held 12 MiB more of a layer worker's memory)
HASH_CHUNK = 4 << 20


class BlobHasher:
    """The sha256 of a blob that lies in a file, on its own thread, in order, while a parallel
    decoder (rapidgzip, zstd frames) reads the blob ahead and out of order. ``hashed``: the
    bytes hashed so far (the progress the decoder reports); an error is raised in the
    consumer's thread by :meth:`raise_error`."""

    def __init__(self, span: BlobSpan, raw_hash: Any, name: str) -> None:
        self.hashed = 0
        self.done_at = 0.0
        self._span = span
        self._hash = raw_hash
        self._name = name
        self._err: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="blob-hash")
        self._thread.start()

    def _run(self) -> None:
        span, pos = self._span, 0
        try:
            while pos < span.size and not self._stop.is_set():
                data = span.pread(HASH_CHUNK, pos)
                if not data:
                    raise LayerError(f"{self._name}: unexpected end of blob")
                if self._hash is not None:
                    self._hash.update(data)
                pos += len(data)
                self.hashed = pos
            self.done_at = time.perf_counter()
        except BaseException as e:  # noqa: BLE001 - re-raised in the consumer's thread
            self._err.append(e)

    def stop(self) -> None:
        self._stop.set()

    def join(self) -> None:
        self._thread.join()

    def raise_error(self) -> None:
        if self._err:
            raise self._err[0]
