"""The verdict rules of the advisory matcher: given the vendor's entries of one CVE for one
target and one component version, is it affected, and which rule decided (``RULES``).

Vendor ranges and exact versions (``_entry_affects``), the next fix above a version, the
NVIDIA driver's branch and product-line rules (``_judge_driver``, ``_judge_lines``), a
CUDA component judged as its toolkit release (``_judge_release``), and NGC pre-releases
of a fix. :mod:`.matcher` finds which entries apply to which component and builds the
findings; everything here is a pure function of entries and a version.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

from packaging.version import InvalidVersion as _PepInvalid
from packaging.version import Version as _Pep

from ..model import Component
from .cuda_releases import ReleaseGuess
from .db import Affected
from .triton_releases import container_of
from .versions import InvalidVersion, Range, parse

__all__ = ["RULES", "Verdict", "line_of"]


def _pep_public_equal(a: str, b: str) -> bool:
    try:
        return _Pep(a).public == _Pep(b).public
    except _PepInvalid:
        return False


def _entry_affects(e: Affected, version: str) -> bool:
    assert e.scheme is not None  # noqa: S101 - type narrowing of an invariant
    for r in e.ranges:
        rng = Range(e.scheme, r.get("introduced"), r.get("fixed"), r.get("last_affected"))
        if rng.contains(version):
            return True
    for x in e.versions:
        if e.scheme == "pep440":
            if _pep_public_equal(version, x):
                return True
        elif parse(e.scheme, x) == parse(e.scheme, version):
            return True
    return False


def _next_fix(e: Affected, version: str) -> str | None:
    """The smallest fixed version above ``version`` among the entry's fixes."""
    assert e.scheme is not None  # noqa: S101 - type narrowing of an invariant
    scheme = e.scheme
    fixes = list(e.fixed) + [r["fixed"] for r in e.ranges if "fixed" in r]
    above = []
    k = parse(scheme, version)
    for f in dict.fromkeys(fixes):
        try:
            if k < parse(scheme, f):
                above.append(f)
        except InvalidVersion:
            continue
    if not above:
        return None
    return min(above, key=lambda f: parse(scheme, f))


class Verdict(NamedTuple):
    """What the matcher concluded for one component and one CVE, and which rule decided."""

    status: str  # affected | review | unsupported-branch | not-affected
    fixed: str | None
    reason: str
    rule: str


#: the rules a finding can name (``AdvisoryMatch.rule``); docs/advisories.md explains each
RULES = (
    "vendor-range",  # the version lies in a vendor range
    "no-range",  # the vendor gives no machine-readable range
    "version-unknown",  # the component's version is unknown or does not parse
    "driver-branch",  # NVIDIA driver: the fix of the component's own branch
    "product-line",  # NVIDIA driver: data-center vs GeForce/RTX fixes differ, line unknown
    "unsupported-branch",  # NVIDIA driver: a branch absent from the bulletin, older than listed
    "triton-release-table",  # Triton: server version -> NGC release
    "prerelease-of-fix",  # an NGC pre-release build of the fixed release
    "cuda-release",  # a CUDA component judged as its toolkit release
    "metadata-only",  # the version is known only from image env/labels
    "per-distro",  # a per-distribution-release advisory, the component's release unknown
    "disputed-cve",  # the CVE record is disputed or rejected: never plainly affected
    "windows-only",  # auto-VEX: the CVE lists the product only on Windows
    "kernel-mode-on-image",  # auto-VEX: kernel-mode driver CVE, image holds user space only
    "cuda-part-absent",  # auto-VEX: the CUDA tool/library the CVE names is not present
)


class _Split(NamedTuple):
    """One CVE's entries for one target, sorted the way ``_judge`` reads them (built once
    per entry list, not once per component version)."""

    vague: list[Affected]  # no machine-readable range
    exact: list[Affected]
    driver: list[Affected]  # NVIDIA driver entries of the plain driver (no vGPU/gaming variant)
    other: list[Affected]  # entries of other schemes
    by_branch: dict[str | None, list[Affected]]  # driver entries by branch (None: unbranched)
    listed: list[int]  # the numeric branches of the driver entries, ascending


def _split(entries: list[Affected]) -> _Split:
    exact = [e for e in entries if e.machine_readable]
    driver = [e for e in exact if e.scheme == "nvidia-driver" and e.variant is None]
    by_branch: dict[str | None, list[Affected]] = {}
    for e in driver:
        by_branch.setdefault(e.branch, []).append(e)
    return _Split([e for e in entries if not e.machine_readable], exact, driver,
                  [e for e in exact if e.scheme != "nvidia-driver"], by_branch,
                  sorted({int(e.branch) for e in driver if e.branch and e.branch.isdigit()}))


