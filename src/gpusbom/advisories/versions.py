"""Version schemes for advisory matching.

Every scheme turns a version string into a sort key; keys of one scheme are totally
ordered (``<``/``==`` on keys), and a range is judged only by comparing keys, so range
membership always agrees with the order.

Schemes:

- ``deb``: Debian policy (epoch, upstream, revision, ``~`` sorts before anything),
  via python-debian;
- ``rpm``: rpm's ``rpmvercmp`` rules on ``[epoch:]version[-release]`` (alphanumeric
  segments, ``~`` before anything, ``^`` after the base version but before any further
  segment);
- ``pep440``: packaging's ``Version`` (local versions ``2.6.0+cu124`` sort after
  ``2.6.0``; NGC builds ``2.6.0a0+ecf3bae.nv25.01`` are pre-releases of 2.6.0);
- ``nvidia-driver``: dotted integers (``580.126.09`` == ``580.126.9``; leading zeros
  are padding), branch = the first number (``R580``); fixes apply within a branch;
- ``intel``: Intel's dotted numeric versions, any number of parts
  (``32.0.101.6077``, ``25.18.33578.6``, ``2025.0.0``), compared numerically;
- ``semver``: ``v``-prefix tolerant, numeric core compared numerically (missing parts are
  zero), a ``-pre`` release sorts before its release, ``+build`` ignored.
- ``generic`` is an alias of ``semver``.

Where univers fits, it is used: ``rpm`` is its ``RpmVersion`` (900 ordered pairs of 30 RPM
versions, epochs, ``~``, ``^``, releases, agree with the rpmvercmp key it replaced; a parse
costs about 60 us, cached). ``deb`` and ``pep440`` stay on python-debian and packaging, the
libraries univers' own Debian and PyPI classes wrap or re-implement. ``semver`` is not
univers' ``SemverVersion``: it reads a fourth numeric part as build metadata, so
``12.6.3.4`` and ``12.6.3.9`` compare equal (and ``1.2.3`` equal to ``1.2.3.4.5``), while
vendor versions of four and more parts (CUDA's ``12.6.20241114``-style, Intel's) must
order by every part. ``nvidia-driver`` (branch = first number, zero-padded patch) and
``intel`` are gpusbom's own schemes.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from packaging.version import InvalidVersion as _PepInvalid
from packaging.version import Version as PepVersion

from ..errors import AdvisoryError

if TYPE_CHECKING:
    from debian.debian_support import Version as DebVersion

__all__ = [
    "SCHEMES",
    "InvalidVersion",
    "build_of",
    "Range",
    "compare",
    "driver_branch",
    "parse",
]


class InvalidVersion(AdvisoryError):
    """The string is not a version in that scheme."""


# --------------------------------------------------------------------------- deb


class _DebKey:
    """Debian versions, ordered with python-debian's comparison (``version_compare``)."""

    __slots__ = ("v",)

    def __init__(self, v: DebVersion) -> None:
        self.v = v

    def __lt__(self, other: _DebKey) -> bool:
        return bool(self.v < other.v)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _DebKey) and bool(self.v == other.v)

    def __hash__(self) -> int:  # equal keys need not hash equal for our use; keep it coarse
        return 0

    def __repr__(self) -> str:
        return f"deb:{self.v}"


_DEB_RX = re.compile(r"^(?:\d+:)?[0-9][A-Za-z0-9.+~:-]*$")


def _deb(v: str) -> _DebKey:
    s = v.strip()
    if not _DEB_RX.match(s):
        raise InvalidVersion(f"not a Debian version: {v!r}")
    # imported for the first Debian version (~5 ms): a scan whose components no advisory
    # judges by a Debian version range never needs it
    from debian.debian_support import Version as DebVersion

    try:
        return _DebKey(DebVersion(s))
    except ValueError as exc:
        raise InvalidVersion(str(exc)) from None


# --------------------------------------------------------------------------- rpm

_RPM_RX = re.compile(r"^(?:(\d+):)?([A-Za-z0-9._+~^]+)(?:-([A-Za-z0-9._+~^]+))?$")


