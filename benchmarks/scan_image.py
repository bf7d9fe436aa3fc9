#!/usr/bin/env python3
"""Scan throughput and peak memory against a decompression floor, in one run.

Builds (once, cached) an OCI image layout of at least 1 GB of gzip layers with
a realistic mix of files (many small text files, large shared-library-sized
binaries, a dpkg database and Python dist-infos), or takes ``--image REF``.
Then it measures:

* the floor: the time just to decompress the same layers with the same
  decompressor gpusbom uses (isal), reading to nothing;
* ``gpusbom scan`` of the image as a child process: wall time and peak RSS.

Targets (issue #2): wall time within 1.3x the floor; peak RSS under 500 MB.
Exit status is 0 unless ``--check`` is given and a target is missed.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import random
import resource
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from isal import isal_zlib

CHUNK = 1 << 20
OUT_CHUNK = 4 << 20
DEFAULT_CACHE = Path(os.environ.get("GPUSBOM_BENCH_CACHE", Path.home() / ".cache/gpusbom/bench"))


def _text_file(rng: random.Random, size: int) -> bytes:
    words = [b"cuda", b"kernel", b"int", b"return", b"void", b"#include", b"float", b"tensor"]
    out = bytearray()
    while len(out) < size:
        out += b" ".join(rng.choice(words) for _ in range(12)) + b"\n"
    return bytes(out[:size])


def _binary_file(rng: random.Random, size: int) -> bytes:
    # half incompressible, half repetitive: compresses about 2x like real .so files
    half = size // 2
    return rng.randbytes(half) + (b"\x00\x01\x02\x03ELFSECTION" * (size // 14 + 1))[: size - half]


def _add(tf: tarfile.TarFile, path: str, data: bytes) -> None:
    ti = tarfile.TarInfo(path)
    ti.size = len(data)
    ti.mode = 0o644
    tf.addfile(ti, io.BytesIO(data))


def _write_layer(blobs: Path, seed: int, target_bytes: int) -> tuple[str, str, int]:
    """Write one gzip layer blob; return (digest, diff_id, size)."""
    rng = random.Random(seed)
    tmp = blobs / f"tmp-{seed}"
    raw_hash = hashlib.sha256()
    with open(tmp, "wb") as out:

        class _Tee(io.RawIOBase):
            def writable(self) -> bool:
                return True

            def write(self, b: bytes) -> int:  # type: ignore[override]
                raw_hash.update(b)
                out.write(b)
                return len(b)

        tee = _Tee()
        diff_hash = hashlib.sha256()
        gz = gzip.GzipFile(fileobj=tee, mode="wb", compresslevel=1, mtime=0)

        class _DiffTee(io.RawIOBase):
            def writable(self) -> bool:
                return True

            def write(self, b: bytes) -> int:  # type: ignore[override]
                diff_hash.update(b)
                gz.write(b)
                return len(b)

        with tarfile.open(fileobj=_DiffTee(), mode="w|", format=tarfile.PAX_FORMAT) as tf:
            written = 0
            n = 0
            if seed == 0:
                status = b"".join(
                    b"Package: pkg%d\nStatus: install ok installed\nVersion: 1.%d-1\n"
                    b"Architecture: amd64\nMaintainer: Bench <b@example.org>\n\n" % (i, i)
                    for i in range(800)
                )
                _add(tf, "var/lib/dpkg/status", status)
            while written < target_bytes:
                n += 1
                if n % 200 == 0:
                    size = rng.randint(4 << 20, 24 << 20)
                    data = _binary_file(rng, size)
                    path = f"usr/lib/x86_64-linux-gnu/libbench{seed}_{n}.so.1.{n}"
                elif n % 50 == 0:
                    name = f"benchpkg{seed}x{n}"
                    data = f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.{n}\n".encode()
                    path = f"usr/lib/python3/dist-packages/{name}-0.{n}.dist-info/METADATA"
                else:
                    size = rng.randint(200, 24 << 10)
                    data = _text_file(rng, size)
                    path = f"usr/share/bench{seed}/d{n % 97}/f{n}.txt"
                _add(tf, path, data)
                written += len(data) + 512
        gz.close()
    digest = "sha256:" + raw_hash.hexdigest()
    tmp.rename(blobs / raw_hash.hexdigest())
    return digest, "sha256:" + diff_hash.hexdigest(), (blobs / raw_hash.hexdigest()).stat().st_size


def build_image(root: Path, total_bytes: int) -> Path:
    layout = root / f"oci-{total_bytes >> 20}M"
    if (layout / "index.json").exists():
        return layout
    blobs = layout / "blobs" / "sha256"
    blobs.mkdir(parents=True, exist_ok=True)
    layers = []
    per_layer = 320 << 20
    seed = 0
    built = 0
    while built < total_bytes:
        d, diff, size = _write_layer(blobs, seed, per_layer)
        layers.append((d, diff, size))
        built += size
        seed += 1
        print(f"  built layer {seed}: {size >> 20} MiB", file=sys.stderr)
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Env": ["PATH=/usr/bin"]},
        "rootfs": {"type": "layers", "diff_ids": [x[1] for x in layers]},
    }
    cfg = json.dumps(config, sort_keys=True).encode()
    (blobs / hashlib.sha256(cfg).hexdigest()).write_bytes(cfg)
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": "sha256:" + hashlib.sha256(cfg).hexdigest(),
            "size": len(cfg),
        },
        "layers": [
            {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": d, "size": s}
            for d, _, s in layers
        ],
    }
    man = json.dumps(manifest, sort_keys=True).encode()
    (blobs / hashlib.sha256(man).hexdigest()).write_bytes(man)
    index = {
        "schemaVersion": 2,
        "manifests": [
            {
                "mediaType": manifest["mediaType"],
                "digest": "sha256:" + hashlib.sha256(man).hexdigest(),
                "size": len(man),
                "annotations": {"org.opencontainers.image.ref.name": "bench"},
            }
        ],
    }
    (layout / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    (layout / "index.json").write_text(json.dumps(index))
    return layout


def layer_blobs(layout: Path) -> list[Path]:
    index = json.loads((layout / "index.json").read_text())
    mdig = index["manifests"][0]["digest"].split(":")[1]
    manifest = json.loads((layout / "blobs/sha256" / mdig).read_bytes())
    return [layout / "blobs/sha256" / layer["digest"].split(":")[1] for layer in manifest["layers"]]


def decompress_floor(blobs: list[Path]) -> tuple[float, int, int]:
    """Seconds to inflate every layer to nothing, one layer after another in one thread;
    (seconds, compressed, uncompressed). Output is taken in bounded pieces (4 MiB, as
    gpusbom does): unbounded ``decompress(chunk)`` grows each output buffer by reallocation
    and is ~1.8x slower, which would flatter gpusbom."""
    t0 = time.perf_counter()
    comp = raw = 0
    for blob in blobs:
        d = isal_zlib.decompressobj(31)
        with open(blob, "rb", buffering=0) as f:
            while chunk := f.read(CHUNK):
                comp += len(chunk)
                data = chunk
                while data:
                    raw += len(d.decompress(data, OUT_CHUNK))
                    data = d.unconsumed_tail
                    if d.eof:  # concatenated gzip members
                        data = d.unused_data
                        d = isal_zlib.decompressobj(31)
                while not d.eof:
                    more = d.decompress(b"", OUT_CHUNK)
                    if not more:
                        break
                    raw += len(more)
    return time.perf_counter() - t0, comp, raw


def _tree_rss(pid: int) -> int:
    """Memory of ``pid`` and all its descendants: the sum of their proportional set sizes
    (PSS: pages shared copy-on-write with forked layer workers are split among the sharers,
    so they are counted once), or of their RSS where PSS is not available (an upper bound)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            try:
                with open(f"/proc/{p}/smaps_rollup") as f:
                    total += next(int(line.split()[1]) * 1024 for line in f
                                  if line.startswith("Pss:"))
            except (OSError, StopIteration):
                with open(f"/proc/{p}/statm") as f:
                    total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):
            continue
    return total


