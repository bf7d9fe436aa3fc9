"""Per-file device code of real wheels against NVIDIA's own cuobjdump (issue 31, acceptance 2).

The nvidia-wheels image (cuDNN 9.1 / 8.9, NCCL 2.19, cuBLAS 12.9, cuRAND, nvJPEG, NVRTC),
torch 1.13.1 (PyPI's Linux wheel, CUDA 11.7) and the torch CPU wheel: every shared library of
those wheels is extracted from the pinned wheel and listed with ``cuobjdump --list-elf
--list-ptx`` (the pinned nvidia-cuda-cuobjdump 13.5 wheel; where it stops early -- "Invalid
ELF", "Support for 'sm_35' has been removed" -- cuobjdump 12.8 from the pinned triton 3.6.0
wheel, which reads both). gpusbom's record of that file (``device_code``) must hold exactly
the SASS architectures cuobjdump lists as ELF files and the PTX architectures it lists as PTX
files, plus what cuobjdump lists in the fatbin containers that lie *outside* ``.nv_fatbin``:
cuobjdump lists only that section, while gpusbom's streaming scanner finds every container
(cuBLASLt's ``.cask_resource``, static CUPTI's in ``.rodata``, static cuFFT's in ``.data``,
``__nv_relfatbin``). Those containers are found here independently (magic and header checks,
pyelftools for the sections), cut out of the file and given to cuobjdump as a fatbin file.
A library cuobjdump finds no device code in has no record.
"""

from __future__ import annotations

import importlib.util
import json
import mmap
import re
import struct
import subprocess
import sys
import zipfile
from functools import cache
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "binary"))
from gpubin_oracles import get_cuobjdump  # noqa: E402

SITE = "/usr/local/lib/python3.11/site-packages/"
_ELF = re.compile(r"^ELF file\s+\d+: .*\.(sm_\d+[a-z]?)\.cubin$", re.M)
_PTX = re.compile(r"^PTX file\s+\d+: .*\.sm_(\d+[a-z]?)\.ptx$", re.M)
_SO = re.compile(r"\.so(\.\d+)*$")
_FATBIN_MAGIC = b"\x50\xed\x55\xba"


@cache
def _cuobjdump12() -> str | None:
    """cuobjdump 12.8 of the triton wheel (a test dependency), or None: it still reads sm_35/
    sm_37 cubins (13.x refuses them) and NCCL 2.19's sm_70+ cubins (13.5: "Invalid ELF")."""
    spec = importlib.util.find_spec("triton")
    if spec is None or not spec.submodule_search_locations:
        return None
    exe = Path(list(spec.submodule_search_locations)[0]) / "backends/nvidia/bin/cuobjdump"
    if not exe.is_file():
        return None
    p = subprocess.run([str(exe), "--version"], capture_output=True, text=True, check=False)
    return str(exe) if p.returncode == 0 and "release 12." in p.stdout else None


def _list(exe: str, path: Path) -> tuple[set[str], set[str], bool]:
    p = subprocess.run([exe, "--list-elf", "--list-ptx", str(path)], capture_output=True,
                       text=True, timeout=600, check=False)
    out = p.stdout
    partial = "Invalid ELF" in p.stderr or "has been removed" in p.stderr
    if p.returncode != 0 and not partial and "does not contain device code" not in p.stderr + out:
        raise AssertionError(f"cuobjdump {path}: {p.returncode} {p.stderr.strip()[-300:]}")
    return set(_ELF.findall(out)), {f"compute_{x}" for x in _PTX.findall(out)}, not partial


def _cuobjdump(exe: str, path: Path) -> tuple[set[str], set[str], bool, str]:
    """(SASS, PTX, complete, the cuobjdump that listed it). cuobjdump 13.5 stops at the first
    embedded cubin it refuses: NCCL 2.19's sm_70 one ("Invalid ELF": an executable cubin with
    SHT_RELA sections; sm_50/60/61 carry SHT_REL) and torch 1.13's sm_35/sm_37 ones ("Support
    for 'sm_37' has been removed"); what it listed before is a subset. Then cuobjdump 12.8."""
    sass, ptx, complete = _list(exe, path)
    old = _cuobjdump12()
    if not complete and old:
        sass, ptx, complete = _list(old, path)
        exe = old
    return sass, ptx, complete, exe


