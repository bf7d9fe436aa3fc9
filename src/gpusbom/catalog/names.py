"""The names collectors recognise a product by, other than package names (``names.yaml``):
library file stems per stack, CUDA wheel stems and CUDA conda package names.

The CUDA, ROCm and Level Zero collectors and ``scan --sbom`` classification
(``sbomin/_classify.py``) read this one table instead of each other's constants; package
names are in ``packages.yaml`` (:mod:`.packages`).

API::

    from gpusbom.catalog import names
    names.libraries("cuda")          # {"libcudart": "cudart", ...} (stems, case kept)
    names.library_product("cuda", "libcudnn_ops")   # "cudnn" (stems and prefixes)
    names.cuda_wheel("nvidia-cuda-runtime-cu12")     # "cudart"
    names.cuda_conda()               # {"cuda-cudart": "cudart", ...}
"""

from __future__ import annotations

import functools
import re
from typing import Any

from .._pep503 import canonicalize_name
from .._resources import read_text
from . import CatalogError, _yaml

__all__ = ["cuda_conda", "cuda_wheel", "libraries", "library_prefixes", "library_product",
           "stacks"]

_SECTIONS = ("libraries", "library_prefixes", "cuda_wheels", "cuda_conda")
_CU_SUFFIX_RX = re.compile(r"-cu\d+(?=-|$)")


def _str_map(v: Any, where: str) -> dict[str, str]:
    if not isinstance(v, dict) or not all(isinstance(k, str) and isinstance(x, str)
                                          for k, x in v.items()):
        raise CatalogError(f"names.yaml: {where} must map names to products")
    return dict(v)


@functools.lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    text = read_text(__package__, "names.yaml")
    data = _yaml(text, cache=True)
    if not isinstance(data, dict) or set(data) - set(_SECTIONS):
        raise CatalogError(f"names.yaml: top level must be a mapping of {', '.join(_SECTIONS)}")
    out: dict[str, Any] = {}
    for sec in ("libraries", "library_prefixes"):
        per = data.get(sec) or {}
        if not isinstance(per, dict):
            raise CatalogError(f"names.yaml: {sec} must map stacks to names")
        out[sec] = {str(stack): _str_map(m, f"{sec}.{stack}") for stack, m in per.items()}
    for sec in ("cuda_wheels", "cuda_conda"):
        out[sec] = _str_map(data.get(sec) or {}, sec)
    return out


def stacks() -> tuple[str, ...]:
    """The stacks with library stems, in file order."""
    return tuple(_table()["libraries"])


def libraries(stack: str) -> dict[str, str]:
    """Library stem (case kept) -> product of one stack; {} for a stack with none."""
    return dict(_table()["libraries"].get(stack, {}))


def library_prefixes(stack: str) -> dict[str, str]:
    """Library stem prefix -> product of one stack (``libcudnn`` -> cudnn)."""
    return dict(_table()["library_prefixes"].get(stack, {}))


@functools.lru_cache(maxsize=4096)
def library_product(stack: str, stem: str) -> str | None:
    """The product of ``stack`` a library stem names: an exact stem, else a prefix (the stem
    is the prefix or continues with ``_``; ``libnpp`` with anything: libnppc, libnppial)."""
    p: str | None = _table()["libraries"].get(stack, {}).get(stem)
    if p:
        return p
    for prefix, product in _table()["library_prefixes"].get(stack, {}).items():
        if (stem == prefix or stem.startswith(prefix + "_")
                or (prefix == "libnpp" and stem.startswith(prefix))):
            return str(product)
    return None


def cuda_wheel(name: str) -> str | None:
    """``nvidia-cuda-runtime-cu12`` / ``nvidia-cuda-runtime`` -> ``cudart``; None if it is
    not a CUDA wheel."""
    n = _CU_SUFFIX_RX.sub("", str(canonicalize_name(name))).removeprefix("nvidia-")
    p: str | None = _table()["cuda_wheels"].get(n)
    return p


def cuda_conda() -> dict[str, str]:
    """CUDA conda package name -> product."""
    return dict(_table()["cuda_conda"])
