"""How the stack collectors find a product, read from its catalog row (``products.yaml``).

The generic strategies of a stack collector (``collectors/strategies``: sonames, headers,
package records, version files, environment, classifier hits) hold no product names: they
ask this module, per stack, for what the rows declare. Row fields (all optional)::

    found_as: cuda/tensorrt      # the collector stack/product the row's files are found as,
                                 # when not the row's own stack and first collector product
    role: release                # release (the stack's own release: toolkit roots,
                                 # CUDA_VERSION), runtime (checked against the release's
                                 # env version), compiler (ROOT/bin/<bin> marks it)
    sonames: ['libnccl.so*']     # library file globs (base names) the collector lists
    headers:                     # headers that declare the version, and how
      - file: nccl.h             # base-name glob, under an include/ directory
        macros: [NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH]   # joined with "."
        optional: NCCL_BUILD     # appended when defined
        suffix: NCCL_SUFFIX      # a string macro appended as is
        code: CUDA_VERSION       # instead of macros: one 12040-style version code
        rank: file               # file (as good as a versioned soname) | header (major.minor)
        root_only: true          # counted only at a release root (cuda.h ships in wheels)
    version_json: [libcublas]    # keys of the release root's version.json
    env: [NV_LIBCUBLAS_VERSION]  # image env vars that declare the product's version
    dist_info: ['nvidia_*']      # wheel distribution globs whose METADATA is read
    embedded: true               # a classifier hit inside another binary is a component
    shares_release_with: cublaslt  # a library shipped in the same packages (same version)
    conda_pins: [cuda-version]   # conda records that pin the release without being it
    libraries: [libnccl]         # library stems (with ``sonames``: the stack's names for
                                 # them, ``catalog.names``; ``scan --sbom`` reads them too)
    library_prefixes: [libcudnn] # stem prefixes (libcudnn_ops); ``libnpp*``: any continuation
    wheels: [nccl]               # CUDA wheels: canonical name less ``nvidia-`` and ``-cuNN``
    conda_records: [nccl]        # CUDA conda package names (NVIDIA's channel, conda-forge)
    display: NCCL                # the stack summary's short name (``catalog.product_display``)
    bin: nvcc                    # the compiler's executable name under ROOT/bin
    bin_tools: [ptxas, ...]      # release: executables recorded present/absent under ROOT/bin
    root: /usr/local/cuda        # release: the toolkit root (and ROOT-X.Y siblings)
    version_files:               # release: files of a root that name the release
      json: version.json
      txt: version.txt
      txt_pattern: 'CUDA Version\\s+(\\d+(?:\\.\\d+)+)'
    env_release: CUDA_VERSION    # release: the image env var of the release
    env_require: NVIDIA_REQUIRE_CUDA   # release: the driver requirement expression
    env_noted: [NV_CUDA_LIB_VERSION]   # release: env vars recorded as evidence only (the
                                       # first also marks an env as describing the release)
    collected_by: triton-server  # the collector (its id) that finds the row, when that
                                 # collector's id is not the row's stack (``collected_by``)
    labels: [com.example.version]  # image labels that declare the product's version

A collector with a product-specific layout (Triton's server root, the ICD tables, the
driver's compat directories) reads its own further fields of the row with ``strs`` /
``string`` / ``mapping``, which check them and name the row when they are malformed.

A stack collector's own fields (read with ``listed`` / ``row_map`` over the rows of a stack,
not parsed into ``Found``; each collector's docstring says what its fields mean)::

    release_sonames: [libze_intel_gpu]   # level-zero: stems whose file version is the
                                         # product's release (not an ABI version)
    icd_libraries: [intel-opencl/libigdrcl]  # intel-gpu: OpenCL drivers and the ICD files
    icd_files: [intel.icd]                   # that name them; versioned_bins: executables
    versioned_bins: [ocloc]                  # whose name may carry the release
    install_dirs: [mkl]                  # oneapi: component directories of the install root
    install_root: /opt/intel/oneapi      # oneapi (one row): the root, the unified layout's
    release_product: oneapi              # product, and the directories of products with
    component_dirs: {dpl: onedpl}        # no row of their own

The row files are parsed once per content (``catalog.products``), so a changed row is read
afresh; the specs here are built from the rows in effect (``$GPUSBOM_CATALOG`` included).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from . import CatalogError, Product, products

__all__ = [
    "Found",
    "HeaderSpec",
    "ReleaseSpec",
    "collected_by",
    "found",
    "found_as",
    "header_specs",
    "listed",
    "mapping",
    "release",
    "row_map",
    "row_with",
    "str_field",
    "str_map",
    "string",
    "strs",
]

_RANKS = ("file", "header")


@dataclass(frozen=True)
class HeaderSpec:
    """One header that declares a product's version (see the module docstring)."""

    product: str
    file: str
    macros: tuple[str, ...] = ()
    optional: str | None = None
    suffix: str | None = None
    code: str | None = None
    rank: str = "header"
    root_only: bool = False