def _outside(path: Path) -> list[tuple[int, int, str]]:
    """``(offset, size, section)`` of every fatbin container of an ELF file that is not in
    ``.nv_fatbin``: a container magic with version 1, a 16-byte header, and a first entry whose
    kind is PTX/ELF/NVVM and whose sizes fit the body (as the streaming scanner checks)."""
    from elftools.elf.elffile import ELFFile

    with open(path, "rb") as f:
        secs = [(s["sh_offset"], s["sh_offset"] + s["sh_size"], s.name)
                for s in ELFFile(f).iter_sections() if s["sh_type"] != "SHT_NOBITS"]
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    found = []
    try:
        at = data.find(_FATBIN_MAGIC)
        while at >= 0:
            nxt = at + 1
            _, version, hsize, body = struct.unpack_from("<IHHQ", data, at)
            if version == 1 and hsize == 16 and 64 <= body <= len(data) - at - 16:
                kind, _, ehs, psize = struct.unpack_from("<HHIQ", data, at + 16)
                if kind in (1, 2, 8) and 64 <= ehs <= 1 << 16 and ehs + psize <= body:
                    sec = next((n for a, b, n in secs if a <= at < b), "?")
                    if sec != ".nv_fatbin":
                        found.append((at, 16 + body, sec))
                    nxt = at + 16 + body
            at = data.find(_FATBIN_MAGIC, nxt)
    finally:
        data.close()
    return found


def _listed_outside(exe: str, path: Path, tmp: Path) -> tuple[set[str], set[str], dict[str, int]]:
    """What cuobjdump lists in the containers outside ``.nv_fatbin``, cut out into one fatbin
    file (containers 8-byte aligned, as in a section), and how many came from each section."""
    conts = _outside(path)
    where: dict[str, int] = {}
    if not conts:
        return set(), set(), where
    cut = tmp / "outside.fatbin"
    with open(path, "rb") as src, open(cut, "wb") as dst:
        for off, size, sec in conts:
            where[sec] = where.get(sec, 0) + 1
            src.seek(off)
            dst.write(src.read(size))
            dst.write(b"\0" * (-dst.tell() % 8))
    sass, ptx, complete, _ = _cuobjdump(exe, cut)
    cut.unlink()
    assert complete, f"cuobjdump stopped in the containers outside .nv_fatbin of {path}"
    return sass, ptx, where


def _listed(sass: str) -> str:
    """How cuobjdump --list-elf names an ELF entry: the family ``f`` variant without its
    suffix (nvcc -gencode code=sm_100f is listed as ``sm_100.cubin``; binary/fatbin.py)."""
    return sass[:-1] if sass.endswith("f") else sass


def _downloads() -> Path:
    from fixtures.fetch import cache_root

    return cache_root() / "downloads"


