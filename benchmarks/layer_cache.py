#!/usr/bin/env python3
"""The layer-result cache: a second image that shares all but its top layer with a scanned one.

Builds (once, cached) the benchmark image of ``scan_image.py`` (A: ~1.1 GB of gzip layers)
and an image B with A's layers except the top one, replaced by a new 32 MiB layer. Then,
with an empty cache in a temporary directory:

1. ``gpusbom scan A`` (fills the cache): the first scan;
2. ``gpusbom scan B``: only B's top layer is read; the target is under 25% of (1);
3. ``gpusbom scan B --no-cache``: its JSON output must be byte-identical to (2)'s.

``--fixtures`` does the same for every fixture image of ``fixtures/build.py`` with two or
more layers (B: a new 1 MiB top layer); rounds are medians, with the load average. Each
scan's CPU time (the process and its children) is printed beside its wall time: on a
shared machine the CPU ratio is the steadier one.

Every round also scans a one-layer image holding one small file, as a first scan: what any
scan costs whatever the image (start-up and imports, the manifest, the cache, the
collectors, the advisory database, the output). The last column is B / A in CPU beyond that
fixed cost: the share of the image's own work that the second scan still does.

Exit status is 0 unless ``--check`` is given and a target is missed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scan_image  # the shared image builder


def _variant(a: Path, root: Path, top_bytes: int = 32 << 20, name: str | None = None) -> Path:
    """Image B: A's layers with the top one replaced by a new small layer."""
    b = root / ((name or a.name) + "-newtop")
    if (b / "index.json").exists():
        return b
    blobs = b / "blobs" / "sha256"
    blobs.mkdir(parents=True, exist_ok=True)
    index = json.loads((a / "index.json").read_text())
    man = json.loads((a / "blobs/sha256" / index["manifests"][0]["digest"][7:]).read_bytes())
    cfg = json.loads((a / "blobs/sha256" / man["config"]["digest"][7:]).read_bytes())
    for layer in man["layers"][:-1]:
        dst = blobs / layer["digest"][7:]
        if not dst.exists():
            os.link(a / "blobs/sha256" / layer["digest"][7:], dst)
    d, diff, size = scan_image._write_layer(blobs, 1000, top_bytes)
    man["layers"][-1] = {
        "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
        "digest": d,
        "size": size,
    }
    cfg["rootfs"]["diff_ids"][-1] = diff
    cfg_b = json.dumps(cfg, sort_keys=True).encode()
    (blobs / hashlib.sha256(cfg_b).hexdigest()).write_bytes(cfg_b)
    man["config"] = {
        "mediaType": man["config"]["mediaType"],
        "digest": "sha256:" + hashlib.sha256(cfg_b).hexdigest(),
        "size": len(cfg_b),
    }
    man_b = json.dumps(man, sort_keys=True).encode()
    (blobs / hashlib.sha256(man_b).hexdigest()).write_bytes(man_b)
    index["manifests"][0].update(
        digest="sha256:" + hashlib.sha256(man_b).hexdigest(), size=len(man_b)
    )
    (b / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    (b / "index.json").write_text(json.dumps(index))
    return b


def _one_file(root: Path) -> Path:
    """A one-layer OCI layout holding one small text file (the fixed cost of a scan)."""
    from big_image import write_layout

    img = root / "one-file"
    if not (img / "index.json").exists():
        blobs = img / "blobs" / "sha256"
        blobs.mkdir(parents=True, exist_ok=True)
        write_layout(img, [scan_image._write_layer(blobs, 7, 1)])
    return img


def _scan(ref: str, out: Path, env: dict[str, str], *extra: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the scan and its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "gpusbom", "scan", ref, "-q", "-o", f"json={out}", *extra],
        check=True,
        env=env,
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


Timing = tuple[float, float]


def _round(a: Path, b: Path, env: dict[str, str], tables: Path | None = None,
           one: Path | None = None) -> tuple[Timing, Timing, Timing, bool, Timing | None]:
    """(first scan of A, second scan of B, B without the cache: each (wall, CPU)), whether
    B's output is identical without the cache, and (``one``) the first scan of the one-file
    image; with an empty layer cache in a temporary directory. ``tables``: the catalog's
    parsed tables and the advisory database's index (``gpusbom/_tables.py``,
    ``advisories/_dbcache.py``) from an earlier run, copied in first, so that A is a first
    scan of an image, not the first run of gpusbom."""
    tmp = Path(tempfile.mkdtemp(prefix="gpusbom-cache-bench-"))
    try:
        if tables is not None and tables.is_dir():
            shutil.copytree(tables, tmp / "cache" / "tables")
        env = {**env, "GPUSBOM_CACHE_DIR": str(tmp / "cache")}
        first = _scan(f"oci:{a}", tmp / "a.json", env)
        second = _scan(f"oci:{b}", tmp / "b.json", env)
        uncached = _scan(f"oci:{b}", tmp / "b-nocache.json", env, "--no-cache")
        # last: the layer cache's file exists by then, as it does for A's scan
        fixed = _scan(f"oci:{one}", tmp / "one.json", env) if one is not None else None
        same = (tmp / "b.json").read_bytes() == (tmp / "b-nocache.json").read_bytes()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return first, second, uncached, same, fixed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=1100, help="compressed bytes of image A")
    ap.add_argument("--cache", type=Path, default=scan_image.DEFAULT_CACHE)
    ap.add_argument("--repeat", type=int, default=3, help="rounds (medians)")
    ap.add_argument("--fixtures", nargs="*", metavar="NAME",
                    help="instead: every fixture image (or those named) as A, B with a new "
                         "1 MiB top layer")  # fmt: skip
    ap.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = ap.parse_args()
    env = dict(os.environ, SOURCE_DATE_EPOCH="1700000000", GPUSBOM_DB_AUTO_UPDATE="0")
    env.pop("GPUSBOM_NO_CACHE", None)
    # both scans start with compiled modules (the first would otherwise pay for it alone)
    import gpusbom

    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", os.path.dirname(gpusbom.__file__)], check=False
    )
    pairs: list[tuple[str, Path, Path]] = []
    if args.fixtures is not None:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from fixtures.build import ensure
        from fixtures.recipes import RECIPES

        for name in args.fixtures or sorted(RECIPES):
            fx = ensure(name)
            if len(scan_image.layer_blobs(fx.oci_dir)) < 2:
                continue
            pairs.append((name, fx.oci_dir, _variant(fx.oci_dir, args.cache, 1 << 20, name)))
    else:
        a = scan_image.build_image(args.cache, args.size_mb << 20)
        pairs.append((a.name, a, _variant(a, args.cache)))
    ok = True
    # one scan first: the page cache holds A's blobs, and the catalog's parsed tables are
    # there to copy into every round's empty cache directory
    warm = Path(tempfile.mkdtemp(prefix="gpusbom-cache-bench-warm-"))
    _scan(f"oci:{pairs[0][1]}", warm / "a.json", {**env, "GPUSBOM_CACHE_DIR": str(warm)},
          "--no-cache")
    one = _one_file(args.cache)
    print(
        "| image | layers | A, first scan | B, second scan | B / A | B / A, CPU | B without the "
        "cache | B's output without the cache | load | fixed cost (one-file image) | B / A "
        "beyond it, CPU |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, a, b in pairs:
        firsts: list[Timing] = []
        seconds: list[Timing] = []
        uncached: list[Timing] = []
        fixed: list[Timing | None] = []
        loads: list[float] = []
        same = True
        for _ in range(args.repeat):
            loads.append(os.getloadavg()[0])
            f, s, u, same_now, one_t = _round(a, b, env, warm / "tables", one)
            firsts.append(f)
            seconds.append(s)
            uncached.append(u)
            fixed.append(one_t)
            same = same and same_now
        first = statistics.median(w for w, _ in firsts)
        second = statistics.median(w for w, _ in seconds)
        cpu_a = statistics.median(c for _, c in firsts)
        cpu_b = statistics.median(c for _, c in seconds)
        ratio = second / first
        ok = ok and ratio < 0.25 and same
        got = [t for t in fixed if t is not None]
        fixed_w = statistics.median(w for w, _ in got)
        fixed_c = statistics.median(c for _, c in got)
        # meaningless where A is hardly more than the fixed cost (a 2 MB image)
        beyond = (f"{(cpu_b - fixed_c) / (cpu_a - fixed_c):.0%}" if cpu_a - fixed_c >= 0.1
                  else "n/a")
        print(f"| {name} | {len(scan_image.layer_blobs(a))} | {first:.2f} s, {cpu_a:.2f} CPU-s | "
              f"{second:.2f} s, {cpu_b:.2f} CPU-s | **{ratio:.0%}** | {cpu_b / cpu_a:.0%} | "
              f"{statistics.median(w for w, _ in uncached):.2f} s | "
              f"{'identical' if same else 'DIFFERS'} | "
              f"{min(loads):.1f}-{max(loads):.1f} | {fixed_w:.2f} s, {fixed_c:.2f} CPU-s | "
              f"{beyond} |", flush=True)  # fmt: skip
    shutil.rmtree(warm, ignore_errors=True)
    print("result: " + ("within targets (< 25%)" if ok else "TARGET MISSED on some image"))
    return 0 if ok or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