@dataclass(frozen=True)
class Found:
    """What one row declares for its stack collector."""

    row: Product
    stack: str
    product: str
    role: str | None
    sonames: tuple[str, ...]
    headers: tuple[HeaderSpec, ...]
    version_json: tuple[str, ...]
    env: tuple[str, ...]
    dist_info: tuple[str, ...]
    embedded: bool
    shares_release_with: str | None
    conda_pins: tuple[str, ...]
    bin: str | None


@dataclass(frozen=True)
class ReleaseSpec:
    """The release row of a stack (``role: release``)."""

    found: Found
    cpe_product: str | None
    root: str
    root_rx: re.Pattern[str]
    bin_tools: tuple[str, ...]
    json_file: str | None
    txt_file: str | None
    txt_rx: re.Pattern[str] | None
    env_release: str | None
    env_require: str | None
    env_noted: tuple[str, ...]

    @property
    def product(self) -> str:
        return self.found.product


def _strs(row: Product, key: str) -> tuple[str, ...]:
    v = row.extra.get(key)
    if v is None:
        return ()
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise CatalogError(f"catalog: {row.id}: {key} must be a list of strings")
    return tuple(v)


def _str(row: Product, key: str) -> str | None:
    v = row.extra.get(key)
    if v is not None and not isinstance(v, str):
        raise CatalogError(f"catalog: {row.id}: {key} must be a string")
    return v


def _header(row: Product, product: str, d: Any) -> HeaderSpec:
    if not isinstance(d, dict) or not isinstance(d.get("file"), str):
        raise CatalogError(f"catalog: {row.id}: headers entries need a file")
    macros = d.get("macros") or []
    if not isinstance(macros, list) or not all(isinstance(m, str) for m in macros):
        raise CatalogError(f"catalog: {row.id}: header macros must be a list of strings")
    for k in ("optional", "suffix", "code"):
        if d.get(k) is not None and not isinstance(d[k], str):
            raise CatalogError(f"catalog: {row.id}: header {k} must be a string")
    if bool(macros) == bool(d.get("code")):
        raise CatalogError(f"catalog: {row.id}: a header has macros or a code, one of them")
    rank = d.get("rank", "header")
    if rank not in _RANKS:
        raise CatalogError(f"catalog: {row.id}: header rank must be one of {_RANKS}")
    return HeaderSpec(product, d["file"], tuple(macros), d.get("optional"), d.get("suffix"),
                      d.get("code"), rank, bool(d.get("root_only")))


def found_as(row: Product) -> tuple[str, str]:
    """(collector stack, product) the row's files are found as (``Product.found_as``)."""
    _str(row, "found_as")  # a malformed value is an error naming the row
    return row.found_as


def _found(row: Product) -> Found:
    stack, product = found_as(row)
    heads = row.extra.get("headers") or []
    if not isinstance(heads, list):
        raise CatalogError(f"catalog: {row.id}: headers must be a list")
    return Found(
        row=row, stack=stack, product=product, role=_str(row, "role"),
        sonames=_strs(row, "sonames"),
        headers=tuple(_header(row, product, h) for h in heads),
        version_json=_strs(row, "version_json"), env=_strs(row, "env"),
        dist_info=_strs(row, "dist_info"), embedded=bool(row.extra.get("embedded")),
        shares_release_with=_str(row, "shares_release_with"),
        conda_pins=_strs(row, "conda_pins"), bin=_str(row, "bin"),
    )


@functools.lru_cache(maxsize=8)
def _by_stack(rows: tuple[Product, ...]) -> dict[str, tuple[Found, ...]]:
    """Rows' specs per collector stack: the release first, then the release's parts, then
    the rest, each in catalog order (the order env-declared versions are listed in)."""
    out: dict[str, list[tuple[int, int, Found]]] = {}
    found = [_found(r) for r in rows]
    releases = {f.stack: f.row.id for f in found if f.role == "release"}
    for i, f in enumerate(found):
        rel = releases.get(f.stack)
        group = 0 if f.row.id == rel else 1 if rel and f.row.part_of == rel else 2
        out.setdefault(f.stack, []).append((group, i, f))
    return {s: tuple(f for _, _, f in sorted(v, key=lambda t: t[:2])) for s, v in out.items()}


def found(stack: str) -> tuple[Found, ...]:
    """The specs of every row found under ``stack`` (see ``_by_stack`` for the order)."""
    return _by_stack(products()).get(stack, ())


def header_specs(stack: str) -> tuple[HeaderSpec, ...]:
    return tuple(h for f in found(stack) for h in f.headers)


def with_role(stack: str, role: str) -> Found | None:
    """The first row of ``stack`` with ``role``."""
    return next((f for f in found(stack) if f.role == role), None)


def gather(stack: str, key: str) -> tuple[str, ...]:
    """A list field over the stack's rows, first occurrence kept."""
    seen: dict[str, None] = {}
    for f in found(stack):
        for v in getattr(f, key):
            seen.setdefault(v, None)
    return tuple(seen)


