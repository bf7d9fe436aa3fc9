"""Reading the planned layers: each streamed once through ``fsview.layer.read_layer``,
several at a time in threads, or in forked worker processes for fork-safe stores; then the
scan ``Target``.
"""

from __future__ import annotations

import os
import threading
from array import array
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import replace
from typing import Any, BinaryIO

from ... import _wire, settings
from ...errors import DigestMismatchError, GpusbomError, LayerError
from ...fsview.layer import read_layer
from ...fsview.types import ContentRef, Entry, EntryKind, LayerIndex
from ...model import LayerRef, Target
from ..base import ReadContext
from ..schedule import LayerSchedule, schedule_layers, usable_cpus
from .plan import BlobStore, ImagePlan, LayerPlan


def stream_layer(
    raw: BinaryIO,
    layer: LayerPlan,
    ctx: ReadContext,
    name: str,
    size: int | None,
    *,
    total: int | None = None,
    what: str | None = None,
) -> LayerIndex:
    """Stream one planned layer through ``fsview.layer.read_layer`` with the context's
    matcher, spool, limits and progress, checking the plan's digest and diff_id. With
    ``total``, ``ctx.progress`` hears that the layer starts (shown as ``what``) and, once
    read, that it is done."""
    if total is not None:
        ctx.progress.layer_started(layer.index, total, size, what or name)
    li = read_layer(
        raw,
        index=layer.index,
        name=name,
        matcher=ctx.matcher,
        spool=ctx.spool,
        limits=ctx.limits,
        progress=ctx.progress,
        expected_digest=layer.digest,
        expected_diff_id=layer.diff_id,
        size=size,
    )
    if total is not None:
        ctx.progress.layer_done(layer.index)
    return li


# --------------------------------------------------------------------------- layers, target


def finish_layer(li: LayerIndex, layer: LayerPlan, where: str) -> LayerIndex:
    """Check the streamed layer against the plan and fill its LayerRef."""
    got = li.ref.diff_id
    if got is not None and got != layer.diff_id:
        raise DigestMismatchError(
            f"{where}: layer {layer.index} ({layer.path}): diff_id mismatch: expected "
            f"{layer.diff_id}, got {got}"
        )
    digest = layer.digest if layer.digest != layer.diff_id else None
    li.ref = LayerRef(
        index=layer.index,
        diff_id=layer.diff_id,
        digest=digest,
        media_type=layer.media_type,
        size=layer.size if layer.size is not None else li.ref.size,
        created_by=layer.created_by,
    )
    return li


def layer_workers() -> int:
    """Layers read at once. Each layer is inflated in its own thread, which releases the
    GIL, so a second layer in flight uses a second core; ``GPUSBOM_LAYER_WORKERS`` overrides."""
    env = settings.raw("layer_workers")
    if env.isdigit() and int(env) > 0:
        return int(env)
    return max(1, min(3, os.cpu_count() or 1))


