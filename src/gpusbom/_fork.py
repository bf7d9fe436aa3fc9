"""Forking gpusbom's own workers: ``os.fork`` with Ctrl-C and SIGTERM held back while it
runs, and :func:`write_all` for the pipes between a worker and its parent.

The CLI turns SIGINT and SIGTERM into exceptions in the main thread (``cli._common``), so
that a stopped scan stops its workers and removes its temp files. An exception raised by a
signal handler while ``os.fork`` runs its Python at-fork callbacks (``logging``'s, for one)
is printed and dropped ("Exception ignored in ..."), and the scan would go on as if nothing
had been asked. Every fork of gpusbom's own workers goes through :func:`fork`: the two
signals are blocked around it, and one that came meanwhile is delivered, in the parent,
right after it (the child starts with none pending).
"""

from __future__ import annotations

import os
import signal

_HELD = frozenset({signal.SIGINT, signal.SIGTERM})


def fork() -> int:
    """``os.fork()``, the stop signals blocked while it runs."""
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
    except (AttributeError, OSError, ValueError):  # no signal masks here
        return os.fork()
    try:
        return os.fork()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def write_all(fd: int, data: bytes | memoryview) -> None:
    """Write all of ``data`` to ``fd`` (a pipe takes what fits in each ``os.write``)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
