"""Binary classifier rows: which bytes of which files name which product at which version.

The rows are data, ``classifiers.yaml`` beside this module (the catalog package: every row
names the ``products.yaml`` product it belongs to, checked at load), read once into
:data:`ROWS`; :mod:`gpusbom.collectors._classify` applies them as layers stream. Each
:class:`Row` holds a file glob or ELF predicate, the evidence to read (a ``rodata`` regex
behind a literal anchor, or the constant of a version-getter ``symbol``), the product id, the
version rule (:data:`RULES`, :func:`apply_rule`), the confidence, and the pinned real artifact
its snippet test cuts its bytes from (:class:`Source`), as Syft's snippets record it. The
sibling-file rows of frameworks (``torch/version.py``) are read by the frameworks collector
and listed in :data:`SIBLING_ROWS`. Nothing is executed.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Literal

from .._resources import read_text

__all__ = ["ROWS", "RULES", "SIBLING_ROWS", "Row", "Source", "apply_rule", "load_rows"]


@dataclass(frozen=True)
class Source:
    """Where a row's snippet comes from: a pinned real artifact and the member in it."""

    #: ``static-link``: an executable linked here (gcc) against the static archives of the
    #: pinned Debian package (``fixtures/static_link.py``)
    kind: Literal["wheel", "deb", "nvcc", "static-link"]
    name: str
    version: str
    member: str
    expect: str  # the version (or "present") the row must give on that member
    file: str = ""  # the artifact's file name (wheel) or pool path (deb), as pinned
    sha256: str = ""
    size: int = 0


@dataclass(frozen=True)
class Row:
    """One binary classifier: the files it looks at and the evidence it searches."""

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
    getter: Literal["return", "out", "out1", "pointer"] = "return"
    #: bytes of content a symbol row needs kept (larger files are left to rodata rows)
    capture: int = 0
    #: larger files: keep only their first ``head`` bytes and their section header table
    #: (a sparse capture; the getter must lie in the head), 0: no sparse capture
    head: int = 0
    #: symbol rows of framework libraries (``head: fatbin`` in the YAML): keep a file's bytes
    #: up to its first CUDA fatbin header (its code and data: a statically linked library's
    #: getter lies in ``.text``, before ``.nv_fatbin``; at most ``head`` bytes) and from its
    #: section header table to its end (auditwheel/patchelf move ``.dynstr`` there); the
    #: device code between is not kept
    head_until_fatbin: bool = False
    #: rodata rows: stop searching at the first CUDA fatbin (strings of a statically linked
    #: library lie in ``.rodata``, before ``.nv_fatbin``, the bulk of a framework library)
    before_fatbin: bool = False
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
    "underscored": "the regex group with '_' for '.' (cudnn_version_7_6_5_32 -> 7.6.5.32)",
    "code-10000": "major*10000 + minor*100 + patch (NCCL >= 2.9, cuDNN 9)",
    "code-1000": "major*1000 + minor*100 + patch (cuDNN 7/8)",
    "cublas-code": "CUBLAS_VERSION: major*10000 + minor*100 + patch when >= 100000 (cuBLAS "
                   "11.11 on: 111103, 120903); major*1000 + minor*100 + patch below (cuBLAS "
                   "10.2.1: 10201; an 11.x minor may pass 9: 11000 + minor*100 + patch)",
    "nccl-code": "NCCL_VERSION_CODE: major*10000 + minor*100 + patch from NCCL 2.9 "
                 "(21903); major*1000 + minor*100 + patch before (2.4.8: 2408)",
    "cudnn-code": "CUDNN_VERSION: major*10000 + minor*100 + patch from cuDNN 9 (92400); "
                  "major*1000 + minor*100 + patch for cuDNN 7/8 (7605)",
    "lib-code": "major*1000 + minor*100 + patch (CUFFT_VERSION, CURAND_VERSION, "
                "CUSPARSE_VERSION: cuFFT 10.1.2 = 10102, cuSPARSE 12.5.10 = 12510)",
    "cuda-code": "major*1000 + minor*10 (CUDART_VERSION: major.minor only)",
    "hip-code": "major*10000000 + minor*100000 + patch (HIP_VERSION)",
    "npp-struct": "the NppLibraryVersion {major, minor, build} nppGetLibVersion points to, "
                  "read as major.minor.build ({12, 2, 5}: NPP 12.2.5 of 12.2.5.30; 'build' "
                  "is the release's third number)",
    "presence": "no version: the product is present",
}


