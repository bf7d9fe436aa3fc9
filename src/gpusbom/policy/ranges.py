"""Version ranges in policies: ``">=2.6.0,<3"``, ``"<12.4"``, ``"==580.95.05"``.

A range is comma-separated clauses ``OP VERSION`` (OP: ``>=``, ``>``, ``<=``, ``<``, ``==``,
``!=``), all of which must hold. Versions are compared with the advisory matcher's
version schemes (``gpusbom.advisories.versions``), so a policy and an advisory agree on
order: the entry's ``scheme`` when given, else the component's ecosystem scheme (pypi:
pep440, deb: deb, rpm: rpm) and then ``generic`` (dotted numeric / semver-like) and
``pep440``. A bound that parses in none of them is a configuration error.

Clauses are read and evaluated by ``advisories.versions.read_clause`` / ``satisfies``, the
one implementation inventory queries (``inventory/ranges.py``) use too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..advisories.versions import InvalidVersion, parse, read_clause, satisfies
from ..errors import GpusbomError

__all__ = ["RangeError", "PolicyRange", "check_version", "compare", "scheme_for"]

_FALLBACK = ("generic", "pep440")
_ECOSYSTEM_SCHEME = {"pypi": "pep440", "deb": "deb", "rpm": "rpm", "conda": "pep440"}


class RangeError(GpusbomError, ValueError):
    """A range or version that does not parse (config), or cannot be compared (data)."""


def scheme_for(ecosystem: str | None) -> str | None:
    return _ECOSYSTEM_SCHEME.get(ecosystem or "")


def check_version(version: str, scheme: str | None) -> None:
    """Raise ``RangeError`` unless ``version`` parses in ``scheme`` (or a fallback scheme)."""
    for s in ([scheme] if scheme else list(_FALLBACK)):
        try:
            parse(s, version)
            return
        except InvalidVersion:
            continue
    raise RangeError(f"{version!r} is not a version"
                     + (f" in scheme {scheme}" if scheme else ""))


def _keys(scheme: str, versions: list[str]) -> list[Any] | None:
    try:
        return [parse(scheme, v) for v in versions]
    except InvalidVersion:
        return None


def compare(a: str, b: str, *, scheme: str | None = None, hint: str | None = None) -> int:
    """-1, 0, 1; the first scheme both parse in wins; ``RangeError`` when none does."""
    for s in _candidates(scheme, hint):
        keys = _keys(s, [a, b])
        if keys is not None:
            ka, kb = keys
            return -1 if ka < kb else (1 if kb < ka else 0)
    raise RangeError(f"cannot compare {a!r} with {b!r}")


def _candidates(scheme: str | None, hint: str | None) -> list[str]:
    if scheme:
        return [scheme]
    return list(dict.fromkeys(s for s in (hint, *_FALLBACK) if s))


@dataclass(frozen=True)
class PolicyRange:
    text: str
    clauses: tuple[tuple[str, str], ...]
    scheme: str | None = None

    @classmethod
    def parse(cls, text: str, scheme: str | None = None) -> PolicyRange:
        clauses = []
        for part in text.split(","):
            c = read_clause(part)
            if c is None or c[0] in (None, "="):
                raise RangeError(f"clause {part.strip()!r} is not OP VERSION "
                                 "(OP: >=, >, <=, <, ==, !=)")
            check_version(c[1], scheme)
            clauses.append((c[0], c[1]))
        return cls(text, tuple(clauses), scheme)

    def contains(self, version: str, *, hint: str | None = None) -> bool:
        """Whether ``version`` satisfies every clause; ``RangeError`` when it cannot be
        compared in any scheme the bounds parse in."""
        ok = satisfies(version, self.clauses, _candidates(self.scheme, hint))
        if ok is None:
            raise RangeError(f"{version!r} cannot be compared with {self.text!r}")
        return ok

    def __str__(self) -> str:
        return self.text
