#!/usr/bin/env python3
"""A 10+ GB image built from this machine's own Python environment and CUDA tree, scanned
against its floors in the same run; plus host-scan, check, version and small-image timings.

Meant for a many-core GPU host (the H200 machines): it needs no network and no Docker.

1. Build an OCI layout (cached in ``--work``): one layer of at least 3 GB (the largest
   package directories of the Python environment, ``nvidia/`` and ``torch/`` first), the
   rest of site-packages and the CUDA toolkit tree in further layers, a small base layer
   with the host's os-release and dpkg status. Layers are tarred by ``tar`` and gzipped
   with ISA-L (level 1) on all cores at once.
2. Floors, each over the same blobs: every layer inflated by one ISA-L thread, all layers
   at once (wall: the parallel floor; per layer: the single-thread time, the largest
   layer's among them); sha256 of every blob; the CPU they add up to, divided by the cores.
   The bound of parallel inflate (not with ``--skip-raw``): rapidgzip's command line alone
   on the largest blob (4, 8 and all cores' threads, with gpusbom's chunk size;
   ``--raw-threads`` picks other counts, ``--raw-chunk`` adds
   16-thread runs with other chunk sizes) and on the two largest blobs side by side with
   half the cores each; wall, CPU seconds (against ISA-L's on the same blobs) and peak RSS
   of each child, printed beside the target (1.3 x the total-CPU floor over the cores).
3. ``gpusbom scan`` of the layout: on all cores with the default ``--max-memory`` and with
   2G (``--repeat`` times each, with each layer's timeline from ``GPUSBOM_DEBUG_INFLATE``),
   with parallel inflate off (``GPUSBOM_INFLATE_THREADS=1``), on half the cores; wall, CPU
   and the peak memory of the process tree (PSS where the kernel offers it, else RSS, and
   each process's share at the peak); then with the layer cache, cold and warm. Timed runs
   set ``GPUSBOM_DB_AUTO_UPDATE=0``. Where ``PYTHONDONTWRITEBYTECODE`` is set, byte-compile
   first (``python -m compileall``), as ``pip install`` does.
   ``--variant LABEL:REPEAT:ARGS:ENV`` adds scans with other arguments or environment
   (``--only LABEL`` keeps just those), ``--cores N`` a scan on the first N cores,
   ``--profile`` one scan under cProfile (the parent, and each layer worker through
   ``GPUSBOM_DEBUG_PROFILE``: prof/parent.txt, prof/layers.txt), ``--alone`` scans of a
   layout holding only the largest layer (on all cores, with the 8 inflate threads it gets in
   the whole image, on each ``--cores``): whether that layer is bound by the other layers
   beside it or by its own pipeline (``GPUSBOM_DEBUG_INFLATE`` then also counts the reads
   that found rapidgzip's pipe full: the child waiting for the reader). Each run records how many
   cores were busy, per quarter second (``/proc/stat``).
4. ``gpusbom scan --host`` (median of 5, and a cProfile of one run), ``gpusbom check
   SMALL --host`` (median of 5; the first one scans the host, later ones reuse it),
   ``gpusbom version`` and a small image scan (median of 5 each).

Results go to ``--out`` (results.json, log.txt, host_profile.txt), written as they come.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import io
import json
import multiprocessing
import os
import pstats
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

from isal import isal_zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from synth_layout import build_layout, layer_sizes, write_layout  # noqa: E402

RAW = 1 << 20
OUT = 4 << 20
GB = 1e9

results: dict[str, object] = {}
out_dir = Path(".")
isal_cpu: dict[str, float] = {}  # blob path -> CPU-s of one ISA-L thread inflating it


def log(msg: str) -> None:
    line = f"[{time.strftime('%H:%M:%S')}] {msg}"
    print(line, flush=True)
    with open(out_dir / "log.txt", "a") as f:
        f.write(line + "\n")


def save() -> None:
    (out_dir / "results.json").write_text(json.dumps(results, indent=2, sort_keys=True))


# ------------------------------------------------------------------------------ building


def build(work: Path, donors: list[str], sizes: list[int], seed: int) -> tuple[Path, list[str]]:
    """The synthetic layout (``synth_layout``; cached in ``work``): root and blobs."""
    root, blobs, facts = build_layout(work, sizes=sizes, donors=donors, seed=seed, log=log)
    results["image"] = {k: v for k, v in facts.items() if k != "digests"}
    results["layer_plan_bytes"] = sizes
    save()
    return root, blobs


def _base_layer(blobs: str) -> tuple[str, str, int, int]:
    from synth_layout import _base_layer as base

    b = base(blobs)
    return b["digest"], b["diff_id"], b["size"], b["raw"]  # type: ignore[return-value]


# ------------------------------------------------------------------------------ floors


def _inflate(path: str) -> tuple[str, float, float, int]:
    c0, t0 = time.process_time(), time.perf_counter()
    d = isal_zlib.decompressobj(31)
    n = 0
    with open(path, "rb", buffering=0) as f:
        while chunk := f.read(RAW):
            data = chunk
            while data:
                n += len(d.decompress(data, OUT))
                data = d.unconsumed_tail
                if d.eof:
                    data = d.unused_data
                    d = isal_zlib.decompressobj(31)
            while not d.eof:
                more = d.decompress(b"", OUT)
                if not more:
                    break
                n += len(more)
    return path, time.perf_counter() - t0, time.process_time() - c0, n


def _sha(path: str) -> tuple[str, float, float]:
    c0, t0 = time.process_time(), time.perf_counter()
    h = hashlib.sha256()
    with open(path, "rb", buffering=0) as f:
        while chunk := f.read(4 << 20):
            h.update(chunk)
    return path, time.perf_counter() - t0, time.process_time() - c0


def floors(blobs: list[str], cpus: int) -> None:
    order = sorted(blobs, key=lambda p: -os.path.getsize(p))
    for _ in range(1):  # the blobs were just written: in the page cache
        t0 = time.perf_counter()
        with multiprocessing.Pool(cpus) as pool:
            inf = pool.map(_inflate, order, chunksize=1)
        par = time.perf_counter() - t0
    t0 = time.perf_counter()
    with multiprocessing.Pool(cpus) as pool:
        sha = pool.map(_sha, order, chunksize=1)
    sha_wall = time.perf_counter() - t0
    inflate_cpu = sum(x[2] for x in inf)
    sha_cpu = sum(x[2] for x in sha)
    big = max(inf, key=lambda x: x[3])
    # ISA-L's CPU per blob: rapidgzip's CPU on the same blobs is compared with it
    isal_cpu.update({x[0]: x[2] for x in inf})
    results["floors"] = {
        "parallel_inflate_wall_s": round(par, 2),
        "sequential_inflate_sum_s": round(sum(x[1] for x in inf), 2),
        "inflate_cpu_s": round(inflate_cpu, 2),
        "sha256_cpu_s": round(sha_cpu, 2),
        "sha256_parallel_wall_s": round(sha_wall, 2),
        "total_cpu_s": round(inflate_cpu + sha_cpu, 2),
        "total_cpu_over_cores_s": round((inflate_cpu + sha_cpu) / cpus, 2),
        "largest_layer_uncompressed_bytes": big[3],
        "largest_layer_single_thread_inflate_s": round(big[1], 2),
        "per_layer_inflate_s": [round(x[1], 2) for x in inf],
        "cores": cpus,
    }
    log(f"floors: {results['floors']}")
    save()


# ------------------------------------------------------------------------------ gpusbom runs


def _kind(p: int, root: int | None = None) -> str:
    """rapidgzip (a parallel inflate child), parent (the scan's own process) or worker."""
    try:
        with open(f"/proc/{p}/cmdline", "rb") as f:
            cmd = f.read()
    except OSError:
        return "?"
    if b"rapidgzip" in cmd:
        return "rapidgzip"
    return "parent" if p == root else "worker"


def _tree_mem(pid: int, per: list[tuple[str, int, int, int]] | None = None) -> tuple[int, int]:
    """(PSS sum or -1, RSS sum) of ``pid`` and its descendants, in bytes; ``per`` gets
    (kind, PSS MiB, RSS MiB, process id) of each process."""
    pss_total, rss_total, todo, have_pss = 0, 0, [pid], True
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/statm") as f:
                rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            rss_total += rss
            pss = -1
            if have_pss:
                try:
                    with open(f"/proc/{p}/smaps_rollup") as f:
                        pss = next(int(ln.split()[1]) * 1024 for ln in f if ln.startswith("Pss:"))
                    pss_total += pss
                except (OSError, StopIteration):
                    have_pss = False
            if per is not None:
                per.append((_kind(p, pid), pss >> 20, rss >> 20, p))
            for tid in os.listdir(f"/proc/{p}/task"):
                try:
                    with open(f"/proc/{p}/task/{tid}/children") as f:
                        todo.extend(int(c) for c in f.read().split())
                except OSError:
                    pass
        except (OSError, ValueError):
            continue
    if not have_pss:
        # no children file either (gVisor): find descendants by ppid
        pass
    return (pss_total if have_pss else -1), rss_total


def _descendants_rss(pid: int) -> int:
    """RSS sum over the tree by scanning /proc for ppid links (where task/children is absent)."""
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(name))
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/statm") as f:
                total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError):
            pass
        todo.extend(kids.get(p, []))
    return total


