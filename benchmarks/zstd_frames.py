#!/usr/bin/env python3
"""Multi-frame zstd layer: sequential against parallel decompression, in one run.

Recompresses the first layer of the ``scan_image.py`` benchmark image (built once, cached)
as zstd frames of ``--frame-mb`` MiB each (as ``pzstd`` or a ``zstd:chunked`` writer
would), then reads it through ``fsview.decompress.open_decompressed`` with the blob's
sha256, to nothing: once sequentially and once with ``--threads`` threads
(``fsview.zstd_frames``), interleaved, ``--repeat`` times. Prints medians, every run and
the load average, and checks that both give the same bytes and digest.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import zstandard

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scan_image import DEFAULT_CACHE, build_image, layer_blobs  # noqa: E402

from gpusbom.fsview.decompress import open_decompressed  # noqa: E402


def read(path: Path, threads: int) -> tuple[float, str, str, bool]:
    t0 = time.perf_counter()
    with open(path, "rb", buffering=1 << 20) as f:
        s = open_decompressed(f, path.name, raw_digest="sha256", threaded=True, parallel=threads)
        took = s._p.parallel_zstd is not None
        h = hashlib.sha256()
        while chunk := s.read1(4 << 20):
            h.update(chunk)
        s.close()
    return time.perf_counter() - t0, h.hexdigest(), str(s.raw_digest()), took


def main() -> int:
    from gpusbom._alloc import tune_allocator

    tune_allocator()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frame-mb", type=int, default=4)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    layout = build_image(DEFAULT_CACHE, 1100 << 20)
    import gzip

    with tempfile.TemporaryDirectory() as tmp:
        blob = Path(tmp) / "layer.zst"
        c = zstandard.ZstdCompressor(level=3, write_content_size=True, write_checksum=True)
        piece = args.frame_mb << 20
        raw = 0
        with gzip.open(layer_blobs(layout)[0], "rb") as src, open(blob, "wb") as out:
            while data := src.read(piece):
                raw += len(data)
                out.write(c.compress(data))
        print(f"blob              {blob.stat().st_size / 1e6:,.0f} MB zstd, {raw / 1e6:,.0f} MB "
              f"uncompressed, frames of {args.frame_mb} MiB")  # fmt: skip
        runs: dict[str, list[float]] = {"sequential": [], "parallel": []}
        loads = []
        results = set()
        for _ in range(args.repeat):
            loads.append(os.getloadavg()[0])
            for key, n in (("sequential", 0), ("parallel", args.threads)):
                wall, out_hash, raw_digest, took = read(blob, n)
                assert took == (n > 1), (key, took)
                runs[key].append(wall)
                results.add((out_hash, raw_digest))
        if len(results) != 1:
            print("OUTPUT DIFFERS")
            return 1
        print(f"load average      {', '.join(f'{x:.1f}' for x in loads)} (before each round)")
        seq, par = (statistics.median(runs[k]) for k in ("sequential", "parallel"))
        for k in runs:
            print(f"{k:17s} median {statistics.median(runs[k]):.2f} s  "
                  f"[{', '.join(f'{x:.2f}' for x in runs[k])}]")  # fmt: skip
        print(f"speed-up          {seq / par:.2f}x with {args.threads} threads "
              f"({os.cpu_count()} CPUs); same bytes and digest")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
