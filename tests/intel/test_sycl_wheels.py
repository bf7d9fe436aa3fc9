"""Intel SYCL device code of real PyPI wheels (issue 31, item 4).

* dpctl 0.22.1: ``libDPCTLSyclInterface.so`` holds JIT code only (a ``spir64`` SPIR-V image in
  ``__CLANG_OFFLOAD_BUNDLE__sycl-spir64``);
* vllm-xpu-kernels 0.1.16.2: ``libgrouped_gemm_xe_default.so`` holds AOT code
  (``spir64_gen``): three ocloc fat binaries, each with zebins for PVC (12.60.7), BMG G21
  (20.1.0), BMG G31 (20.2.0), a config the table does not know (35.11.0) and ``generic_ir``.

The scanner's reading is checked against an independent one: pyelftools walks the
``.tgtimg`` image table (its relocations give each image's address), the ``ar`` archives it
points at and the ``.note.intelgt.compat`` notes of each zebin.
"""

from __future__ import annotations

import io
import json
import struct
import zipfile
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from gpusbom.binary.sycl_stream import SyclScanner
from gpusbom.cli.app import main
from gpusbom.compat.intel import config_name, lookup_device, pci_family
from tests.pinned_wheels import CACHE, pinned_wheel

M228 = ("--platform", "manylinux_2_28_x86_64", "--python-version", "3.11")
DPCTL = ("dpctl-0.22.1-0-cp311-cp311-manylinux_2_28_x86_64.whl", "dpctl==0.22.1",
         "19b90062f02ca9a8e8c534169e607b251c05d0da51a4c21d3c3e7c96d9e70bb7",
         "dpctl/libDPCTLSyclInterface.so")
VLLM = ("vllm_xpu_kernels-0.1.16.2-cp38-abi3-manylinux_2_28_x86_64.whl",
        "vllm-xpu-kernels==0.1.16.2",
        "86bfa26abbb605fab485236a386e6de07f76320177c456fa96e55c27502af17a",
        "vllm_xpu_kernels/libgrouped_gemm_xe_default.so")
SP = "usr/local/lib/python3.11/site-packages"


def _extract(spec: tuple[str, str, str, str], dest: Path) -> Path:
    whl = pinned_wheel(spec[0], spec[1], spec[2], dest=CACHE / "intel", pip_args=M228,
                       timeout=900)
    out = dest / SP / spec[3]
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(whl) as z:
        out.write_bytes(z.read(spec[3]))
    return out


@pytest.fixture(scope="module")
def sycl_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sycl")
    _extract(DPCTL, root)
    _extract(VLLM, root)
    return root


def _stream(path: Path, chunk: int) -> dict:  # type: ignore[type-arg]
    s = SyclScanner(path.name)
    with open(path, "rb") as f:
        while b := f.read(chunk):
            s.feed(b)
    r = s.close()
    assert r is not None
    return r["intel"]  # type: ignore[no-any-return]


def _independent(path: Path) -> tuple[set[str], set[int], set[str]]:
    """(sycl targets of .tgtsym, zebin product configs, ocloc member names) via pyelftools."""
    data = path.read_bytes()
    elf = ELFFile(io.BytesIO(data))
    targets = {n.split(b".", 1)[0].decode()[len("sycl-"):].split("-")[0]
               for n in (elf.get_section_by_name(".tgtsym") or elf.get_section_by_name(
                   ".shstrtab")).data().split(b"\0") if n.startswith(b"sycl-")}
    for s in elf.iter_sections():
        if s.name.startswith("__CLANG_OFFLOAD_BUNDLE__sycl-"):
            targets.add(s.name[len("__CLANG_OFFLOAD_BUNDLE__sycl-"):])
    tgt = elf.get_section_by_name(".tgtimg")
    rel = {r["r_offset"]: r["r_addend"]
           for r in elf.get_section_by_name(".rela.dyn").iter_relocations()}
    seg = [s for s in elf.iter_segments() if s["p_type"] == "PT_LOAD"]

    def off(addr: int) -> int:
        s = next(s for s in seg if s["p_vaddr"] <= addr < s["p_vaddr"] + s["p_filesz"])
        return addr - s["p_vaddr"] + s["p_offset"]

    configs: set[int] = set()
    members: set[str] = set()
    for i in range(0, tgt["sh_size"], 16):
        start = off(rel[tgt["sh_addr"] + i])
        (size,) = struct.unpack_from("<Q", tgt.data(), i + 8)
        img = data[start : start + size]
        if not img.startswith(b"!<arch>\n"):
            continue
        p = 8
        while p + 60 <= len(img):
            name = img[p : p + 16].rstrip(b" ").rstrip(b"/").decode()
            n = int(img[p + 48 : p + 58])
            body = img[p + 60 : p + 60 + n]
            if not name.startswith("pad_"):
                members.add(name)
            if body[:4] == b"\x7fELF" and struct.unpack_from("<H", body, 18)[0] == 205:
                z = ELFFile(io.BytesIO(body))
                note = z.get_section_by_name(".note.intelgt.compat").data()
                q = 0
                while q < len(note):
                    nz, dz, ty = struct.unpack_from("<III", note, q)
                    d0 = q + 12 + ((nz + 3) & ~3)
                    if ty == 6:
                        configs.add(struct.unpack_from("<I", note, d0)[0])
                    q = d0 + ((dz + 3) & ~3)
            p += 60 + n + (n & 1)
    return targets, configs, members


