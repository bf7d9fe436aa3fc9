"""Binary classifier rows: which bytes of which files name which product at which version.

Data, in the manner of Syft's ``classifiers.go`` but GPU-aware, read by
:mod:`gpusbom.collectors._classify`. One :class:`Row` holds:

* ``globs``: file base-name globs the row applies to (``libnccl.so*``; auditwheel and
  delocate renames ``libnccl-<hash>.so.2`` are covered by the ``-*`` forms;
  ``<executable>``: any ELF executable the scan analyses) and ``elf``: an ELF predicate
  (``any``, ``exec``: executables and PIE, ``lib``: shared objects);
* the evidence to read, one of

  - ``rodata``: ``pattern``, a regex over the file bytes beginning with the literal
    ``anchor`` (found with ``bytes.find`` as the layer streams; group ``v`` is the version,
    or no group for presence only);
  - ``symbol``: the constant the getter ``symbol`` returns (``getter="return"``) or stores
    through its first / second argument (``"out"`` / ``"out1"``), decoded statically by
    :func:`gpusbom.binary.getters.read_getter` (needs the file's content: ``capture``);

* ``product``: the product id the collectors use (``nccl``, ``cudnn``, ``hip-runtime`` ...);
* ``rule``: how the raw value becomes a version (see :data:`RULES`);
* ``confidence``: ``high`` (the product's own full version), ``medium`` (a short form:
  major.minor only, or no build number) or ``low`` (presence only);
* ``source``: the pinned real artifact the row's snippet test cuts its bytes from
  (``wheel`` / ``deb`` / ``nvcc`` + name, version, member), as Syft's snippets record it.

Rows never execute anything; a row that does not match leaves the file to the other
sources (file name, package metadata). The sibling-file rows of frameworks (``version.py``)
are in :mod:`gpusbom.collectors.frameworks`, listed in :data:`SIBLING_ROWS` for the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["ROWS", "RULES", "SIBLING_ROWS", "Row", "Source", "apply_rule"]


@dataclass(frozen=True)
class Source:
    """Where a row's snippet comes from: a pinned real artifact and the member in it."""

    kind: Literal["wheel", "deb", "nvcc"]
    name: str
    version: str
    member: str
    expect: str  # the version (or "present") the row must give on that member
    file: str = ""  # the artifact's file name (wheel) or pool path (deb), as pinned
    sha256: str = ""
    size: int = 0


@dataclass(frozen=True)
class Row:
    id: str
    product: str
    stack: str
    globs: tuple[str, ...]
    evidence: Literal["rodata", "symbol"]
    rule: str
    confidence: Literal["high", "medium", "low"]
    source: Source
    elf: Literal["any", "exec", "lib"] = "any"
    anchor: bytes = b""
    pattern: bytes = b""
    symbol: str = ""
    getter: Literal["return", "out", "out1"] = "return"
    #: bytes of content a symbol row needs kept (larger files are left to rodata rows)
    capture: int = 0
    #: symbol tables searched, in order
    tables: tuple[str, ...] = (".dynsym", ".symtab")
    note: str = ""


def _code(major: int, minor: int, patch: int | None) -> str:
    return f"{major}.{minor}" if patch is None else f"{major}.{minor}.{patch}"


def _mmp(value: int, m: int, n: int) -> tuple[int, int, int]:
    return value // m, value % m // n, value % n


#: rule name -> (raw value -> version, or None when the value is implausible)
RULES: dict[str, str] = {
    "verbatim": "the regex group as is",
    "code-10000": "major*10000 + minor*100 + patch (NCCL >= 2.9, cuDNN 9, cuBLASLt)",
    "code-1000": "major*1000 + minor*100 + patch (cuDNN 7/8)",
    "cuda-code": "major*1000 + minor*10 (CUDART_VERSION: major.minor only)",
    "hip-code": "major*10000000 + minor*100000 + patch (HIP_VERSION)",
    "presence": "no version: the product is present",
}


