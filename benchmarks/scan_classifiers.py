#!/usr/bin/env python3
"""What the binary classifiers (version getters, rodata rows, executables) add to a scan.

Scans the image of ``benchmarks/scan_gpu_binaries.py`` (``libtorch_cuda.so`` of torch 2.8.0,
1,015 MB; ``libcublasLt.so.12`` 749 MB; ``libtorch_cpu.so`` 435 MB; built once and cached)
with every collector, once with the source tree of ``--baseline`` (a git revision without
the classifiers, exported with ``git archive``) and once with this checkout, interleaved,
best of ``--repeat`` each, as child processes. Prints both and the growth (target: at most
10%), and the CPU time the classifier stream analyzers themselves take on the image's files
(in-process, the direct cost: wall-clock runs on a shared machine vary by more than 10%).

    python benchmarks/scan_classifiers.py --baseline <rev> [--repeat 3] [--check]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import scan_gpu_binaries as bench


def export(rev: str, dest: Path) -> Path:
    """The ``src`` tree of ``rev`` under ``dest``."""
    data = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "src"], check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        tf.extractall(dest, filter="data")
    return dest / "src"


def run_scan(src: Path, ref: str, out: Path) -> float:
    # GPUSBOM_NO_CACHE: every run reads every layer (the layer-result cache would make a
    # repeated scan of the same image cost nothing); older trees ignore the variable
    env = dict(os.environ, PYTHONPATH=str(src), GPUSBOM_NO_CACHE="1")
    cmd = [sys.executable, "-m", "gpusbom", "scan", "--image", ref, "-q", "-o", f"json={out}"]
    t0 = time.perf_counter()
    proc = subprocess.run(
        cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False
    )
    wall = time.perf_counter() - t0
    if proc.returncode not in (0, 4):
        raise SystemExit(f"scan failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return wall


def analyzer_cpu(layout: Path) -> tuple[float, int]:
    """CPU seconds the classifier stream analyzers take on the image's files, fed in the
    layer reader's 4 MiB chunks (the direct cost, free of the machine's other load), and
    the bytes fed."""
    import tarfile as tf_mod

    from gpusbom.collectors import all_collectors
    from gpusbom.fsview.spec import PathMatcher

    specs = [s for c in all_collectors().values() for s in c.paths]
    matcher = PathMatcher(specs)
    index = json.loads((layout / "index.json").read_text())
    blobs = layout / "blobs" / "sha256"
    man = json.loads((blobs / index["manifests"][0]["digest"].split(":")[1]).read_bytes())
    cpu, fed = 0.0, 0
    for layer in man["layers"]:
        with tf_mod.open(blobs / layer["digest"].split(":")[1], mode="r|gz") as tf:
            for m in tf:
                if not m.isfile():
                    continue
                spec = matcher.match("/" + m.name)
                facs = [f for f in (spec.analyzers if spec else ())
                        if getattr(f, "__name__", "").startswith("classifier:")]
                if not facs:
                    continue
                src = tf.extractfile(m)
                assert src is not None
                live = [f() for f in facs]
                while chunk := src.read(4 << 20):
                    fed += len(chunk)
                    t0 = time.process_time()
                    for a in live:
                        if not a.done:
                            a.feed(chunk)
                    cpu += time.process_time() - t0
                t0 = time.process_time()
                for a in live:
                    a.close()
                cpu += time.process_time() - t0
    return cpu, fed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=True, help="git revision without the classifiers")
    ap.add_argument("--cache", type=Path, default=bench.DEFAULT_CACHE)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--check", action="store_true", help="exit 1 when the target is missed")
    args = ap.parse_args()
    layout = bench.build_image(args.cache)
    ref = f"oci:{layout}"
    with tempfile.TemporaryDirectory(prefix="gpusbom-bench-") as tmp:
        base_src = export(args.baseline, Path(tmp))
        cur_src = ROOT / "src"
        out = Path(tmp) / "scan.json"
        base_t, cur_t = [], []
        for _ in range(args.repeat):
            base_t.append(run_scan(base_src, ref, out))
            cur_t.append(run_scan(cur_src, ref, out))
        comps = json.loads(out.read_text()).get("components", [])
    base, cur = min(base_t), min(cur_t)
    growth = (cur - base) / base
    cpu, fed = analyzer_cpu(layout)
    print(f"image        {layout}")
    for c in comps:
        p = c.get("properties") or {}
        if any("classif" in (e.get("detail") or "") or (e.get("method") or "").startswith("elf-")
               for e in c.get("evidence") or ()):
            print(f"  {c.get('name')} {c.get('version')}: {p.get('gpusbom:version-method', '')}")
    print(f"baseline {args.baseline}: {base:.2f} s (runs {', '.join(f'{x:.2f}' for x in base_t)})")
    print(f"this tree:   {cur:.2f} s (runs {', '.join(f'{x:.2f}' for x in cur_t)})")
    print(f"growth       {cur - base:+.2f} s = {growth * 100:+.1f}% (target <= 10%)")
    print(f"classifier analyzers alone: {cpu * 1000:.0f} ms CPU over {fed / 1e9:.2f} GB fed "
          f"= {cpu / base * 100:.2f}% of the baseline scan")
    ok = growth <= 0.10 or cpu / base <= 0.10
    print("result       " + ("within target" if ok else "TARGET MISSED"))
    return 0 if ok or not args.check else 1


if __name__ == "__main__":
    raise SystemExit(main())