def _busy_jiffies() -> tuple[int, int] | None:
    """(busy, total) jiffies of all CPUs from /proc/stat, or None."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return sum(v) - idle, sum(v)


def run(args: list[str], env: dict[str, str] | None = None, cpus: list[int] | None = None,
        prefix: list[str] | None = None) -> dict[str, float]:
    # no advisory-database update attempt in timed runs (the update is not scanning, and a
    # host without network would time each run's failed attempt)
    e = dict(os.environ, GPUSBOM_DB_AUTO_UPDATE="0", **(env or {}))
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, *(prefix or []), "-m", "gpusbom", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=e,
        preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,  # noqa: PLW1509
    )
    peak_pss = peak_rss = peak_rss2 = 0
    at_peak: list[tuple[str, int, int, int]] = []
    peak_of: dict[int, tuple[str, int]] = {}  # each process's own peak PSS (MiB)
    stop = threading.Event()
    busy: list[float] = []  # busy cores (all processes of the machine) per 0.25 s

    def sample() -> None:
        nonlocal peak_pss, peak_rss, peak_rss2, at_peak
        last = _busy_jiffies()
        last_t = time.perf_counter()
        while not stop.is_set():
            now_t = time.perf_counter()
            if now_t - last_t >= 0.25:
                cur = _busy_jiffies()
                if cur is not None and last is not None and cur[1] > last[1]:
                    ncpu = os.cpu_count() or 1
                    busy.append(round(ncpu * (cur[0] - last[0]) / (cur[1] - last[1]), 1))
                last, last_t = cur, now_t
            per: list[tuple[str, int, int, int]] = []
            pss, rss = _tree_mem(proc.pid, per)
            for kind, p_pss, _, p in per:
                if p_pss > peak_of.get(p, ("", -1))[1]:
                    peak_of[p] = (kind, p_pss)
            if pss > peak_pss:
                at_peak = per
            peak_pss, peak_rss = max(peak_pss, pss), max(peak_rss, rss)
            peak_rss2 = max(peak_rss2, _descendants_rss(proc.pid))
            time.sleep(0.05)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    _, err = proc.communicate()
    wall = time.perf_counter() - t0
    stop.set()
    th.join()
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = {
        "wall_s": round(wall, 3),
        "cpu_s": round((r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime), 2),
        "peak_tree_pss_mib": round(peak_pss / 2**20) if peak_pss > 0 else None,
        "peak_tree_rss_mib": round(max(peak_rss, peak_rss2) / 2**20),
        "rc": proc.returncode,
        # (kind, PSS MiB, RSS MiB, pid) of each process when the tree's PSS peaked
        "at_peak": sorted(at_peak, key=lambda x: -x[1]),
        # (kind, its own peak PSS MiB, pid) of each process, whenever it peaked
        "process_peaks": sorted(((k, m, p) for p, (k, m) in peak_of.items()), key=lambda x: -x[1]),
        "busy_cores_per_quarter_s": busy,
    }
    text = err.decode(errors="replace")
    # GPUSBOM_DEBUG_INFLATE: start-up, the layers, and what follows them (collectors, output)
    m = re.search(r"layer workers started ([\d.]+) s after the process, layers read and "
                  r"received ([\d.]+) s later", text)
    if m:
        out["start_s"], out["layers_s"] = float(m.group(1)), float(m.group(2))
        out["tail_s"] = round(wall - out["start_s"] - out["layers_s"], 2)
    # per stage (gpusbom.stagetime) and per layer (the layer workers' timelines)
    out["stages"] = {m.group(1): [float(m.group(2)), float(m.group(3))] for m in re.finditer(
        r"gpusbom: stage (.+?): ([\d.]+) s wall, ([\d.]+) CPU-s", text)}  # type: ignore[assignment]
    out["per_layer"] = [  # type: ignore[assignment]
        {"layer": int(m.group(1)), "bytes": int(m.group(2)), "threads": int(m.group(3)),
         "from_s": float(m.group(4)), "to_s": float(m.group(5)), "cpu_s": float(m.group(6))}
        for m in re.finditer(r"gpusbom: layer (\d+) \((\d+) bytes, (\d+) threads\) in worker \d+: "
                             r"([\d.]+)-([\d.]+) s, ([\d.]+) CPU-s", text)]
    if proc.returncode not in (0, 1) or (env or {}).get("GPUSBOM_DEBUG_INFLATE"):
        out["stderr"] = text[-8000:]  # type: ignore[assignment]
    return out


def med(rows: list[dict[str, float]]) -> dict[str, object]:
    return {"median_wall_s": round(statistics.median(r["wall_s"] for r in rows), 3), "runs": rows}


def small_image(work: Path) -> Path:
    root = work / "small"
    if (root / "index.json").exists():
        return root
    (root / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
    d, diff, size, _ = _base_layer(str(root / "blobs" / "sha256"))
    write_layout(root, [(d, diff, size)])
    return root


def main() -> int:
    global out_dir
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--work", type=Path, default=Path("/tmp/gpusbom-big"))
    ap.add_argument("--site", default=None, help="donor site-packages (default: this Python's)")
    ap.add_argument("--cuda", default="/usr/local/cuda", help="donor CUDA tree (when present)")
    ap.add_argument("--donor", action="append", help="more donor directories")
    ap.add_argument("--target-gb", type=float, default=13.0, help="uncompressed size of the layers")
    ap.add_argument("--layers", type=int, default=13, help="layers besides the small base layer")
    ap.add_argument("--largest-gb", type=float, default=4.5, help="the largest layer")
    ap.add_argument("--sizes-gb", help="explicit layer sizes, comma-separated (overrides the above)")
    ap.add_argument("--seed", type=int, default=37)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-image", action="store_true")
    ap.add_argument("--skip-host", action="store_true", help="only the image measurements")
    ap.add_argument("--skip-raw", action="store_true", help="no rapidgzip command-line runs")
    ap.add_argument("--raw-threads", type=int, action="append",
                    help="rapidgzip alone on the largest blob with this many threads (default 4, 8; "
                         "all cores always)")
    ap.add_argument("--raw-chunk", type=int, action="append",
                    help="also rapidgzip alone on the largest blob with this chunk size (KiB)")
    ap.add_argument("--variant", action="append",
                    help="more scans: LABEL:REPEAT:ARG,ARG:KEY=VALUE,KEY=VALUE")
    ap.add_argument("--only", action="append", help="scan only these variant labels")
    ap.add_argument("--cores", type=int, action="append", help="also scan on the first N cores")
    ap.add_argument("--profile", action="store_true",
                    help="one more scan under cProfile (parent and layer workers)")
    ap.add_argument("--alone", action="store_true",
                    help="also scan a layout of the largest layer alone (its blob hard-linked): "
                         "on all cores, with 8 inflate threads as in the whole image, on --cores")
    args = ap.parse_args()
    out_dir = args.out
    out_dir.mkdir(parents=True, exist_ok=True)
    cpus = len(os.sched_getaffinity(0))
    results["cores"] = cpus
    results["python"] = sys.version.split()[0]
    import gpusbom

    results["gpusbom_from"] = os.path.dirname(gpusbom.__file__)
    site = args.site or next((p for p in sys.path if p.endswith("site-packages")
                              and os.path.isdir(os.path.join(p, "torch"))),
                             next(p for p in sys.path if p.endswith("site-packages")))
    cuda = os.path.realpath(args.cuda) if os.path.isdir(args.cuda) else ""
    log(f"{cpus} cores; site-packages {site}; cuda {cuda or '(none)'}")
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    cache_env = {"GPUSBOM_CACHE_DIR": str(work / "cache")}
    (work / "cache").mkdir(exist_ok=True)

    if not args.skip_host:
        host_and_small(work, cache_env)
    if args.skip_image:
        return 0
    image_runs(work, site, cuda, args, cpus, cache_env)
    log("done")
    return 0


def largest_alone(layout: Path) -> Path:
    """An OCI layout next to ``layout`` holding only its largest layer (the same blob, hard
    linked): how long that layer takes with nothing else to read."""
    facts = json.loads((layout / "facts.json").read_text())
    big = max(facts["per_layer"], key=lambda x: x["raw"])
    root = layout.parent / (layout.name + "-largest")
    blobs = root / "blobs" / "sha256"
    blobs.mkdir(parents=True, exist_ok=True)
    target = blobs / big["digest"][7:]
    if not target.exists():
        os.link(layout / "blobs" / "sha256" / big["digest"][7:], target)
    write_layout(root, [(big["digest"], big["diff_id"], big["size"])])
    return root


def rapidgzip_raw(blobs: list[str], threads: int, chunk_kib: int) -> dict[str, object]:
    """rapidgzip's own command line (as gpusbom runs it) on ``blobs`` side by side, ``threads``
    each, every output read from a pipe: wall time of all, and per child its wall, CPU
    seconds (user + system, from wait4) against ISA-L's on that blob, and peak RSS."""
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c",
             "import sys, rapidgzip; sys.argv[0] = 'rapidgzip'; sys.exit(rapidgzip.cli())",
             "-d", "-c", "-q", "-P", str(threads), "--chunk-size", str(chunk_kib), blob],
            stdout=subprocess.PIPE,
        )
        for blob in blobs
    ]
    counts = [0] * len(blobs)
    ends = [0.0] * len(blobs)

    def drain(k: int) -> None:
        fd = procs[k].stdout.fileno()  # type: ignore[union-attr]
        while b := os.read(fd, 4 << 20):
            counts[k] += len(b)
        ends[k] = time.perf_counter() - t0

    readers = [threading.Thread(target=drain, args=(k,)) for k in range(len(blobs))]
    for th in readers:
        th.start()
    for th in readers:
        th.join()
    children = []
    for k, proc in enumerate(procs):
        _, status, ru = os.wait4(proc.pid, 0)
        cpu = ru.ru_utime + ru.ru_stime
        base = isal_cpu.get(blobs[k])
        children.append({
            "blob_bytes": os.path.getsize(blobs[k]),
            "bytes": counts[k],
            "wall_s": round(ends[k], 2),
            "cpu_s": round(cpu, 2),
            "isal_cpu_s": round(base, 2) if base else None,
            "cpu_vs_isal": round(cpu / base, 2) if base else None,
            "peak_rss_mib": ru.ru_maxrss >> 10,
            "ok": os.waitstatus_to_exitcode(status) == 0,
        })
    return {
        "threads_each": threads,
        "chunk_kib": chunk_kib,
        "wall_s": round(time.perf_counter() - t0, 2),
        "cpu_s": round(sum(c["cpu_s"] for c in children), 2),  # type: ignore[misc]
        "children": children,
    }