def _judge(
    entries: list[Affected], c: Component, version: str | None, ctx: _Ctx | None = None,
    split: _Split | None = None,
) -> Verdict | None:
    """The verdict for one component against one CVE's entries, None when not affected.
    ``split``: ``_split(entries)`` when the caller keeps it."""
    if not entries:
        return None
    vague, exact, driver, other, _, _ = sp = split or _split(entries)
    if not exact:
        return Verdict("review", None, vague[0].no_range or "no machine-readable range",
                       "no-range")
    if not driver and not other:
        return None  # only vGPU / gaming variants: not what a plain driver component is
    results: list[Verdict] = []
    if driver:
        results.extend(_judge_driver(driver, version, ctx or _Ctx(), sp))
    for e in other:
        v = c.properties.get(e.version_of) if e.version_of else version
        via = ""
        if not v and e.version_of == "container-release" and version:
            rel = container_of(version)
            if rel is not None:
                v, via = rel.container, (f"server {version} is NGC release {rel.container} "
                                         f"({rel.source}); ")
        if not v:
            what = e.version_of or "version"
            results.append(Verdict("review", None, f"{what} unknown; vendor range needs it",
                                   "version-unknown"))
            continue
        try:
            hit = _entry_affects(e, v)
        except InvalidVersion as exc:
            results.append(Verdict("review", None, f"cannot compare: {exc}", "version-unknown"))
            continue
        if hit:
            fix = _next_fix(e, v)
            reason = f"{via}{v} in vendor range {_describe(e)}"
            if e.scheme == "pep440" and fix and _ngc_prerelease_of(v, fix):
                results.append(Verdict(
                    "review", fix, f"{v} is a pre-release build of the fixed release {fix}; "
                    "whether it carries the fix is not known", "prerelease-of-fix"))
            else:
                results.append(Verdict("affected", fix, reason,
                                       "triton-release-table" if via else "vendor-range"))
    for want in ("affected", "unsupported-branch", "review"):
        for r in results:
            if r.status == want:
                return r
    return _vague_rest(vague, version)


def _vague_rest(vague: list[Affected], version: str | None) -> Verdict | None:
    """No silent outcome: where the understood ranges clear the version but the vendor
    also wrote a phrase the importer did not understand (an entry with ``no_range``) for
    the same product, the finding is ``review`` naming that phrase."""
    branch = None
    if version:
        try:
            branch = str(parse("nvidia-driver", version)[0])
        except InvalidVersion:
            branch = None
    for e in vague:
        if e.variant is None and (e.branch is None or e.branch == branch):
            return Verdict("review", None, (e.no_range or "no machine-readable range")
                           + "; the vendor's other phrases do not cover this version",
                           "no-range")
    return None


def _judge_release(
    entries: list[Affected], c: Component, guess: ReleaseGuess
) -> Verdict | None:
    """A CUDA component judged as the toolkit release it ships with.

    Never more than ``review``: a toolkit bulletin names the CUDA Toolkit as a whole (its
    CVEs are often in one tool, e.g. cuobjdump or nvdisasm), so whether this component
    carries the vulnerable part is not stated."""
    what = c.product_name or c.name
    caveat = (f"the bulletin names the CUDA Toolkit as a whole; whether {what} carries the "
              "vulnerable part is not stated")
    if guess.release is not None:
        got = _judge(entries, c, guess.release)
        if got is None:
            return None
        return Verdict("review", got.fixed, f"{guess.how}; {got.reason}; {caveat}",
                       "cuda-release")
    assert guess.lowest is not None and guess.highest is not None  # noqa: S101 - type narrowing of an invariant
    lo, hi = _judge(entries, c, guess.lowest), _judge(entries, c, guess.highest)
    if lo is None and hi is None:
        return None
    if lo is not None and hi is not None and lo.status == hi.status == "affected":
        return Verdict("review", lo.fixed, (f"{guess.how}; every such release is in the vendor "
                                            f"range ({lo.reason}); {caveat}"), "cuda-release")
    either = lo or hi
    return Verdict("review", either.fixed if either else None,
                   (f"{guess.how}; some {guess.lowest}.x releases are affected, others not: "
                    "the exact release is unknown"), "cuda-release")


def _ngc_prerelease_of(v: str, fix: str) -> bool:
    try:
        pv, pf = _Pep(v), _Pep(fix)
    except _PepInvalid:
        return False
    return pv.is_prerelease and pv.local is not None and pv.release == pf.release


def _describe(e: Affected) -> str:
    parts = []
    for r in e.ranges:
        lo = r.get("introduced")
        hi = (f"< {r['fixed']}" if "fixed" in r else
              f"<= {r['last_affected']}" if "last_affected" in r else "")
        parts.append(" ".join(x for x in ((f">= {lo}" if lo and lo != "0" else ""), hi) if x))
    parts.extend(f"== {x}" for x in e.versions)
    prefix = f"R{e.branch} " if e.branch else ""
    return prefix + (", ".join(p for p in parts if p) or "(all)")


