"""The SHA-256 of a binary as it streams by, on a hashing thread of its own.

``binary.scanloop`` feeds every byte of a binary it scans to a ``StreamSha256``; the digest
is reported with the file's device code, and the file is not read twice.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from gpusbom.fsview import types as _fstypes

#: bytes of a file gathered before they go to its hashing thread as one job: the layer reader
#: hands over 0.06-4 MiB pieces, and each job costs hand-offs under the interpreter lock
#: (a future, a wake-up, the lock taken back by the hashing thread)
_HASH_BATCH = 4 << 20
#: files smaller than this are hashed by the scanning thread at their end
_HASH_INLINE_MAX = 256 << 10
#: hashing threads per process; each file is hashed by one of them (its jobs in order),
#: consecutive files by different ones: a layer full of big libraries (CUDA's, torch's:
#: 3.5 GB of them in one layer) hashes at ~1 GB/s per thread, which one thread made the
#: layer's bound on a many-core host
_HASH_THREADS = 3


class _HashState:
    """The hashing threads of one process and the jobs in flight on them."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.pools = [ThreadPoolExecutor(1, thread_name_prefix="gpusbom-sha256") for _ in range(_HASH_THREADS)]
        self.next = itertools.count()
        self.lock = threading.Lock()
        self.inflight: deque[tuple[Future[Any], int]] = deque()
        self.inflight_bytes = 0

    def submit(self, pool: ThreadPoolExecutor, fn: Callable[..., Any], *args: Any, n: int) -> Future[Any]:
        """Run ``fn(*args)`` on ``pool`` once fewer than ``fsview.types.analyzer_backlog()``
        bytes wait (``n``: the bytes it hashes); waits on the oldest jobs first."""
        limit = _fstypes.analyzer_backlog()
        while True:
            with self.lock:
                inflight = self.inflight
                while inflight and inflight[0][0].done():
                    self.inflight_bytes -= inflight.popleft()[1]
                if not inflight or self.inflight_bytes + n <= limit:
                    fut = pool.submit(fn, *args)
                    inflight.append((fut, n))
                    self.inflight_bytes += n
                    return fut
                oldest = inflight[0][0]
            oldest.result()


_state: _HashState | None = None
_state_lock = threading.Lock()


def hash_state() -> _HashState:
    """This process's hashing threads (made after a fork, never inherited: a forked layer
    worker would own threads, and jobs, that do not exist there)."""
    global _state
    with _state_lock:
        if _state is None or _state.pid != os.getpid():
            _state = _HashState()
        return _state


def release_threads() -> None:
    """End this process's hashing threads once every job is done (they are made again when
    next needed): a process about to fork (``cli.output.render_all``) then has no thread
    but its own."""
    global _state
    with _state_lock:
        st, _state = _state, None
    if st is not None and st.pid == os.getpid():
        for pool in st.pools:
            pool.shutdown(wait=True)


def _update_all(h: Any, pieces: list[bytes], err: list[BaseException]) -> None:
    # one update per piece: joining them would copy under the interpreter lock
    if err:
        return  # a digest with bytes missing is never reported (see _finish)
    try:
        for b in pieces:
            h.update(b)
    except BaseException as e:  # noqa: BLE001 - kept for _finish, which raises it
        err.append(e)


def _finish(h: Any, pieces: list[bytes], err: list[BaseException]) -> str:
    _update_all(h, pieces, err)
    if err:
        raise err[0]
    return str(h.hexdigest())


class StreamSha256:
    """SHA-256 of a stream, updated on a thread of its own: hashlib releases the interpreter
    lock, so the hash of a big binary runs beside the device-code search and the inflate
    instead of after them. Pieces are gathered into jobs of :data:`_HASH_BATCH` bytes and
    hashed in order (one single-thread executor per file, FIFO); at most
    ``fsview.types.analyzer_backlog()`` bytes of all files wait (bounded memory). A file under
    :data:`_HASH_INLINE_MAX` is hashed inline at its end (a hand-off would cost more).

    :meth:`digest_later` ends the file without waiting: the hash of its last bytes goes on
    while the next file streams, and the digest is a future."""

    __slots__ = ("_h", "_batch", "_batch_bytes", "_pool", "_state", "_handed", "_err")

    def __init__(self, first: bytes) -> None:
        self._h = hashlib.sha256()
        self._err: list[BaseException] = []  # an update job's failure, raised by the digest
        self._batch: list[bytes] = []
        self._batch_bytes = 0
        self._pool: ThreadPoolExecutor | None = None
        self._state: _HashState | None = None
        self._handed = False
        self.update(first)

    def update(self, chunk: bytes) -> None:
        self._batch.append(chunk)
        self._batch_bytes += len(chunk)
        if self._batch_bytes >= _HASH_BATCH:
            self._submit(_update_all)

    def _submit(self, fn: Callable[[Any, list[bytes], list[BaseException]], Any]) -> Future[Any]:
        batch, n = self._batch, self._batch_bytes
        self._batch, self._batch_bytes = [], 0
        if self._state is None:
            self._state = st = hash_state()
            self._pool = st.pools[next(st.next) % len(st.pools)]
        assert self._pool is not None  # noqa: S101 - set with _state
        self._handed = True
        return self._state.submit(self._pool, fn, self._h, batch, self._err, n=n)

    def digest_later(self) -> str | Future[str]:
        """The hex digest of everything fed: a future while the hashing threads are at it."""
        if not self._handed and self._batch_bytes < _HASH_INLINE_MAX:
            return _finish(self._h, self._batch, self._err)  # a small file: no hand-off
        return self._submit(_finish)

    def hexdigest(self) -> str:
        d = self.digest_later()
        return d if isinstance(d, str) else d.result()
