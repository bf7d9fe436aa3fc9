"""Run every fuzz target (in parallel) for a time budget; print executions and findings.

    scripts/fuzz --minutes N [--jobs J] [--targets a,b] [--corpus DIR] [--out DIR]

Each target runs ``fuzz/run.py`` (atheris) on its own working corpus, seeded from
``fuzz/seeds.py`` (built once into the corpus directory). A finding (crash, timeout, memory
blow-up) is saved as ``OUT/<target>/crash-*`` (libFuzzer's name) and the target is
restarted for the rest of its time, so one bug does not end a long run. The summary
(``OUT/summary.json`` and a table on stdout) gives per target the seconds fuzzed, the
executions, the corpus size and the findings. Exit status 1 when there was any finding.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
_RUNS = re.compile(r"^#(\d+)\s", re.M)
_DONE = re.compile(r"Done (\d+) runs in")
_EXEC_UNITS = re.compile(r"stat::number_of_executed_units:\s*(\d+)")
MAX_RESTARTS = 25


def _executions(log: str) -> int:
    for rx in (_EXEC_UNITS, _DONE):
        m = rx.findall(log)
        if m:
            return int(m[-1])
    runs = _RUNS.findall(log)
    return int(runs[-1]) if runs else 0


def fuzz_one(name: str, seconds: float, corpus: Path, out: Path, seeds: Path,
             python: str, rss_mb: int, timeout_s: int) -> dict[str, object]:
    work = corpus / name
    work.mkdir(parents=True, exist_ok=True)
    if (seeds / name).is_dir():
        for f in (seeds / name).iterdir():
            if not (work / f.name).exists():
                shutil.copyfile(f, work / f.name)
    found = out / name
    found.mkdir(parents=True, exist_ok=True)
    logf = out / f"{name}.log"
    deadline = time.monotonic() + seconds
    execs = 0
    runs = 0
    crashes: list[str] = []
    with open(logf, "w") as log:
        while runs <= MAX_RESTARTS:
            left = int(deadline - time.monotonic())
            if left < 2:
                break
            runs += 1
            cmd = [python, str(HERE / "run.py"), name, str(work), f"-max_total_time={left}",
                   f"-timeout={timeout_s}", f"-rss_limit_mb={rss_mb}", "-print_final_stats=1",
                   f"-artifact_prefix={found}/", "-max_len=65536"]
            env = {**os.environ, "PYTHONUNBUFFERED": "1"}
            # the whole run may not outlive its budget by more than the per-input timeout
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace",
                                      timeout=left + 3 * timeout_s + 120, env=env)
                text, rc = proc.stdout + proc.stderr, proc.returncode
            except subprocess.TimeoutExpired as e:
                parts = [x.decode(errors="replace") if isinstance(x, bytes) else (x or "")
                         for x in (e.stdout, e.stderr)]
                text, rc = "".join(parts), -9
                # libFuzzer did not stop at -max_total_time nor at -timeout: a hang
                crashes.append(f"overran-run-{runs}")
            execs += _executions(text)
            log.write(text[-200_000:])
            new = [p.name for p in found.iterdir() if p.name not in crashes]
            crashes.extend(new)
            if rc == 0 or not new:
                if rc not in (0, -9) and not new:
                    log.write(f"\n[driver] {name}: exit {rc} without an artifact\n")
                    crashes.append(f"exit-{rc}")
                break
    return {"target": name, "seconds": round(seconds), "executions": execs,
            "corpus": sum(1 for _ in work.iterdir()), "findings": crashes, "runs": runs}


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(HERE))
    ap = argparse.ArgumentParser(prog="scripts/fuzz", description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=None, help="per target")
    ap.add_argument("--seconds", type=float, default=None, help="per target (instead of minutes)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--targets", default="", help="comma-separated (default: all)")
    ap.add_argument("--corpus", type=Path,
                    default=Path.home() / ".cache" / "gpusbom" / "fuzz" / "corpus")
    ap.add_argument("--seeds", type=Path, default=None,
                    help="seed corpus (default: built by fuzz/seeds.py into CORPUS/../seeds)")
    ap.add_argument("--out", type=Path, default=Path("fuzz-out"))
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--rss-limit-mb", type=int, default=2048)
    ap.add_argument("--timeout", type=int, default=20, help="seconds for one input")
    a = ap.parse_args(argv)
    import targets

    names = [t for t in a.targets.split(",") if t] or list(targets.TARGETS)
    unknown = [t for t in names if t not in targets.TARGETS]
    if unknown:
        ap.error(f"unknown target(s) {unknown}; targets: {', '.join(targets.TARGETS)}")
    seconds = a.seconds if a.seconds is not None else (a.minutes or 1.0) * 60
    seeds = a.seeds or a.corpus.parent / "seeds"
    if not seeds.is_dir():
        import seeds as seedmod

        seedmod.build(seeds)
    a.out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    results = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        futs = [pool.submit(fuzz_one, n, seconds, a.corpus, a.out, seeds, a.python,
                            a.rss_limit_mb, a.timeout) for n in names]
        for f in concurrent.futures.as_completed(futs):
            r = f.result()
            results.append(r)
            print(f"{r['target']:16} {r['seconds']:>6}s {r['executions']:>10} execs  "
                  f"{len(r['findings'])} finding(s)", flush=True)
    results.sort(key=lambda r: str(r["target"]))
    summary = {"wall_seconds": round(time.monotonic() - t0), "targets": results}
    (a.out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(f"\n{'target':16} {'seconds':>8} {'executions':>11} {'corpus':>7}  findings")
    for r in results:
        print(f"{r['target']:16} {r['seconds']:>8} {r['executions']:>11} {r['corpus']:>7}  "
              f"{', '.join(r['findings']) or 'none'}")
    return 1 if any(r["findings"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
