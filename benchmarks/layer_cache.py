#!/usr/bin/env python3
"""The layer-result cache: a second image that shares all but its top layer with a scanned one.

Builds (once, cached) the benchmark image of ``scan_image.py`` (A: ~1.1 GB of gzip layers)
and an image B with A's layers except the top one, replaced by a new 32 MiB layer. Then,
with an empty cache in a temporary directory:

1. ``gpusbom scan A`` (fills the cache): the first scan;
2. ``gpusbom scan B``: only B's top layer is read; the target is under 25% of (1);
3. ``gpusbom scan B --no-cache``: its JSON output must be byte-identical to (2)'s.

Exit status is 0 unless ``--check`` is given and a target is missed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scan_image  # the shared image builder


def _variant(a: Path, root: Path) -> Path:
    """Image B: A's layers with the top one replaced by a new small layer."""
    b = root / (a.name + "-newtop")
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
    d, diff, size = scan_image._write_layer(blobs, 1000, 32 << 20)
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


def _scan(ref: str, out: Path, env: dict[str, str], *extra: str) -> float:
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "gpusbom", "scan", ref, "-q", "-o", f"json={out}", *extra],
        check=True,
        env=env,
    )
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=1100, help="compressed bytes of image A")
    ap.add_argument("--cache", type=Path, default=scan_image.DEFAULT_CACHE)
    ap.add_argument("--repeat", type=int, default=2, help="take the best of N rounds")
    ap.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = ap.parse_args()
    a = scan_image.build_image(args.cache, args.size_mb << 20)
    b = _variant(a, args.cache)
    env = dict(os.environ, SOURCE_DATE_EPOCH="1700000000")
    env.pop("GPUSBOM_NO_CACHE", None)
    # both scans start with compiled modules (the first would otherwise pay for it alone)
    import gpusbom

    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", os.path.dirname(gpusbom.__file__)], check=False
    )
    firsts, seconds = [], []
    same = True
    for _ in range(args.repeat):
        tmp = Path(tempfile.mkdtemp(prefix="gpusbom-cache-bench-"))
        try:
            env["GPUSBOM_CACHE_DIR"] = str(tmp / "cache")
            firsts.append(_scan(f"oci:{a}", tmp / "a.json", env))
            seconds.append(_scan(f"oci:{b}", tmp / "b.json", env))
            _scan(f"oci:{b}", tmp / "b-nocache.json", env, "--no-cache")
            same = same and (tmp / "b.json").read_bytes() == (tmp / "b-nocache.json").read_bytes()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    first, second = min(firsts), min(seconds)
    ratio = second / first
    print(f"image A           {a} ({len(scan_image.layer_blobs(a))} layers)")
    print(f"image B           {b} (A's layers but a new top one)")
    print(f"first scan (A)    {first:.2f} s  (empty cache)")
    print(f"second scan (B)   {second:.2f} s  ({ratio:.0%} of the first; target < 25%)")
    print(f"B's output        {'identical' if same else 'DIFFERS'} with and without the cache")
    ok = ratio < 0.25 and same
    print("result            " + ("within targets" if ok else "TARGET MISSED"))
    return 0 if ok or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
