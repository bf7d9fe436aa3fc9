"""``--max-memory`` holds for the whole process tree of a real scan that uses forked layer
workers and a rapidgzip child (the many-core schedule, planned here with ``GPUSBOM_CPUS=8``):
the peak PSS of the tree, sampled from /proc, stays under the cap and under the schedule's
own estimate, and each rapidgzip child under the figure ``sources.schedule`` counts for it.
The image is the ``nvidia-wheels`` fixture: a 168 MB gzip layer (libnccl, whose getter row
keeps a 32 MiB head) beside four smaller ones."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fixtures.build import ensure
from gpusbom.sources import schedule

CPUS = 8


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out.extend(int(c) for c in f.read().split())
    except OSError:
        pass
    return out


def _pss_mib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) >> 10
    except OSError:
        return None
    return None


def _is_rapidgzip(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"rapidgzip" in f.read()
    except OSError:
        return False


def _scan_sampled(ref: str, out: Path, cap: str) -> tuple[subprocess.CompletedProcess[str], int, list[int]]:
    """Run the scan; (the finished process, peak PSS of the tree in MiB, each rapidgzip
    child's own peak PSS in MiB)."""
    env = {**os.environ, "GPUSBOM_CPUS": str(CPUS), "GPUSBOM_DEBUG_INFLATE": "1",
           "GPUSBOM_DB_AUTO_UPDATE": "0"}
    env.pop("GPUSBOM_LAYER_PROCESSES", None)
    env.pop("GPUSBOM_INFLATE_THREADS", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpusbom", "scan", ref, "-q", "--no-cache", "--max-memory", cap,
         "-o", f"cyclonedx-json={out}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    peak = 0
    child_peaks: dict[int, int] = {}
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            total, todo = 0, [proc.pid]
            while todo:
                p = todo.pop()
                m = _pss_mib(p)
                if m is None:
                    continue
                total += m
                if p != proc.pid and _is_rapidgzip(p):
                    child_peaks[p] = max(child_peaks.get(p, 0), m)
                todo.extend(_children(p))
            peak = max(peak, total)
            time.sleep(0.01)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    try:
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        done.set()
        t.join()
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr), peak, list(
        child_peaks.values()
    )


@pytest.mark.parametrize("cap", [512, 768])
def test_tree_stays_under_max_memory(cap: int, tmp_path: Path) -> None:
    paths = ensure("nvidia-wheels")
    index = json.loads((paths.oci_dir / "index.json").read_text())
    manifest_digest = index["manifests"][0]["digest"].split(":", 1)[1]
    manifest = json.loads((paths.oci_dir / "blobs" / "sha256" / manifest_digest).read_text())
    sizes = [la["size"] for la in manifest["layers"]]
    # what the scan plans: a worker per layer up to half the cores, fitted to the cap
    plan = schedule.schedule_layers(
        sizes, cpus=CPUS, max_memory=cap << 20, processes=min(len(sizes), CPUS // 2)
    )
    threads = max(plan.threads)
    assert plan.processes >= 2 and threads >= 2  # workers and a rapidgzip child
    assert plan.memory_mib() <= cap

    done, peak, children = _scan_sampled(paths.oci_ref, tmp_path / "sbom.json", f"{cap}M")
    assert done.returncode == 0, done.stderr
    assert f"{threads} threads" in done.stderr and "fallback=None" in done.stderr, done.stderr
    assert children, "no rapidgzip child was seen"
    assert peak <= cap, f"tree peak {peak} MiB over --max-memory {cap}M"
    assert peak <= plan.memory_mib(), f"tree peak {peak} MiB over the estimate {plan.memory_mib()}"
    figure = schedule.PARALLEL_BASE_MIB + plan.per_thread_mib * threads
    assert max(children) <= figure, f"rapidgzip child {max(children)} MiB, counted {figure}"
