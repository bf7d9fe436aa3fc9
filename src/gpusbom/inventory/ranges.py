"""Version constraints for inventory queries: ``<9.1``, ``>=9.0,<9.1``, ``==2.28.3``.

Versions are compared with the advisory version schemes (``advisories/versions.py``): a
package's own scheme (deb, rpm, pep440 for PyPI) for its package version, and the dotted
numeric ``generic`` scheme (PEP 440 as a fallback) for a GPU product's version. Clauses
are read and evaluated by ``advisories.versions.read_clause`` / ``satisfies`` (shared with
policy ranges); a bare version here means ``==``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..advisories.versions import SCHEMES, read_clause, satisfies
from ..errors import UsageError

_OPS = ("<=", ">=", "==", "!=", "<", ">", "=")

ECOSYSTEM_SCHEMES = {"deb": "deb", "rpm": "rpm", "pypi": "pep440", "apk": "generic"}


@dataclass(frozen=True)
class Constraint:
    op: str
    version: str


@dataclass(frozen=True)
class QueryRange:
    """All constraints must hold. ``text`` is what the user wrote."""

    text: str
    constraints: tuple[Constraint, ...]
    scheme: str | None = None  # force one scheme

    def schemes_for(self, ecosystem: str | None, via_product: bool) -> tuple[str, ...]:
        if self.scheme:
            return (self.scheme,)
        if via_product:
            return ("generic", "pep440")
        own = ECOSYSTEM_SCHEMES.get(ecosystem or "")
        return tuple(dict.fromkeys(x for x in (own, "generic", "pep440") if x))

    def contains(self, version: str | None, ecosystem: str | None = None,
                 via_product: bool = False) -> bool | None:
        """True/False; None when the version (or a bound) does not parse in any scheme
        that applies (the caller reports such rows as not comparable)."""
        if version is None:
            return None
        return satisfies(version, ((c.op, c.version) for c in self.constraints),
                         self.schemes_for(ecosystem, via_product))


def parse_range(text: str, scheme: str | None = None) -> QueryRange:
    """``"<9.1"``, ``">=9.0,<9.1"``, ``"9.1.0"`` (equality); raises ``UsageError``."""
    if scheme is not None and scheme not in SCHEMES:
        raise UsageError(f"--scheme {scheme!r}: one of {', '.join(sorted(SCHEMES))}")
    parts = [p for p in text.split(",") if p.strip()]
    if not parts:
        raise UsageError(f"version range {text!r}: empty")
    out: list[Constraint] = []
    for p in parts:
        m = read_clause(p)
        if m is None:
            raise UsageError(f"version range {text!r}: cannot read {p.strip()!r} "
                             f"(use {', '.join(o for o in _OPS if o != '=')} and commas)")
        op = m[0] or "=="
        out.append(Constraint("==" if op == "=" else op, m[1]))
    return QueryRange(text.strip(), tuple(out), scheme)
