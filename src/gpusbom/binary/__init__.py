"""GPU binary analysis: find and decode the device code embedded in host binaries.

* :mod:`gpusbom.binary.elf` -- locate GPU sections of an ELF file (headers only).
* :mod:`gpusbom.binary.fatbin` -- CUDA fatbin containers: SASS/PTX/NVVM entries, archs, PTX ISA,
  compression.
* :mod:`gpusbom.binary.hipbundle` -- clang offload bundles (HIP), plain and compressed (CCOB).

Every decoder reads a seekable binary file object in bounded pieces and raises only
:class:`BinaryFormatError` (a ``ValueError``) for malformed input; I/O errors propagate.

:func:`scan_binary` is the one-call entry point used by collectors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import BinaryIO

from gpusbom.binary.elf import BinaryFormatError, GpuSection, find_gpu_sections, is_elf
from gpusbom.binary.fatbin import (
    CudaTargets,
    FatbinEntry,
    cuda_targets,
    is_fatbin,
    iter_fatbin,
    list_fatbin,
    scan_cuda,
)
from gpusbom.binary.hipbundle import (
    BundleEntry,
    HipTargets,
    OffloadBundle,
    TargetId,
    hip_targets,
    is_bundle,
    iter_bundles,
    list_bundles,
    parse_target_id,
    scan_hip,
)

__all__ = [
    "BinaryFormatError",
    "BinaryTargets",
    "BundleEntry",
    "CudaTargets",
    "FatbinEntry",
    "GpuSection",
    "HipTargets",
    "OffloadBundle",
    "TargetId",
    "cuda_targets",
    "find_gpu_sections",
    "hip_targets",
    "is_bundle",
    "is_elf",
    "is_fatbin",
    "iter_bundles",
    "iter_fatbin",
    "list_bundles",
    "list_fatbin",
    "might_have_gpu_code",
    "parse_target_id",
    "scan_binary",
    "scan_cuda",
    "scan_hip",
]


@dataclass(frozen=True)
class BinaryTargets:
    """What :func:`scan_binary` found. ``cuda``/``hip`` are None when the file has no such code."""

    sections: tuple[GpuSection, ...] = ()
    cuda: CudaTargets | None = None
    hip: HipTargets | None = None
    errors: tuple[str, ...] = field(default_factory=tuple)


def might_have_gpu_code(head: bytes) -> bool:
    """Cheap pre-check on the first bytes of a file (24 are enough)."""
    return is_elf(head) or is_fatbin(head) or is_bundle(head)


def scan_binary(f: BinaryIO, *, name: str = "<binary>") -> BinaryTargets:
    """List the CUDA and HIP device targets of an ELF file, a standalone fatbin or a bundle.

    Never raises for malformed GPU data: problems go to ``errors`` (and to the per-kind
    ``errors``). Raises :class:`BinaryFormatError` only when the ELF headers themselves are
    unreadable. Files of other types give an empty result.
    """
    f.seek(0)
    head = f.read(32)
    if is_fatbin(head):
        _, cuda = scan_cuda(f, name=name)
        return BinaryTargets(cuda=cuda, errors=cuda.errors)
    if is_bundle(head):
        _, hip = scan_hip(f, name=name)
        return BinaryTargets(hip=hip, errors=hip.errors)
    if not is_elf(head):
        return BinaryTargets()
    sections = tuple(find_gpu_sections(f, name=name))
    cuda_t: CudaTargets | None = None
    hip_t: HipTargets | None = None
    if any(s.kind == "cuda-fatbin" for s in sections):
        _, cuda_t = scan_cuda(f, name=name)
    if any(s.kind in ("hip-fatbin", "clang-offload-section") for s in sections):
        _, hip_t = scan_hip(f, name=name)
    errors = (cuda_t.errors if cuda_t else ()) + (hip_t.errors if hip_t else ())
    return BinaryTargets(sections=sections, cuda=cuda_t, hip=hip_t, errors=errors)