def parallel_inflate_bound(blobs: list[str], cpus: int, chunks: list[int], threads: list[int]) -> None:
    """The bound of any scan that must inflate (and so verify) the largest layers: rapidgzip
    alone on the largest blob, and on the two largest side by side, beside the target."""
    from gpusbom.fsview.decompress import PARALLEL_CHUNK_KIB

    by_size = sorted(blobs, key=os.path.getsize, reverse=True)
    fl = results["floors"]
    target = 1.3 * fl["total_cpu_s"] / cpus  # type: ignore[index]
    runs: list[dict[str, object]] = []
    for t in sorted({*threads, cpus}):
        runs.append({"what": f"largest blob, {t} threads", **rapidgzip_raw(by_size[:1], t, PARALLEL_CHUNK_KIB)})
    for ck in chunks:
        if ck != PARALLEL_CHUNK_KIB:
            runs.append({"what": f"largest blob, {cpus} threads, {ck} KiB chunks",
                         **rapidgzip_raw(by_size[:1], cpus, ck)})
    half = max(1, cpus // 2)
    runs.append({"what": f"two largest blobs side by side, {half} threads each",
                 **rapidgzip_raw(by_size[:2], half, PARALLEL_CHUNK_KIB)})
    alone = next(r for r in runs if r["what"] == f"largest blob, {cpus} threads")
    both = runs[-1]
    results["parallel_inflate_bound"] = {
        "target_s": round(target, 2),
        "largest_alone_all_cores_s": alone["wall_s"],
        "two_largest_side_by_side_s": both["wall_s"],
        "runs": runs,
    }
    for r in runs:
        kids = "; ".join(
            f"{c['wall_s']} s, {c['cpu_s']} CPU-s ({c['cpu_vs_isal']}x ISA-L's {c['isal_cpu_s']}), "
            f"{c['peak_rss_mib']} MiB" for c in r["children"]  # type: ignore[attr-defined]
        )
        log(f"rapidgzip alone, {r['what']}: {r['wall_s']} s wall, {r['cpu_s']} CPU-s [{kids}]")
    if alone["wall_s"] > target:  # type: ignore[operator]
        verdict = "the largest layer's inflate alone is above the target"
    elif both["wall_s"] > target:  # type: ignore[operator]
        verdict = "the two largest layers' inflate side by side is above the target"
    else:
        verdict = "both within the target"
    results["parallel_inflate_bound"]["verdict"] = verdict  # type: ignore[index]
    log(f"bound: target 1.3 x {fl['total_cpu_s']} CPU-s / {cpus} cores = {target:.2f} s; "  # type: ignore[index]
        f"rapidgzip alone on the largest blob ({cpus} threads) {alone['wall_s']} s, the two "
        f"largest side by side ({half} threads each) {both['wall_s']} s: {verdict}")
    save()


def host_and_small(work: Path, cache_env: dict[str, str]) -> None:
    # host first: quick, and least disturbed by what follows
    prof = cProfile.Profile()
    sys.argv = ["gpusbom", "scan", "--host", "-q", "-o", f"json={work / 'host.json'}"]
    from gpusbom.cli.app import main as cli_main

    prof.enable()
    try:
        cli_main()
    except SystemExit:
        pass
    prof.disable()
    with open(out_dir / "host_profile.txt", "w") as f:
        st = pstats.Stats(prof, stream=f)
        st.sort_stats("cumulative").print_stats(60)
        st.sort_stats("tottime").print_stats(30)
    results["scan_host"] = med([run(["scan", "--host", "-q", "-o", "json=/dev/null"], cache_env) for _ in range(5)])
    log(f"scan --host: {results['scan_host']['median_wall_s']} s")  # type: ignore[index]
    small = small_image(work)
    results["check_host"] = med(
        [run(["check", f"oci:{small}", "--host", "-o", "json=/dev/null"], cache_env) for _ in range(5)]
    )
    log(f"check --host: {results['check_host']['median_wall_s']} s")  # type: ignore[index]
    results["version"] = med([run(["version"]) for _ in range(5)])
    results["small_scan_nocache"] = med(
        [run(["scan", f"oci:{small}", "-q", "-o", "json=/dev/null", "--no-cache"], cache_env) for _ in range(5)]
    )
    results["small_scan_cached"] = med(
        [run(["scan", f"oci:{small}", "-q", "-o", "json=/dev/null"], cache_env) for _ in range(5)]
    )
    prof = cProfile.Profile()
    sys.argv = ["gpusbom", "scan", f"oci:{small}", "-q", "--no-cache", "-o", "json=/dev/null"]
    prof.enable()
    try:
        cli_main()
    except SystemExit:
        pass
    prof.disable()
    with open(out_dir / "small_profile.txt", "w") as f:
        pstats.Stats(prof, stream=f).sort_stats("cumulative").print_stats(50)
    log(f"version {results['version']['median_wall_s']} s; small scan "  # type: ignore[index]
        f"{results['small_scan_nocache']['median_wall_s']} s / cached "  # type: ignore[index]
        f"{results['small_scan_cached']['median_wall_s']} s")  # type: ignore[index]
    save()


def image_runs(work: Path, site: str, cuda: str, args: argparse.Namespace, cpus: int,
               cache_env: dict[str, str]) -> None:
    if args.sizes_gb:
        sizes = [int(float(x) * GB) for x in args.sizes_gb.split(",")]
    else:
        sizes = layer_sizes(args.layers, args.target_gb * GB, min(args.largest_gb, args.target_gb) * GB)
    donors = [d for d in [site, cuda, *(args.donor or [])] if d]
    layout, blobs = build(work, donors, sizes, args.seed)
    floors(blobs, cpus)
    if not args.skip_raw:
        parallel_inflate_bound(blobs, cpus, args.raw_chunk or [], args.raw_threads or [4, 8])
    ref = f"oci:{layout}"
    scan = ["scan", ref, "-q", "-o", "json=/dev/null"]
    dbg = {**cache_env, "GPUSBOM_DEBUG_INFLATE": "1"}
    variants: list[tuple[str, list[str], dict[str, str], int]] = [
        ("default_1G", [], {}, args.repeat),
        ("max_memory_2G", ["--max-memory", "2G"], {}, args.repeat),
    ]
    for spec in args.variant or []:
        # LABEL:REPEAT:ARG,ARG:K=V,K=V (e.g. nohash:1::GPUSBOM_NO_BINARY_HASH=1)
        label, rep, extra, envs = (spec.split(":", 3) + ["", "", ""])[:4]
        variants.append((label, [a for a in extra.split(",") if a],
                         dict(kv.split("=", 1) for kv in envs.split(",") if kv), int(rep or 1)))
    for label, extra, venv, repeat in variants:
        if args.only and label not in args.only:
            continue
        rows = []
        for _ in range(repeat):
            rows.append(run([*scan, "--no-cache", *extra], {**dbg, **venv}))
            log(f"scan {cpus} cores {label}: " + json.dumps({k: v for k, v in rows[-1].items() if k != "stderr"}))
            log("   " + str(rows[-1].get("stderr", "")).replace("\n", "\n   "))
        results[f"scan_all_cores_{label}"] = med(rows)
        bound = results.get("parallel_inflate_bound", {})
        fl = results["floors"]
        log(f"scan {label}: wall {[r['wall_s'] for r in rows]} s, CPU {[r['cpu_s'] for r in rows]} s, "
            f"peak PSS {[r['peak_tree_pss_mib'] for r in rows]} MiB; start {[r.get('start_s') for r in rows]}, "
            f"layers {[r.get('layers_s') for r in rows]}, tail {[r.get('tail_s') for r in rows]} s; "
            f"target {1.3 * fl['total_cpu_s'] / cpus:.2f} s, rapidgzip alone on the largest "  # type: ignore[index]
            f"blob {bound.get('largest_alone_all_cores_s')} s, the two largest side by side "  # type: ignore[union-attr]
            f"{bound.get('two_largest_side_by_side_s')} s, the largest by one ISA-L thread "  # type: ignore[union-attr]
            f"{fl['largest_layer_single_thread_inflate_s']} s")  # type: ignore[index]
        save()
    for n in args.cores or []:
        sub = sorted(os.sched_getaffinity(0))[:n]
        row = run([*scan, "--no-cache"], dbg, cpus=sub)
        results[f"scan_{n}_cores"] = row
        log(f"scan on {n} cores: " + json.dumps({k: v for k, v in row.items() if k != "stderr"}))
        log("   " + str(row.get("stderr", "")).replace("\n", "\n   "))
        save()
    if args.alone:
        alone = largest_alone(layout)
        runs = [("all cores", {}, None), ("8 inflate threads", {"GPUSBOM_INFLATE_THREADS": "8"}, None)]
        runs += [(f"{n} cores", {}, sorted(os.sched_getaffinity(0))[:n]) for n in args.cores or []]
        for label, venv, sub in runs:
            row = run(["scan", f"oci:{alone}", "-q", "-o", "json=/dev/null", "--no-cache"],
                      {**dbg, **venv}, cpus=sub)
            results[f"largest_alone_{label.replace(' ', '_')}"] = row
            log(f"scan largest alone, {label}: " + json.dumps({k: v for k, v in row.items() if k != "stderr"}))
            log("   " + str(row.get("stderr", "")).replace("\n", "\n   "))
            save()
    if args.profile:
        # the parent under cProfile, each layer worker's main thread too (GPUSBOM_DEBUG_PROFILE)
        pdir = out_dir / "prof"
        pdir.mkdir(exist_ok=True)
        row = run([*scan, "--no-cache"], {**dbg, "GPUSBOM_DEBUG_PROFILE": str(pdir)},
                  prefix=["-m", "cProfile", "-o", str(pdir / "parent.prof")])
        results["scan_profiled"] = row
        log("scan profiled: " + json.dumps({k: v for k, v in row.items() if k != "stderr"}))
        log("   " + str(row.get("stderr", "")).replace("\n", "\n   "))
        with open(pdir / "parent.txt", "w") as f:
            st = pstats.Stats(str(pdir / "parent.prof"), stream=f)
            st.sort_stats("cumulative").print_stats(60)
            st.sort_stats("tottime").print_stats(30)
        (pdir / "parent.prof").unlink()
        # one file for all workers (few files come back from a device run)
        with open(pdir / "layers.txt", "w") as f:
            for lp in sorted(pdir.glob("layer-*.txt")):
                f.write(f"==== {lp.name}\n{lp.read_text()}\n")
                lp.unlink()
        save()
    if args.skip_host:
        return
    results["scan_no_parallel_inflate"] = run([*scan, "--no-cache"], {**cache_env, "GPUSBOM_INFLATE_THREADS": "1"})
    log(f"scan, parallel inflate off: {results['scan_no_parallel_inflate']}")
    save()
    half = sorted(os.sched_getaffinity(0))[: max(1, cpus // 2)]
    results["scan_half_cores"] = run([*scan, "--no-cache"], cache_env, cpus=half)
    log(f"scan on {len(half)} cores: {results['scan_half_cores']}")
    save()
    results["scan_cache_cold"] = run(scan, cache_env)
    results["scan_cache_warm"] = run(scan, cache_env)
    log(f"cache cold {results['scan_cache_cold']} warm {results['scan_cache_warm']}")
    save()


if __name__ == "__main__":
    sys.exit(main())