def _rpm(v: str) -> Any:
    """univers' ``RpmVersion`` (rpm's ``rpmvercmp`` on ``[epoch:]version[-release]``); a
    version without a release sorts before the same version with one."""
    from univers.versions import RpmVersion

    s = v.strip()
    m = _RPM_RX.match(s)
    if not m or not re.search(r"[A-Za-z0-9]", m.group(2)):
        raise InvalidVersion(f"not an RPM version: {v!r}")
    try:
        return RpmVersion(s)
    except ValueError as exc:
        raise InvalidVersion(f"not an RPM version: {v!r}: {exc}") from None


# --------------------------------------------------------------------------- pep 440


def _pep440(v: str) -> PepVersion:
    s = v.strip()
    if "~" in s:  # a vendor's Debian-style release candidate: 1.3.0~rc.1 is 1.3.0rc1
        s = s.replace("~", "", 1)
    try:
        return PepVersion(s)
    except _PepInvalid:
        raise InvalidVersion(f"not a PEP 440 version: {v!r}") from None


# --------------------------------------------------------------------------- numeric

_NUMERIC_RX = re.compile(r"^[vVrR]?(\d+(?:\.\d+)*)$")


def _numeric(v: str) -> tuple[int, ...]:
    m = _NUMERIC_RX.match(v.strip())
    if not m:
        raise InvalidVersion(f"not a dotted numeric version: {v!r}")
    parts = [int(x) for x in m.group(1).split(".")]
    while len(parts) > 1 and parts[-1] == 0:  # 2025.0.0 == 2025.0 == 2025
        parts.pop()
    return tuple(parts)


def driver_branch(v: str) -> str | None:
    """``580.126.09`` -> ``"580"``; None when not a driver version."""
    try:
        return str(_numeric(v)[0])
    except InvalidVersion:
        return None


# --------------------------------------------------------------------------- semver-ish

_SEMVER_RX = re.compile(
    r"^[vV]?(\d+(?:\.\d+)*)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$"
)
# vendor spellings of a pre-release: 1.3.0rc14, 1.3.0~rc.1, 1.3.0.rc1, 1.3.0 rc14
_VENDOR_PRE = re.compile(r"^([vV]?\d+(?:\.\d+)*)(?:\s+|[~.])?(rc|alpha|beta|a|b|pre|dev)"
                         r"\.?(\d+)$", re.I)


def _semver(v: str) -> tuple[Any, ...]:
    vp = _VENDOR_PRE.match(v.strip())
    if vp:  # as semver writes it: 1.3.0-rc.14
        v = f"{vp.group(1)}-{vp.group(2).lower()}.{vp.group(3)}"
    m = _SEMVER_RX.match(v.strip())
    if not m:
        raise InvalidVersion(f"not a semver-like version: {v!r}")
    core = [int(x) for x in m.group(1).split(".")]
    while len(core) > 1 and core[-1] == 0:
        core.pop()
    pre = m.group(2)
    if pre is None:
        pre_key: tuple[Any, ...] = (1,)  # a release sorts after its pre-releases
    else:
        ids: list[tuple[int, Any]] = []
        for ident in pre.split("."):
            # numeric identifiers sort before alphanumeric ones (semver 2.0.0 §11); a
            # vendor's "rc14" is "rc.14" (so rc14 sorts after rc2, as the vendor means)
            sp = re.fullmatch(r"([A-Za-z]+)(\d+)", ident)
            if sp:
                ids += [(1, sp.group(1).lower()), (0, int(sp.group(2)))]
                continue
            ids.append((0, int(ident)) if ident.isdigit() else (1, ident))
        pre_key = (0, tuple(ids))
    return (tuple(core), pre_key)


# --------------------------------------------------------------------------- registry

SCHEMES: dict[str, Callable[[str], Any]] = {
    "deb": _deb,
    "rpm": _rpm,
    "pep440": _pep440,
    "nvidia-driver": _numeric,
    "intel": _numeric,
    "numeric": _numeric,
    "semver": _semver,
    "generic": _semver,
}


