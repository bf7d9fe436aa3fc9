#!/usr/bin/env python3
"""Pull-and-scan from a local registry: wall time and peak RSS of ``gpusbom scan --image registry:``.

Takes the 1 GB+ OCI layout that ``benchmarks/scan_image.py`` builds (and builds it when it
is missing), starts Debian's ``docker-registry`` on 127.0.0.1 with a temporary storage root,
pushes the layout with ``skopeo copy --preserve-digests``, then runs
``gpusbom scan --image registry:127.0.0.1:PORT/bench/big:latest --insecure-registry ...`` as a
child process. Its peak RSS is read from ``wait4`` for that child alone (not skopeo's or
the registry's). In ``--repeat`` interleaved rounds it also scans the same image from its
oci-archive and fetches every blob over HTTP one after another (the fetch floor); it prints
medians, every run and the load average, and the one-thread inflate floor. ``--cold`` adds
scans with the registry's blob files and the archive evicted from the page cache
(``posix_fadvise``, nothing else evicted) and with no compiled bytecode.

Targets: peak RSS under 500 MB while pulling a 1 GB+ image (issue #8); the registry scan
within 1.3x of the oci-archive scan (issue #19).
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scan_image import DEFAULT_CACHE, build_image, decompress_floor, layer_blobs


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_registry(root: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    storage = root / "storage"
    storage.mkdir(parents=True)
    cfg = root / "config.yml"
    cfg.write_text(
        "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\n"
        f"storage:\n  filesystem:\n    rootdirectory: {storage}\n"
        f"http:\n  addr: 127.0.0.1:{port}\n  secret: {uuid.uuid4().hex}\n"
    )
    log = open(root / "registry.log", "wb")  # noqa: SIM115 - lives as long as the process
    proc = subprocess.Popen(["docker-registry", "serve", str(cfg)], stdout=log, stderr=log)
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc, f"127.0.0.1:{port}"
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(
                    f"docker-registry did not start: {(root / 'registry.log').read_text()}"
                )
            time.sleep(0.1)


def run_scan(args: list[str], env: dict[str, str] | None = None) -> tuple[float, float, int, str]:
    """(wall s, peak RSS MiB, exit code, stderr) of one ``gpusbom scan`` child (a first scan:
    ``--no-cache``, no advisory-database update)."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gpusbom", "scan", *args, "--no-cache", "-q",
             "-o", "json=/dev/null"],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env={**os.environ, "GPUSBOM_DB_AUTO_UPDATE": "0", **(env or {})},
        )  # fmt: skip
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        err.seek(0)
        text = err.read().decode("utf-8", "replace")
    return wall, usage.ru_maxrss / 1024.0, proc.returncode, text


