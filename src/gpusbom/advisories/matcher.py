"""Match scanned components against the advisory database.

A component is looked up by every identity it carries: its package (``ecosystem`` +
``name``, e.g. ``pypi``/``torch``, ``deb``/``...``) and every GPU product it provides
(``Component.products``), each with that product's version. Advisory targets (``db.TARGETS``) name those
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

import dataclasses
import gc
import re
from collections.abc import Iterable
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING, Any, NamedTuple

from .. import catalog
from ..model import (
    AdvisoryMatch,
    Component,
    ComponentType,
    Finding,
    Product,
    own_product_version,
)
from .cuda_parts import absent_justification, judge_part_package, part_package
from .cuda_releases import release_of
from .db import Advisory, AdvisoryDB, Affected, Vulnerability, selectors
from .dedupe import merge_same_file
from .verdicts import RULES, Verdict, _Ctx, _judge, _judge_release, _Split, _split, line_of

if TYPE_CHECKING:
    from ._dbcache import Indexed

__all__ = ["RULES", "SEVERITY_ORDER", "Verdict", "line_of", "match", "severity_of"]

SEVERITY_ORDER = ("critical", "high", "medium", "low", "none", "unknown")
_METADATA_METHODS = {"env", "label"}
_TOOLKIT_KEY = ("catalog", "*", "cuda-toolkit")


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


Key = tuple[str, str, str]
Entry = tuple[Advisory, Vulnerability, str]


def _target_keys(target: str) -> list[Key]:
    """The identity keys a target's selectors match (``db.selectors``)."""
    try:
        sels = selectors(target)
    except KeyError:
        sels = []
    keys: list[Key] = []
    for sel in sels:
        if "catalog" in sel:
            keys.append(("catalog", "*", sel["catalog"]))
        elif "source" in sel:
            keys.append(("src", sel["ecosystem"], _norm(sel["source"])))
        elif "ecosystem" in sel:
            keys.append(("pkg", sel["ecosystem"], _norm(sel["name"])))
        else:
            keys.append(("stack", sel["stack"], sel.get("product", "*")))
    return keys


class _LazyKeys:
    """``by_key`` of a database read from its cached index (``_dbcache``): the same lists, in
    the same order, as ``_build_index`` makes, but an advisory is built only when a key that
    names it is looked up (an image's components name a handful of the database's)."""

    def __init__(self, ix: Indexed) -> None:
        self._ix = ix
        self._raw: dict[Key, list[tuple[int, int, str]]] = {}
        keys_of: dict[str, list[Key]] = {}
        for ai, vi, target in ix.triples:
            keys = keys_of.get(target)
            if keys is None:
                keys = keys_of[target] = _target_keys(target)
            for key in keys:
                self._raw.setdefault(key, []).append((ai, vi, target))
        self._done: dict[Key, list[Entry]] = {}

    def get(self, key: Key) -> list[Entry] | None:
        done = self._done.get(key)
        if done is None:
            raw = self._raw.get(key)
            if raw is None:
                return None
            at = self._ix.at
            done = self._done[key] = [(at(ai), at(ai).vulnerabilities[vi], target)
                                      for ai, vi, target in raw]
        return done


@dataclass
class _Index:
    """The advisory database indexed by component identity key."""

    # identity key -> [(advisory, vulnerability, target)]
    by_key: dict[Key, list[Entry]] | _LazyKeys


def _build_index(db: AdvisoryDB) -> _Index:
    if db.index is not None:
        return _Index(_LazyKeys(db.index))
    by_key: dict[Key, list[Entry]] = {}
    for adv in db:
        for vuln in adv.vulnerabilities:
            for target in dict.fromkeys(a.target for a in vuln.affected):
                for key in _target_keys(target):
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
    own = own_product_version(c)
    for p in c.products:
        version = p.version or own or c.version
        out.append((("stack", p.stack, p.name), version, True))
        out.append((("stack", p.stack, "*"), version, True))
    out.extend(_catalog_identities(c, c.products))
    return out


