#!/usr/bin/env python3
"""CPU cost of the per-file stream analysis a layer worker does, without the inflate.

Feeds files from disk (say ``libtorch_cuda.so``, ``libcublasLt.so.12``, extracted from the
wheels ``benchmarks/scan_gpu_binaries.py`` pins) through the stream analyzers that a scan with
every collector attaches to them at an image path (``--at``, default the torch wheel's
site-packages directory), in the chunk sizes the layer reader hands out, and prints the CPU
seconds (``time.process_time``: the hashing threads count too) per analyzer kind and in
total, best of ``--repeat``. The results are printed too (``--show``), so a change can be
checked to leave them unchanged.

    python benchmarks/member_analysis.py /tmp/libtorch_cuda.so /tmp/libcublasLt.so.12
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path


def analyzers_for(path: str) -> list:  # type: ignore[type-arg]
    from gpusbom.collectors import all_collectors
    from gpusbom.scan import build_matcher

    spec = build_matcher(list(all_collectors().values())).match(path)
    return list(spec.analyzers) if spec is not None else []


def feed(file: Path, factories: list, chunk: int) -> tuple[float, dict]:  # type: ignore[type-arg]
    from gpusbom.fsview.layer import Analyzers

    t0 = time.process_time()
    an = Analyzers(factories)
    with file.open("rb", buffering=0) as f:
        while not (an.done and factories):
            data = f.read(chunk)
            if not data:
                break
            an.feed(data)
    out = an.close() or {}
    return time.process_time() - t0, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--at", default="/usr/local/lib/python3.11/site-packages/torch/lib/")
    ap.add_argument("--chunk", type=int, default=4 << 20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--show", action="store_true", help="print the analysis results")
    args = ap.parse_args()
    total = 0.0
    reads = 0.0
    for file in args.files:
        factories = analyzers_for(args.at + file.name)
        # the page cache is warm after the first run; reading costs a little sys time
        per: dict[str, float] = {}
        for fac in factories:
            name = getattr(fac, "__name__", str(fac))
            per[name] = min(feed(file, [fac], args.chunk)[0] for _ in range(args.repeat))
        both = [feed(file, factories, args.chunk) for _ in range(args.repeat)]
        best = min(t for t, _ in both)
        read = min(feed(file, [], args.chunk)[0] for _ in range(args.repeat))
        total += best
        reads += read
        print(f"{file.name}: {file.stat().st_size / 1e6:.0f} MB, all analyzers {best:.3f} CPU-s"
              f" (reading alone {read:.3f})")
        for name, t in per.items():
            print(f"  {name}: {t:.3f} CPU-s")
        if args.show:
            print(json.dumps(both[0][1], sort_keys=True, default=str))
    print(f"total {total:.3f} CPU-s, of which reading the files {reads:.3f}; analysis"
          f" {total - reads:.3f} CPU-s (load {os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
