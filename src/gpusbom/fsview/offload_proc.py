"""The analysis processes of a large layer: stream analyzers of large files in processes of
their own, fed through pipes.

``fsview.offload`` runs the analyzers of a large layer's large files on a thread beside the
layer's reader; both share one interpreter lock, and on a 16-core host the 4.57 GB CUDA
layer of ``benchmarks/big_image.py`` spent ~5.5 CPU-s of its ~7 s under that lock (the
reader's tar parsing and pipe reads, the analyzers' device-code and SYCL searches, the
hand-offs to the hashing threads). Here the analyzers run in ``procs`` forked children, each
with its own interpreter (and hashing threads); the reader only writes each large file's
bytes to a child's pipe (``os.write`` releases the lock) and goes on.

Forked when the layer's reading starts, before its reader runs any thread: a child inherits
the scan's path matcher and builds each file's analyzers from the file's path, as the reader
would (``matcher.match(path).analyzers``). Frames to a child: ``S`` (a file starts: its
path), ``D`` (a piece of its bytes, in order), ``E`` (its end). A child answers ``X`` when
every analyzer of a file is done (the reader then stops sending that file's bytes and the
tar reader skips them, as the inline path stops reading) and ``R`` with the file's result
(``gpusbom._wire``: plain values, never code), once its digest is hashed; a thread here
reads the answers as they come. A child that dies, or answers what it may not, fails the
layer (``LayerError``), as a lost layer worker does. The results are those of the inline
path (``tests/fsview/test_analysis_processes.py``).
"""

from __future__ import annotations

import contextlib
import os
import queue
import struct
import sys
import threading
from collections.abc import Callable, Sequence
from itertools import count
from typing import TYPE_CHECKING, Any

from .. import _wire, settings
from ..errors import LayerError
from .offload import Job

if TYPE_CHECKING:
    from .layer import Analyzers
    from .spec import PathMatcher
    from .types import Entry

_HEAD = struct.Struct("<cII")  # kind, file id, payload length
_START, _DATA, _END, _QUIT = b"S", b"D", b"E", b"Q"
_STOPPED, _RESULT = b"X", b"R"
#: the pipes' capacity asked for (F_SETPIPE_SZ), where allowed
_PIPE = 4 << 20
#: what a result may name besides plain values: nothing (``gpusbom._wire``)
_PLAIN: dict[str, type] = _wire.allow(())
#: the largest frame a child may send (a file's result: device code found, digests)
_MAX_RESULT = 16 << 20


def processes() -> int:
    """Analysis processes for a layer read in parallel: ``GPUSBOM_ANALYSIS_PROCESSES`` (0:
    none, the analysis thread of ``fsview.offload`` instead)."""
    n = settings.get("analysis_processes")
    return max(0, min(int(n), 8)) if isinstance(n, int) else 0


def _grow(fd: int) -> None:
    with contextlib.suppress(ImportError, OSError):
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), _PIPE)


def _read_exact(fd: int, n: int) -> bytes | None:
    """``n`` bytes from ``fd``; None where it ends first."""
    first = os.read(fd, n)
    if len(first) == n or not first:
        return first if first else (b"" if n == 0 else None)
    parts = [first]
    got = len(first)
    while got < n:
        b = os.read(fd, n - got)
        if not b:
            return None
        parts.append(b)
        got += len(b)
    return b"".join(parts)


def _write_all(fd: int, *pieces: bytes) -> None:
    for data in pieces:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]


class _Child:
    __slots__ = ("pid", "data_fd", "result_fd", "thread", "jobs", "lost", "lock")

    def __init__(self, pid: int, data_fd: int, result_fd: int) -> None:
        self.pid = pid
        self.data_fd = data_fd
        self.result_fd = result_fd
        self.thread: threading.Thread | None = None
        self.jobs: dict[int, Job] = {}
        self.lost: str | None = None
        self.lock = threading.Lock()


