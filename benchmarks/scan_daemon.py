#!/usr/bin/env python3
"""The Docker Engine path against ``docker save > /dev/null``, in one run.

Starts a private ``dockerd`` (``--storage-driver=vfs`` by default, as the tests do; no
networking) in a temporary directory, ``docker load``s an archive (default: the
``torch-cpu`` fixture's docker-archive), then runs ``--repeat`` interleaved rounds of:

* ``docker save TAG > /dev/null`` (the floor the issue names), with the CPU the Engine
  spent producing the export (from ``/proc/<dockerd>/stat``);
* ``gpusbom scan docker:TAG`` reading the save stream (``GPUSBOM_DOCKER_DIRECT=0``);
* ``gpusbom scan docker:TAG`` reading the Engine's storage (``sources/docker_storage.py``);
* ``gpusbom scan docker-archive:PATH`` of the same archive (for reference).

Every scan is a first scan (``--no-cache``); it prints medians and every run, the load
average before each round, and checks that both daemon paths write byte-identical output.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def start_dockerd(tmp: Path, driver: str) -> tuple[subprocess.Popen[bytes], str]:
    host = f"unix://{tmp}/docker.sock"
    cmd = [
        "dockerd", f"--storage-driver={driver}", "--iptables=false", "--ip6tables=false",
        "--bridge=none", "--data-root", f"{tmp}/data", "--exec-root", f"{tmp}/exec",
        "-H", host, "--pidfile", f"{tmp}/docker.pid",
    ]  # fmt: skip
    log = open(tmp / "dockerd.log", "wb")  # noqa: SIM115 - lives as long as the process
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    env = {**os.environ, "DOCKER_HOST": host}
    deadline = time.monotonic() + 60
    while subprocess.run(["docker", "version"], env=env, capture_output=True).returncode:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit((tmp / "dockerd.log").read_text(errors="replace")[-2000:])
        time.sleep(0.3)
    return proc, host


def cpu_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def timed(cmd: list[str] | str, env: dict[str, str], shell: bool = False) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, shell=shell, capture_output=True)  # noqa: S603
    if proc.returncode:
        raise SystemExit(f"{cmd} failed: {proc.stderr.decode(errors='replace')[-800:]}")
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fixture", default="torch-cpu", help="fixture whose docker-archive to load")
    ap.add_argument("--archive", type=Path, help="a docker-archive to load instead")
    ap.add_argument("--tag", help="the archive's tag (with --archive)")
    ap.add_argument("--driver", default="vfs", help="dockerd --storage-driver")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    if args.archive:
        archive, tag = args.archive, args.tag
    else:
        from fixtures.build import ensure

        fx = ensure(args.fixture)
        archive, tag = fx.docker_archive, fx.tag
    tmp = Path(tempfile.mkdtemp(prefix="gpusbom-bd-", dir="/tmp"))
    proc, host = start_dockerd(tmp, args.driver)
    env = {
        **os.environ,
        "DOCKER_HOST": host,
        "GPUSBOM_NO_CACHE": "1",
        "GPUSBOM_DB_AUTO_UPDATE": "0",
        "SOURCE_DATE_EPOCH": "1700000000",
    }
    try:
        load = timed(["docker", "load", "-i", str(archive)], env)
        dpid = int((tmp / "docker.pid").read_text())
        scan = [sys.executable, "-m", "gpusbom", "scan", "-q", "-o"]
        rows: dict[str, list[float]] = {"save": [], "stream": [], "direct": [], "archive": []}
        engine_cpu: list[float] = []
        loads: list[float] = []
        for i in range(args.repeat):
            loads.append(os.getloadavg()[0])
            c0 = cpu_ticks(dpid)
            rows["save"].append(timed(f"docker save {tag} > /dev/null", env, shell=True))
            engine_cpu.append((cpu_ticks(dpid) - c0) / os.sysconf("SC_CLK_TCK"))
            out = {m: tmp / f"{m}-{i}.json" for m in ("stream", "direct")}
            rows["stream"].append(
                timed([*scan, f"json={out['stream']}", f"docker:{tag}"],
                      {**env, "GPUSBOM_DOCKER_DIRECT": "0"})
            )  # fmt: skip
            rows["direct"].append(timed([*scan, f"json={out['direct']}", f"docker:{tag}"], env))
            rows["archive"].append(
                timed([*scan, f"json={tmp / 'a.json'}", f"docker-archive:{archive}"], env)
            )
            if out["stream"].read_bytes() != out["direct"].read_bytes():
                print("OUTPUT DIFFERS between the save stream and the direct read")
                return 1
        med = {k: statistics.median(v) for k, v in rows.items()}
        print(f"image            {tag} ({archive.stat().st_size / 1e6:,.0f} MB docker-archive), "
              f"storage driver {args.driver}, docker load {load:.1f} s")  # fmt: skip
        print(f"load average     {', '.join(f'{x:.1f}' for x in loads)} (before each round)")
        for k, label in [
            ("save", "docker save > /dev/null"),
            ("stream", "gpusbom, save stream"),
            ("direct", "gpusbom, Engine storage"),
            ("archive", "gpusbom, docker-archive"),
        ]:
            runs = ", ".join(f"{x:.2f}" for x in rows[k])
            print(
                f"{label:25s} median {med[k]:.2f} s  ({med[k] / med['save']:.2f}x save)  [{runs}]"
            )
        print(f"Engine CPU per save: median {statistics.median(engine_cpu):.2f} s")
        print("outputs of the two daemon paths: byte-identical")
        return 0
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