def run_scan(ref: str, extra: tuple[str, ...] = ("--no-cache",)) -> tuple[float, float, int]:
    """(wall seconds, peak RSS MiB of the scan's process tree, exit code) of ``gpusbom scan``
    as a child process (the tree is sampled every 10 ms; the kernel's own peak of the
    largest single process is taken too)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpusbom", "scan", "--image", ref, "-q", "-o", "json=/dev/null", *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    peak_tree = 0
    while proc.poll() is None:
        peak_tree = max(peak_tree, _tree_rss(proc.pid))
        time.sleep(0.01)
    wall = time.perf_counter() - t0
    err = proc.stderr.read() if proc.stderr else ""
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if proc.returncode != 0:
        print(err, file=sys.stderr)
    return wall, max(peak_tree / 2**20, max(peak, before) / 1024.0), proc.returncode


def main() -> int:
    # the floor gets the allocator settings gpusbom's CLI applies (gpusbom._alloc): without
    # them, page faults of fresh output buffers make plain inflation ~1.7x slower, and the
    # floor would flatter gpusbom
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from gpusbom._alloc import tune_allocator

    tuned = tune_allocator()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=1100, help="compressed layer bytes to build")
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    ap.add_argument("--image", help="an existing oci:DIR to scan instead of building one")
    ap.add_argument("--repeat", type=int, default=2, help="take the best of N runs of each")
    ap.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = ap.parse_args()

    layout = Path(args.image.removeprefix("oci:")) if args.image else build_image(
        args.cache, args.size_mb << 20
    )
    blobs = layer_blobs(layout)
    floor = min(decompress_floor(blobs)[0] for _ in range(args.repeat))
    _, comp, raw = decompress_floor(blobs)
    runs = [run_scan(f"oci:{layout}") for _ in range(args.repeat)]
    if any(rc != 0 for _, _, rc in runs):
        print("scan failed", file=sys.stderr)
        return 2
    wall = min(w for w, _, _ in runs)
    rss = max(r for _, r, _ in runs)
    ratio = wall / floor
    print(f"image             {layout} ({len(blobs)} layers)")
    print(f"layer bytes       {comp / 1e6:,.0f} MB compressed, {raw / 1e6:,.0f} MB uncompressed")
    print(f"floor (inflate)   {floor:.2f} s  ({raw / 1e6 / floor:,.0f} MB/s uncompressed; "
          f"one thread, isal, allocator {'tuned as gpusbom does' if tuned else 'defaults'})")
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"cores             {cpus} usable")
    print(f"gpusbom scan      {wall:.2f} s  ({raw / 1e6 / wall:,.0f} MB/s uncompressed)")
    print(f"ratio             {ratio:.2f}x the floor (target <= 1.30x)")
    print(f"peak RSS          {rss:.0f} MiB, the scan's processes together, PSS (target < 500 MiB)")
    ok = ratio <= 1.3 and rss < 500
    print("result            " + ("within targets" if ok else "TARGET MISSED"))
    return 0 if ok or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