@functools.lru_cache(maxsize=65536)
def parse(scheme: str, version: str) -> Any:
    """The sort key of ``version`` in ``scheme``; raises ``InvalidVersion``."""
    try:
        fn = SCHEMES[scheme]
    except KeyError:
        raise InvalidVersion(f"unknown version scheme {scheme!r}") from None
    return fn(version)


def compare(scheme: str, a: str, b: str) -> int:
    ka, kb = parse(scheme, a), parse(scheme, b)
    return -1 if ka < kb else (1 if kb < ka else 0)


@dataclass(frozen=True)
class Range:
    """``introduced <= v`` and (``v < fixed`` | ``v <= last_affected``); unbounded sides
    are None. ``introduced`` of ``"0"`` means from the beginning."""

    scheme: str
    introduced: str | None = None
    fixed: str | None = None
    last_affected: str | None = None

    def contains(self, version: str) -> bool:
        k = parse(self.scheme, version)
        if self.introduced not in (None, "0") and k < parse(self.scheme, self.introduced):
            return False
        if self.fixed is not None and not k < parse(self.scheme, self.fixed):
            return False
        if self.last_affected is not None and parse(self.scheme, self.last_affected) < k:
            return build_of(self.scheme, version, self.last_affected)
        return True


_RELEASE_RX = re.compile(r"^(?:\d+:)?[vV]?(\d+(?:\.\d+)*)")


def _release_parts(scheme: str, v: str) -> tuple[int, ...]:
    if scheme == "pep440":
        try:
            return tuple(_pep440(v).release)
        except InvalidVersion:
            return ()
    m = _RELEASE_RX.match(v.strip())
    return tuple(int(x) for x in m.group(1).split(".")) if m else ()


def build_of(scheme: str, version: str, release: str) -> bool:
    """Whether ``version`` is a build of the release-form ``release``: ``release`` has at
    least three numeric parts and ``version``'s numeric parts begin with them and go on
    (TensorRT build ``10.16.1.11`` of release ``10.16.1``). An inclusive bound written in
    release form (``<= v10.16.1``) holds that release's builds; a bound of fewer parts
    (``<= 12.6``) does not reach later patch releases (``12.6.1``)."""
    r = _release_parts(scheme, release)
    v = _release_parts(scheme, version)
    return len(r) >= 3 and len(v) > len(r) and v[: len(r)] == r


# ------------------------------------------------------------------ comparison clauses
# One implementation of ``OP VERSION`` clauses (policy ``versions:``, inventory queries):
# how a clause reads and when a version satisfies all of them, in the schemes above.

_CLAUSE = re.compile(r"^\s*(>=|<=|==|!=|>|<|=)?\s*([^\s,<>=!]+)\s*$")
_HOLDS: dict[str, Callable[[bool, bool], bool]] = {
    "<": lambda lt, gt: lt, "<=": lambda lt, gt: not gt, ">": lambda lt, gt: gt,
    ">=": lambda lt, gt: not lt, "==": lambda lt, gt: not lt and not gt,
    "!=": lambda lt, gt: lt or gt,
}


def read_clause(text: str) -> tuple[str | None, str] | None:
    """``">= 2.6"`` -> (">=", "2.6"); ``"9.1"`` -> (None, "9.1"); ``"=9.1"`` -> ("=",
    "9.1"); None when it is no clause. Callers decide what a bare or ``=`` clause means."""
    m = _CLAUSE.match(text)
    return (m.group(1), m.group(2)) if m else None


def satisfies(version: str, clauses: Iterable[tuple[str, str]],
              schemes: Iterable[str]) -> bool | None:
    """Whether ``version`` meets every ``(op, bound)`` (ops ``< <= > >= == !=``) in the first
    scheme that parses the version and every bound; None when no scheme does."""
    cl = tuple(clauses)
    for s in schemes:
        try:
            key = parse(s, version)
            bounds = [parse(s, v) for _, v in cl]
        except InvalidVersion:
            continue
        return all(_HOLDS[op](key < b, b < key) for (op, _), b in zip(cl, bounds, strict=True))
    return None