def products_with(stack: str, flag: str) -> frozenset[str]:
    return frozenset(f.product for f in found(stack) if getattr(f, flag))


@functools.lru_cache(maxsize=8)
def _release(rows: tuple[Product, ...], stack: str) -> ReleaseSpec | None:
    f = next((x for x in _by_stack(rows).get(stack, ()) if x.role == "release"), None)
    if f is None:
        return None
    row = f.row
    root = _str(row, "root")
    if not root:
        raise CatalogError(f"catalog: {row.id}: a release row names its root")
    vf = row.extra.get("version_files") or {}
    if not isinstance(vf, dict) or not all(isinstance(v, str) for v in vf.values()):
        raise CatalogError(f"catalog: {row.id}: version_files must map kinds to strings")
    txt_rx = re.compile(vf["txt_pattern"]) if vf.get("txt_pattern") else None
    cpe = row.cpe[0].partition(":")[2] if row.cpe else None
    return ReleaseSpec(
        found=f, cpe_product=cpe, root=root,
        root_rx=re.compile("^" + re.escape(root) + r"(?:-(\d+\.\d+))?$"),
        bin_tools=_strs(row, "bin_tools"), json_file=vf.get("json"), txt_file=vf.get("txt"),
        txt_rx=txt_rx, env_release=_str(row, "env_release"),
        env_require=_str(row, "env_require"), env_noted=_strs(row, "env_noted"),
    )


def release(stack: str) -> ReleaseSpec | None:
    """The stack's release row (``role: release``), None when it has none."""
    return _release(products(), stack)


def stacks_with(field: str) -> Iterable[str]:
    """The stacks some row of which declares ``field`` (host pre-parsing asks for headers)."""
    return tuple(s for s, fs in _by_stack(products()).items() if any(getattr(f, field)
                                                                        for f in fs))


#: a row's own list fields (``libraries``, ``parts`` ...): read from the row, not ``extra``
_ROW_FIELDS = frozenset(f.name for f in dataclasses.fields(Product))


def _listed(row: Product, key: str) -> tuple[str, ...]:
    return tuple(getattr(row, key)) if key in _ROW_FIELDS else _strs(row, key)


def _stack_rows(stack: str) -> Iterable[Product]:
    """The rows of ``stack`` (their own, not ``found_as``), in catalog order."""
    return (r for r in products() if r.stack == stack)


def listed(stack: str, key: str) -> tuple[str, ...]:
    """A list-of-strings field over the rows of ``stack`` (their own stack), first
    occurrence kept: a collector's own field, not one the generic strategies read."""
    seen: dict[str, None] = {}
    for r in _stack_rows(stack):
        for v in _listed(r, key):
            seen.setdefault(v, None)
    return tuple(seen)


def row_map(stack: str, key: str) -> dict[str, Product]:
    """Each string of a list field over the rows of ``stack`` -> the row that lists it
    (the first in catalog order): a collector's own field naming what finds the row."""
    out: dict[str, Product] = {}
    for r in _stack_rows(stack):
        for v in _listed(r, key):
            out.setdefault(v, r)
    return out


def row_with(stack: str, key: str) -> Product | None:
    """The first row of ``stack`` (its own) that declares ``key``."""
    return next((r for r in _stack_rows(stack) if r.extra.get(key) is not None), None)


def str_field(row: Product, key: str) -> str | None:
    """A string field of a row (None when absent; ``CatalogError`` when not a string)."""
    return _str(row, key)


def str_map(row: Product, key: str) -> dict[str, str]:
    """A mapping field of a row, names to names ({} when absent)."""
    v = row.extra.get(key) or {}
    if not isinstance(v, dict) or not all(isinstance(k, str) and isinstance(x, str)
                                          for k, x in v.items()):
        raise CatalogError(f"catalog: {row.id}: {key} must map names to names")
    return dict(v)


def strs(row: Product, key: str) -> tuple[str, ...]:
    """A row's list-of-strings field (``()`` when absent); CatalogError naming the row."""
    return _strs(row, key)


def string(row: Product, key: str) -> str | None:
    """A row's string field (None when absent); CatalogError naming the row."""
    return _str(row, key)


def mapping(row: Product, key: str) -> dict[str, Any]:
    """A row's mapping field with string keys ({} when absent); CatalogError naming the row."""
    v = row.extra.get(key) or {}
    if not isinstance(v, dict) or not all(isinstance(k, str) for k in v):
        raise CatalogError(f"catalog: {row.id}: {key} must be a mapping")
    return dict(v)


def collected_by(collector_id: str) -> tuple[Product, ...]:
    """The rows a collector finds that are not told by its id alone: those whose
    ``collected_by`` names it, else those of the stack with its id (catalog order)."""
    rows = products()
    named = tuple(r for r in rows if _str(r, "collected_by") == collector_id)
    return named or tuple(r for r in rows if r.stack == collector_id)