def _compare(scan: dict, wheels: list[Path], exe: str, tmp: Path,  # type: ignore[type-arg]
             outside: dict[str, dict[str, int]] | None = None) -> dict[str, int]:
    """Compare every shared library of ``wheels``; ``outside`` (when given) gets, for each file
    where gpusbom lists more than cuobjdump, the sections of its containers outside
    ``.nv_fatbin`` and how many there are in each."""
    records = {d["path"]: d for c in scan["components"] for d in c.get("device_code", [])}
    seen = {"files": 0, "with_code": 0, "sass": 0, "ptx": 0, "cuobjdump_partial": 0,
            "cuobjdump_12": 0, "outside_nv_fatbin": 0}
    mismatches = []
    for whl in wheels:
        with zipfile.ZipFile(whl) as z:
            for info in z.infolist():
                if not _SO.search(info.filename) or info.is_dir():
                    continue
                path = SITE + info.filename
                member = tmp / "m.so"
                with z.open(info) as src, open(member, "wb") as dst:
                    while chunk := src.read(1 << 22):
                        dst.write(chunk)
                elf, ptx, complete, used = _cuobjdump(exe, member)
                rec = records.get(path)
                got_sass = set((rec or {}).get("targets", {}).get("cuda:sass", "").split(",")) - {""}
                got_ptx = set((rec or {}).get("targets", {}).get("cuda:ptx", "").split(",")) - {""}
                listed = {_listed(x) for x in got_sass}
                seen["files"] += 1
                seen["cuobjdump_12"] += used != exe
                if elf or ptx:
                    seen["with_code"] += 1
                    seen["sass"] += len(elf)
                    seen["ptx"] += len(ptx)
                if not complete:  # no cuobjdump 12 here: what 13.5 listed before it stopped
                    seen["cuobjdump_partial"] += 1
                    print(f"cuobjdump partial on {path}: listed SASS {sorted(elf)} PTX "
                          f"{sorted(ptx)}; gpusbom SASS {sorted(got_sass)} PTX {sorted(got_ptx)}")
                    if not (elf <= got_sass and ptx <= got_ptx and (elf or got_sass)):
                        mismatches.append(f"{path}: cuobjdump (partial) SASS {sorted(elf)} "
                                          f"not within gpusbom SASS {sorted(got_sass)}")
                    member.unlink()
                    continue
                o_sass: set[str] = set()
                o_ptx: set[str] = set()
                if listed - elf or got_ptx - ptx:  # more than cuobjdump lists: from where?
                    o_sass, o_ptx, where = _listed_outside(exe, member, tmp)
                    seen["outside_nv_fatbin"] += 1
                    if outside is not None:
                        outside[info.filename] = where
                    print(f"{path}: containers outside .nv_fatbin {where}: cuobjdump lists SASS "
                          f"{sorted(o_sass - elf)} PTX {sorted(o_ptx - ptx)} there and not in "
                          f"the file")
                if (elf | o_sass, ptx | o_ptx) != (listed, got_ptx):
                    mismatches.append(f"{path}: cuobjdump SASS {sorted(elf)} PTX {sorted(ptx)} "
                                      f"(+ outside .nv_fatbin: SASS {sorted(o_sass)} PTX "
                                      f"{sorted(o_ptx)}); gpusbom SASS {sorted(got_sass)} PTX "
                                      f"{sorted(got_ptx)}")
                member.unlink()
    assert not mismatches, "\n".join(mismatches)
    return seen


#: the wheels the tests already pin (catalog classifier rows name them: name -> a member);
#: torch 1.13.1 is PyPI's Linux wheel (CUDA 11.7 inside), pinned by the static-NCCL rows
REAL_WHEELS = {"nvidia-cudnn-cu12": "libcudnn_graph.so.9", "nvidia-cudnn-cu11": "libcudnn_ops_infer",
               "nvidia-cublas-cu12": "libcublasLt.so.12", "nvidia-nccl-cu12": "libnccl.so.2",
               "torch": "libtorch_cuda_cpp.so"}

#: where the targets that gpusbom lists and cuobjdump does not (it reads only .nv_fatbin)
#: are, checked by cuobjdump on the containers cut out of there: cuBLASLt's kernel resources
#: (CUTLASS sm_100a/100f/103f/120f cubins, zstd); NCCL's relocatable fatbins (compute_90 PTX:
#: the only PTX of the file); torch 1.13.1's static cuFFT (.data: its kernel modules,
#: sm_35..sm_80 SASS + compute_86 PTX) and static CUPTI (.rodata, sm_35..sm_87 SASS)
OUTSIDE = {
    "nvidia-cublas-cu12": {"nvidia/cublas/lib/libcublasLt.so.12": {".cask_resource": 469}},
    "nvidia-nccl-cu12": {"nvidia/nccl/lib/libnccl.so.2": {"__nv_relfatbin": 112}},
    "torch": {"torch/lib/libtorch_cuda_cpp.so": {"__nv_relfatbin": 68, ".data": 318},
              "torch/lib/libtorch_cpu.so": {".rodata": 3}},
}