class ProcessOffload:
    """``procs`` forked children running the stream analyzers of large files; each file goes
    to the child with the fewest files open, whole and in order. Same interface as
    ``fsview.offload.Offload``."""

    def __init__(self, chunk: int, matcher: PathMatcher, procs: int, name: str,
                 make: Callable[[Sequence[Any]], Analyzers],
                 resolve: Callable[[list[dict[str, Any]]], None]) -> None:
        """``make``: ``fsview.layer.Analyzers`` (a file's analyzers from their factories);
        ``resolve``: ``fsview.layer.resolve_deferred`` (the child's digests, awaited)."""
        self._chunk = chunk
        self._make = make
        self._resolve = resolve
        self._name = name
        self._ids = count(1)
        self._pending: list[tuple[Entry, Job]] = []
        self._by_entry: dict[int, Job] = {}
        self._kids: list[_Child] = []
        self._closed = False
        try:
            for _ in range(max(1, procs)):
                self._kids.append(self._fork(matcher))
        except BaseException:
            self.abort()
            raise
        for kid in self._kids:
            kid.thread = threading.Thread(target=self._answers, args=(kid,), daemon=True,
                                          name="gpusbom-analysis-answers")
            kid.thread.start()

    def _fork(self, matcher: PathMatcher) -> _Child:
        dr, dw = os.pipe()
        rr, rw = os.pipe()
        _grow(dw)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child (its results are checked in the parent)
            code = 1
            try:
                os.close(dw)
                os.close(rr)
                for k in self._kids:  # its siblings' pipes are theirs
                    os.close(k.data_fd)
                    os.close(k.result_fd)
                _serve(dr, rw, matcher, self._make, self._resolve)
                code = 0
            finally:
                os._exit(code)
        os.close(dr)
        os.close(rw)
        return _Child(pid, dw, rr)

    # the reader's side ----------------------------------------------------------------------

    def analyze(self, member: Any, size: int, analyzers: Analyzers, path: str = "") -> Job:
        """Send the member's data to a child piecewise (``analyzers``, the reader's own, are
        not fed: the child builds the same ones from ``path``); once the child says they
        are done, the rest is left for the tar reader to skip."""
        del analyzers
        job = Job(None)  # type: ignore[arg-type]  # analysed in the child
        kid = min(self._kids, key=lambda k: len(k.jobs))
        fid = next(self._ids)
        with kid.lock:
            kid.jobs[fid] = job
        fd = kid.data_fd
        try:
            p = path.encode("utf-8", "surrogateescape")
            _write_all(fd, _HEAD.pack(_START, fid, len(p)), p)
            left = size
            read = getattr(member, "read_some", None) or member.read
            while left > 0 and not job.stopped:
                chunk = read(min(self._chunk, left))
                if not chunk:
                    break
                _write_all(fd, _HEAD.pack(_DATA, fid, len(chunk)), chunk)
                left -= len(chunk)
            _write_all(fd, _HEAD.pack(_END, fid, 0))
        except OSError as e:
            raise LayerError(f"{self._name}: an analysis process was lost ({kid.lost or e})") from None
        return job

    def add(self, entry: Entry, job: Job) -> None:
        self._pending.append((entry, job))
        self._by_entry[id(entry)] = job

    def result_of(self, entry: Entry) -> dict[str, Any] | None:
        job = self._by_entry.get(id(entry))
        if job is None:
            return entry.analysis
        job.done.wait()
        return job.result

    def finish(self) -> list[dict[str, Any]]:
        """Tell the children the layer is read, wait for their last results, fill in every
        analysed entry; returns their analyses."""
        self._stop(quit_=True)
        lost = [k.lost for k in self._kids if k.lost]
        if lost:
            raise LayerError(f"{self._name}: an analysis process was lost ({lost[0]})")
        out = []
        for entry, job in self._pending:
            entry.analysis = job.result
            if job.result is not None:
                out.append(job.result)
        return out

    def abort(self) -> None:
        """The layer failed: stop the children."""
        self._stop(quit_=False)

    def _stop(self, quit_: bool) -> None:
        if self._closed:
            return
        self._closed = True
        import signal

        for kid in self._kids:
            if quit_:
                with contextlib.suppress(OSError):
                    _write_all(kid.data_fd, _HEAD.pack(_QUIT, 0, 0))
            with contextlib.suppress(OSError):
                os.close(kid.data_fd)
            if not quit_:
                with contextlib.suppress(OSError):
                    os.kill(kid.pid, signal.SIGKILL)
        for kid in self._kids:
            if kid.thread is not None:
                kid.thread.join()
            with contextlib.suppress(OSError):
                os.close(kid.result_fd)
            with contextlib.suppress(ChildProcessError):
                _, status = os.waitpid(kid.pid, 0)
                if quit_ and os.waitstatus_to_exitcode(status) != 0 and kid.lost is None:
                    kid.lost = f"exit {os.waitstatus_to_exitcode(status)}"
            with kid.lock:
                left = [j for j in kid.jobs.values() if not j.done.is_set()]
            if left and kid.lost is None and quit_:
                kid.lost = f"{len(left)} result(s) missing"
            for j in left:
                j.done.set()  # nobody waits forever on a lost child

    def _answers(self, kid: _Child) -> None:
        """Read a child's answers until it closes its pipe."""
        fd = kid.result_fd
        try:
            while True:
                head = _read_exact(fd, _HEAD.size)
                if not head:
                    return
                kind, fid, n = _HEAD.unpack(head)
                if n > _MAX_RESULT:
                    raise LayerError(f"a frame of {n} bytes")
                body = _read_exact(fd, n) if n else b""
                if body is None:
                    raise LayerError("a truncated frame")
                with kid.lock:
                    job = kid.jobs.get(fid)
                if job is None:
                    raise LayerError(f"an answer for unknown file {fid}")
                if kind == _STOPPED:
                    job.stopped = True
                elif kind == _RESULT:
                    res = _wire.loads(body, _PLAIN) if body else None
                    if res is not None and not isinstance(res, dict):
                        raise LayerError("a result that is not a mapping")
                    job.result = res
                    with kid.lock:
                        del kid.jobs[fid]
                    job.done.set()
                else:
                    raise LayerError(f"an answer of kind {kind!r}")
        except (LayerError, _wire.WireError, OSError, ValueError) as e:
            kid.lost = str(e)
            with contextlib.suppress(OSError):
                os.kill(kid.pid, 9)
            with kid.lock:
                jobs = list(kid.jobs.values())
            for j in jobs:
                j.stopped = True
                j.done.set()


