#!/usr/bin/env python3
"""The CI benchmark job (``.ci/run``, after the tests): ratios, checked against a baseline.

Seconds on a shared CI machine say little; ratios measured side by side in one run say more.
Each round runs, back to back (so that a change in the machine's load falls on all alike):

* for each fixture image (``nvidia-wheels`` and ``torch-cpu`` by default; ``fixtures/build.py``
  builds them once into the fixture cache): the inflate floor (one ISA-L thread inflating the
  image's gzip layers, as its OCI layout holds them), ``gpusbom scan --no-cache -o
  cyclonedx-json`` of its docker-archive and every peer of ``benchmarks/peers.py`` (Syft
  1.18.1: ``scripts/test`` installs it), then the digest floor of that archive
  (``peers.digest_floor``: one thread hashing its layer blobs, which are plain tar, and the
  binaries whose SHA-256 gpusbom reported);
* on a small synthetic image (``benchmarks/synth_layout.py``: 12 gzip layers built from this
  Python's site-packages, cached under ``~/.cache/gpusbom/bench``): the parallel-inflate
  floor (every layer inflated at once, one process each) and ``gpusbom scan --no-cache``.

Per round it takes the ratios (gpusbom's wall time, CPU time and peak memory over Syft's,
gpusbom's wall time over each floor, the digest floor's CPU time over Syft's), and reports
the median over ``--rounds`` rounds. On a loaded machine wall time follows CPU time, so the
digest floor's CPU over Syft's bounds from below how far under Syft gpusbom's wall can get
without dropping a digest. Lower is better
for every ratio. The job fails (exit 1) only when a ratio is above its value in the committed
baseline (``benchmarks/baseline.json``) by more than the stated margin (``margin`` there:
a fraction, 0.5 = 50 % worse); ratios not in the baseline are printed, never judged.
``--update-baseline`` writes the medians of this run as the new baseline (keep the margin).
``--json PATH`` writes every figure. Exit 2: a peer or a fixture is missing.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import peers  # noqa: E402
from synth_layout import build_layout, layer_sizes  # noqa: E402

BASELINE = ROOT / "benchmarks" / "baseline.json"
DEFAULT_MARGIN = 0.5


def _inflate(path: str) -> float:
    from isal import isal_zlib

    t0 = time.perf_counter()
    d = isal_zlib.decompressobj(31)
    with open(path, "rb", buffering=0) as f:
        while chunk := f.read(1 << 20):
            data = chunk
            while data:
                d.decompress(data, 4 << 20)
                data = d.unconsumed_tail
                if d.eof:
                    data = d.unused_data
                    d = isal_zlib.decompressobj(31)
    return time.perf_counter() - t0


def parallel_floor(blobs: list[str]) -> float:
    """Wall seconds for all layers inflated at once (a process each, up to the cores)."""
    cpus = len(os.sched_getaffinity(0))
    t0 = time.perf_counter()
    with multiprocessing.Pool(min(cpus, len(blobs))) as pool:
        pool.map(_inflate, sorted(blobs, key=os.path.getsize, reverse=True), chunksize=1)
    return time.perf_counter() - t0


def _median(xs: list[float]) -> float:
    return round(statistics.median(xs), 3)


def run(args: argparse.Namespace) -> dict[str, object]:
    from fixtures.build import ensure

    tmp = Path(tempfile.mkdtemp(prefix="gpusbom-ci-bench-"))
    cmds = peers.tools(tmp, only=args.peer)
    missing = [t for t, c in cmds.items() if c is None]
    if missing:
        raise SystemExit(f"ci benchmark: {', '.join(missing)} not found (scripts/test installs "
                         "Syft 1.18.1 into the sbom-tools cache)")
    peers._compile_gpusbom()
    env = {"SYFT_CHECK_FOR_APP_UPDATE": "false", "GPUSBOM_NO_CACHE": "1",
           "GPUSBOM_DB_AUTO_UPDATE": "0"}
    fixtures = {name: ensure(name) for name in args.fixture}
    work = Path(os.environ.get("GPUSBOM_BENCH_CACHE") or Path.home() / ".cache/gpusbom/bench")
    site = next(p for p in sys.path if p.endswith("site-packages") and os.path.isdir(p))
    gb = 1e9
    layout, blobs, facts = build_layout(
        work, sizes=layer_sizes(args.layers, args.synthetic_gb * gb, args.synthetic_gb * gb / 4),
        donors=[site], seed=37, log=lambda m: print(f"ci-bench: {m}", file=sys.stderr))
    scan_synth = [sys.executable, "-m", "gpusbom", "scan", f"oci:{layout}", "-q", "--no-cache",
                  "-o", f"json={tmp / 'synth.json'}"]
    per_round: dict[str, list[float]] = {}
    raw: dict[str, list[dict[str, float]]] = {}

    def note(key: str, value: float) -> None:
        per_round.setdefault(key, []).append(value)

    for r in range(args.rounds):
        for name, fx in fixtures.items():
            archive = str(fx.docker_archive)
            floor = peers.floor(fx.oci_dir)
            got = {tool: peers.measure([*cmd, peers.target_of(tool, archive)], env)
                   for tool, cmd in cmds.items() if cmd is not None}
            for tool, m in got.items():
                raw.setdefault(f"{name}/{tool}", []).append({**m, "floor": floor})
            g = got["gpusbom"]
            note(f"{name}: gpusbom wall / inflate floor", g["wall"] / floor)
            # the docker-archive's layers are plain tar (nothing to inflate): what bounds
            # gpusbom there is the hashing no fact can do without (peers.digest_floor)
            df = peers.digest_floor(fx.docker_archive, tmp / "g.json")
            raw.setdefault(f"{name}/digest floor", []).append(df)
            df_wall = df["layers_s"] + df["binaries_s"]
            df_cpu = df["layers_cpu"] + df["binaries_cpu"]
            note(f"{name}: gpusbom wall / digest floor", g["wall"] / df_wall)
            for tool, m in got.items():
                if tool != "gpusbom":
                    note(f"{name}: gpusbom wall / {tool} wall", g["wall"] / m["wall"])
                    note(f"{name}: gpusbom memory / {tool} memory", g["mem"] / m["mem"])
                    note(f"{name}: gpusbom CPU / {tool} CPU", g["cpu"] / m["cpu"])
                    note(f"{name}: digest floor CPU / {tool} CPU", df_cpu / m["cpu"])
        pf = parallel_floor(blobs)
        m = peers.measure(scan_synth, env)
        raw.setdefault("synthetic/gpusbom", []).append({**m, "parallel_floor": pf})
        note("synthetic: gpusbom wall / parallel-inflate floor", m["wall"] / pf)
        print(f"ci-bench: round {r + 1}/{args.rounds} done, load {os.getloadavg()[0]:.1f}",
              file=sys.stderr)
    return {
        "ratios": {k: _median(v) for k, v in per_round.items()},
        "per_round": {k: [round(x, 3) for x in v] for k, v in per_round.items()},
        "runs": raw,
        "synthetic_image": {k: facts[k] for k in ("layers", "uncompressed_bytes", "compressed_bytes")},
        "cores": len(os.sched_getaffinity(0)),
        "load_after": os.getloadavg()[0],
    }


def judge(ratios: dict[str, float], baseline: dict[str, object]) -> list[str]:
    """Print the table; return the ratios that regressed past the margin."""
    margin = float(baseline.get("margin", DEFAULT_MARGIN))  # type: ignore[arg-type]
    base: dict[str, float] = baseline.get("ratios", {})  # type: ignore[assignment]
    bad = []
    print(f"| ratio (lower is better) | this run | baseline | limit (+{margin:.0%}) | |")
    print("|---|---|---|---|---|")
    for k, v in ratios.items():
        b = base.get(k)
        if b is None:
            print(f"| {k} | {v:.3f} | - | - | not judged |")
            continue
        limit = b * (1 + margin)
        ok = v <= limit
        if not ok:
            bad.append(k)
        print(f"| {k} | {v:.3f} | {b:.3f} | {limit:.3f} | {'ok' if ok else 'REGRESSED'} |")
    return bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--fixture", action="append", help="fixture images (default: nvidia-wheels, torch-cpu)")
    ap.add_argument("--peer", action="append", help="peers to compare (default: syft)")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--synthetic-gb", type=float, default=0.3)
    ap.add_argument("--baseline", type=Path, default=BASELINE)
    ap.add_argument("--update-baseline", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    args.fixture = args.fixture or ["nvidia-wheels", "torch-cpu"]
    args.peer = args.peer or ["syft"]
    t0 = time.perf_counter()
    got = run(args)
    got["seconds"] = round(time.perf_counter() - t0, 1)
    if args.json:
        args.json.write_text(json.dumps(got, indent=2))
    ratios: dict[str, float] = got["ratios"]  # type: ignore[assignment]
    if args.update_baseline:
        old = json.loads(args.baseline.read_text()) if args.baseline.exists() else {}
        args.baseline.write_text(json.dumps({
            "margin": old.get("margin", DEFAULT_MARGIN),
            "note": old.get("note", "medians of benchmarks/ci.py; lower is better; the job "
                                    "fails when a ratio exceeds baseline x (1 + margin)"),
            "measured": f"{got['cores']} cores, load {got['load_after']:.1f}, "
                        f"{args.rounds} rounds",
            "ratios": ratios,
        }, indent=2) + "\n")
        print(f"ci-bench: baseline written to {args.baseline}", file=sys.stderr)
    baseline = json.loads(args.baseline.read_text()) if args.baseline.exists() else {}
    bad = judge(ratios, baseline)
    print(f"\nci-bench: {got['seconds']} s, {got['cores']} cores, load {got['load_after']:.1f} "
          f"after the runs; {len(bad)} ratio(s) regressed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