def evict(paths: list[Path]) -> None:
    """Drop these files from the page cache (a cold read), without touching anything else."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def fetch_floor(host: str, repo: str, digests: list[str]) -> float:
    """Seconds to GET every layer blob from the registry, one after another, to nothing."""
    import requests

    t0 = time.perf_counter()
    with requests.Session() as s:
        for d in digests:
            with s.get(f"http://{host}/v2/{repo}/blobs/{d}", stream=True) as r:
                r.raise_for_status()
                for _ in r.iter_content(1 << 20):
                    pass
    return time.perf_counter() - t0


def oci_archive(layout: Path) -> Path:
    """The layout as an oci-archive next to it (made once with skopeo)."""
    out = layout.with_name(layout.name + ".oci.tar")
    if not out.exists():
        tmp = out.with_suffix(".tmp")
        tmp.unlink(missing_ok=True)
        subprocess.run(
            ["skopeo", "--insecure-policy", "copy", "--quiet", f"oci:{layout}",
             f"oci-archive:{tmp}"],
            check=True,
        )  # fmt: skip
        tmp.rename(out)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=1100, help="compressed layer bytes to build")
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    ap.add_argument("--image", help="an existing oci:DIR to push instead of building one")
    ap.add_argument("--repeat", type=int, default=5, help="interleaved rounds (medians)")
    ap.add_argument("--cold", action="store_true",
                    help="also scan with the registry's blobs and the archive evicted from the "
                         "page cache, and with no compiled bytecode")  # fmt: skip
    ap.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = ap.parse_args()
    for tool in ("docker-registry", "skopeo"):
        if shutil.which(tool) is None:
            print(
                f"{tool} is not installed (apt-get install docker-registry skopeo)", file=sys.stderr
            )
            return 2

    layout = (
        Path(args.image.removeprefix("oci:"))
        if args.image
        else build_image(args.cache, args.size_mb << 20)
    )
    blobs = layer_blobs(layout)
    archive = oci_archive(layout)
    work = Path(tempfile.mkdtemp(prefix="gpusbom-bench-registry-"))
    proc, host = start_registry(work)
    try:
        t0 = time.perf_counter()
        subprocess.run(
            ["skopeo", "--insecure-policy", "copy", "--quiet", "--preserve-digests",
             "--dest-tls-verify=false", f"oci:{layout}", f"docker://{host}/bench/big:latest"],
            check=True,
        )  # fmt: skip
        push = time.perf_counter() - t0
        reg = ["--image", f"registry:{host}/bench/big:latest", "--insecure-registry", host]
        arc = ["--image", f"oci-archive:{archive}"]
        digests = ["sha256:" + b.name for b in blobs]
        stored = [p for p in (work / "storage").rglob("data") if p.is_file()]
        rounds: dict[str, list[float]] = {"registry": [], "archive": [], "fetch": []}
        loads: list[float] = []
        rss: list[float] = []
        for _ in range(args.repeat):
            loads.append(os.getloadavg()[0])
            for key, ref in (("registry", reg), ("archive", arc)):
                wall, peak, rc, err = run_scan(ref)
                if rc != 0:
                    print(f"{key} scan failed (exit {rc}): {err}", file=sys.stderr)
                    return 2
                rounds[key].append(wall)
                if key == "registry":
                    rss.append(peak)
            rounds["fetch"].append(fetch_floor(host, "bench/big", digests))
        med = {k: statistics.median(v) for k, v in rounds.items()}
        floor, comp, raw = decompress_floor(blobs)
        print(f"image             {layout} ({len(blobs)} layers)")
        print(
            f"layer bytes       {comp / 1e6:,.0f} MB compressed, {raw / 1e6:,.0f} MB uncompressed"
        )
        print(f"skopeo push       {push:.2f} s (setup, not measured)")
        print(f"load average      {', '.join(f'{x:.1f}' for x in loads)} (before each round)")
        for k, label in (("registry", "registry scan"), ("archive", "oci-archive scan"),
                         ("fetch", "fetch every blob")):  # fmt: skip
            runs = ", ".join(f"{x:.2f}" for x in rounds[k])
            print(f"{label:17s} median {med[k]:.2f} s  [{runs}]")
        print(f"inflate floor     {floor:.2f} s (one thread, every layer)")
        print(f"peak RSS          {max(rss):.0f} MiB (registry scan; target < 500 MB)")
        ratio = med["registry"] / med["archive"]
        print(f"registry / oci-archive  {ratio:.2f}x (target 1.3x)")
        if args.cold:
            # a cold machine: the registry's blob files not in the page cache, and no
            # compiled bytecode for gpusbom and its dependencies (a fresh install / image)
            evict(stored)
            cold_io = run_scan(reg)[0]
            evict([archive])
            cold_arc = run_scan(arc)[0]
            with tempfile.TemporaryDirectory() as pyc:
                env = {"PYTHONPYCACHEPREFIX": pyc}
                cold_pyc = run_scan(reg, env)[0]
                warm_again = run_scan(reg)[0]
            print(f"cold page cache   registry {cold_io:.2f} s, oci-archive {cold_arc:.2f} s")
            print(f"no bytecode       registry {cold_pyc:.2f} s (warm again {warm_again:.2f} s)")
        ok = max(rss) * 1.048576 < 500 and ratio <= 1.3
        print("result            " + ("within target" if ok else "TARGET MISSED"))
        return 0 if ok or not args.check else 1
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