# the child's side ------------------------------------------------------------------------------


def _serve(data_fd: int, result_fd: int, matcher: PathMatcher,
           make: Callable[[Sequence[Any]], Analyzers],
           resolve_deferred: Callable[[list[dict[str, Any]]], None]) -> None:  # pragma: no cover - a child
    """Analyse the files sent through ``data_fd``; answer through ``result_fd``. A sender
    thread waits for each result's digests (hashed on this process's hashing threads) and
    writes it, so that reading goes on meanwhile."""
    import gc

    gc.freeze()  # what the fork shared stays shared: the collector walks only what is new
    out: queue.Queue[tuple[int, dict[str, Any] | None] | None] = queue.Queue()
    wlock = threading.Lock()

    def send(kind: bytes, fid: int, body: bytes = b"") -> None:
        with wlock:
            _write_all(result_fd, _HEAD.pack(kind, fid, len(body)), body)

    def sender() -> None:
        while (item := out.get()) is not None:
            fid, res = item
            if res is not None:
                resolve_deferred([res])
            send(_RESULT, fid, _wire.dumps(res) if res is not None else b"")

    th = threading.Thread(target=sender, daemon=True)
    th.start()
    open_: dict[int, Analyzers] = {}
    stopped: set[int] = set()
    while True:
        head = _read_exact(data_fd, _HEAD.size)
        if not head:
            break
        kind, fid, n = _HEAD.unpack(head)
        body = _read_exact(data_fd, n) if n else b""
        if body is None:
            break
        if kind == _DATA:
            an = open_.get(fid)
            if an is not None and fid not in stopped:
                if an.done:
                    stopped.add(fid)
                    send(_STOPPED, fid)
                else:
                    an.feed(body)
        elif kind == _START:
            spec = matcher.match(body.decode("utf-8", "surrogateescape")) if matcher else None
            open_[fid] = make(spec.analyzers if spec is not None else ())
        elif kind == _END:
            an = open_.pop(fid, None)
            stopped.discard(fid)
            out.put((fid, an.close(defer=True) if an is not None else None))
        elif kind == _QUIT:
            break
    out.put(None)
    th.join()
    sys.stdout.flush()
