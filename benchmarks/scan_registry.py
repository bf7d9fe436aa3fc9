#!/usr/bin/env python3
"""Pull-and-scan from a local registry: wall time and peak RSS of ``gpusbom scan --image registry:``.

Takes the 1 GB+ OCI layout that ``benchmarks/scan_image.py`` builds (and builds it when it
is missing), starts Debian's ``docker-registry`` on 127.0.0.1 with a temporary storage root,
pushes the layout with ``skopeo copy --preserve-digests``, then runs
``gpusbom scan --image registry:127.0.0.1:PORT/bench/big:latest --insecure-registry ...`` as a
child process. Its peak RSS is read from ``wait4`` for that child alone (not skopeo's or
the registry's). For reference it also times the inflate-only floor and the same scan from
the ``oci:`` layout on disk.

Target (issue #8): peak RSS under 500 MB while pulling a 1 GB+ image.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
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


def run_scan(args: list[str]) -> tuple[float, float, int, str]:
    """(wall s, peak RSS MiB, exit code, stderr) of one ``gpusbom scan`` child."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gpusbom", "scan", *args, "-q", "-o", "json=/dev/null"],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        err.seek(0)
        text = err.read().decode("utf-8", "replace")
    return wall, usage.ru_maxrss / 1024.0, proc.returncode, text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=1100, help="compressed layer bytes to build")
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    ap.add_argument("--image", help="an existing oci:DIR to push instead of building one")
    ap.add_argument("--repeat", type=int, default=2, help="take the best wall time of N pulls")
    ap.add_argument("--no-compare", action="store_true", help="skip the floor and the oci: scan")
    ap.add_argument("--check", action="store_true", help="exit 1 when the RSS target is missed")
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
        ref = ["--image", f"registry:{host}/bench/big:latest", "--insecure-registry", host]
        runs = [run_scan(ref) for _ in range(args.repeat)]
        for _, _, rc, err in runs:
            if rc != 0:
                print(f"registry scan failed (exit {rc}): {err}", file=sys.stderr)
                return 2
        wall = min(r[0] for r in runs)
        rss = max(r[1] for r in runs)
        _, comp, raw = decompress_floor(blobs)
        print(f"image             {layout} ({len(blobs)} layers)")
        print(
            f"layer bytes       {comp / 1e6:,.0f} MB compressed, {raw / 1e6:,.0f} MB uncompressed"
        )
        print(f"skopeo push       {push:.2f} s (setup, not measured)")
        print(f"registry scan     {wall:.2f} s  ({comp / 1e6 / wall:,.0f} MB/s pulled)  "
              f"best of {len(runs)}: {', '.join(f'{r[0]:.2f}' for r in runs)}")  # fmt: skip
        print(f"peak RSS          {rss:.0f} MiB (target < 500 MB)")
        if not args.no_compare:
            floor = decompress_floor(blobs)[0]
            owall, orss, orc, _ = run_scan(["--image", f"oci:{layout}"])
            print(f"floor (inflate)   {floor:.2f} s")
            print(
                f"oci: scan         {owall:.2f} s, peak RSS {orss:.0f} MiB"
                + ("" if orc == 0 else f" (exit {orc})")
            )
            print(
                f"registry / oci:   {wall / owall:.2f}x wall, registry / floor {wall / floor:.2f}x"
            )
        ok = rss * 1.048576 < 500
        print("result            " + ("within target" if ok else "TARGET MISSED"))
        return 0 if ok or not args.check else 1
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