def apply_rule(rule: str, raw: str | int) -> str | None:
    """The version a raw value means under ``rule``; None when implausible for it."""
    if rule == "verbatim":
        return str(raw) or None
    if rule == "presence":
        return None
    v = int(raw)
    if rule == "code-10000":
        major, minor, patch = _mmp(v, 10000, 100)
        return _code(major, minor, patch) if 1 <= major <= 99 else None
    if rule == "code-1000":
        major, minor, patch = _mmp(v, 1000, 100)
        return _code(major, minor, patch) if 5 <= major <= 8 and minor <= 9 else None
    if rule == "cuda-code":
        major, rest = divmod(v, 1000)
        return _code(major, rest // 10, None) if 7 <= major <= 30 and rest % 10 == 0 else None
    if rule == "hip-code":
        major, minor, patch = _mmp(v, 10_000_000, 100_000)
        return _code(major, minor, patch) if 1 <= major <= 20 else None
    raise ValueError(f"unknown version rule {rule!r}")


_NVRTC_RX = rb"Cuda compilation tools, release \d+\.\d+, V(?P<v>\d+\.\d+\.\d+)"

ROWS: tuple[Row, ...] = (
    Row(
        "nvrtc-rodata", "nvrtc", "cuda",
        ("libnvrtc.so*", "libnvrtc-*.so*"),
        "rodata", "verbatim", "high",
        Source("wheel", "nvidia-cuda-nvrtc-cu12", "12.6.77",
               "nvidia/cuda_nvrtc/lib/libnvrtc.so.12", "12.6.77",
               "nvidia_cuda_nvrtc_cu12-12.6.77-py3-none-manylinux2014_x86_64.whl",
               "35b0cc6ee3a9636d5409133e79273ce1f3fd087abb0532d2d2e8fff1fe9efc53", 23650380),
        elf="lib",
        anchor=b"Cuda compilation tools, release ", pattern=_NVRTC_RX,
        note="NVRTC embeds the compiler's identification; the file name gives 12 or 12.6",
    ),
    Row(
        "nccl-rodata", "nccl", "cuda",
        ("libnccl.so*", "libnccl-*.so*"),
        "rodata", "verbatim", "high",
        Source("wheel", "nvidia-nccl-cu12", "2.19.3", "nvidia/nccl/lib/libnccl.so.2", "2.19.3",
               "nvidia_nccl_cu12-2.19.3-py3-none-manylinux1_x86_64.whl",
               "a9734707a2c96443331c1e48c717024aa6678a0e2a4cb66b2c364d18cee6b48d", 165987969),
        anchor=b"NCCL version ",
        pattern=rb"NCCL version (?P<v>\d+\.\d+\.\d+)(?:\+cuda[0-9.]+)?\x00",
        note="the banner NCCL prints with NCCL_DEBUG=VERSION; also in statically linked NCCL",
    ),
    Row(
        "nccl-getter", "nccl", "cuda",
        ("libnccl.so*", "libnccl-*.so*"),
        "symbol", "code-10000", "high",
        Source("wheel", "nvidia-nccl-cu12", "2.19.3", "nvidia/nccl/lib/libnccl.so.2", "2.19.3",
               "nvidia_nccl_cu12-2.19.3-py3-none-manylinux1_x86_64.whl",
               "a9734707a2c96443331c1e48c717024aa6678a0e2a4cb66b2c364d18cee6b48d", 165987969),
        symbol="ncclGetVersion", getter="out", capture=256 << 20,
        note="leaf: mov dword [rdi], NCCL_VERSION_CODE",
    ),
    Row(
        "cudnn9-getter", "cudnn", "cuda",
        ("libcudnn_graph.so*", "libcudnn_graph-*.so*"),
        "symbol", "code-10000", "high",
        Source("wheel", "nvidia-cudnn-cu12", "9.1.0.70",
               "nvidia/cudnn/lib/libcudnn_graph.so.9", "9.1.0",
               "nvidia_cudnn_cu12-9.1.0.70-py3-none-manylinux2014_x86_64.whl",
               "165764f44ef8c61fcdfdfdbe769d687e06374059fbb388b6c89ecb0e28793a6f", 664752741),
        symbol="cudnnGetVersion", getter="return", capture=256 << 20,
        note="cuDNN 9: the constant is in libcudnn_graph; libcudnn.so.9 forwards via dlsym",
    ),
    Row(
        "cudnn8-getter", "cudnn", "cuda",
        ("libcudnn_ops_infer.so*", "libcudnn_ops_infer-*.so*"),
        "symbol", "code-1000", "high",
        Source("wheel", "nvidia-cudnn-cu11", "8.9.5.30",
               "nvidia/cudnn/lib/libcudnn_ops_infer.so.8", "8.9.5",
               "nvidia_cudnn_cu11-8.9.5.30-py3-none-manylinux1_x86_64.whl",
               "df16c962ecc1c38ab6ca579c058e801c60a3e5e2c5349a2dcb88b29f0351fb6b", 696789613),
        symbol="cudnnGetVersion", getter="return", capture=256 << 20,
        note="cuDNN 8: libcudnn.so.8 forwards to libcudnn_ops_infer (CUDNN_VERSION 8905)",
    ),
    Row(
        "cudart-getter", "cudart", "cuda",
        ("libcudart.so*", "libcudart-*.so*"),
        "symbol", "cuda-code", "medium",
        Source("wheel", "nvidia-cuda-runtime-cu12", "12.4.127",
               "nvidia/cuda_runtime/lib/libcudart.so.12", "12.4",
               "nvidia_cuda_runtime_cu12-12.4.127-py3-none-manylinux2014_x86_64.whl",
               "64403288fa2136ee8e467cdc9c9427e0434110899d07c779f25b5c068934faa5", 883737),
        elf="lib", symbol="cudaRuntimeGetVersion", getter="out", capture=64 << 20,
        note="CUDART_VERSION is major*1000+minor*10: a short form (12.4 of 12.4.127)",
    ),
    Row(
        "cudart-static-rodata", "cudart", "cuda",
        ("*.so*", "<executable>"),
        "rodata", "presence", "low",
        Source("nvcc", "nvcc", "13.0.88", "app (nvcc -cudart static)", "present"),
        anchor=b"libcudart_static_", pattern=rb"libcudart_static_[0-9a-f]{40}",
        note="the static CUDA runtime's internal symbol names (unstripped binaries)",
    ),
    Row(
        "cudart-static-getter", "cudart", "cuda",
        ("*.so*", "<executable>"),
        "symbol", "cuda-code", "medium",
        Source("nvcc", "nvcc", "13.0.88", "app (nvcc -cudart static)", "13.0"),
        symbol="cudaRuntimeGetVersion", getter="out", capture=64 << 20, tables=(".symtab",),
        note="static cudart: a local .symtab symbol of the executable or library",
    ),
    Row(
        "hip-getter", "hip-runtime", "rocm",
        ("libamdhip64.so*", "libamdhip64-*.so*"),
        "symbol", "hip-code", "high",
        Source("deb", "libamdhip64-5", "5.2.3-8",
               "usr/lib/x86_64-linux-gnu/libamdhip64.so.5.2.21153", "5.2.21153",
               "pool/main/r/rocm-hipamd/libamdhip64-5_5.2.3-8_amd64.deb",
               "e89c3757b6ca16b7a03374a0a42402ab19e9e7000251d47379838be965330ebd", 4865232),
        symbol="hipRuntimeGetVersion", getter="out", capture=256 << 20,
        note="HIP_VERSION: HIP's own numbering; rocm.py maps it to its ROCm release",
    ),
    Row(
        "ocl-icd-rodata", "opencl-icd-loader", "opencl",
        ("libOpenCL.so*",),
        "rodata", "verbatim", "high",
        Source("deb", "ocl-icd-libopencl1", "2.3.1-1",
               "usr/lib/x86_64-linux-gnu/libOpenCL.so.1.0.0", "2.3.1",
               "pool/main/o/ocl-icd/ocl-icd-libopencl1_2.3.1-1_amd64.deb",
               "ddd8509c0430545173752bed272c7f44f8b5f7d125265b20456207aaefbb52c8", 43016),
        anchor=b"OpenCL ICD Loader\x00",
        pattern=rb"OpenCL ICD Loader\x00(?P<v>\d+\.\d+\.\d+)\x00",
        note="ocl-icd's clGetICDLoaderInfoOCLICD strings (name, then version)",
    ),
)  # fmt: skip

#: Sibling-file rows (read by the frameworks collector when a dist-info is missing).
SIBLING_ROWS: tuple[tuple[str, str, str], ...] = (
    ("pytorch", "torch/version.py", "__version__, cuda, hip, xpu, git_version"),
    ("cupy", "cupy/_version.py", "__version__"),
    ("jax", "jaxlib/version.py", "_version"),
)
