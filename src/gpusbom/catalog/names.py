"""The names collectors recognise a product by, other than package names: library file
stems per stack, CUDA wheel stems and CUDA conda package names.

A product's own row holds them (``products.yaml``: ``libraries`` and ``library_prefixes`` of
a row that declares ``sonames``, ``wheels``, ``conda_records``; the stack and product are
the row's, or its ``found_as``); ``names.yaml`` holds those of the stacks whose rows do not
carry them yet (ROCm, Level Zero, Intel GPU).

The CUDA, ROCm and Level Zero collectors and ``scan --sbom`` classification
(``sbomin/_classify.py``) read this one table instead of each other's constants; package
names are in ``packages.yaml`` (:mod:`.packages`).

API::

    from gpusbom.catalog import names
    names.libraries("cuda")          # {"libcudart": "cudart", ...} (stems, case kept)
    names.library_product("cuda", "libcudnn_ops")   # "cudnn" (stems and prefixes)
    names.cuda_wheel("nvidia-cuda-runtime-cu12")     # "cudart"
    names.cuda_wheels()              # {"cuda-runtime": "cudart", ...}
    names.cuda_conda()               # {"cuda-cudart": "cudart", ...}
"""

from __future__ import annotations

import functools
import re
from typing import Any

from .._pep503 import canonicalize_name
from .._resources import read_text
from . import CatalogError, Product, products, shipped_table

__all__ = ["cuda_conda", "cuda_wheel", "cuda_wheels", "libraries", "library_prefixes", "library_product",
           "stacks"]

_SECTIONS = ("libraries", "library_prefixes", "cuda_wheels", "cuda_conda")
_CU_SUFFIX_RX = re.compile(r"-cu\d+(?=-|$)")


def _str_map(v: Any, where: str) -> dict[str, str]:
    if not isinstance(v, dict) or not all(isinstance(k, str) and isinstance(x, str)
                                          for k, x in v.items()):
        raise CatalogError(f"names.yaml: {where} must map names to products")
    return dict(v)


def _table() -> dict[str, Any]:
    return _merged(products())


@functools.lru_cache(maxsize=4)
def _merged(rows: tuple[Product, ...]) -> dict[str, Any]:
    """names.yaml's table, then every row's own names (a name already there is kept)."""
    from .detection import found_as

    out = shipped_table(read_text(__package__, "names.yaml"), _table_of)
    for r in rows:
        stack, product = found_as(r)
        if r.extra.get("sonames"):  # a row found by its library files
            libs = out["libraries"].setdefault(stack, {})
            for stem in r.libraries:
                libs.setdefault(stem, product)
            pre = out["library_prefixes"].setdefault(stack, {})
            for stem in _row_list(r, "library_prefixes"):
                pre.setdefault(stem, product)
        for name in _row_list(r, "wheels"):
            out["cuda_wheels"].setdefault(name, product)
        for name in _row_list(r, "conda_records"):
            out["cuda_conda"].setdefault(name, product)
    return out


def _row_list(r: Product, key: str) -> tuple[str, ...]:
    v = r.extra.get(key) or []
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise CatalogError(f"catalog: {r.id}: {key} must be a list of strings")
    return tuple(v)


def _table_of(data: Any) -> dict[str, Any]:
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
    is the prefix or continues with ``_``; a prefix ending in ``*`` with anything:
    ``libnpp*``: libnppc, libnppial)."""
    p: str | None = _table()["libraries"].get(stack, {}).get(stem)
    if p:
        return p
    for prefix, product in _table()["library_prefixes"].get(stack, {}).items():
        if prefix.endswith("*"):
            if stem.startswith(prefix[:-1]):
                return str(product)
        elif stem == prefix or stem.startswith(prefix + "_"):
            return str(product)
    return None


def cuda_wheel(name: str) -> str | None:
    """``nvidia-cuda-runtime-cu12`` / ``nvidia-cuda-runtime`` -> ``cudart``; None if it is
    not a CUDA wheel."""
    n = _CU_SUFFIX_RX.sub("", str(canonicalize_name(name))).removeprefix("nvidia-")
    p: str | None = _table()["cuda_wheels"].get(n)
    return p


def cuda_wheels() -> dict[str, str]:
    """CUDA wheel stem (canonical name less ``nvidia-`` and ``-cuNN``) -> product."""
    return dict(_table()["cuda_wheels"])


def cuda_conda() -> dict[str, str]:
    """CUDA conda package name -> product."""
    return dict(_table()["cuda_conda"])