def apply_rule(rule: str, raw: str | int) -> str | None:
    """The version a raw value means under ``rule``; None when implausible for it."""
    if rule == "verbatim":
        return str(raw) or None
    if rule == "underscored":
        return str(raw).replace("_", ".") or None
    if rule == "presence":
        return None
    if rule == "npp-struct":
        parts = str(raw).split(".")
        if len(parts) != 3 or not all(p.isdigit() for p in parts):
            return None
        major, minor, build = (int(p) for p in parts)
        return _code(major, minor, build) if 9 <= major <= 99 and minor <= 99 and \
            build <= 999 else None
    v = int(raw)
    if rule == "cublas-code":
        if v >= 100000:
            return apply_rule("code-10000", v)
        if v >= 11000:  # cuBLAS 11 before the x10000 code: its minor reached 10
            minor, patch = divmod(v - 11000, 100)
            return _code(11, minor, patch) if minor <= 20 else None
        major, minor, patch = _mmp(v, 1000, 100)
        return _code(major, minor, patch) if 9 <= major <= 10 and minor <= 9 else None
    if rule == "nccl-code":
        return apply_rule("code-10000" if v >= 10000 else "lib-code", v) if v >= 2000 else None
    if rule == "cudnn-code":
        return apply_rule("code-10000" if v >= 10000 else "code-1000", v)
    if rule == "lib-code":
        major, minor, patch = _mmp(v, 1000, 100)
        return _code(major, minor, patch) if 2 <= major <= 99 and minor <= 9 else None
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


def _bytes(v: object) -> bytes:
    return str(v).encode("latin-1")


def _row(d: dict[str, Any], products: set[str]) -> Row:
    if d.get("catalog") not in products:
        raise ValueError(
            f"classifier row {d.get('id')!r}: unknown catalog product {d.get('catalog')!r}"
        )
    if d.get("rule") not in RULES:
        raise ValueError(f"classifier row {d.get('id')!r}: unknown rule {d.get('rule')!r}")
    src = dict(d["source"])
    source = Source(
        kind=src["kind"], name=str(src["name"]), version=str(src["version"]),
        member=str(src["member"]), expect=str(src["expect"]), file=str(src.get("file", "")),
        sha256=str(src.get("sha256", "")), size=int(src.get("size", 0)),
    )  # fmt: skip
    row = Row(
        id=str(d["id"]), product=str(d["product"]), stack=str(d["stack"]),
        globs=tuple(str(g) for g in d["globs"]), evidence=d["evidence"], rule=str(d["rule"]),
        confidence=d["confidence"], source=source, elf=d.get("elf", "any"),
        anchor=_bytes(d.get("anchor", "")), pattern=_bytes(d.get("pattern", "")),
        symbol=str(d.get("symbol", "")), getter=d.get("getter", "return"),
        capture=int(d.get("capture", 0)),
        head=int(d.get("head_bytes", 0) if d.get("head") == "fatbin" else d.get("head", 0)),
        head_until_fatbin=d.get("head") == "fatbin",
        before_fatbin=bool(d.get("before_fatbin", False)),
        tables=tuple(d.get("tables") or (".dynsym", ".symtab")), note=str(d.get("note", "")),
    )  # fmt: skip
    if row.evidence == "rodata":
        re.compile(row.pattern)
        if not row.anchor:
            raise ValueError(f"classifier row {row.id!r}: no anchor")
    elif not row.symbol:
        raise ValueError(f"classifier row {row.id!r}: no symbol")
    return row


@functools.lru_cache(maxsize=1)
def load_rows() -> tuple[Row, ...]:
    """Every row of ``classifiers.yaml``, in file order (validated; cached)."""
    from . import products, shipped_table

    ids = {p.id for p in products()}

    def build(data: Any) -> tuple[Row, ...]:
        if not isinstance(data, (list, type(None))):
            raise ValueError("classifiers.yaml: top level must be a list")
        rows = tuple(_row(d, ids) for d in data or [])
        if len({r.id for r in rows}) != len(rows):
            raise ValueError("classifier rows: duplicate id")
        return rows

    # libyaml's safe loader (the catalog's own): the same rows, 40x faster than pure Python
    return shipped_table(read_text(__package__, "classifiers.yaml"), build)


ROWS: tuple[Row, ...] = load_rows()

#: Sibling-file rows (read by the frameworks collector when a dist-info is missing).
SIBLING_ROWS: tuple[tuple[str, str, str], ...] = (
    ("pytorch", "torch/version.py", "__version__, cuda, hip, xpu, git_version"),
    ("cupy", "cupy/_version.py", "__version__"),
    ("jax", "jaxlib/version.py", "_version"),
)
