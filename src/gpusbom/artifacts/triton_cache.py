"""Triton kernel caches: ``<cache>/<HASH>/<kernel>.json`` (the compile metadata: backend,
arch, Triton version) beside the compiled kernel (``<kernel>.cubin`` for CUDA,
``<kernel>.hsaco`` for ROCm, ``<kernel>.spv``/``.zebin`` for Intel XPU) and ``__grp__<kernel>.json``.

Layouts: ``~/.triton/cache`` (``TRITON_CACHE_DIR`` anywhere else) and torch.compile's
``/tmp/torchinductor_<user>/triton/<n>/``. Made by running Triton 3.6.0 here:
``triton.compile(ASTSource(...), target=GPUTarget("cuda", 90, 32))`` writes ``"target":
{"backend": "cuda", "arch": 90}``, ``"arch": "sm90"``, ``"triton_version": "3.6.0"``, and a cubin
whose ELF header is ``e_machine`` 190 (EM_CUDA), OS ABI 51, ABI version 7 and ``e_flags``
``0x5a0d5a``: SASS architecture in the low byte (0x5a = 90).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Any

__all__ = ["CubinHeader", "KernelMeta", "cubin_header", "kernel_meta"]

EM_CUDA = 190
MAX_JSON = 1 << 20


@dataclass(frozen=True)
class CubinHeader:
    sm: int | None  # SASS architecture (90), None when the ABI version is not one we decode
    abi_version: int
    e_flags: int


def cubin_header(head: bytes) -> CubinHeader | None:
    """The CUDA ELF header of a cubin (64 bytes), or None when it is not one."""
    if len(head) < 52 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
        return None
    machine, = struct.unpack_from("<H", head, 18)
    if machine != EM_CUDA:
        return None
    flags, = struct.unpack_from("<I", head, 48)
    abi = head[8]
    # ABI version 7 (the e_flags layout of CUDA <= 12 cubins, and of Triton 3.6's ptxas):
    # the low byte is the SASS architecture
    sm = flags & 0xFF if abi == 7 and flags & 0xFF else None
    return CubinHeader(sm=sm, abi_version=abi, e_flags=flags)


@dataclass(frozen=True)
class KernelMeta:
    name: str
    backend: str  # cuda | hip | xpu | ...
    arch: str  # "sm_90", "gfx942", "" when not recorded
    triton_version: str | None


def _arch(backend: str, raw: Any, target: dict[str, Any]) -> str:
    if backend == "cuda":
        cc = target.get("arch", raw)
        s = str(cc).lower().removeprefix("sm").removeprefix("_")
        return f"sm_{s}" if s[:1].isdigit() and s.rstrip("af").isdigit() else ""
    t = target.get("arch", raw)
    return str(t)[:64] if isinstance(t, str | int) else ""


def kernel_meta(text: str | bytes) -> KernelMeta | None:
    """The compile metadata of one cached kernel, or None when ``text`` is not one (a
    ``__grp__`` file, another JSON)."""
    if len(text) > MAX_JSON:
        raise ValueError("Triton kernel metadata larger than 1 MiB")
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(doc, dict) or "child_paths" in doc:
        return None
    target = doc.get("target")
    if not isinstance(target, dict):
        return None
    backend = str(target.get("backend") or doc.get("backend_name") or "")[:32]
    name = doc.get("name")
    if not backend or not isinstance(name, str):
        return None
    ver = doc.get("triton_version")
    return KernelMeta(name=name[:256], backend=backend, arch=_arch(backend, doc.get("arch"), target),
                      triton_version=str(ver)[:32] if isinstance(ver, str) else None)
