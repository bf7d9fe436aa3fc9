"""Match scanned components against the advisory database.

A component is looked up by every identity it carries: its package (``ecosystem`` +
``name``, e.g. ``pypi``/``torch``, ``deb``/``...``) and every GPU product it provides
(``Component.products`` after fusion, or its own ``stack``/``product`` properties),
each with that product's version. Advisory targets (``db.TARGETS``) name those
identities, so an image's ``cuda-compat`` (stack ``nvidia-driver``) with
``libcuda.so.580.95.05`` is judged as driver 580.95.05.

Status of a finding:

- ``affected``: the version lies in a vendor range;
- ``review``: the vendor gives no machine-readable range, the version is unknown or
  does not parse in the advisory's scheme, or it is an NGC pre-release of the fixed
  release, or only image metadata (env/label) gives the version;
- ``not-affected``: set later by a VEX statement (``vex.py``).

NVIDIA driver rule: a fix applies only within its branch (``R535`` fixed in
535.288.01 is fixed, though below the R570 fix); a branch older than the newest branch
a bulletin lists but absent from it has no fix (affected, with no fixed version in
that branch); a branch newer than every listed branch is not reported.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from packaging.version import InvalidVersion as _PepInvalid
from packaging.version import Version as _Pep

from .. import catalog
from ..model import AdvisoryMatch, Component, Finding, Product
from .cuda_releases import ReleaseGuess, release_of
from .db import Advisory, AdvisoryDB, Affected, Vulnerability, selectors
from .triton_releases import container_of
from .versions import InvalidVersion, Range, parse

__all__ = ["SEVERITY_ORDER", "match", "severity_of"]

SEVERITY_ORDER = ("critical", "high", "medium", "low", "none", "unknown")
_METADATA_METHODS = {"env", "label"}


def severity_of(score: float | None) -> str:
    """CVSS v3/v4 qualitative rating of a base score."""
    if score is None:
        return "unknown"
    if score == 0:
        return "none"
    if score < 4:
        return "low"
    if score < 7:
        return "medium"
    if score < 9:
        return "high"
    return "critical"


def _norm(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


@dataclass
class _Index:
    # identity key -> [(advisory, vulnerability, target)]
    by_key: dict[tuple[str, str, str], list[tuple[Advisory, Vulnerability, str]]]


def _build_index(db: AdvisoryDB) -> _Index:
    by_key: dict[tuple[str, str, str], list[tuple[Advisory, Vulnerability, str]]] = {}
    for adv in db:
        for vuln in adv.vulnerabilities:
            for target in dict.fromkeys(a.target for a in vuln.affected):
                try:
                    sels = selectors(target)
                except KeyError:
                    sels = []
                for sel in sels:
                    if "catalog" in sel:
                        key = ("catalog", "*", sel["catalog"])
                    elif "source" in sel:
                        key = ("src", sel["ecosystem"], _norm(sel["source"]))
                    elif "ecosystem" in sel:
                        key = ("pkg", sel["ecosystem"], _norm(sel["name"]))
                    else:
                        key = ("stack", sel["stack"], sel.get("product", "*"))
                    by_key.setdefault(key, []).append((adv, vuln, target))
    return _Index(by_key)


_INDEX_CACHE: dict[int, tuple[AdvisoryDB, _Index]] = {}


def _index(db: AdvisoryDB) -> _Index:
    hit = _INDEX_CACHE.get(id(db))
    if hit is None or hit[0] is not db:
        hit = (db, _build_index(db))
        _INDEX_CACHE[id(db)] = hit
    return hit[1]


def _identities(c: Component) -> list[tuple[tuple[str, str, str], str | None, bool]]:
    """(key, version, via a GPU product) for every identity the component carries."""
    out: list[tuple[tuple[str, str, str], str | None, bool]] = []
    if c.ecosystem and c.ecosystem != "generic":
        out.append((("pkg", c.ecosystem, _norm(c.name)), c.version, False))
        if c.ecosystem in ("deb", "rpm", "apk"):
            # distro advisories (OSV Debian/Ubuntu) name source packages and their versions
            src = c.properties.get("source-package") or c.name
            out.append((("src", c.ecosystem, _norm(src)),
                        c.properties.get("source-version") or c.version, False))
    products = list(c.products)
    stack = c.properties.get("stack")
    if not products and stack:
        version = c.properties.get("product-version") or c.version
        name = c.properties.get("product") or c.name
        out.append((("stack", stack, name), version, True))
        out.append((("stack", stack, "*"), version, True))
    for p in products:
        version = p.version or c.properties.get("product-version") or c.version
        out.append((("stack", p.stack, p.name), version, True))
        out.append((("stack", p.stack, "*"), version, True))
    out.extend(_catalog_identities(c, products, stack))
    return out


def _catalog_identities(
    c: Component, products: list[Product], stack: str | None
) -> list[tuple[tuple[str, str, str], str | None, bool]]:
    """Every catalog row the component's names (package name, purl, CPE) select, unless a
    collector product of the component already stands for that row (its version, read
    from files, is the better one)."""
    rows = list(catalog.by_purl(c.purl)) if c.purl else []
    if c.ecosystem and c.ecosystem != "generic":
        rows += catalog.by_package(c.ecosystem, c.name)
    if c.cpe:
        rows += catalog.by_cpe(c.cpe)
    if not rows:
        return []
    covered = {r.id for p in products for r in catalog.by_collector(p.stack, p.name)}
    if stack and not products:
        covered.update(r.id for r in catalog.by_collector(stack, c.properties.get("product") or c.name))
    out: list[tuple[tuple[str, str, str], str | None, bool]] = []
    for row in dict.fromkeys(rows):
        if row.id in covered:
            continue
        version = (catalog.product_version(row, c.ecosystem, c.version)
                   or c.properties.get("product-version"))
        out.append((("catalog", "*", row.id), version, True))
    return out


def _distro(c: Component) -> str:
    """The purl ``distro`` qualifier (``debian-12``), ``"?"`` when the component has none."""
    purl = c.purl or ""
    q = purl.split("?", 1)[1] if "?" in purl else ""
    for kv in q.split("&"):
        k, _, v = kv.partition("=")
        if k == "distro" and v:
            return v.lower()
    return "?"


def _evidence_path(c: Component, via_product: bool) -> str | None:
    paths = [e for e in c.evidence if e.path]
    if via_product:
        preferred = [e for e in paths if e.method not in ("package-db",)]
        if preferred:
            return preferred[0].path
    return paths[0].path if paths else None


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


def _judge(
    entries: list[Affected], c: Component, version: str | None
) -> tuple[str, str | None, str] | None:
    """(status, fixed version, reason) or None when not affected."""
    if not entries:
        return None
    vague = [e for e in entries if not e.machine_readable]
    exact = [e for e in entries if e.machine_readable]
    if not exact:
        return ("review", None, vague[0].no_range or "no machine-readable range")
    driver = [e for e in exact if e.scheme == "nvidia-driver" and e.variant is None]
    other = [e for e in exact if e.scheme != "nvidia-driver"]
    if not driver and not other:
        return None  # only vGPU / gaming variants: not what a plain driver component is
    results: list[tuple[str, str | None, str]] = []
    if driver:
        results.extend(_judge_driver(driver, version))
    for e in other:
        v = c.properties.get(e.version_of) if e.version_of else version
        via = ""
        if not v and e.version_of == "container-release" and version:
            rel = container_of(version)
            if rel is not None:
                # rule triton-release-table: the server version decides the NGC release
                v, via = rel.container, (f"server {version} is NGC release {rel.container} "
                                         f"({rel.source}); ")
        if not v:
            what = e.version_of or "version"
            results.append(("review", None, f"{what} unknown; vendor range needs it"))
            continue
        try:
            hit = _entry_affects(e, v)
        except InvalidVersion as exc:
            results.append(("review", None, f"cannot compare: {exc}"))
            continue
        if hit:
            fix = _next_fix(e, v)
            reason = f"{via}{v} in vendor range {_describe(e)}"
            if e.scheme == "pep440" and fix and _ngc_prerelease_of(v, fix):
                results.append(
                    ("review", fix, f"{v} is a pre-release build of the fixed release {fix}; "
                     "whether it carries the fix is not known")
                )
            else:
                results.append(("affected", fix, reason))
    if not results:
        return None
    for want in ("affected", "review"):
        for r in results:
            if r[0] == want:
                return r
    return None


def _judge_release(
    entries: list[Affected], c: Component, guess: ReleaseGuess
) -> tuple[str, str | None, str] | None:
    """A CUDA component judged as the toolkit release it ships with.

    Never more than ``review``: a toolkit bulletin names the CUDA Toolkit as a whole (its
    CVEs are often in one tool, e.g. cuobjdump or nvdisasm), so whether this component
    carries the vulnerable part is not stated."""
    what = c.properties.get("product") or c.name
    caveat = (f"the bulletin names the CUDA Toolkit as a whole; whether {what} carries the "
              "vulnerable part is not stated")
    if guess.release is not None:
        got = _judge(entries, c, guess.release)
        if got is None:
            return None
        return ("review", got[1], f"{guess.how}; {got[2]}; {caveat}")
    assert guess.lowest is not None and guess.highest is not None  # noqa: S101 - type narrowing of an invariant
    lo, hi = _judge(entries, c, guess.lowest), _judge(entries, c, guess.highest)
    if lo is None and hi is None:
        return None
    if lo is not None and hi is not None and lo[0] == hi[0] == "affected":
        return ("review", lo[1], f"{guess.how}; every such release is in the vendor range "
                f"({lo[2]}); {caveat}")
    return ("review", (lo or hi or (None, None, ""))[1],
            f"{guess.how}; some {guess.lowest}.x releases are affected, others not: "
            "the exact release is unknown")


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


def _judge_driver(entries: list[Affected], version: str | None) -> list[tuple[str, str | None, str]]:
    if not version:
        return [("review", None, "driver version unknown")]
    try:
        key = parse("nvidia-driver", version)
    except InvalidVersion as exc:
        return [("review", None, f"cannot compare: {exc}")]
    branch = str(key[0])
    mine = [e for e in entries if e.branch == branch]
    unbranched = [e for e in entries if e.branch is None]
    out: list[tuple[str, str | None, str]] = []
    for e in mine + unbranched:
        if _entry_affects(e, version):
            out.append(("affected", _next_fix(e, version), f"{version} in vendor range {_describe(e)}"))
    if mine or out:
        return out
    branched = [e for e in entries if e.branch is not None]
    if not branched:
        return out
    listed = sorted({int(e.branch) for e in branched if e.branch and e.branch.isdigit()})
    if listed and int(branch) < listed[-1]:
        fixes = []
        for b in listed:
            fx = sorted(
                {f for e in branched if e.branch == str(b) for f in e.fixed},
                key=lambda f: parse("nvidia-driver", f),
            )
            if fx:
                fixes.append(f"R{b} {fx[-1]}")
        return [(
            "affected",
            None,
            f"branch R{branch} is not in the bulletin: no fix in this branch; fixed branches: "
            + ", ".join(fixes),
        )]
    return out  # a branch newer than every branch the bulletin lists


def _best_score(v: Vulnerability) -> tuple[float | None, str | None, str | None]:
    for s in v.scores:
        if s.score is not None:
            return s.score, s.type, s.vector
    return None, None, None


def match(
    components: Iterable[Component], db: AdvisoryDB, *, platform: str = "linux"
) -> list[Finding]:
    """Every advisory finding for ``components`` (affected or review), sorted."""
    idx = _index(db)
    components = list(components)
    # CUDA components are judged as their toolkit release only where no toolkit root
    # (cuda-toolkit component) was found at the same location: that one speaks for them
    toolkit_at = {c.properties.get("location") for c in components
                  if c.properties.get("stack") == "cuda"
                  and c.properties.get("product") == "cuda-toolkit"}
    findings: list[Finding] = []
    entries_cache: dict[tuple[int, str], tuple[list[Affected], bool, bool]] = {}
    verdicts: dict[tuple[object, ...], tuple[str, str | None, str] | None] = {}
    for c in components:
        seen: set[tuple[str, str]] = set()
        for key, version, via_product in _identities(c):
            for adv, vuln, target in idx.by_key.get(key, ()):
                if (adv.id, vuln.id) in seen:
                    continue
                via_release = None
                if target == "cuda-toolkit" and key[0] == "stack" and key[2] != "cuda-toolkit":
                    if key[2] == "*" or c.properties.get("location", "?") in toolkit_at:
                        continue
                    via_release = release_of(key[2], version)
                    if via_release is None:
                        continue  # a component version that says nothing about the release
                ekey = (id(vuln), target)
                cached = entries_cache.get(ekey)
                if cached is None:
                    entries = [
                        a for a in vuln.affected
                        if a.target == target and a.platform in (None, platform)
                    ]
                    cached = entries_cache[ekey] = (
                        entries, any(e.distro for e in entries),
                        any(e.version_of for e in entries))
                entries, per_distro, per_prop = cached
                cdist = None
                if per_distro:
                    cdist = _distro(c)
                    entries = [e for e in entries if e.distro in (None, cdist) or cdist == "?"]
                props = tuple(c.properties.get(e.version_of) for e in entries
                              if e.version_of) if per_prop else ()
                vkey = (id(vuln), target, version, props, cdist)
                if via_release is not None:
                    verdict = _judge_release(entries, c, via_release)
                elif vkey in verdicts:
                    verdict = verdicts[vkey]
                else:
                    verdict = verdicts[vkey] = _judge(entries, c, version)
                if verdict is None:
                    continue
                seen.add((adv.id, vuln.id))
                status, fixed, reason = verdict
                if cdist == "?" and status == "affected":
                    status = "review"
                    reason += ("; the advisory is per distribution release and the component's "
                               "release is unknown")
                if status == "affected" and c.evidence and all(
                    e.method in _METADATA_METHODS for e in c.evidence
                ):
                    status = "review"
                    reason += "; the version is known only from image metadata (env/label)"
                score, stype, vector = _best_score(vuln)
                aliases = tuple(sorted({*vuln.aliases, *(x for x in adv.aliases if x == vuln.id)} - {vuln.id}))
                path = _evidence_path(c, via_product)
                findings.append(
                    Finding(
                        id=vuln.id,
                        kind="advisory",
                        severity=severity_of(score),
                        title=f"{vuln.id}: {adv.title}" if adv.title else vuln.id,
                        detail=reason,
                        components=(c.bom_ref,) if c.bom_ref else (),
                        evidence=(path,) if path else (),
                        advisory=AdvisoryMatch(
                            advisory=adv.id,
                            vulnerability=vuln.id,
                            status=status,
                            product=target,
                            installed_version=(
                                (c.properties.get(entries[0].version_of) or version)
                                if entries and entries[0].version_of else version
                            ),
                            fixed_version=fixed,
                            aliases=aliases,
                            score=score,
                            score_type=stype,
                            vector=vector,
                            urls=tuple(adv.sources),
                            reason=reason,
                        ),
                    )
                )
    findings.sort(key=_finding_key)
    return findings


def _finding_key(f: Finding) -> tuple[int, str, str, str]:
    sev = SEVERITY_ORDER.index(f.severity) if f.severity in SEVERITY_ORDER else len(SEVERITY_ORDER)
    adv = f.advisory.advisory if f.advisory else ""
    return (sev, f.id, adv, f.components[0] if f.components else "")
