"""The host walk in forked worker processes: the same view as the one-process walk, sooner.

A host's install roots hold tens of thousands of directory entries (an H200 node: 8,546
directories, 82,642 files); walking them is Python work per entry (a ``scandir`` item, a
name test, a stat and an ``Entry`` per directory, the read of each matched file), about
0.5 s in one process. Here the parent walks the first levels itself, deferring the
subdirectories it meets (``_HostWalker.defer``), until the pieces are small; forked workers
then take those directories one at a time from a queue (a pipe of fixed-size records, so a
busy worker never holds up an idle one), walk each whole, and send back the entries they
kept (through a pipe per worker, read back by ``gpusbom._wire``). The parent merges them into one dict: entries
are keyed by path and everything that reads them sorts (``FsView``), so the result is the
same whatever the order; the paths that could not be read are put back in the order the
one-process walk meets them. A worker that fails sends its exception, raised again here; a
worker that dies without a word makes the parent walk everything itself.

Workers are forked before any other thread starts (NVML's), and import nothing: they only
use what the parent has loaded. Large matched files go to the scan's spool directory under
the worker's own names; each worker gets an equal share of the spool's byte budget.
"""

from __future__ import annotations

import errno
import os
import re
import selectors
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import _fork, _wire, settings
from ..errors import UnsafeArchiveError
from ..fsview.types import ContentRef, Entry, EntryKind

if TYPE_CHECKING:
    from .walker import _HostWalker

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_REC = struct.Struct("<I")  # one task index per queue record (reads of 4 bytes are whole)
#: directories whose subdirectories are handed out one by one rather than walked as one
#: piece: the first levels, where Python environments keep their packages (a torch venv's
#: site-packages is the largest subtree of a GPU host), and the way down to Triton's bundled
#: NVIDIA tools (``triton/backends/nvidia/bin``: reading ptxas for its release string is the
#: workers' longest parse; inside one ``triton`` piece, which is not a parse piece and so was
#: taken late, it ended 0.06 s after every other worker on an H200 host)
_SPLIT_DEPTH = 4
_HUB = re.compile(r"lib|lib32|lib64|local|include|bin|python[0-9.]*|site-packages|"
                  r"dist-packages|venv|\.venv|envs|pkgs|nvidia|torch|cuda[-0-9.]*|targets|"
                  r"x86_64-linux(?:-gnu)?|aarch64-linux(?:-gnu)?|dpkg|info|rpm|triton|backends")
_SLICE = 512  # a directory split over workers: this many of its entries a piece
_MAX_TASKS = 4000  # the queue pipe holds them all (64 KiB at 4 bytes each, with room)
_PIPE_SIZE = 1 << 20


def default_workers() -> int:
    """Worker processes for a host walk: ``GPUSBOM_HOST_WALKERS`` when set, else one per
    core up to 16 on machines of 4 cores or more (1: the walk stays in this process)."""
    env = settings.raw("host_walkers")
    if env and env.strip().isdigit():
        return max(1, int(env))
    if not hasattr(os, "fork"):
        return 1
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return min(cores, 16) if cores >= 4 else 1


def _split(path: str, depth: int) -> bool:
    return depth < _SPLIT_DEPTH or _HUB.fullmatch(path[path.rfind("/") + 1 :]) is not None


