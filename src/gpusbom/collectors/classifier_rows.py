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
               "nvidia/cuda_nvrtc/lib/libnvrtc.so.12", "12.6.77"),
        elf="lib",
        anchor=b"Cuda compilation tools, release ", pattern=_NVRTC_RX,
        note="NVRTC embeds the compiler's identification; the file name gives 12 or 12.6",
    ),
    Row(
        "nccl-rodata", "nccl", "cuda",
        ("libnccl.so*", "libnccl-*.so*"),
        "rodata", "verbatim", "high",
        Source("wheel", "nvidia-nccl-cu12", "2.19.3", "nvidia/nccl/lib/libnccl.so.2", "2.19.3"),
        anchor=b"NCCL version ",
        pattern=rb"NCCL version (?P<v>\d+\.\d+\.\d+)(?:\+cuda[0-9.]+)?\x00",
        note="the banner NCCL prints with NCCL_DEBUG=VERSION; also in statically linked NCCL",
    ),
    Row(
        "nccl-getter", "nccl", "cuda",
        ("libnccl.so*", "libnccl-*.so*"),
        "symbol", "code-10000", "high",
        Source("wheel", "nvidia-nccl-cu12", "2.19.3", "nvidia/nccl/lib/libnccl.so.2", "2.19.3"),
        symbol="ncclGetVersion", getter="out", capture=256 << 20,
        note="leaf: mov dword [rdi], NCCL_VERSION_CODE",
    ),
    Row(
        "cudnn9-getter", "cudnn", "cuda",
        ("libcudnn_graph.so*", "libcudnn_graph-*.so*"),
        "symbol", "code-10000", "high",
        Source("wheel", "nvidia-cudnn-cu12", "9.1.0.70",
               "nvidia/cudnn/lib/libcudnn_graph.so.9", "9.1.0"),
        symbol="cudnnGetVersion", getter="return", capture=256 << 20,
        note="cuDNN 9: the constant is in libcudnn_graph; libcudnn.so.9 forwards via dlsym",
    ),
    Row(
        "cudnn8-getter", "cudnn", "cuda",
        ("libcudnn_ops_infer.so*", "libcudnn_ops_infer-*.so*"),
        "symbol", "code-1000", "high",
        Source("wheel", "nvidia-cudnn-cu11", "8.9.5.30",
               "nvidia/cudnn/lib/libcudnn_ops_infer.so.8", "8.9.5"),
        symbol="cudnnGetVersion", getter="return", capture=256 << 20,
        note="cuDNN 8: libcudnn.so.8 forwards to libcudnn_ops_infer (CUDNN_VERSION 8905)",
    ),
    Row(
        "cudart-getter", "cudart", "cuda",
        ("libcudart.so*", "libcudart-*.so*"),
        "symbol", "cuda-code", "medium",
        Source("wheel", "nvidia-cuda-runtime-cu12", "12.4.127",
               "nvidia/cuda_runtime/lib/libcudart.so.12", "12.4"),
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
        "cublaslt-getter", "cublas", "cuda",
        ("libcublasLt.so*", "libcublasLt-*.so*"),
        "symbol", "code-10000", "medium",
        Source("wheel", "nvidia-cublas-cu12", "12.1.3.1",
               "nvidia/cublas/lib/libcublasLt.so.12", "12.1.3"),
        symbol="cublasLtGetVersion", getter="return", capture=0,
        note="no build number (12.1.3 of 12.1.3.1); libcublas forwards cublasGetVersion "
        "to cublasLtGetVersion (no constant of its own); content is not kept by default "
        "(cuBLASLt is 0.5-0.75 GB)",
    ),
    Row(
        "cutlass-rodata", "cutlass", "cuda",
        ("libtorch_cuda*.so*", "libtorch-*.so*", "libtorch_cuda-*.so*"),
        "rodata", "presence", "low",
        Source("wheel", "torch", "2.8.0", "torch/lib/libtorch_cuda.so", "present"),
        elf="lib", anchor=b"N7cutlass",
        pattern=rb"N7cutlass(?:6half_t|10bfloat16_t|4gemm)",
        note="CUTLASS is header-only: instantiated kernels name it, no version is compiled in",
    ),
    Row(
        "hip-getter", "hip-runtime", "rocm",
        ("libamdhip64.so*", "libamdhip64-*.so*"),
        "symbol", "hip-code", "high",
        Source("deb", "libamdhip64-5", "5.2.3-8",
               "usr/lib/x86_64-linux-gnu/libamdhip64.so.5.2.21153", "5.2.21153"),
        symbol="hipRuntimeGetVersion", getter="out", capture=256 << 20,
        note="HIP_VERSION: HIP's own numbering; rocm.py maps it to its ROCm release",
    ),
    Row(
        "ocl-icd-rodata", "opencl-icd-loader", "opencl",
        ("libOpenCL.so*",),
        "rodata", "verbatim", "high",
        Source("deb", "ocl-icd-libopencl1", "2.3.1-1",
               "usr/lib/x86_64-linux-gnu/libOpenCL.so.1.0.0", "2.3.1"),
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
