"""``fork_map``: a function over task numbers in forked worker processes, each result read
back through its worker's own pipe by ``gpusbom._wire`` (data and listed classes only).

It replaces ``multiprocessing.Pool.imap`` for the image layer workers: the pool reads its
workers' results with plain pickle, which may name any class or function, and a worker is
where hostile bytes are parsed (tar, gzip, zstd, ELF and fatbin parsers, some in C). Here a
worker that was subverted can send wrong data but not make the scanning process import or
call anything. A worker that dies before sending all of its results (a signal, the OOM
killer) ends the map with ``WorkerLost`` instead of the pool's endless wait.

Tasks go to the workers through one pipe of fixed-size records (a worker takes the next
record when it is free: largest first, small ones fill the gaps, as the pool's ``imap`` with
``chunksize=1`` did); results come back framed (task number, status, length) as each ends.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import struct
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import Any

from . import _fork, _wire
from .errors import GpusbomError

__all__ = ["WorkerLost", "fork_map"]

_TASK = struct.Struct("<I")
_FRAME = struct.Struct("<IBQ")  # task number, 0 = value / 1 = error, payload length
_READ = 1 << 20


class WorkerLost(GpusbomError):
    """A worker ended without sending every result it owed (killed, or ``os._exit``)."""


def _widen(fd: int) -> None:
    with contextlib.suppress(ImportError, AttributeError, OSError):
        import fcntl

        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _READ)


def _child(fn: Callable[[int], Any], rq: int, w: int, pack: Callable[[Any], Any]) -> None:
    code = 0
    try:
        while True:
            rec = os.read(rq, _TASK.size)
            if len(rec) < _TASK.size:
                break
            (i,) = _TASK.unpack(rec)
            try:
                data, status = _wire.dumps(pack(fn(i))), 0
            except BaseException as exc:  # noqa: BLE001 - sent to the parent and raised there
                data, status = _wire.dumps(_wire.portable(exc)), 1
            _fork.write_all(w, _FRAME.pack(i, status, len(data)))
            _fork.write_all(w, data)
            if status:
                break
    except BaseException:  # noqa: BLE001 - whatever happens, the worker ends here
        code = 1
    finally:
        os._exit(code)


def fork_map(
    fn: Callable[[int], Any],
    tasks: Sequence[int],
    procs: int,
    allowed: dict[str, type],
    pack: Callable[[Any], Any] = lambda v: v,
    unpack: Callable[[Any], Any] = lambda v: v,
) -> Generator[tuple[int, Any], None, None]:
    """``(task, unpack(value))`` for each task as its worker finishes it, ``value`` being
    ``pack(fn(task))`` in a forked worker. The first error a worker raises is raised here
    (the other workers are killed); a worker lost without its results raises ``WorkerLost``.
    The caller must have no other threads running (fork)."""
    rq, wq = os.pipe()
    kids: dict[int, int] = {}  # read fd -> pid
    try:
        for t in tasks:  # every task record is written before a worker starts: no blocking
            _fork.write_all(wq, _TASK.pack(t))  # 4 bytes each: a 64 KiB pipe holds 16,384
        os.close(wq)
        wq = -1
        for _ in range(max(1, min(procs, len(tasks)))):
            r, w = os.pipe()
            _widen(w)
            pid = _fork.fork()
            if pid == 0:  # pragma: no cover - the worker (its coverage is not collected)
                os.close(r)
                for fd in kids:
                    os.close(fd)
                _child(fn, rq, w, pack)
            os.close(w)
            kids[r] = pid
    except BaseException:
        for fd in kids:
            os.close(fd)
        _kill(kids.values())
        raise
    finally:
        if wq >= 0:
            os.close(wq)
        os.close(rq)
    yield from _gather(kids, len(tasks), allowed, unpack)


def _kill(pids: Any) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.waitpid(pid, 0)


def _gather(kids: dict[int, int], total: int, allowed: dict[str, type],
            unpack: Callable[[Any], Any]) -> Iterator[tuple[int, Any]]:
    sel = selectors.DefaultSelector()
    bufs = {fd: bytearray() for fd in kids}
    done = 0
    live = dict(kids)
    try:
        for fd in kids:
            sel.register(fd, selectors.EVENT_READ)
        while live:
            for key, _ in sel.select():
                fd = int(key.fd)
                chunk = os.read(fd, _READ)
                buf = bufs[fd]
                if not chunk:
                    sel.unregister(fd)
                    os.close(fd)
                    pid = live.pop(fd)
                    _, status = os.waitpid(pid, 0)
                    if buf:
                        raise WorkerLost(f"a worker (pid {pid}) ended in the middle of a result "
                                         f"(wait status {status})")
                    continue
                buf += chunk
                while len(buf) >= _FRAME.size:
                    i, err, n = _FRAME.unpack_from(buf)
                    if len(buf) < _FRAME.size + n:
                        break
                    payload = bytes(buf[_FRAME.size : _FRAME.size + n])
                    del buf[: _FRAME.size + n]
                    value = _wire.loads(payload, allowed)
                    if err:
                        if not isinstance(value, BaseException):
                            raise _wire.WireError("a worker's error is not an exception")
                        raise value
                    done += 1
                    yield i, unpack(value)
        if done < total:
            raise WorkerLost(f"workers ended with {total - done} of {total} results unsent")
    finally:
        sel.close()
        for fd in live:
            with contextlib.suppress(OSError):
                os.close(fd)
        _kill(live.values())