def layer_processes(store: BlobStore, total: int) -> int:
    """Worker processes for reading layers (0: threads in this process).

    One layer's pipeline (read+hash, inflate, tar walk) is three threads under one
    interpreter lock, so several layers in one process stop scaling at about three; in
    processes they scale with the cores. Used for fork-safe stores on machines with 4 or more
    cores; ``GPUSBOM_LAYER_PROCESSES`` (a number, or 0 for none) overrides."""
    if total <= 1 or not getattr(store, "fork_safe", False) or not hasattr(os, "fork"):
        return 0
    env = settings.raw("layer_processes")
    if env.isdigit():
        return min(int(env), total)
    cpus = usable_cpus()
    # as many as the memory cap allows (sources.schedule fits them): half the cores
    return min(total, max(3, cpus // 2)) if cpus >= 4 else 0


def read_layers(
    store: BlobStore, plan: ImagePlan, ctx: ReadContext, workers: int | None = None
) -> list[LayerIndex]:
    """Stream every layer once: several at a time when the store allows it, largest first,
    large gzip layers on several threads (``sources.schedule``); cached layers not at all
    (``fsview.layercache``)."""
    cache = getattr(ctx, "layer_cache", None)
    if cache is not None:
        return cache.read_layers(  # type: ignore[no-any-return]
            plan, ctx, lambda p, c: read_layers(store, p, c, workers), finish_layer
        )
    total = len(plan.layers)
    procs = layer_processes(store, total) if workers is None else 0
    sched = schedule_layers(
        [la.size for la in plan.layers],
        cpus=usable_cpus(),
        max_memory=ctx.limits.max_memory,
        processes=procs if procs > 1 else 0,
    )
    if sched.processes > 1:
        return read_layers_forked(store, plan, ctx, sched.processes, sched)
    n = layer_workers() if workers is None else workers
    if not store.parallel_safe or n <= 1 or total <= 1:
        out = []
        for i, layer in enumerate(plan.layers):
            lctx = _with_threads(ctx, sched.threads[i], sched.chunk_kib)
            li = store.read_layer(layer.path, layer, total, lctx)
            out.append(finish_layer(li, layer, store.label))
        return out
    return read_layers_parallel(store, plan, ctx, n)


def _with_threads(ctx: ReadContext, threads: int, chunk_kib: int) -> ReadContext:
    """``ctx`` with ``threads`` inflate threads (of ``chunk_kib`` chunks) granted to its layer."""
    if threads <= 1 or (
        ctx.limits.inflate_threads == threads and ctx.limits.inflate_chunk_kib == chunk_kib
    ):
        return ctx
    return replace(
        ctx, limits=replace(ctx.limits, inflate_threads=threads, inflate_chunk_kib=chunk_kib)
    )


class SharedSpool:
    """A per-layer view of the scan's Spool that is safe with parallel layer readers."""

    def __init__(self, spool: Any, lock: threading.Lock) -> None:
        self._spool = spool
        self._lock = lock
        self._seen = 0
        self.limits = getattr(spool, "limits", None)

    @property
    def dir(self) -> str | None:
        with self._lock:  # the scan's spool makes its directory when first asked
            return getattr(self._spool, "dir", None)

    def new_path(self) -> str:
        with self._lock:
            return str(self._spool.new_path())

    @property
    def bytes(self) -> int:
        with self._lock:
            self._seen = self._spool.bytes
            return self._seen

    @bytes.setter
    def bytes(self, value: int) -> None:  # "spool.bytes += n" from one thread: apply the delta
        with self._lock:
            self._spool.bytes += value - self._seen
            self._seen = self._spool.bytes


class CombinedProgress:
    """Parallel layers shown as one task (the sink shows one layer at a time)."""

    def __init__(self, sink: Any, total_bytes: int | None, layers: int, label: str) -> None:
        self._sink = sink
        self._lock = threading.Lock()
        start_all = getattr(sink, "layers_started", None)
        if callable(start_all):
            start_all(layers, total_bytes, label)
        else:
            sink.layer_started(layers - 1, layers, total_bytes, label)

    def layer_started(self, index: int, total: int, size: int | None, name: str) -> None:
        pass

    def advance(self, nbytes: int) -> None:
        with self._lock:
            self._sink.advance(nbytes)

    def layer_done(self, index: int) -> None:
        pass

    def finish(self, layers: int) -> None:
        with self._lock:
            self._sink.layer_done(layers - 1)


class LayersCancelled(GpusbomError):
    """Raised inside a layer reader once another layer has failed."""


def read_layers_parallel(
    store: BlobStore, plan: ImagePlan, ctx: ReadContext, workers: int
) -> list[LayerIndex]:
    """Stream every layer once, ``workers`` at a time; results in order; first error wins.

    Stores with a ``cancel`` event (the registry) stop their other downloads when a
    layer fails; others finish the layers already started. Layers start largest first.
    """
    cache = getattr(ctx, "layer_cache", None)
    if cache is not None:
        return cache.read_layers(  # type: ignore[no-any-return]
            plan, ctx, lambda p, c: read_layers_parallel(store, p, c, workers), finish_layer
        )
    total = len(plan.layers)
    if total == 0:
        return []
    sizes = [la.size for la in plan.layers]
    total_bytes = (
        sum(s for s in sizes if s is not None) if all(s is not None for s in sizes) else None
    )
    progress = CombinedProgress(ctx.progress, total_bytes, total, store.label)
    lock = threading.Lock()
    cancel: threading.Event | None = getattr(store, "cancel", None)
    failed = threading.Event()

    def one(layer: LayerPlan) -> LayerIndex:
        if failed.is_set():
            raise LayersCancelled()
        lctx = ReadContext(
            matcher=ctx.matcher,
            spool=SharedSpool(ctx.spool, lock),  # type: ignore[arg-type]
            limits=ctx.limits,
            progress=progress,
            platform=ctx.platform,
        )
        try:
            li = store.read_layer(layer.path, layer, total, lctx)
        except BaseException:
            failed.set()
            raise
        return finish_layer(li, layer, store.label)

    pool = ThreadPoolExecutor(max_workers=max(1, min(workers, total)), thread_name_prefix="layer")
    by_size = sorted(range(total), key=lambda i: -(plan.layers[i].size or 0))
    submitted = {i: pool.submit(one, plan.layers[i]) for i in by_size}
    futures = [submitted[i] for i in range(total)]
    try:
        wait(futures, return_when=FIRST_EXCEPTION)
        for fut in futures:
            exc = fut.exception() if fut.done() else None
            if exc is not None and not isinstance(exc, LayersCancelled) and not getattr(
                exc, "cancelled_by_peer", False
            ):
                raise exc
        return [fut.result() for fut in futures]
    except BaseException:
        failed.set()
        if cancel is not None:
            cancel.set()
        for fut in futures:
            fut.cancel()
        raise
    finally:
        pool.shutdown(wait=True)
        progress.finish(total)


class _ForkSpool:
    """The scan's Spool as seen from a layer worker process: its own file names in the same
    private directory, and the byte budget shared through a counter in shared memory."""

    def __init__(self, spool: Any, counter: Any, index: int) -> None:
        self.dir = spool.dir
        self.limits = getattr(spool, "limits", None)
        self._counter = counter
        self._index = index
        self._n = 0
        self._seen = 0

    def new_path(self) -> str:
        self._n += 1
        return os.path.join(self.dir, f"l{self._index:05d}-{self._n:07d}")

    @property
    def bytes(self) -> int:
        with self._counter.get_lock():
            self._seen = int(self._counter.value)
            return self._seen

    @bytes.setter
    def bytes(self, value: int) -> None:  # "spool.bytes += n": apply the delta
        with self._counter.get_lock():
            self._counter.value += value - self._seen
            self._seen = int(self._counter.value)


_FORK_JOB: tuple[Any, ...] | None = None  # what forked layer workers inherit
_FORK_T0 = 0.0  # when the workers were started (GPUSBOM_DEBUG_INFLATE's timeline)
_NICED = False  # this worker gave up priority to the critical layer (_yield_to_critical)


def _yield_to_critical(i: int, sched: LayerSchedule | None) -> None:
    """In the worker of a layer other than the largest, when the largest is inflated in
    parallel (the scan's critical path): lower this worker's priority by ``layer_nice``
    (its rapidgzip child inherits it), so that where the cores are oversubscribed the
    largest layer's reader and inflate threads run first. Once per worker (a niceness
    cannot be raised back); 0 (the default) leaves priorities alone."""
    global _NICED
    nice = settings.get("layer_nice")
    if _NICED or not isinstance(nice, int) or nice <= 0 or sched is None or not sched.order:
        return
    first = sched.order[0]
    if i == first or sched.threads[first] <= 1:
        return
    _NICED = True
    import contextlib

    with contextlib.suppress(OSError):  # not permitted here: priorities stay as they are
        os.nice(min(nice, 19))


def _start_profile() -> Any:
    """A running cProfile of this layer worker (``GPUSBOM_DEBUG_PROFILE=DIR``: each worker
    writes ``DIR/layer-NN.txt``; from Python 3.12 it sees the worker's threads too)."""
    import cProfile

    prof = cProfile.Profile()
    try:
        prof.enable()
    except ValueError:  # Python 3.12+: the parent's profiler, inherited over the fork
        import sys

        mon = getattr(sys, "monitoring", None)
        if mon is not None:
            mon.free_tool_id(mon.PROFILER_ID)
        prof.enable()
    return prof


def _read_layer_in_child(i: int) -> LayerIndex:
    from ...fsview import types as fstypes
    from ...fsview.types import NullProgress

    # a worker's memory share (sources.schedule) was measured with this much held back
    fstypes.ANALYZER_BACKLOG = fstypes.ANALYZER_BACKLOG_WORKER

    assert _FORK_JOB is not None  # noqa: S101 - type narrowing of an invariant
    store, plan, ctx, counter, sched = _FORK_JOB
    _yield_to_critical(i, sched)
    layer = plan.layers[i]
    threads = sched.threads[i] if sched is not None else 0
    lctx = ReadContext(
        matcher=ctx.matcher,
        spool=_ForkSpool(ctx.spool, counter, i),  # type: ignore[arg-type]
        limits=(
            replace(ctx.limits, inflate_threads=threads, inflate_chunk_kib=sched.chunk_kib)
            if threads > 1 and sched is not None
            else ctx.limits
        ),
        progress=NullProgress(),
        platform=ctx.platform,
    )
    debug = settings.get("debug_inflate")
    prof_dir = (settings.raw("debug_profile") or None)
    prof: Any = None
    if debug:
        import resource
        import sys
        import time

        t0, c0, m0 = time.perf_counter(), time.process_time(), time.thread_time()
        k0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if prof_dir:
        prof = _start_profile()
    li = store.read_layer(layer.path, layer, len(plan.layers), lctx)
    if prof is not None:
        import pstats

        prof.disable()
        with open(os.path.join(prof_dir or ".", f"layer-{i:02d}.txt"), "w") as f:
            st = pstats.Stats(prof, stream=f)
            st.sort_stats("tottime").print_stats(35)
            st.sort_stats("cumulative").print_stats(35)
    if debug:
        k1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        print(
            f"gpusbom: layer {i} ({layer.size} bytes, {threads} threads) in worker "
            f"{os.getpid()}: {t0 - _FORK_T0:.2f}-{time.perf_counter() - _FORK_T0:.2f} s, "
            f"{time.process_time() - c0:.2f} CPU-s (main thread "
            f"{time.thread_time() - m0:.2f}, child "
            f"{k1.ru_utime + k1.ru_stime - k0.ru_utime - k0.ru_stime:.2f})",
            file=sys.stderr,
        )
    return finish_layer(li, layer, store.label)


def _debug_phase(layers_s: float) -> None:
    """``GPUSBOM_DEBUG_INFLATE``: when the layer workers started, counted from the process's
    start (imports, plan), and how long the layers took with their results received; the
    rest of the scan's wall time is what follows them (collectors, output)."""
    import sys

    since = -1.0
    try:  # the process's age: /proc/self/stat field 22 (start, in clock ticks after boot)
        with open("/proc/self/stat") as f:
            start = int(f.read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
        with open("/proc/uptime") as f:
            since = float(f.read().split()[0]) - start - layers_s
    except (OSError, ValueError, IndexError):
        pass
    print(
        f"gpusbom: layer workers started {since:.2f} s after the process, "
        f"layers read and received {layers_s:.2f} s later",
        file=sys.stderr,
    )


def read_layers_forked(
    store: BlobStore,
    plan: ImagePlan,
    ctx: ReadContext,
    procs: int,
    sched: LayerSchedule | None = None,
) -> list[LayerIndex]:
    """Stream every layer once, in ``procs`` forked worker processes; results in order,
    the first error wins (the other workers are stopped). Children inherit the plan, the
    matcher and the open store; they return the layer index (captured content in memory,
    or in the scan's spool directory)."""
    import multiprocessing

    global _FORK_JOB, _FORK_T0
    import time

    _FORK_T0 = time.perf_counter()
    total = len(plan.layers)
    sizes = [la.size for la in plan.layers]
    total_bytes = (
        sum(s for s in sizes if s is not None) if all(s is not None for s in sizes) else None
    )
    progress = CombinedProgress(ctx.progress, total_bytes, total, store.label)
    mp = multiprocessing.get_context("fork")
    counter = mp.Value("q", int(getattr(ctx.spool, "bytes", 0)))  # shared memory, no pickle
    if hasattr(ctx.spool, "dir"):
        # the spool's directory is made here, before the fork (see fsview.types.Spool)
        _ = ctx.spool.dir
    _FORK_JOB = (store, plan, ctx, counter, sched)
    import gc

    from ...forkmap import WorkerLost, fork_map

    gc.freeze()  # the collector leaves inherited objects alone: fewer copied pages per worker
    try:
        # largest first, handed out one at a time: small layers fill the gaps
        order = sched.order if sched is not None else list(range(total))
        got: dict[int, LayerIndex] = {}
        results = fork_map(_read_layer_in_child, order, procs, _LAYER_CLASSES,
                           pack=_pack_layer, unpack=_unpack_layer)
        try:
            for i, li in results:
                got[i] = li
                size = plan.layers[i].size
                if size:
                    progress.advance(size)
        except (WorkerLost, _wire.WireError) as e:
            raise LayerError(f"{store.label}: a layer worker failed: {e}") from None
        finally:
            results.close()
        if hasattr(ctx.spool, "bytes"):
            ctx.spool.bytes = int(counter.value)
        if settings.get("debug_inflate"):
            _debug_phase(time.perf_counter() - _FORK_T0)
        return [got[i] for i in range(total)]
    finally:
        gc.unfreeze()
        _FORK_JOB = None
        progress.finish(total)


#: what a layer worker's result may name (``gpusbom._wire``); its ``shadow_hashes`` array
#: travels as bytes (``_pack_layer``), the analyzers' results are plain JSON-able values
_LAYER_CLASSES = _wire.allow((LayerIndex, LayerRef, Entry, EntryKind, ContentRef))


def _pack_layer(li: LayerIndex) -> tuple[LayerIndex, bytes]:
    hashes = li.shadow_hashes
    li.shadow_hashes = None  # type: ignore[assignment]  # sent apart, as bytes
    try:
        return replace(li), hashes.tobytes()
    finally:
        li.shadow_hashes = hashes


def _unpack_layer(value: Any) -> LayerIndex:
    if not (isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], LayerIndex)
            and isinstance(value[1], bytes) and len(value[1]) % 8 == 0):
        raise _wire.WireError("a layer worker's result is not a layer index")
    li: LayerIndex = value[0]
    raw: bytes = value[1]
    if li.shadow_hashes is not None:
        raise _wire.WireError("a layer worker's result carries its hashes twice")
    li.shadow_hashes = array("q")
    li.shadow_hashes.frombytes(raw)
    return li


def make_target(reference: str, scheme: str, plan: ImagePlan, layers: list[LayerIndex]) -> Target:
    cfg = plan.config
    return Target(
        kind="image",
        reference=reference,
        source=scheme,
        name=plan.name,
        tags=list(plan.tags),
        manifest_digest=plan.manifest_digest,
        image_id=cfg.digest,
        platform=str(cfg.platform) if cfg.platform else None,
        env=dict(cfg.env),
        labels=dict(cfg.labels),
        created=cfg.created,
        layers=[li.ref for li in layers],
    )
