"""Host-scan benchmark: ``scan --host``, ``check IMAGE --host``, ``version`` and a small image.

Run on the machine being measured, from a byte-compiled tree (``python -m compileall``; as
``pip install`` leaves it), with no advisory-database update attempt::

    python benchmarks/host_scan.py --out OUT [--repeat 5] [--profile]

Each command runs as its own process (``python -m gpusbom ...``), ``--repeat`` times; the
median, minimum and maximum wall times are reported, with the load average before the runs
(other work on the machine shows there). Measured:

- ``scan --host -q -o json=/dev/null`` and ``-o cyclonedx-json=/dev/null``;
- ``check oci:SMALL --host``: the first run scans the host (an empty user cache), the next
  ones reuse that scan (``gpusbom/host/cache.py``);
- ``gpusbom version``;
- ``scan oci:SMALL --no-cache``: SMALL is a one-layer OCI layout holding this machine's
  os-release and dpkg status (built by ``benchmarks/big_image.py``'s helpers).

``--outputs 3`` measures only ``scan --host -q --offline`` with JSON alone and with JSON,
CycloneDX JSON and SPDX JSON (three files in a temporary directory), interleaved
(``--repeat`` runs of each), the difference of the medians, whether the CycloneDX and SPDX
documents have the same bytes in every run (``SOURCE_DATE_EPOCH=0``), and one ``--debug``
run's output stages: each forked child's wall and CPU seconds (issue #37: three outputs
within 1.0 s on a 16-core H200 host). With ``--against SRC`` the same for that source tree,
interleaved, and whether both trees' documents are byte-identical::

    python benchmarks/host_scan.py --out OUT --outputs 3 --repeat 7 [--against SRC]

``--profile`` adds a cProfile of one in-process ``scan --host -o cyclonedx-json`` run
(``host_profile.txt``, by cumulative and by own time) and ``python -X importtime`` of
``scan --host`` (``importtime.txt``, the slowest imports first). ``--against SRC`` adds
interleaved runs of ``scan --host -o json`` with another gpusbom source tree (``SRC`` put
first on ``PYTHONPATH``: the code before a change) and checks that both write the same bytes
(``SOURCE_DATE_EPOCH=0``). Results: ``OUT/host.json``.

Figures (H200 hosts, 16 cores, gVisor, 2026-12-01; README "Hosts, check, version"): with
the walk in one process, medians of 5: ``scan --host`` 1.69-2.36 s (JSON) and 2.62-3.14 s
(CycloneDX), ``check --host`` 0.66-0.79 s, ``version`` 60-75 ms, the small image 0.57-0.62 s,
on two machines of that kind; with the walk in 16 worker processes (``host/parwalk.py``):
``scan --host`` 1.07 s (JSON) and 1.88 s (CycloneDX), ``check --host`` 0.59 s, ``version``
77 ms, the small image 0.52 s.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def timed(args: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "gpusbom", *args], env=env,  # noqa: S603 - gpusbom itself
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    wall = time.perf_counter() - t0
    if r.returncode not in (0, 1):  # 1: check's verdict
        raise SystemExit(f"gpusbom {' '.join(args)}: exit {r.returncode}: "
                         f"{r.stderr.decode(errors='replace')[-2000:]}")
    return wall


def series(label: str, args: list[str], env: dict[str, str], n: int,
           results: dict[str, object]) -> None:
    before = load()
    walls = [timed(args, env) for _ in range(n)]
    results[label] = {
        "median_s": round(statistics.median(walls), 3),
        "min_s": round(min(walls), 3),
        "max_s": round(max(walls), 3),
        "runs_s": [round(w, 3) for w in walls],
        "load_before": before,
    }
    print(f"{label:28s} median {statistics.median(walls):.3f} s  "
          f"(min {min(walls):.3f}, max {max(walls):.3f}; load {before})", flush=True)


def small_image(work: Path) -> Path:
    from big_image import _base_layer, write_layout

    root = work / "small"
    (root / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
    d, diff, size, _ = _base_layer(str(root / "blobs" / "sha256"))
    write_layout(root, [(d, diff, size)])
    return root


def profile(out: Path) -> None:
    from gpusbom.cli.app import main as cli_main

    prof = cProfile.Profile()
    prof.enable()
    cli_main(["scan", "--host", "-q", "-o", "cyclonedx-json=/dev/null"])
    prof.disable()
    buf = io.StringIO()
    st = pstats.Stats(prof, stream=buf)
    st.sort_stats("cumulative").print_stats(80)
    st.sort_stats("tottime").print_stats(40)
    (out / "host_profile.txt").write_text(buf.getvalue())


def importtime(out: Path, env: dict[str, str]) -> None:
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "gpusbom", "scan", "--host",
                        "-q", "-o", "json=/dev/null"], env=env, capture_output=True, text=True,
                       check=False)
    rows = []
    for ln in r.stderr.splitlines():
        parts = ln.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]), ln))
    rows.sort(reverse=True)
    total = sum(int(ln.split("|")[0].split(":")[1]) for _, ln in rows)
    (out / "importtime.txt").write_text(
        f"self total {total / 1e6:.3f} s\n" + "\n".join(ln for _, ln in rows[:80]) + "\n")


def against(src: str, env: dict[str, str], n: int, results: dict[str, object]) -> None:
    """Interleaved ``scan --host -o json`` runs of ``src`` and of this gpusbom, and whether
    their outputs are the same bytes."""
    # a user cache of its own: the collector plug-ins' list (collectors/_plugins.py) is kept
    # there keyed by sys.path, so two trees sharing one would list the installed
    # distributions again on every run (14-17 ms of each on an H200 host)
    other = dict(env, PYTHONPATH=os.pathsep.join([src, env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep), GPUSBOM_CACHE_DIR=env["GPUSBOM_CACHE_DIR"] + "-against")
    args = ["scan", "--host", "-q", "-o", "json=/dev/null"]
    walls: dict[str, list[float]] = {"against": [], "this": []}
    for _ in range(n):
        walls["against"].append(timed(args, other))
        walls["this"].append(timed(args, env))
    outs = {}
    for label, e in (("against", other), ("this", env)):
        path = Path(tempfile.mkdtemp(prefix="gpusbom-hostbench-")) / "host.json"
        timed(["scan", "--host", "-q", "-o", f"json={path}"], dict(e, SOURCE_DATE_EPOCH="0"))
        outs[label] = path.read_bytes()
        shutil.rmtree(path.parent, ignore_errors=True)
    same = outs["against"] == outs["this"]
    results["against"] = {k: {"median_s": round(statistics.median(v), 3),
                              "runs_s": [round(w, 3) for w in v]} for k, v in walls.items()}
    results["against"]["byte_identical"] = same  # type: ignore[index]
    print(f"scan --host -o json: {src} median {statistics.median(walls['against']):.3f} s, "
          f"this {statistics.median(walls['this']):.3f} s (interleaved, {n} each); "
          f"output {'byte-identical' if same else 'DIFFERENT'}", flush=True)


OUTPUT_FORMATS = (("json", "json"), ("cyclonedx-json", "cdx.json"), ("spdx-json", "spdx.json"))


def _outputs_args(n: int, where: Path) -> list[str]:
    args = ["scan", "--host", "-q", "--offline"]
    for fmt, suffix in OUTPUT_FORMATS[:n]:
        args += ["-o", f"{fmt}={where / ('out.' + suffix)}"]
    return args


def timed_cpu(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """``timed``, and the CPU seconds (user and system) of the command and every process
    it waited for (its walk workers, its forked outputs)."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = timed(args, env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def outputs(n: int, env: dict[str, str], repeat: int, work: Path, against_src: str | None,
            results: dict[str, object]) -> None:
    """Interleaved ``scan --host`` with JSON alone and with ``n`` outputs (this tree, and
    ``against_src``'s when given); the medians, their difference, the documents' bytes
    (same in every run, and the same in both trees), one ``--debug`` run's output stages."""
    trees = {"this": env}
    if against_src:
        trees["against"] = dict(env, PYTHONPATH=os.pathsep.join(
            [against_src, env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
            GPUSBOM_CACHE_DIR=env["GPUSBOM_CACHE_DIR"] + "-against")
    walls: dict[str, list[float]] = {}
    cpus: dict[str, list[float]] = {}
    docs: dict[str, set[bytes]] = {}
    for e in trees.values():  # warm: byte-compiled, the collectors' list cached
        timed(_outputs_args(n, work), dict(e, SOURCE_DATE_EPOCH="0"))
    for _ in range(repeat):
        for name, e in trees.items():
            for k in (1, n):
                label = f"{name} {k} output{'s' if k > 1 else ''}"
                wall, cpu = timed_cpu(_outputs_args(k, work), dict(e, SOURCE_DATE_EPOCH="0"))
                walls.setdefault(label, []).append(wall)
                cpus.setdefault(label, []).append(cpu)
                if k == n:
                    for fmt, suffix in OUTPUT_FORMATS[1:n]:
                        docs.setdefault(f"{name} {fmt}", set()).add(
                            (work / ("out." + suffix)).read_bytes())
    out: dict[str, object] = {}
    for label, ws in walls.items():
        cs = cpus[label]
        out[label] = {"median_s": round(statistics.median(ws), 3), "min_s": round(min(ws), 3),
                      "max_s": round(max(ws), 3), "runs_s": [round(w, 3) for w in ws],
                      "cpu_median_s": round(statistics.median(cs), 3),
                      "cpu_runs_s": [round(c, 3) for c in cs]}
        print(f"scan --host {label:24s} median {statistics.median(ws):.3f} s "
              f"(min {min(ws):.3f}, max {max(ws):.3f}); CPU median "
              f"{statistics.median(cs):.3f} s", flush=True)
    for name in trees:
        one = statistics.median(walls[f"{name} 1 output"])
        many = statistics.median(walls[f"{name} {n} outputs"])
        out[f"{name} added_by_{n}_outputs_s"] = round(many - one, 3)
        print(f"{name}: {n} outputs add {many - one:.3f} s to JSON alone (medians)", flush=True)
    for key, blobs in docs.items():
        out[f"{key} same_bytes_every_run"] = len(blobs) == 1
    if against_src:
        for fmt, _suffix in OUTPUT_FORMATS[1:n]:
            out[f"{fmt} byte_identical_to_against"] = docs[f"this {fmt}"] == docs[f"against {fmt}"]
    print("documents: " + ", ".join(f"{k}={v}" for k, v in out.items() if "bytes" in k
                                    or "identical" in k), flush=True)
    r = subprocess.run([sys.executable, "-m", "gpusbom", *_outputs_args(n, work)],  # noqa: S603
                       env=dict(env, GPUSBOM_DEBUG_INFLATE="1"), capture_output=True, text=True,
                       check=False)
    stages = [ln for ln in r.stderr.splitlines() if ln.startswith("gpusbom: stage")]
    out["debug_stages"] = stages
    print("\n".join(stages), flush=True)
    results[f"outputs_{n}"] = out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--against", metavar="SRC", help="another gpusbom source tree to compare")
    ap.add_argument("--outputs", type=int, choices=(2, 3), metavar="N",
                    help="only: scan --host with JSON alone against N outputs (3: JSON, "
                         "CycloneDX JSON, SPDX JSON)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gpusbom-hostbench-"))
    env = dict(os.environ, GPUSBOM_DB_AUTO_UPDATE="0", GPUSBOM_CACHE_DIR=str(work / "cache"))
    results: dict[str, object] = {"cores": len(os.sched_getaffinity(0)),
                                  "python": sys.version.split()[0]}
    try:
        n = args.repeat
        if args.outputs:
            outputs(args.outputs, env, n, work, args.against, results)
            return 0
        series("scan_host_json", ["scan", "--host", "-q", "-o", "json=/dev/null"], env, n,
               results)
        series("scan_host_cyclonedx", ["scan", "--host", "-q", "-o", "cyclonedx-json=/dev/null"],
               env, n, results)
        small = small_image(work)
        check = ["check", f"oci:{small}", "--host", "-o", "json=/dev/null"]
        series("check_host_first", check, env, 1, results)  # scans the host, stores it
        series("check_host", check, env, n, results)
        series("version", ["version"], env, max(n, 10), results)
        series("small_image_scan", ["scan", f"oci:{small}", "-q", "--no-cache", "-o",
                                    "json=/dev/null"], env, max(n, 10), results)
        if args.against:
            against(args.against, env, n, results)
        if args.profile:
            os.environ.update(env)
            profile(args.out)
            importtime(args.out, env)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        (args.out / "host.json").write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
