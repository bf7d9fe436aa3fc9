"""How the layers of one image share the machine: order, worker processes, inflate threads.

Layers are started largest first, so that many small layers finish while the largest one
is still being read instead of queueing behind it. A large gzip layer that lies in a file
is given several inflate threads (``fsview.decompress``, rapidgzip), in proportion to its
share of the image's bytes, so that the largest layer no longer bounds the scan.

Everything is sized to fit ``max_memory`` (``gpusbom scan --max-memory``, 1 GiB by default,
the peak PSS of the whole process tree). The tree peaks either while the layers are read
(the parent, its layer workers and their rapidgzip children) or after them (the parent
alone, merging the layers and running the collectors); :meth:`LayerSchedule.memory_mib`
takes the larger of the two. The figures are PSS measured with ``benchmarks/big_image.py``
on a 13 GB image on 16-core H200 hosts (gVisor; 4 workers, two layers on 4 inflate threads
each; seven runs, the tree's peak 845-902 MiB; ``at_peak``: each process when the tree
peaked, ``process_peaks``: each one's own peak) and on the development VM
(``GPUSBOM_CPUS=8``; a 5-layer image with a 1.35 GB gzip layer of GPU libraries, and
``tests/sources/test_memory_cap.py``). The parts do not peak together (the sum of each
process's own peak was 1,017 MiB when the tree peaked at 899), so the figures are the parts
at the tree's peak, and their sum for that schedule (1,000 MiB) bounds the tree's peak:

* the parent: 31-34 MiB at the tree's peak (:data:`MAIN_LAYERS_MIB`; it shares most of its
  pages with the workers forked from it; its own peak 76 MiB), 280 MiB counted once the
  layers are in (:data:`MAIN_MIB`, an earlier measurement of the merge and collectors);
* a layer worker that inflates its layer itself (:data:`WORKER_MIB`): 91-126 MiB, the two
  such workers 198-225 MiB together; the worker of a layer inflated in parallel holds more
  in flight (the child's pipe, the analysis thread's queue, the hashing backlog;
  :data:`PARALLEL_WORKER_MIB`): 108-146 MiB, 234-274 MiB together. Before a symbol row's
  kept head of a large library (libcublasLt's 64 MiB) went to a temporary file
  (``collectors._classify``), such a worker measured 206-211 MiB there;
* a rapidgzip child (4 MiB chunks, ``fsview.decompress.PARALLEL_CHUNK_KIB``) with 4
  threads: 147-235 MiB (own peaks 198-251); on its own on the VM, 174 / 283 / 459 MB peak
  RSS with 2 / 4 / 8 threads: :data:`PARALLEL_BASE_MIB` plus :func:`thread_mib` per thread.
  A thread's share grows with the chunk (the chunks it decodes and those that wait decoded
  in rapidgzip's prefetch cache, two per thread): on the VM the slope over 2 / 4 / 8
  threads was 34 MiB per thread with 2 MiB chunks and 51 with 4 MiB; on the H200 host four
  threads with 2 MiB chunks held 142-179 MiB. The CPU per byte falls as the chunk grows
  (the start of each chunk is decoded without its window, by rapidgzip's own slower
  inflate, before ISA-L takes over): alone on the 4.57 GB layer with 16 threads, 16.7 /
  19.4 / 24.4 CPU-s with 4 / 2 / 1 MiB chunks (one ISA-L thread: 9.4).

When they do not fit, workers are given up first down to five, then parallel layers keep
at most four inflate threads, then workers go down to four, inflate threads down to two
(one at a time), workers down to two, then parallel inflate (:func:`_fit`). Where the cap
takes both workers and threads with 4 MiB chunks, 2 MiB chunks are used if that keeps more
workers: on the 16-core host the 13 GB image then reads with five workers instead of four
(the small layers, which ended last, are done first) at the same 4 + 4 threads.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

from .. import settings
from ..fsview.decompress import PARALLEL_CHUNK_KIB, parallel_chunk_kib

MAIN_MIB = 280
MAIN_LAYERS_MIB = 40
WORKER_MIB = 100
PARALLEL_WORKER_MIB = 140
PARALLEL_BASE_MIB = 40
PARALLEL_THREAD_MIB = 50  # with 4 MiB chunks (thread_mib)
# a thread's share: a fixed part and a part per MiB of chunk (20 + 7.5 x 4 = 50; with 2 MiB
# chunks 35: four threads measured 142-179 MiB on the H200 host, 40 + 4 x 35 = 180)
_THREAD_FIXED_MIB = 20
_THREAD_PER_CHUNK_MIB = 7.5
# the smaller chunk taken where memory would otherwise cost a worker (schedule_layers)
PARALLEL_SMALL_CHUNK_KIB = 2048
DEFAULT_MAX_MEMORY = 1 << 30
# rapidgzip on the 4.57 GB layer of a 16-core host: 8 threads 2.39 s, 16 threads 2.34 s
# (two such layers side by side with 8 each: 2.54 s); more threads add memory, not speed
PARALLEL_MAX_THREADS = 8


#: the default memory budget per usable core where that is above 1 GiB (at most 4 GiB):
#: the tree's peak grows with the workers and inflate threads that the cores allow, and with
#: 1 GiB a 16-core host ran the 13 GB image with four workers and two inflate threads on its
#: largest layer (the 8-core schedule gave it six): 16 cores were no faster than 8
DEFAULT_MIB_PER_CORE = 128
DEFAULT_MAX_MEMORY_CAP = 4 << 30


def default_max_memory(cpus: int | None = None) -> int:
    """The memory budget when none is given: 1 GiB, or 128 MiB per core on more than 8
    cores (16 cores: 2 GiB), at most 4 GiB."""
    n = usable_cpus() if cpus is None else cpus
    return max(DEFAULT_MAX_MEMORY, min(DEFAULT_MAX_MEMORY_CAP, n * DEFAULT_MIB_PER_CORE << 20))


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask, not the machine's count);
    ``GPUSBOM_CPUS`` plans as if there were that many (tests of the many-core schedule on
    a small machine)."""
    env = settings.raw("cpus")
    if env.isdigit() and int(env) > 0:
        return int(env)
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def thread_mib(chunk_kib: int | None = None) -> int:
    """PSS counted per rapidgzip thread with ``chunk_kib`` chunks (None: those in effect)."""
    kib = parallel_chunk_kib() if chunk_kib is None else chunk_kib
    return math.ceil(_THREAD_FIXED_MIB + _THREAD_PER_CHUNK_MIB * kib / 1024)


