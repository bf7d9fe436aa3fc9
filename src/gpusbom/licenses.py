"""Declared licence strings -> SPDX license expressions (with ``license-expression``).

Packages declare licences in their own dialects: Debian copyright short names
(``Expat``, ``Apache-2``, ``GPL-2+``, ``BSD-3-clause or Expat``), Fedora/RPM tags
(``GPLv2+ and LGPLv2+``, ``ASL 2.0``), Python metadata (``Apache-2.0 OR MIT``, trove
classifier names). Every SBOM writer needs one SPDX expression per component, so:

- each licence name maps to its SPDX id (a small alias table for the dialects, then
  the SPDX list itself, case-insensitively, through ``license-expression``);
- ``and``/``or``/``with`` and parentheses keep their meaning;
- a name with no SPDX id stays as ``LicenseRef-<name>`` (sanitised), never a free
  name: SPDX and CycloneDX consumers then still read one valid expression;
- several declared strings of one component are ANDed (a Debian copyright file lists
  the licences of different files of the package: all of them apply).
"""

from __future__ import annotations

import functools
import re

from license_expression import (  # type: ignore[import-untyped]
    ExpressionError,
    Licensing,
    get_spdx_licensing,
)

__all__ = ["declared_expression", "license_ref", "normalise_key", "to_expression"]

# Debian copyright-format short names, Fedora's old tags and common spellings that are
# not SPDX ids (keys lower-case)
_ALIASES = {
    "expat": "MIT",
    "mit/x11": "MIT",
    "x11": "X11",
    "apache-2": "Apache-2.0",
    "apache 2.0": "Apache-2.0",
    "apache-2.0+": "Apache-2.0",
    "asl 2.0": "Apache-2.0",
    "asl-2.0": "Apache-2.0",
    "apache license 2.0": "Apache-2.0",
    "apache license, version 2.0": "Apache-2.0",
    "apache": "LicenseRef-Apache",
    "bsl-1": "BSL-1.0",
    "bsl": "BSL-1.0",
    "boost-1.0": "BSL-1.0",
    "boost": "BSL-1.0",
    "mpl-2": "MPL-2.0",
    "mpl-1.1": "MPL-1.1",
    "cc0": "CC0-1.0",
    "zlib": "Zlib",
    "isc": "ISC",
    "psf": "PSF-2.0",
    "python": "PSF-2.0",
    "bsd-2": "BSD-2-Clause",
    "bsd-3": "BSD-3-Clause",
    "bsd-4": "BSD-4-Clause",
    "public domain": "LicenseRef-public-domain",
    "public-domain": "LicenseRef-public-domain",
    "mit license": "MIT",
}
# GPL-2+, GPLv2+, LGPL-2.1, AGPL-3, GFDL-1.3+ ... (Debian and Fedora spellings)
_FAMILY = re.compile(r"^(A?GPL|LGPL|GFDL)(?:[-v ]*)(\d+(?:\.\d+)?)(\+|-or-later|-only)?$", re.IGNORECASE)
_OPERATORS = re.compile(r"(\(|\)|\s+(?:and|or|with)\s+|,\s*(?:and|or)\s+)", re.IGNORECASE)
_UNSAFE = re.compile(r"[^A-Za-z0-9.\-]+")


@functools.lru_cache(maxsize=1)
def _spdx() -> Licensing:
    return get_spdx_licensing()


@functools.lru_cache(maxsize=1)
def _known() -> dict[str, str]:
    """lower-case key -> canonical SPDX id (licences and exceptions, aliases included)."""
    out: dict[str, str] = {}
    for sym in _spdx().known_symbols.values():
        out[str(sym.key).lower()] = str(sym.key)
        for alias in getattr(sym, "aliases", ()) or ():
            out.setdefault(str(alias).lower(), str(sym.key))
    return out


def warm() -> None:
    """Build the tables the first licence asks for (the SPDX licence index, its lower-case
    keys: ~0.02 CPU-s), e.g. beside a host's walk rather than in each forked output."""
    _known()


def license_ref(name: str) -> str:
    """``NVIDIA Proprietary Software`` -> ``LicenseRef-NVIDIA-Proprietary-Software``."""
    s = _UNSAFE.sub("-", name.strip()).strip("-.") or "unknown"
    return s if s.startswith("LicenseRef-") else f"LicenseRef-{s}"


@functools.lru_cache(maxsize=4096)
def normalise_key(name: str) -> str:
    """One licence name -> its SPDX id, else a ``LicenseRef-`` id."""
    n = " ".join(name.split())
    low = n.lower()
    if low.startswith("licenseref-"):
        return license_ref(n)
    if low in _ALIASES:
        return _ALIASES[low]
    m = _FAMILY.match(n)
    if m:
        fam, ver, suffix = m.group(1).upper(), m.group(2), (m.group(3) or "").lower()
        if "." not in ver:
            ver += ".0"
        later = suffix in ("+", "-or-later")
        cand = f"{fam}-{ver}-{'or-later' if later else 'only'}"
        if cand.lower() in _known():
            return _known()[cand.lower()]
    if low in _known():
        return _known()[low]
    return license_ref(n)


@functools.lru_cache(maxsize=4096)
def to_expression(text: str) -> str | None:
    """One declared licence string -> a valid SPDX expression, None when empty."""
    text = " ".join(text.split())
    if not text:
        return None
    parts = _OPERATORS.split(text)
    out: list[str] = []
    for p in parts:
        if not p:
            continue
        tok = p.strip().lower().lstrip(",").strip()
        if p in ("(", ")"):
            out.append(p)
        elif tok in ("and", "or", "with"):
            out.append(f" {tok.upper()} ")
        elif p.strip():
            out.append(normalise_key(p.strip()))
    candidate = "".join(out).strip()
    try:
        expr = _spdx().parse(candidate, validate=False, strict=True)
    except (ExpressionError, Exception):  # noqa: BLE001 - the library raises odd types
        expr = None
    if expr is None:
        return license_ref(text)
    rendered = str(expr)
    if not _valid(rendered):
        # a piece still unknown (a WITH on a non-exception, say): keep it whole, as a ref
        return license_ref(text)
    return rendered


def _valid(expression: str) -> bool:
    """Every key an SPDX id (an exception only after WITH) or a LicenseRef-."""
    try:
        expr = _spdx().parse(expression, validate=False, strict=True)
    except Exception:  # noqa: BLE001 - license-expression raises ExpressionError, and
        # AttributeError/TypeError from its own code on odd input: not a valid expression
        return False
    if expr is None:
        return False
    for sym in _spdx().license_symbols(expr, decompose=False):
        if hasattr(sym, "license_symbol"):  # LICENSE WITH EXCEPTION
            lic, exc = str(sym.license_symbol.key), str(sym.exception_symbol.key)
            if lic.lower() not in _known() or exc.lower() not in _known():
                return False
            continue
        key = str(sym.key)
        if not key.startswith("LicenseRef-") and key.lower() not in _known():
            return False
    return True


def declared_expression(values: list[str]) -> str | None:
    """Several declared strings of one component -> one expression (ANDed)."""
    exprs = list(dict.fromkeys(e for v in values if v and v.strip()
                               if (e := to_expression(v)) is not None))
    if not exprs:
        return None
    if len(exprs) == 1:
        return exprs[0]
    joined = " AND ".join(f"({e})" if " " in e else e for e in exprs)
    try:
        return str(_spdx().parse(joined, validate=False, simple=False))
    except Exception:  # noqa: BLE001 - license-expression's errors are of several types;
        # the pieces are valid expressions each, so their plain AND is kept as written
        return joined
