"""How ``sources.schedule`` shares the memory cap between layer workers and inflate threads,
on the layer sizes of ``benchmarks/big_image.py``'s 13 GB image (the plans measured on the
16-core H200 host), and that a layer's planned chunk size reaches the rapidgzip child."""

from __future__ import annotations

import subprocess
import zlib
from pathlib import Path
from typing import Any

import pytest

from gpusbom.fsview import decompress
from gpusbom.fsview.types import Limits
from gpusbom.sources import schedule
from gpusbom.sources.schedule import schedule_layers

# compressed sizes of the 14 layers: 2.82 GB and 2.60 GB, six of about 0.2 GB, small ones
BIG_IMAGE = [103742, 2602082263, 216450131, 220390142, 184757496, 221878243, 216535143,
             227037749, 2822423011, 117274392, 88118494, 68851660, 19234137, 6106842]
GIB = 1 << 30


@pytest.fixture(autouse=True)
def _no_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GPUSBOM_RAPIDGZIP_CHUNK_KIB", "GPUSBOM_INFLATE_THREADS"):
        monkeypatch.delenv(name, raising=False)


def _parallel(sched: schedule.LayerSchedule) -> list[int]:
    return sorted(t for t in sched.threads if t > 1)


def test_default_cap_keeps_a_fifth_worker_with_smaller_chunks() -> None:
    # with 4 MiB chunks 1 GiB holds four workers and 4 + 4 threads; with 2 MiB chunks a
    # fifth worker fits beside the same threads, which read the image faster (6.36-6.42 s
    # against 6.65-6.83 s in one run), so the smaller chunk is taken
    sched = schedule_layers(BIG_IMAGE, cpus=16, processes=8)
    assert (sched.processes, _parallel(sched), sched.chunk_kib) == (5, [4, 4], 2048)
    assert sched.memory_mib() <= 1024
    assert sched.order[:2] == [8, 1]  # the two large layers first


def test_chunks_stay_large_where_memory_costs_no_worker() -> None:
    roomy = schedule_layers(BIG_IMAGE, cpus=16, max_memory=2 * GIB, processes=8)
    assert (roomy.processes, _parallel(roomy), roomy.chunk_kib) == (8, [8, 8], 4096)
    # eight cores: four workers either way, so the chunk that costs less CPU
    eight = schedule_layers(BIG_IMAGE, cpus=8, processes=4)
    assert (eight.processes, _parallel(eight), eight.chunk_kib) == (4, [4, 4], 4096)
    # one huge layer beside small ones: its threads are not cut, so neither is its chunk
    huge = schedule_layers([10 * GIB] + [50 << 20] * 5, cpus=16, processes=6)
    assert (huge.processes, _parallel(huge), huge.chunk_kib) == (5, [8], 4096)


def test_memory_figure_follows_the_chunk() -> None:
    assert schedule.thread_mib(4096) == schedule.PARALLEL_THREAD_MIB
    assert schedule.thread_mib(2048) < schedule.thread_mib(4096) < schedule.thread_mib(8192)
    for cap in (512, 768, 1024, 1536, 2048):
        sched = schedule_layers(BIG_IMAGE, cpus=16, max_memory=cap << 20, processes=8)
        assert sched.memory_mib() <= cap


def test_environment_forces_the_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUSBOM_RAPIDGZIP_CHUNK_KIB", "4096")
    sched = schedule_layers(BIG_IMAGE, cpus=16, processes=8)
    assert (sched.processes, _parallel(sched), sched.chunk_kib) == (4, [4, 4], 4096)


def test_planned_chunk_reaches_rapidgzip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(decompress, "PARALLEL_MIN_SIZE", 1)
    data = b"".join(b"%08d some layer bytes\n" % i for i in range(400_000))
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    path = tmp_path / "layer.gz"
    path.write_bytes(c.compress(data) + c.flush())
    seen: list[list[str]] = []
    real = subprocess.Popen

    def spy(args: Any, *a: Any, **kw: Any) -> Any:
        seen.append([str(x) for x in args])
        return real(args, *a, **kw)

    monkeypatch.setattr(subprocess, "Popen", spy)
    with open(path, "rb", buffering=1 << 20) as f:
        s = decompress.open_decompressed(
            f, path.name, limits=Limits(inflate_chunk_kib=1024), raw_digest="sha256",
            threaded=True, parallel=2,
        )
        try:
            assert s.read() == data
        finally:
            s.close()
    cmd = next(a for a in seen if "rapidgzip" in " ".join(a))
    assert cmd[cmd.index("--chunk-size") + 1] == "1024"
    assert cmd[cmd.index("-P") + 1] == "2"


def test_default_memory_grows_with_the_cores_and_keeps_the_largest_layers_threads() -> None:
    """#37: with 1 GiB, 16 cores gave the largest layer of the 13 GB image fewer inflate
    threads than 8 cores did. Unset, the budget is 128 MiB per core above 8 cores (16: 2 GiB,
    at most 4 GiB); and a budget that cuts threads cuts the smaller layers' first."""
    from gpusbom.sources.schedule import default_max_memory, schedule_layers

    assert default_max_memory(2) == default_max_memory(8) == 1 << 30
    assert default_max_memory(16) == 2 << 30
    assert default_max_memory(64) == 4 << 30
    gz = [1_730, 700, 560, 450, 360, 290, 230, 180, 150, 120, 90, 80, 60, 1]  # MB, largest first
    sizes = [s * 1_000_000 for s in gz]
    eight = schedule_layers(sizes, cpus=8, max_memory=default_max_memory(8))
    sixteen = schedule_layers(sizes, cpus=16, max_memory=default_max_memory(16))
    assert sixteen.processes > eight.processes
    assert sixteen.threads[0] >= eight.threads[0]
    assert sixteen.memory_mib() <= default_max_memory(16) >> 20
    tight = schedule_layers(sizes, cpus=16, max_memory=1200 << 20)
    assert tight.threads[0] == max(tight.threads)