@pytest.mark.parametrize("chunk", [1 << 20, 4093])
def test_jit_only_dpctl(sycl_dir: Path, chunk: int) -> None:
    lib = sycl_dir / SP / DPCTL[3]
    got = _stream(lib, chunk)
    targets, configs, members = _independent(lib)
    assert targets == {"spir64"}
    assert got["sycl"] == sorted(targets) and got["configs"] == [] == sorted(configs)
    assert got["members"] == [] and got["zebins"] == 0 and "errors" not in got


@pytest.mark.parametrize("chunk", [1 << 20, 4093])
def test_aot_vllm_xpu_kernels(sycl_dir: Path, chunk: int) -> None:
    lib = sycl_dir / SP / VLLM[3]
    got = _stream(lib, chunk)
    targets, configs, members = _independent(lib)
    assert got["sycl"] == sorted(targets) == ["spir64_gen"]
    assert got["configs"] == sorted(configs)
    assert got["members"] == sorted(members)
    assert "generic_ir" in members and got["archives"] == 3 and "errors" not in got
    # names from Intel's table; a config it does not list is marked, not guessed
    assert sorted(config_name(c) for c in configs) == [
        "bmg-g21-a0", "bmg-g31-a0", "ip-35.11.0", "pvc-xt-c0"]


def test_device_ids() -> None:
    assert pci_family("0x0bd5") == ("pvc", "Intel(R) Data Center GPU Max 1550")
    assert pci_family("56A0") == ("dg2", "Intel(R) Arc(TM) A770 Graphics")
    assert pci_family(0xE20B) == ("bmg", "Intel(R) Arc(TM) B580 Graphics")
    assert pci_family("0x1234") is None
    assert lookup_device("pvc") is not None and lookup_device("pvc")[0] == "pvc"  # type: ignore[index]
    assert lookup_device("acm-g11") is not None and lookup_device("acm-g11")[0] == "dg2"  # type: ignore[index]
    assert lookup_device("h100") is None


GPUS = {"intel:0x0bd5": "pvc", "intel:0x56a0": "dg2", "intel:0xe20b": "bmg"}
#: per file and GPU: AOT zebins for pvc and bmg load; DG2 has none, generic_ir is JIT-compiled;
#: dpctl's SPIR-V is JIT-compiled everywhere
EXPECTED = {
    ("libDPCTLSyclInterface.so", "pvc"): "runs-with-jit",
    ("libDPCTLSyclInterface.so", "dg2"): "runs-with-jit",
    ("libDPCTLSyclInterface.so", "bmg"): "runs-with-jit",
    ("libgrouped_gemm_xe_default.so", "pvc"): "runs",
    ("libgrouped_gemm_xe_default.so", "dg2"): "runs-with-jit",
    ("libgrouped_gemm_xe_default.so", "bmg"): "runs",
}


def test_check_pvc_dg2_bmg(sycl_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "check.json"
    args = ["check", f"dir:{sycl_dir}"]
    for g in GPUS:
        args += ["--gpu", g]
    main([*args, "-o", f"json={out}"])
    doc = json.loads(out.read_text())
    got: dict[tuple[str, str], str] = {}
    for v, fam in zip(doc["verdicts"], GPUS.values(), strict=True):
        assert v["gpu"]["vendor"] == "intel"
        for lib in v["libraries"]:
            if lib["kind"] == "intel-code":
                got[(lib["evidence"][0].rsplit("/", 1)[-1], fam)] = lib["verdict"]
            else:  # no SYCL runtime / Level Zero driver in this directory
                assert lib["kind"] == "intel-runtime" and lib["verdict"] == "will-fail"
        assert v["verdict"] == "will-fail"
        assert any("no Intel GPU runtime" in r for r in v["reasons"])
    assert got == EXPECTED
    dg2 = next(v for v in doc["verdicts"] if "A770" in v["target"])
    assert any("no AOT image for dg2 (has bmg-g21-a0, bmg-g31-a0, ip-35.11.0, pvc-xt-c0)" in r
               for r in dg2["reasons"])