def _wheel(project: str) -> Path:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "binary"))
    from test_classifiers import _fetch

    from gpusbom.catalog.classifiers import ROWS

    row = next(r for r in ROWS if r.source.kind == "wheel" and r.source.name == project
               and REAL_WHEELS[project] in r.source.member)
    return _fetch(row)


@pytest.mark.parametrize("project", sorted(REAL_WHEELS))
def test_real_wheel_per_file_targets_match_cuobjdump(project: str, tmp_path: Path) -> None:
    """Every shared library of the wheel, installed under site-packages of a root and scanned
    (scan --root --analyze-binaries): gpusbom's per-file record against cuobjdump's list."""
    from gpusbom.cli.app import main

    exe = get_cuobjdump()
    if project == "torch" and _cuobjdump12() is None:
        pytest.fail("torch 1.13.1 needs cuobjdump 12 (the triton wheel's): 13.x refuses sm_35")
    whl = _wheel(project)
    root = tmp_path / "root"
    with zipfile.ZipFile(whl) as z:
        for info in z.infolist():
            if _SO.search(info.filename) and not info.is_dir():
                dst = root / SITE.strip("/") / info.filename
                dst.parent.mkdir(parents=True, exist_ok=True)
                with z.open(info) as src, open(dst, "wb") as f:
                    while chunk := src.read(1 << 22):
                        f.write(chunk)
    out = tmp_path / "scan.json"
    assert main(["scan", "--root", str(root), "--analyze-binaries", "-q", "-o", f"json={out}"]) == 0
    scan = json.loads(out.read_text())
    for p in root.rglob("*.so*"):  # the root's files, compared at their in-root paths
        p.unlink()
    outside: dict[str, dict[str, int]] = {}
    seen = _compare(scan, [whl], exe, tmp_path, outside)
    assert seen["with_code"] >= 1 and seen["sass"] >= seen["with_code"]
    print(project, json.dumps(seen))
    if _cuobjdump12():  # else NCCL is compared as a subset (what 13.5 listed before it stopped)
        assert outside == OUTSIDE.get(project, {})


def test_nvidia_wheels_image_per_file_targets_match_cuobjdump(wheels_scan: Path,
                                                               tmp_path: Path) -> None:
    """The nvidia-wheels fixture image (NCCL, cuRAND, nvJPEG, NVRTC, cudart wheels): the
    image scan's per-file records against cuobjdump on the same wheel members."""
    exe = get_cuobjdump()
    scan = json.loads(wheels_scan.read_text())
    owners = {(c["name"], c["version"]) for c in scan["components"]
              if c.get("ecosystem") == "pypi" and c.get("device_code")}
    assert {n for n, _ in owners} >= {"nvidia-nccl-cu12", "nvidia-curand-cu12"}
    wheels = []
    for name, version in sorted(owners):
        stem = f"{name.replace('-', '_')}-{version}-"
        found = sorted(p for p in _downloads().glob(f"{stem}*.whl"))
        assert found, f"no downloaded wheel {stem}*.whl for {name} {version}"
        wheels.append(found[0])
    seen = _compare(scan, wheels, exe, tmp_path)
    assert seen["with_code"] >= 3 and seen["sass"] > seen["with_code"]
    print(json.dumps(seen))


def test_torch_cpu_wheel_has_no_device_code(tmp_path: Path) -> None:
    from fixtures.build import ensure
    from gpusbom.cli.app import main

    exe = get_cuobjdump()
    paths = ensure("torch-cpu")
    out = tmp_path / "torch.json"
    assert main(["scan", paths.oci_ref, "-q", "-o", f"json={out}"]) == 0
    scan = json.loads(out.read_text())
    wheels = sorted(_downloads().glob("torch-2.13.0+cpu-*.whl"))
    if not wheels:
        pytest.fail("the torch-cpu fixture's wheel is not in the download cache")
    seen = _compare(scan, wheels, exe, tmp_path)
    assert seen["files"] > 5 and seen["with_code"] == 0