def _open_task(real_root: str, root: str, path: str) -> int:
    """The directory ``path`` (below the walk root ``root``), opened the way the walk
    reached it: the root as the one-process walk opens it, then each component below it
    without following links."""
    fd = os.open(os.path.join(real_root, root.lstrip("/")), _DIR_FLAGS & ~os.O_NOFOLLOW)
    try:
        for comp in path[len(root) + 1 :].split("/") if path != root else ():
            sub = os.open(comp, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = sub
    except BaseException:
        os.close(fd)
        raise
    return fd


def _walk_task(walker: _HostWalker, real_root: str, roots: list[str],
               task: tuple[str, int, int, int, int]) -> None:
    path, depth, ri, k, n = task
    try:
        fd = _open_task(real_root, roots[ri], path)
    except OSError as e:
        # the directory was opened once already (by the walk that met it, which said so
        # if it could not): failing now, it changed under us
        if e.errno in (errno.EACCES, errno.EPERM, errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
            return
        raise
    try:
        if n > 1 or k >= 0:  # a slice of the directory; its subdirectories are tasks of their own
            walker.part, walker.defer = (max(k, 0), n), []
            try:
                walker.walk_one(fd, path, depth)
            finally:
                walker.part, walker.defer = None, None
        else:
            walker.walk_one(fd, path, depth)
    finally:
        os.close(fd)


def _subdirs(walker: _HostWalker, real_root: str, root: str, path: str,
             depth: int) -> tuple[int, list[str]] | None:
    """How many entries directory ``path`` holds, and the subdirectories the walk descends
    into (the tests of ``DirWalker._walk_fd`` and ``_HostWalker._walk_fd``)."""
    from .walker import SKIP_NAMES, SKIP_PATHS

    try:
        fd = _open_task(real_root, root, path)
    except OSError:
        return None  # a slice task meets it again and says why
    try:
        with os.scandir(fd) as it:
            items = list(it)
    except OSError:
        return None
    finally:
        os.close(fd)
    prefix = "/" if path == "/" else path + "/"
    room = walker.limits.max_path_length - len(prefix)
    skip = frozenset({"proc", "sys", "dev"}) if depth == 0 else frozenset()
    subs = []
    for d in items:
        name = d.name
        if name in skip or len(name) > room or name in SKIP_NAMES:
            continue
        try:
            if not d.is_file(follow_symlinks=False) and d.is_dir(follow_symlinks=False):
                p = prefix + name
                if p not in SKIP_PATHS:
                    subs.append(p)
        except OSError:
            continue
    subs.sort()
    return len(items), subs


def _plan(walker: _HostWalker, real_root: str, roots: list[str]) -> list[tuple[str, int, int, int, int]]:
    """The walk's pieces: (directory, depth, walk root, slice, slices); slice -1 walks the
    directory whole, else that slice of its own entries (subdirectories kept, not entered)."""
    assert walker.defer is not None  # noqa: S101 - host_view sets it
    pending = [(p, d, _root_of(roots, p)) for p, d in walker.defer]
    tasks: list[tuple[str, int, int, int, int]] = []
    while pending:
        path, depth, ri = pending.pop(0)
        got = None
        if _split(path, depth) and len(tasks) + len(pending) < _MAX_TASKS:
            got = _subdirs(walker, real_root, roots[ri], path, depth)
        if got is None:
            tasks.append((path, depth, ri, -1, 1))
            continue
        count, subs = got
        parts = max(1, -(-count // _SLICE))
        tasks.extend((path, depth, ri, k, parts) for k in range(parts))
        pending[0:0] = [(p, depth + 1, ri) for p in subs]  # depth-first: a bounded queue
    walker.defer = None
    return tasks


#: pieces whose captured files the workers also parse (``host/premake.py``): a wheel's
#: dist-info (a torch RECORD lists ~25,000 files), dpkg's info directory, include
#: directories (CUDA headers), the tools Triton bundles
_PARSED = re.compile(r".*(?:\.dist-info|\.egg-info|/var/lib/dpkg(?:/info)?|/include(?:/.*)?|"
                     r"/triton/backends/nvidia/bin)")


def _queue_order(tasks: list[tuple[str, int, int, int, int]]) -> list[int]:
    """The order the workers take the pieces in: those where the workers parse files first,
    then the rest, each in plan order (the longest pieces early, so that none is left to
    one worker at the end; the merge is in plan order whatever the order taken)."""
    first = [i for i, t in enumerate(tasks) if _PARSED.fullmatch(t[0])]
    rest = [i for i, t in enumerate(tasks) if not _PARSED.fullmatch(t[0])]
    return first + rest


class _WorkerSpool:
    """The scan's spool as a worker sees it: its own file names in the same directory and
    its share of the byte budget."""

    def __init__(self, spool: Any, index: int, share: int) -> None:
        self.dir = spool.dir
        self.limits = getattr(spool, "limits", None)
        self._index = index
        self._n = 0
        self.start = spool.limits.max_spool_bytes - share if self.limits else spool.bytes
        self.bytes = self.start

    def new_path(self) -> str:
        self._n += 1
        return os.path.join(self.dir, f"h{self._index:03d}-{self._n:07d}")


def _root_of(roots: list[str], path: str) -> int:
    best = -1
    for i, r in enumerate(roots):
        if (path == r or path.startswith(r + "/") or r == "/") and (
            best < 0 or len(r) > len(roots[best])
        ):
            best = i
    return best


def walk_parallel(walker: _HostWalker, real_root: str, roots: list[str], workers: int,
                  started: Callable[[], None] | None) -> None:
    """Finish the walk whose roots ``walker`` has deferred (``walker.defer``) in ``workers``
    forked processes; ``walker`` then holds what the one-process walk would."""
    assert walker.defer is not None  # noqa: S101 - host_view sets it
    tasks = _plan(walker, real_root, roots)
    if not tasks:
        if started is not None:
            started()
        return
    workers = min(workers, len(tasks))
    if walker.analyze:  # what the workers' stream analyzers import, imported before the fork
        from ..fsview import layer  # noqa: F401
    from .premake import warm

    warm()  # the parsers' first-use imports, before the fork
    rq, wq = os.pipe()
    try:
        os.write(wq, b"".join(_REC.pack(i) for i in _queue_order(tasks)))
    finally:
        os.close(wq)
    spool = walker.spool
    if hasattr(spool, "dir"):
        # the spool's directory is made here, before the fork (see fsview.types.Spool)
        _ = spool.dir
    share = max(0, (spool.limits.max_spool_bytes - spool.bytes) // workers) \
        if getattr(spool, "limits", None) is not None else 0
    kids: list[tuple[int, int]] = []
    try:
        for k in range(workers):
            try:
                r, w = os.pipe()
            except OSError:
                break  # out of file descriptors: the workers started take every piece
            _widen(r)
            try:
                pid = _fork.fork()
            except OSError:  # no more processes (a container's pids limit): likewise
                os.close(r)
                os.close(w)
                break
            if pid == 0:  # pragma: no cover - the worker (its coverage is not collected)
                os.close(r)
                _worker(walker, real_root, roots, tasks, rq, w, _WorkerSpool(spool, k, share))
            os.close(w)
            kids.append((pid, r))
    finally:
        os.close(rq)
    if started is not None:
        started()
    if not kids:  # not one worker could start: this process walks
        _serial(walker, real_root, roots, tasks)
        return
    kind = {k.value: k for k in EntryKind}
    results: list[Any] = [None] * len(kids)
    allowed = _allowed()

    def arrived(k: int, payload: bytes) -> None:
        # read back while the other workers still walk: the entries become Entry objects
        # here, the merge below only puts them in place (in task order)
        try:
            res = _wire.loads(payload, allowed) if payload else None
        except _wire.WireError:
            res = None  # as a worker that died: the walk is redone in this process
        results[k] = res
        if res is not None and res[0] == "ok":
            for i, (kept, unr, made) in res[1].items():
                res[1][i] = ([_entry(t, kind) for t in kept], unr, made)

    _gather([r for _, r in kids], arrived)
    lost = False
    for pid, _ in kids:
        _, status = os.waitpid(pid, 0)
        lost = lost or status != 0
    for res in results:
        if res is not None and res[0] == "error":
            raise res[1]
    if lost or any(res is None for res in results):
        _serial(walker, real_root, roots, tasks)
        return
    done: dict[int, tuple[list[Entry], list[str], dict[tuple[str, str], Any]]] = {}
    for res in results:
        _, per_task, count, spooled = res
        done.update(per_task)
        walker.count += count
        spool.bytes += spooled
    entries = walker.entries
    unreadable = list(walker.unreadable)
    premade = walker.premade = {}
    for i in range(len(tasks)):
        kept, unr, made = done[i]
        for e in kept:
            entries[e.path] = e
        unreadable.extend(unr)
        premade.update(made)
    if len(entries) > walker.limits.max_kept_records:
        raise UnsafeArchiveError(
            f"more than {walker.limits.max_kept_records} kept records (directories, links, "
            "matched files)")
    # the order the one-process walk meets them: by walk root, then depth-first by name
    walker.unreadable = sorted(unreadable, key=lambda p: (_root_of(roots, p), p.split("/")))


def _allowed() -> dict[str, type]:
    """The classes a worker's results may name (``gpusbom._wire``): those the premade parses
    declare they return; entries travel as plain tuples (``_flat``)."""
    from ..collectors import premade_parsers

    return _wire.allow({c for p in premade_parsers() for c in p.returns})


def _flat(e: Entry) -> tuple[Any, ...]:
    """``e`` as plain values (pickled and read back two to three times faster than the
    dataclass: 20k entries, 13 MB, on a development VM)."""
    c = e.content
    data = None if c is None else c._data if c._data is not None else (c._path, c.size)
    return (e.path, e.kind.value, e.size, e.mode, e.linkname, e.layer, data, e.matched, e.uid,
            e.gid, e.mtime, e.history, e.analysis)


def _entry(t: tuple[Any, ...], kind: dict[str, EntryKind]) -> Entry:
    data = t[6]
    content = None if data is None else ContentRef(data=data) if isinstance(data, bytes) \
        else ContentRef(path=data[0], size=data[1])
    return Entry(t[0], kind[t[1]], t[2], t[3], t[4], t[5], content, t[7], t[8], t[9], t[10],
                 t[11], t[12])


def _serial(walker: _HostWalker, real_root: str, roots: list[str],
            tasks: list[tuple[str, int, int, int, int]]) -> None:
    for task in tasks:
        _walk_task(walker, real_root, roots, task)
    walker.unreadable.sort(key=lambda p: (_root_of(roots, p), p.split("/")))


def _widen(fd: int) -> None:
    """A result pipe of 1 MiB (Linux's default most an unprivileged process may ask for)
    instead of 64 KiB: a worker's results (6 MB from each of 3 workers on a development
    VM: the captured package lists) come back in a sixteenth of the reads and wake-ups
    (the parent's reading 0.060 -> 0.036-0.050 CPU-s there)."""
    try:
        import fcntl

        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _PIPE_SIZE)
    except (ImportError, AttributeError, OSError):  # not Linux, or over the limit: 64 KiB
        pass


def _gather(fds: list[int], arrived: Callable[[int, bytes], None]) -> None:
    """Read each pipe of ``fds`` to its end; ``arrived(k, data)`` as soon as the k-th has
    ended (the others' workers may still be walking)."""
    bufs: dict[int, list[bytes]] = {fd: [] for fd in fds}
    index = {fd: k for k, fd in enumerate(fds)}
    sel = selectors.DefaultSelector()
    try:
        for fd in fds:
            sel.register(fd, selectors.EVENT_READ)
        live = len(fds)
        while live:
            for key, _ in sel.select():
                chunk = os.read(key.fd, _PIPE_SIZE)
                if chunk:
                    bufs[key.fd].append(chunk)
                else:
                    sel.unregister(key.fd)
                    live -= 1
                    arrived(index[key.fd], b"".join(bufs.pop(key.fd)))
    finally:
        sel.close()
        for fd in fds:
            os.close(fd)


def _worker(walker: _HostWalker, real_root: str, roots: list[str],
            tasks: list[tuple[str, int, int, int, int]], rq: int, w: int, spool: _WorkerSpool) -> None:
    """A forked worker: walk the tasks it takes from the queue, send what it kept, exit."""
    from .premake import make

    code = 0
    try:
        walker.spool = spool  # type: ignore[assignment]  # the parts of Spool the walk uses
        per_task: dict[int, tuple[list[Any], list[str], dict[tuple[str, str], Any]]] = {}
        count = 0
        while True:
            rec = os.read(rq, _REC.size)
            if len(rec) < _REC.size:
                break
            (i,) = _REC.unpack(rec)
            walker.entries = {}
            walker.unreadable = []
            walker.count = 0
            _walk_task(walker, real_root, roots, tasks[i])
            kept = list(walker.entries.values())
            per_task[i] = ([_flat(e) for e in kept], walker.unreadable, make(kept))
            count += walker.count
        payload: tuple[Any, ...] = ("ok", per_task, count, spool.bytes - spool.start)
    except BaseException as exc:  # noqa: BLE001 - sent to the parent and raised there
        payload = ("error", _wire.portable(exc))
    try:
        data = _wire.dumps(payload)
    except Exception:  # noqa: BLE001 - an exception that does not pickle: the parent redoes it
        data, code = b"", 1
    try:
        _fork.write_all(w, data)
    except OSError:
        code = 1
    finally:
        os._exit(code)