def _catalog_identities(
    c: Component, products: list[Product]
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
    out: list[tuple[tuple[str, str, str], str | None, bool]] = []
    for row in dict.fromkeys(rows):
        if row.id in covered:
            continue
        version = (None if row.version_rule == "none" else
                   catalog.product_version(row, c.ecosystem, c.version)
                   or own_product_version(c))
        out.append((("catalog", "*", row.id), version, True))
        if row.part_of == "cuda-toolkit" and "part" in row.extra and "cuda-toolkit" not in covered:
            # a per-part package (cuda-cuobjdump-12-8): judged as that part of the toolkit
            out.append((("catalog", "*", "cuda-toolkit"), version, True))
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


def _best_score(v: Vulnerability) -> tuple[float | None, str | None, str | None]:
    for s in v.scores:
        if s.score is not None:
            return s.score, s.type, s.vector
    return None, None, None


def _host_line(components: list[Component]) -> str | None:
    """``datacenter`` / ``workstation`` when every NVIDIA GPU a host scan found is of that
    line (by the GPU model table), else None."""
    from ..compat.reference_data import find_model

    lines = set()
    for c in components:
        if c.type is not ComponentType.DEVICE or c.properties.get("vendor") != "nvidia":
            continue
        m = find_model(c.name, c.properties.get("pci:device-id"))
        if m is None or m.data_center is None:
            return None
        lines.add("datacenter" if m.data_center else "workstation")
    return lines.pop() if len(lines) == 1 else None


def _bulletin_branches(adv: Advisory) -> frozenset[int]:
    return frozenset(int(a.branch) for v in adv.vulnerabilities for a in v.affected
                     if a.target == "nvidia-driver" and a.branch and a.branch.isdigit()
                     and a.variant is None and a.platform in (None, "linux"))


_KERNEL_FILES = re.compile(r"(?:^|/)lib/modules/|\.ko(?:\.xz|\.zst|\.gz)?$|\.run$")


def _kernel_code_in(components: list[Component]) -> bool:
    """Whether any component's evidence is a kernel module or a driver installer."""
    return any(e.path and _KERNEL_FILES.search(e.path) for c in components for e in c.evidence)


def _auto_vex(
    v: Verdict, vuln: Vulnerability, target: str, c: Component, *, target_kind: str | None,
    kernel_code: bool, path: str | None,
) -> Verdict:
    """Proven not affected (auto-VEX) from the evidence the scan has; the justification
    names the evidence. The raw verdict stays in the reason."""
    if (target == "nvidia-driver" and vuln.layer == "kernel" and target_kind == "image"
            and not kernel_code):
        where = path or c.name  # (a placeholder the caller fills per component)
        return Verdict(
            "not-affected", v.fixed,
            f"component_not_present: the vendor places {vuln.id} in the kernel-mode driver; "
            f"this image holds only the user-space library {where} and no kernel module "
            f"(the kernel module is the host's) [raw: {v.status}, {v.reason}]",
            "kernel-mode-on-image")
    absent = (absent_justification(vuln, c) if target == "cuda-toolkit"
              and target_kind in ("image", "host", "directory") else None)
    if absent is not None:
        return Verdict("not-affected", v.fixed, f"{absent} [raw: {v.status}, {v.reason}]",
                       "cuda-part-absent")
    checked = c.properties.get("bin-tools-checked")
    if (target == "cuda-toolkit" and vuln.parts and checked is not None
            and target_kind in ("image", "host", "directory")):
        tools = set(checked.split())
        present = set(c.properties.get("bin-tools", "").split())
        parts = set(vuln.parts)
        if parts <= tools and not parts & present:
            root = c.properties.get("location") or "the toolkit root"
            names = ", ".join(sorted(parts))
            return Verdict(
                "not-affected", v.fixed,
                f"component_not_present: the vendor places {vuln.id} in {names}; "
                f"{names} is not in {root}/bin (gpusbom looked for it there) "
                f"[raw: {v.status}, {v.reason}]", "cuda-part-absent")
    return v


def match(
    components: Iterable[Component], db: AdvisoryDB, *, platform: str = "linux",
    target_kind: str | None = None,
) -> list[Finding]:
    """Every advisory finding for ``components``, sorted.

    ``target_kind`` (``image`` | ``host`` | ``directory`` | None for SBOM input) enables the
    analyses that need to know what the scan saw: kernel-mode driver CVEs are not affected
    on an image that holds no kernel module."""
    # Findings are acyclic, but the cyclic collector's full passes walk every live object:
    # with 100,000 findings they cost as much as the matching itself, and more on every
    # later scan of the process (the earlier results are live). Paused for the build only.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _match(list(components), db, platform, target_kind)
    finally:
        if was_enabled:
            gc.enable()


def _match(
    components: list[Component], db: AdvisoryDB, platform: str, target_kind: str | None,
) -> list[Finding]:
    idx = _index(db)
    # CUDA components are judged as their toolkit release only where no toolkit root
    # (cuda-toolkit component) was found at the same location: that one speaks for them
    toolkit_at = {c.properties.get("location") for c in components
                  if c.stack == "cuda" and c.product_name == "cuda-toolkit"}
    line = _host_line(components) if target_kind == "host" else None
    kernel_code = _kernel_code_in(components) if target_kind == "image" else True
    entries_cache: dict[tuple[int, str],
                        tuple[list[Affected], bool, bool, list[Affected], bool, _Split]] = {}
    verdicts: dict[tuple[object, ...], Verdict | None] = {}
    branches: dict[str, _Ctx] = {}
    per_vuln: dict[int, tuple[Any, ...]] = {}
    _PATH = "\x00path\x00"

    def decide(c: Component, key: tuple[str, str, str], version: str | None, adv: Advisory,
               vuln: Vulnerability, target: str) -> tuple[Any, ...] | None:
        via_release = None
        pp = part_package(c) if target == "cuda-toolkit" and key[0] == "catalog" else None
        if target == "cuda-toolkit" and key[0] == "stack" and key[2] != "cuda-toolkit":
            if key[2] == "*" or c.properties.get("location", "?") in toolkit_at:
                return None
            via_release = release_of(key[2], version)
            if via_release is None:
                return None  # a component version that says nothing about the release
        ekey = (id(vuln), target)
        cached = entries_cache.get(ekey)
        if cached is None:
            mine = [a for a in vuln.affected if a.target == target]
            entries = [a for a in mine if a.platform in (None, platform)]
            elsewhere = [a for a in mine if a.platform not in (None, platform)]
            only_elsewhere = not entries and bool(elsewhere)
            if only_elsewhere:
                # judged as if for this platform, then shown not affected
                entries = [dataclasses.replace(a, platform=None) for a in elsewhere]
            cached = entries_cache[ekey] = (
                entries, any(e.distro for e in entries),
                any(e.version_of for e in entries), elsewhere, only_elsewhere, _split(entries))
        entries, per_distro, per_prop, elsewhere, windows_only, whole = cached
        split: _Split | None = whole
        cdist = None
        if per_distro:
            cdist = _distro(c)
            entries = [e for e in entries if e.distro in (None, cdist) or cdist == "?"]
            split = None
        props = tuple(c.properties.get(e.version_of) for e in entries
                      if e.version_of) if per_prop else ()
        ctx = branches.get(adv.id)
        if ctx is None:
            ctx = branches[adv.id] = _Ctx(_bulletin_branches(adv), line)
        vkey = (id(vuln), target, version, props, cdist, windows_only)
        if pp is not None:
            verdict = judge_part_package(entries, c, pp, vuln)
        elif via_release is not None:
            verdict = _judge_release(entries, c, via_release)
            parts = set(vuln.parts)
            if verdict is not None and parts and key[2] not in parts:
                # the vendor places the CVE in another tool or library of the toolkit; this
                # component is a library of the toolkit (cudart, cuBLAS...), not that one
                names = ", ".join(sorted(parts))
                return ("not-affected", None, verdict.reason, "cuda-part-absent",
                        f"component_not_present: the vendor places {vuln.id} in {names}; "
                        f"this component is {key[2]} of the toolkit, not {names} (gpusbom "
                        f"analysis) [raw: {verdict.status}, {verdict.reason}]",
                        version)
        elif vkey in verdicts:
            verdict = verdicts[vkey]
        else:
            verdict = verdicts[vkey] = _judge(entries, c, version, ctx, split)
        if verdict is None:
            return None
        status, fixed, reason, rule = verdict
        if cdist == "?" and status == "affected":
            status, rule = "review", "per-distro"
            reason += ("; the advisory is per distribution release and the component's "
                       "release is unknown")
        if vuln.state in ("disputed", "rejected") and status in (
                "affected", "unsupported-branch"):
            status, rule = "review", "disputed-cve"
            reason += f"; the CVE is {vuln.state}: the vendor's claim is contested"
        if status == "affected" and c.evidence and all(
            e.method in _METADATA_METHODS for e in c.evidence
        ):
            status, rule = "review", "metadata-only"
            reason += "; the version is known only from image metadata (env/label)"
        justification = None
        if windows_only:
            plats = sorted({str(a.platform) for a in elsewhere})
            justification = (
                f"vulnerable_code_not_present: the vendor lists {target} for {vuln.id} "
                f"only on {', '.join(plats)}; this is a {platform.capitalize()} target "
                f"(gpusbom analysis) [raw: {status}, {reason}]")
            status, rule, fixed = "not-affected", "windows-only", None
        else:
            vexed = _auto_vex(Verdict(status, fixed, reason, rule), vuln, target, c,
                              target_kind=target_kind, kernel_code=kernel_code, path=_PATH)
            if vexed.status == "not-affected":
                head, _, raw = vexed.reason.partition(" [raw: ")
                status, rule = "not-affected", vexed.rule
                justification = f"{head} (gpusbom analysis) [raw: {raw}"
        installed = ((c.properties.get(entries[0].version_of) or version)
                     if entries and entries[0].version_of else version)
        return (status, fixed, reason, rule, justification, installed)

    def prepare(adv: Advisory, vuln: Vulnerability, target: str,
                d: tuple[Any, ...]) -> _Prepared:
        """What every finding of one decision shares, built once per decision."""
        status, fixed, reason, rule, justification, installed = d
        const = per_vuln.get(id(vuln))
        if const is None:
            score, stype, vector = _best_score(vuln)
            # KEV and descriptions: only in a database ``advisories update`` fetched
            kev = next((db.kev[x]["dateAdded"] for x in (vuln.id, *vuln.aliases)
                        if x in db.kev), None) if db.kev else None
            const = per_vuln[id(vuln)] = (
                score, stype, vector, severity_of(score),
                tuple(sorted({*vuln.aliases, *(x for x in adv.aliases if x == vuln.id)}
                             - {vuln.id})),
                f"{vuln.id}: {adv.title}" if adv.title else vuln.id, tuple(adv.sources),
                kev, db.descriptions.get(vuln.id))
        score, stype, vector, severity, aliases, title, urls, kev, description = const
        am = AdvisoryMatch(
            advisory=adv.id, vulnerability=vuln.id, status=status, product=target,
            installed_version=installed, fixed_version=fixed, aliases=aliases, score=score,
            score_type=stype, vector=vector, urls=urls, reason=reason,
            justification=justification, rule=rule, cwe=vuln.cwe, cve_state=vuln.state,
            kev=kev, description=description)
        sev = (SEVERITY_ORDER.index(severity) if severity in SEVERITY_ORDER
               else len(SEVERITY_ORDER))
        return _Prepared((adv.id, vuln.id), (sev, vuln.id, adv.id), severity, title, reason,
                         am, bool(justification and _PATH in justification), {})

    memo: dict[tuple[Any, ...], list[_Prepared]] = {}
    # findings grouped by what sorts them before the component (severity, CVE, advisory)
    groups: dict[tuple[int, str, str], list[Finding]] = {}
    for c in components:
        seen: set[tuple[str, str]] = set()
        meta_only = bool(c.evidence) and all(e.method in _METADATA_METHODS for e in c.evidence)
        ref = c.bom_ref
        refs = (ref,) if ref else ()
        for key, version, via_product in _identities(c):
            items = idx.by_key.get(key)
            if not items:
                continue
            # components alike in what the rules read share one decision list (an image's
            # twenty driver libraries of one version are judged once)
            mkey = (key, version, c.properties.get("container-release"), _distro(c),
                    c.properties.get("location", "?") in toolkit_at, meta_only,
                    c.product_name or c.name if key[0] == "stack" else
                    c.name if key == _TOOLKIT_KEY else None,
                    c.properties.get("parts-found") if key[0] != "pkg" else None)
            decided = memo.get(mkey)
            if decided is None:
                decided = memo[mkey] = [
                    prepare(adv, vuln, target, d) for adv, vuln, target in items
                    if (d := decide(c, key, version, adv, vuln, target)) is not None]
            if not decided:
                continue
            path = _evidence_path(c, via_product)
            evidence = (path,) if path else ()
            for p in decided:
                if p.seen_key in seen:
                    continue
                seen.add(p.seen_key)
                am = p.match
                if p.path_in_justification:
                    # the justification names this component's evidence path; matches are
                    # immutable, so components with the same path share one
                    where = path or c.name
                    shared = p.by_path.get(where)
                    if shared is None:
                        assert p.match.justification is not None  # noqa: S101 - type narrowing of an invariant
                        shared = p.by_path[where] = dataclasses.replace(
                            p.match, justification=p.match.justification.replace(_PATH, where))
                    am = shared
                f = Finding(id=am.vulnerability, kind="advisory", severity=p.severity,
                            title=p.title, detail=p.reason, components=refs,
                            evidence=evidence, advisory=am)
                group = groups.get(p.sort_key)
                if group is None:
                    group = groups[p.sort_key] = []
                group.append(f)
    out: list[Finding] = []
    for k in sorted(groups):
        group = groups[k]
        # by component (stable: equal keys keep the scan order); ``components`` is (ref,)
        # or () for a component without a bom-ref, which sorts first as "" would
        group.sort(key=_COMPONENTS)
        out.extend(group)
    return merge_same_file(out)


_COMPONENTS = attrgetter("components")


class _Prepared(NamedTuple):
    """One decision (component identity x CVE) as every finding of it shares it."""

    seen_key: tuple[str, str]  # (advisory id, CVE id): one finding per component
    sort_key: tuple[int, str, str]  # severity rank, CVE id, advisory id
    severity: str
    title: str
    reason: str
    match: AdvisoryMatch
    path_in_justification: bool  # the justification names the component's evidence path
    by_path: dict[str, AdvisoryMatch]  # the match with that path filled in