@dataclass(frozen=True)
class _Ctx:
    """What the driver rules need beyond one CVE's entries."""

    bulletin_branches: frozenset[int] = frozenset()  # Linux driver branches of the bulletin
    line: str | None = None  # "datacenter" | "workstation": the host's NVIDIA GPUs


_DATACENTER = re.compile(r"^Tesla$|Data Center|\bHGX\b|\bDGX\b", re.IGNORECASE)
_WORKSTATION = re.compile(r"GeForce|RTX|Quadro|NVS|Studio|TITAN", re.IGNORECASE)
_VENDOR_SENTENCE = ("the vendor: earlier branch releases may also be affected; upgrade to "
                    "the latest branch release")


def line_of(vendor_product: str | None) -> str | None:
    """The product line of a driver entry: ``datacenter`` (Tesla, Data Center GPU),
    ``workstation`` (GeForce, RTX, Quadro, NVS), None when the entry names neither."""
    if not vendor_product:
        return None
    if _DATACENTER.search(vendor_product):
        return "datacenter"
    if _WORKSTATION.search(vendor_product):
        return "workstation"
    return None


def _judge_driver(
    entries: list[Affected], version: str | None, ctx: _Ctx, split: _Split
) -> list[Verdict]:
    if not version:
        return [Verdict("review", None, "driver version unknown", "version-unknown")]
    try:
        key = parse("nvidia-driver", version)
    except InvalidVersion as exc:
        return [Verdict("review", None, f"cannot compare: {exc}", "version-unknown")]
    branch = int(key[0])
    mine = split.by_branch.get(str(branch), [])
    unbranched = split.by_branch.get(None, [])
    if mine or unbranched:
        return _judge_lines(mine + unbranched, version, ctx)
    listed = split.listed
    in_bulletin = ctx.bulletin_branches or frozenset(listed)
    if branch in in_bulletin:
        return []  # per-CVE product tree: the bulletin lists this branch, not for this CVE
    if listed and branch < max(in_bulletin):
        fixes = []
        for b in listed:
            fx = sorted({f for e in entries if e.branch == str(b) for f in e.fixed},
                        key=lambda f: parse("nvidia-driver", f))
            if fx:
                fixes.append(f"R{b} {fx[-1]}")
        return [Verdict(
            "unsupported-branch", None,
            f"branch R{branch} is not in the bulletin ({_VENDOR_SENTENCE}); fixed branches: "
            + ", ".join(fixes), "unsupported-branch")]
    return []  # a branch newer than every branch the bulletin lists: not affected


def _judge_lines(entries: list[Affected], version: str, ctx: _Ctx) -> list[Verdict]:
    """One branch's entries: per product line when the lines' fixes differ."""
    by_line: dict[str | None, list[Affected]] = {}
    for e in entries:
        by_line.setdefault(line_of(e.vendor_product), []).append(e)

    def verdict(es: list[Affected]) -> Verdict | None:
        hits = [e for e in es if _entry_affects(e, version)]
        if not hits:
            return None
        fixes = [f for f in (_next_fix(e, version) for e in hits) if f]
        fix = min(fixes, key=lambda f: parse("nvidia-driver", f)) if fixes else None
        return Verdict("affected", fix, f"{version} in vendor range {_describe(hits[0])}",
                       "driver-branch")

    if ctx.line in by_line:
        got = verdict(by_line[ctx.line])
        what = "data-center" if ctx.line == "datacenter" else "GeForce/RTX"
        return [got._replace(reason=f"{got.reason} ({what} line: the host's GPUs)")] if got else []
    lines = {k: verdict(v) for k, v in by_line.items()}
    got_any = [v for v in lines.values() if v is not None]
    if not got_any:
        return []
    fixes = {k: sorted({f for e in by_line[k] for f in e.fixed},
                       key=lambda f: parse("nvidia-driver", f)) for k in by_line}
    if len(got_any) == len(lines) and len({v.fixed for v in got_any}) <= 1:
        return [got_any[0]]  # every line agrees
    desc = "; ".join(f"{_LINE_NAMES.get(k, 'other')}: "
                     f"{'affected, fixed in ' + str(v.fixed) if v else 'fixed (' + ', '.join(fixes[k]) + ')'}"
                     for k, v in sorted(lines.items(), key=lambda kv: str(kv[0])))
    best = max(got_any, key=lambda v: parse("nvidia-driver", v.fixed) if v.fixed else (0,))
    return [Verdict("review", best.fixed,
                    f"{version}: the product line is undetermined and the vendor's fixes "
                    f"differ by line ({desc})", "product-line")]


_LINE_NAMES = {"datacenter": "data-center (Tesla)", "workstation": "GeForce/RTX/Quadro",
               None: "other"}
