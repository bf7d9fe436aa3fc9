"""The analysis thread of a large layer: stream analyzers of large files run beside the reader.

A layer that is given several inflate threads (``sources.schedule``: one of the image's
largest, read in a worker process of its own) is bounded by that worker's reader: reading
the decompressed stream, parsing the tar and feeding every large library to its stream
analyzers (device-code search, SHA-256) took one thread. Measured on a 16-core H200 host
(``benchmarks/big_image.py``, ``GPUSBOM_DEBUG_INFLATE=1``), the reader's thread of the
3.98 GB ``torch/`` + ``nvidia/`` layer used 5.9-7.1 CPU-s with the analyzers inline and
2.0-2.2 CPU-s with them on this thread (which used 3.5-3.7 CPU-s): most of the analyzers'
work (numpy compares, hashing) runs outside the interpreter lock, so both threads progress.

``fsview.layer.index_members`` hands such files here piecewise; they are analysed one after
the other, each one's chunks in order, with the same early stop as the inline path (no
chunk is fed once every analyzer is done): the results are the inline path's.
``GPUSBOM_ANALYSIS_THREAD=0`` keeps the analyzers inline.
"""

from __future__ import annotations

import queue
import threading
from typing import TYPE_CHECKING, Any

from .. import settings

if TYPE_CHECKING:
    from .layer import Analyzers
    from .types import Entry

#: files at least this large are analysed on the analysis thread; smaller ones inline
OFFLOAD_MIN = 8 << 20
#: chunks (up to the layer reader's ``STREAM_CHUNK``, 4 MiB) waiting for each thread
OFFLOAD_DEPTH = 4
#: the most analysis threads of one layer (``threads_for``)
MAX_THREADS = 16
_END = object()


def enabled() -> bool:
    return bool(settings.get("analysis_thread"))


def threads_for(inflate_threads: int) -> int:
    """Analysis threads for a layer given ``inflate_threads`` (a layer read in parallel):
    ``GPUSBOM_ANALYSIS_THREADS`` (at most :data:`MAX_THREADS`), else one. The last
    measurement on a 16-core host had the one thread 42% busy beside the 4.5 GB layer's
    reader (3.03 CPU-s in 7.2 s), so more are not planned until a measurement shows them
    shorten that layer."""
    del inflate_threads  # the plan may weigh it once measured
    forced = settings.get("analysis_threads")
    if isinstance(forced, int) and forced > 0:
        return min(forced, MAX_THREADS)
    return 1


class Job:
    """The analysis of one file on the analysis thread."""

    __slots__ = ("analyzers", "done", "result", "stopped")

    def __init__(self, analyzers: Analyzers) -> None:
        self.analyzers = analyzers
        self.stopped = False  # every analyzer is done: more data cannot change them
        self.done = threading.Event()
        self.result: dict[str, Any] | None = None


class Offload:
    """``threads`` threads running the stream analyzers of large files while the layer's
    reader goes on; a file is given to the thread with the fewest chunks waiting, and
    analysed there from its first chunk to its last, so files are analysed side by side and
    each one's chunks in order. At most ``OFFLOAD_DEPTH`` chunks wait per thread (bounded
    memory)."""

    def __init__(self, chunk: int, threads: int = 1) -> None:
        self._chunk = chunk
        self._abort = False
        self._error: BaseException | None = None
        self._pending: list[tuple[Entry, Job]] = []
        self._by_entry: dict[int, Job] = {}
        self._queues: list[queue.Queue[Any]] = []
        self._threads: list[threading.Thread] = []
        for i in range(max(1, threads)):
            q: queue.Queue[Any] = queue.Queue(maxsize=OFFLOAD_DEPTH)
            t = threading.Thread(target=self._run, args=(q,), daemon=True,
                                 name=f"gpusbom-analysis-{i}")
            self._queues.append(q)
            self._threads.append(t)
            t.start()
        self._q = self._queues[0]

    def _run(self, q: queue.Queue[Any]) -> None:
        get = q.get
        while True:
            item = get()
            if item is None:
                break
            job, chunk = item
            try:
                if chunk is _END:
                    if not self._abort:
                        # deferred digests are resolved by fsview.layer once all is read
                        job.result = job.analyzers.close(defer=True)
                    job.done.set()
                elif not job.stopped and not self._abort:
                    # as ``fsview.layer._analyze_member``: a chunk is fed only while some
                    # analyzer still wants data
                    if job.analyzers.done:
                        job.stopped = True
                    else:
                        job.analyzers.feed(chunk)
            except BaseException as e:  # noqa: BLE001 - re-raised by finish()
                # (Analyzers isolate their analyzers' errors: this is not bad input.) Keep
                # draining the queue so that the reader never waits on a dead thread.
                self._error = e
                self._abort = True
                job.done.set()
        if settings.get("debug_inflate"):
            import sys
            import time

            print(f"gpusbom: analysis thread {time.thread_time():.2f} CPU-s, "
                  f"{len(self._pending)} files", file=sys.stderr)

    def analyze(self, member: Any, size: int, analyzers: Analyzers) -> Job:
        """Read the member's data here and hand it to the thread piecewise; once the thread
        says the analyzers are done, the rest is left for the tar reader to skip."""
        job = Job(analyzers)
        # the thread with the fewest chunks waiting (the first of equals)
        q = min(self._queues, key=lambda x: x.qsize()) if len(self._queues) > 1 else self._q
        put = q.put
        left = size
        read = getattr(member, "read_some", None) or member.read
        while left > 0 and not job.stopped:
            chunk = read(min(self._chunk, left))
            if not chunk:
                break
            put((job, chunk))
            left -= len(chunk)
        put((job, _END))
        return job

    def add(self, entry: Entry, job: Job) -> None:
        """``entry.analysis`` is ``job``'s result (filled in by ``finish``)."""
        self._pending.append((entry, job))
        self._by_entry[id(entry)] = job

    def result_of(self, entry: Entry) -> dict[str, Any] | None:
        """``entry.analysis``, waiting for the thread when it is still being computed (a
        hard link to a file analysed here)."""
        job = self._by_entry.get(id(entry))
        if job is None:
            return entry.analysis
        job.done.wait()
        return job.result

    def finish(self) -> list[dict[str, Any]]:
        """Wait for the thread and fill in every analysed entry; returns their analyses
        (some values may still be ``Future``: see ``fsview.layer.resolve_deferred``)."""
        self._stop()
        if self._error is not None:
            raise self._error
        out = []
        for entry, job in self._pending:
            entry.analysis = job.result
            if job.result is not None:
                out.append(job.result)
        return out

    def abort(self) -> None:
        """The layer failed: the threads drop what is queued and end."""
        self._abort = True
        self._stop()

    def _stop(self) -> None:
        for q in self._queues:
            q.put(None)
        for t in self._threads:
            t.join()