@dataclass(frozen=True)
class LayerSchedule:
    """The order layers are read in and the workers and threads for each."""

    order: list[int]  # plan positions, largest layer first
    processes: int  # worker processes (0: threads in this process)
    threads: list[int]  # inflate threads per plan position (1: sequential)
    chunk_kib: int = PARALLEL_CHUNK_KIB  # rapidgzip's chunk for the layers given threads

    @property
    def per_thread_mib(self) -> int:
        """What a rapidgzip thread counts with this plan's chunk (:func:`thread_mib`)."""
        return thread_mib(self.chunk_kib)

    def memory_mib(self) -> int:
        """Estimated peak PSS of the tree: the larger of the layer phase (the layers that
        start together are the largest ones) and the parent after it."""
        running = self.order[: max(self.processes, 1)]
        layers = MAIN_LAYERS_MIB + sum(
            PARALLEL_WORKER_MIB + PARALLEL_BASE_MIB + self.per_thread_mib * self.threads[i]
            if self.threads[i] > 1
            else WORKER_MIB
            for i in running
        )
        return max(MAIN_MIB, layers)


def schedule_layers(
    sizes: Sequence[int | None],
    *,
    cpus: int,
    max_memory: int = DEFAULT_MAX_MEMORY,
    min_parallel_size: int = 64 << 20,
    processes: int | None = None,
) -> LayerSchedule:
    """Plan the reading of layers with compressed ``sizes`` (None: unknown) on ``cpus``.

    ``processes``: worker processes wanted (None: as many as cores and memory allow,
    at most one per layer; one layer's pipeline keeps about two cores busy, so that is
    half the cores, at least three on four cores or more)."""
    n = len(sizes)
    known = [s or 0 for s in sizes]
    # GPUSBOM_INFLATE_THREADS caps the threads of one layer (1: never in parallel)
    env = settings.raw("inflate_threads")
    cap = int(env) if env.isdigit() and int(env) > 0 else cpus
    order = sorted(range(n), key=lambda i: -known[i])
    total = sum(known) or 1
    budget = max_memory >> 20
    threads = [1] * n
    cap = min(cap, PARALLEL_MAX_THREADS)
    if cpus >= 4:
        # only a layer larger than its fair share of the cores would bound the scan; it
        # gets twice its share of them (it starts first and runs longest)
        for i in order:
            share = cpus * known[i] / total
            if known[i] >= min_parallel_size and share >= 1.5:
                want = math.ceil(2 * share)
                threads[i] = max(2, min(cpus, want)) if cap > 1 else 1
                threads[i] = min(threads[i], cap)
    if processes is None:
        processes = 0 if cpus < 4 or n <= 1 else min(n, max(3, cpus // 2))
    processes = min(processes, n)
    forced = settings.raw("rapidgzip_chunk_kib")
    if forced:
        return _fit(order, processes, threads, known, budget, parallel_chunk_kib())
    sched = _fit(order, processes, list(threads), known, budget, PARALLEL_CHUNK_KIB)
    cut_threads = any(t < w for t, w in zip(sched.threads, threads, strict=True) if w > 1)
    if sched.processes < processes and cut_threads:
        # memory, not cores, took both workers and inflate threads: smaller chunks (less
        # memory per thread, more CPU per byte) are taken where they keep more workers
        small = _fit(order, processes, list(threads), known, budget, PARALLEL_SMALL_CHUNK_KIB)
        if small.processes > sched.processes:
            return small
    return sched


def _fit(
    order: list[int], processes: int, threads: list[int], known: list[int], budget: int, chunk_kib: int
) -> LayerSchedule:
    """``processes`` workers and ``threads`` (changed in place) fitted to ``budget`` MiB:
    fewer workers down to five; then at most four inflate threads per layer (on the 16-core
    host, threads beyond four never shortened the scan: 5+5, 6+6, 8+7 and 8+8 against 4+4,
    while a fifth worker did); workers down to four; threads down to two, one at a time,
    the smaller parallel layers' first and the largest layer's (the critical path) last;
    workers down to two; then no parallel inflate."""
    n = len(threads)
    procs = processes

    def plan() -> LayerSchedule:
        return LayerSchedule(order, procs, threads, chunk_kib)

    while plan().memory_mib() > budget and procs > 5:
        procs -= 1
    if plan().memory_mib() > budget:
        threads[:] = [min(t, 4) for t in threads]
    while plan().memory_mib() > budget and procs > 4:
        procs -= 1
    while plan().memory_mib() > budget and any(t > 2 for t in threads):
        # the largest layer is the scan's critical path: the other parallel layers give
        # their threads up first (the smallest first), the largest last
        largest = order[0] if order else -1
        cands = [i for i in range(n) if threads[i] > 2 and i != largest] or [largest]
        big = min(cands, key=lambda i: known[i])
        threads[big] -= 1
    while plan().memory_mib() > budget and procs > 2:
        procs -= 1
    while plan().memory_mib() > budget and any(t > 1 for t in threads):
        small = min((i for i in range(n) if threads[i] > 1), key=lambda i: known[i])
        threads[small] = 1
    return plan()
