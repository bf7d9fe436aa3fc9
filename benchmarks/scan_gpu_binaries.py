#!/usr/bin/env python3
"""What binary analysis (the ``gpu-binaries`` collector) adds to the scan time of an image
holding huge real CUDA libraries.

Builds (once, cached) an OCI layout with one gzip layer holding real libraries from pinned
PyPI wheels: ``libtorch_cuda.so`` (torch 2.8.0, 1,015 MB: a 1 GB+ CUDA library),
``libcublasLt.so.12`` (cuBLAS 12.9.3.13, 749 MB) and ``libtorch_cpu.so`` (435 MB of host
code without device code: the worst case, every byte searched). Then times
``gpusbom scan`` as a child process with every collector, and with every collector but
``gpu-binaries``; prints both, the added time and the ratio (target: < 20% added).

Each wheel's ``.dist-info`` (``METADATA`` and ``RECORD``) goes into the image too, so the
libraries belong to their pypi components as in a real install, and the ``RECORD`` sha256
of each library becomes its declared digest.

It also times the full scan with every hash turned off: the SHA-256 of GPU binaries
(``GPUSBOM_NO_BINARY_HASH=1``) and the package-declared digests
(``GPUSBOM_NO_DECLARED_DIGESTS=1``), interleaved in the same run, and prints what hashing
adds (target: < 10%). Every run passes ``--no-cache``: the layer-result cache would
otherwise answer the later runs (and its key does not know the hashing switches).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

from isal import igzip

DEFAULT_CACHE = Path(os.environ.get("GPUSBOM_BENCH_CACHE", Path.home() / ".cache/gpusbom/bench"))

#: (project, version, wheel file, sha256, members to put in the image)
WHEELS = [
    (
        "torch",
        "2.8.0",
        "torch-2.8.0-cp311-cp311-manylinux_2_28_x86_64.whl",
        "c12fa219f51a933d5f80eeb3a7a5d0cbe9168c0a14bbb4055f1979431660879b",
        ["torch/lib/libtorch_cuda.so", "torch/lib/libtorch_cpu.so"],
    ),
    (
        "nvidia-cublas-cu12",
        "12.9.3.13",
        "nvidia_cublas_cu12-12.9.3.13-py3-none-manylinux_2_27_x86_64.whl",
        "d7d51055f161b317c7105ddaae90e71eda059026074ffef93cf7cde2886bfe72",
        ["nvidia/cublas/lib/libcublasLt.so.12"],
    ),
]
SITE = "usr/local/lib/python3.11/site-packages/"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def wheel(cache: Path, project: str, version: str, filename: str, sha: str) -> Path:
    d = cache / "wheels"
    path = d / filename
    if not path.is_file() or _sha256(path) != sha:
        d.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
             "--python-version", "3.11", "--platform", "manylinux1_x86_64",
             "--platform", "manylinux_2_27_x86_64", "--platform", "manylinux_2_28_x86_64",
             "-d", str(d), f"{project}=={version}"],
            check=True,
        )  # fmt: skip
        if _sha256(path) != sha:
            raise SystemExit(f"{filename}: sha256 mismatch")
    return path


def build_image(cache: Path) -> Path:
    # the layout's name follows the pinned wheels, so changing a pin builds a new image
    key = hashlib.sha256(repr((WHEELS, "dist-info")).encode()).hexdigest()[:12]
    layout = cache / f"oci-gpu-binaries-{key}"
    if (layout / "index.json").exists():
        return layout
    blobs = layout / "blobs" / "sha256"
    blobs.mkdir(parents=True, exist_ok=True)
    tmp = blobs / "layer.tmp"
    diff = hashlib.sha256()

    class _Tee:
        def __init__(self, gz: igzip.IGzipFile) -> None:
            self.gz = gz

        def write(self, b: bytes) -> int:
            diff.update(b)
            return self.gz.write(b)

    with igzip.open(tmp, "wb", compresslevel=1) as gz:
        with tarfile.open(fileobj=_Tee(gz), mode="w|", format=tarfile.PAX_FORMAT) as tf:  # type: ignore[arg-type]
            for project, version, filename, sha, members in WHEELS:
                whl = wheel(cache, project, version, filename, sha)
                with zipfile.ZipFile(whl) as z:
                    dist_info = [n for n in z.namelist()
                                 if n.endswith((".dist-info/METADATA", ".dist-info/RECORD"))]
                    for m in [*members, *dist_info]:
                        info = z.getinfo(m)
                        ti = tarfile.TarInfo(SITE + m)
                        ti.size = info.file_size
                        ti.mode = 0o755
                        with z.open(m) as src:
                            tf.addfile(ti, src)
                        print(f"  added {m} ({info.file_size >> 20} MiB)", file=sys.stderr)
    digest = _sha256(tmp)
    tmp.rename(blobs / digest)
    size = (blobs / digest).stat().st_size
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Env": ["PATH=/usr/bin"]},
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + diff.hexdigest()]},
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
            {
                "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                "digest": "sha256:" + digest,
                "size": size,
            }
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
            }
        ],
    }
    (layout / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    (layout / "index.json").write_text(json.dumps(index))
    return layout


#: CPU seconds (user + system) of each run_scan child, in call order: on a shared, loaded
#: machine the wall time follows the load; the CPU a scan spends much less so
CPU: list[float] = []


def run_scan(ref: str, collectors: list[str] | None, out: Path, *, hashing: bool = True) -> float:
    cmd = [sys.executable, "-m", "gpusbom", "scan", "--image", ref, "-q", "--no-cache",
           "-o", f"json={out}"]
    for c in collectors or ():
        cmd += ["--collector", c]
    env = dict(os.environ)
    env.pop("GPUSBOM_NO_BINARY_HASH", None)
    env.pop("GPUSBOM_NO_DECLARED_DIGESTS", None)
    if not hashing:
        env["GPUSBOM_NO_BINARY_HASH"] = "1"
        env["GPUSBOM_NO_DECLARED_DIGESTS"] = "1"
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          env=env)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
    if proc.returncode not in (0, 4):
        raise SystemExit(f"scan failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    ap.add_argument("--image", help="an existing oci:DIR to scan instead of building one")
    ap.add_argument("--repeat", type=int, default=3, help="take the best of N runs of each")
    ap.add_argument("--check", action="store_true", help="exit 1 when the target is missed")
    args = ap.parse_args()

    from gpusbom.collectors import all_collectors

    layout = Path(args.image.removeprefix("oci:")) if args.image else build_image(args.cache)
    ref = f"oci:{layout}"
    without = [c for c in all_collectors() if c != "gpu-binaries"]
    out = args.cache / "scan-gpu-binaries.json"
    with_t: list[float] = []
    without_t: list[float] = []
    nohash_t: list[float] = []
    nohash_out = args.cache / "scan-gpu-binaries-nohash.json"
    with_cpu: list[float] = []
    nohash_cpu: list[float] = []
    for _ in range(args.repeat):  # interleaved, so all see the same page cache state
        without_t.append(run_scan(ref, without, out))
        nohash_t.append(run_scan(ref, None, nohash_out, hashing=False))
        nohash_cpu.append(CPU[-1])
        with_t.append(run_scan(ref, None, out))
        with_cpu.append(CPU[-1])
    found = json.loads(out.read_text())
    comps = found.get("components", [])
    base, full = min(without_t), min(with_t)
    added = (full - base) / base
    size = sum(p.stat().st_size for p in (layout / "blobs/sha256").iterdir())
    print(f"image                  {layout} ({size / 1e9:.2f} GB compressed)")
    for c in comps:
        props = c.get("properties") or {}
        sass = props.get("cuda:sass") or props.get("gpusbom:cuda:sass")
        if sass:
            print(f"  {c.get('name')}: cuda:sass {sass}")
    print(f"scan without analysis  {base:.2f} s  (runs: {', '.join(f'{x:.2f}' for x in without_t)})")
    print(f"scan with analysis     {full:.2f} s  (runs: {', '.join(f'{x:.2f}' for x in with_t)})")
    print(f"added                  {full - base:.2f} s = {added * 100:.1f}% (target < 20%)")
    ok = added < 0.20
    print("result                 " + ("within target" if ok else "TARGET MISSED"))
    nohash = min(nohash_t)
    hashed = sum(1 for c in comps for e in c.get("evidence") or () if e.get("sha256"))
    declared = {e["path"] for c in comps for e in c.get("evidence") or ()
                if e.get("declared_digest")}
    unhashed = json.loads(nohash_out.read_text()).get("components", [])
    if any(e.get("sha256") or e.get("declared_digest")
           for c in unhashed for e in c.get("evidence") or ()):
        raise SystemExit("the no-hash run still has hashes: the switches were ignored")
    hash_added = (full - nohash) / nohash
    print(f"scan, no hashes        {nohash:.2f} s  (runs: {', '.join(f'{x:.2f}' for x in nohash_t)})")
    print(f"hashes and digests     {full - nohash:+.2f} s = {hash_added * 100:+.1f}% "
          f"({hashed} GPU binaries hashed, {len(declared)} files with a declared digest; "
          "target < 10%)")
    cpu_added = (min(with_cpu) - min(nohash_cpu)) / min(nohash_cpu)
    print(f"CPU, all hashes        {min(with_cpu):.2f} s  (runs: {', '.join(f'{x:.2f}' for x in with_cpu)})")
    print(f"CPU, no hashes         {min(nohash_cpu):.2f} s  (runs: {', '.join(f'{x:.2f}' for x in nohash_cpu)})")
    print(f"hashes and digests CPU {min(with_cpu) - min(nohash_cpu):+.2f} s = {cpu_added * 100:+.1f}%")
    print(f"load average           {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
          f"on {os.cpu_count()} CPUs (wall times follow it)")
    hash_ok = hash_added < 0.10
    print("hash result            " + ("within target" if hash_ok else "TARGET MISSED"))
    ok = ok and hash_ok
    return 0 if ok or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
