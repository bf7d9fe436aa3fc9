"""CSAF 2.0 security advisories, as NVIDIA PSIRT publishes them (NVIDIA/product-security).

NVIDIA's product tree: ``vendor`` -> ``product_family`` -> ``product_name`` (the product,
with a CPE) and ``vendor`` -> ``architecture`` (``Linux``, ``Linux(R580)``,
``Linux(R580 vGPU 19)``, ``Windows(R590)``, ``Linux(Gaming)``) -> ``product_version``
whose branch name is the product and whose product *name* is a free-text phrase:

- ``All driver versions prior to 580.159.03``  -> ``< 580.159.03``
- ``All versions up to and including v1.16.1`` -> ``<= 1.16.1``
- ``580.126.09(All versions prior to and including vGPU 19.4)`` -> ``<= 580.126.09``
- ``580.126.09(vGPU software 19.4)``, ``v1.16.2``, ``24.09`` -> that version

Branches are walked at any depth and the context (vendor, product, platform, driver
branch, variant) is carried down. ``vulnerabilities[].product_status`` then says which
product ids are ``known_affected`` / ``fixed`` / ``known_not_affected``.

Every phrase the importer cannot turn into a range or version is reported
(``CsafImport.unparsed``), never dropped silently: the affected entry then gets
``no_range`` so the matcher reports ``review``.

One module over 500 lines because it is one parser: the CSAF 2.0 product tree, its
branches and product ids, and the vulnerabilities that refer to them are read together.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from . import shape_checked
from .phrases import Phrase, parse_phrase, phrase_class

__all__ = [
    "CsafImport",
    "CsafProduct",
    "Phrase",
    "import_csaf",
    "parse_arch",
    "parse_phrase",
    "phrase_class",
]

_ARCH = re.compile(r"^(?P<platform>[^()]*?)\s*(?:\((?P<inner>[^()]*)\))?\s*$")
_BRANCH = re.compile(r"\bR(\d{3})\b")


def parse_arch(name: str) -> tuple[str | None, str | None, str | None]:
    """``Linux(R580 vGPU 19)`` -> (``linux``, ``580``, ``vGPU 19``);
    ``Linux(Gaming)`` -> (``linux``, None, ``Gaming``); ``Linux`` -> (``linux``, None, None)."""
    m = _ARCH.match(name.strip())
    if not m:
        return None, None, None
    plat = m.group("platform").strip() or None
    inner = (m.group("inner") or "").strip()
    branch = None
    bm = _BRANCH.search(inner)
    if bm:
        branch = bm.group(1)
        inner = (inner[: bm.start()] + inner[bm.end():]).strip()
    variant = inner or None
    return platform_of(plat), branch, variant


_PLATFORM_SPLIT = re.compile(r"\s*(?:,|/|&|\band\b)\s*", re.I)
_LINUX_WORDS = re.compile(r"^(?:linux\b.*|ubuntu.*|debian.*|rhel.*|red hat.*|centos.*|rocky.*|sles.*|"
                          r"suse.*|jetpack.*|jetson.*|kubernetes|k8s|docker|container.*)$", re.I)


def platform_of(text: str | None) -> str | None:
    """A CSAF/CVE platform phrase -> ``linux`` / ``windows`` / ``macos``, None when it
    covers every platform including Linux (``All platforms``, ``Windows and Linux``,
    ``Linux and Windows``, ``Windows, Linux, MacOS``, ``Linux/MacOS``); any other phrase
    is returned as written (a platform no Linux target matches)."""
    if not text or not text.strip():
        return None
    names = [x.strip().lower() for x in _PLATFORM_SPLIT.split(text.strip()) if x.strip()]
    if not names or names[0] in ("all", "all platforms", "any"):
        return None
    kinds = set()
    for n in names:
        if re.fullmatch(r"[\d.x]+", n):
            continue  # "Windows 10 and 11", "Windows 7 and 8.x": the numbers of a name
        if _LINUX_WORDS.match(n):
            kinds.add("linux")
        elif n.startswith("windows"):
            kinds.add("windows")
        elif n in ("macos", "mac os", "mac", "osx", "os x"):
            kinds.add("macos")
        else:
            kinds.add("?")
    if kinds == {"linux"}:
        return "linux"
    if "linux" in kinds:
        return None  # the entry applies to Linux among others
    if kinds == {"windows"}:
        return "windows"
    if kinds == {"macos"}:
        return "macos"
    if kinds <= {"windows", "macos"}:
        return "windows"
    return text.strip()


@dataclass
class CsafProduct:
    product_id: str
    name: str  # the phrase (product_version) or the product name
    category: str
    vendor: str | None = None
    family: str | None = None
    product: str | None = None  # the product this version is of ("GeForce", "NVIDIA Container Toolkit")
    architecture: str | None = None
    platform: str | None = None
    branch: str | None = None
    variant: str | None = None
    cpe: str | None = None
    phrase: Phrase | None = None


@dataclass
class CsafImport:
    record: dict[str, Any]
    products: dict[str, CsafProduct]
    phrases: int = 0  # product_version phrases seen
    parsed: int = 0  # of those, understood
    unparsed: list[tuple[str, str]] = field(default_factory=list)  # (product_id, phrase)
    unmapped: list[str] = field(default_factory=list)  # vendor product names with no target


def _walk(branches: Iterable[dict[str, Any]], ctx: dict[str, Any], out: dict[str, CsafProduct]) -> None:
    for b in branches or ():
        cat = b.get("category", "")
        name = str(b.get("name", ""))
        c = dict(ctx)
        if cat == "vendor":
            c["vendor"] = name
        elif cat == "product_family":
            c["family"] = name
        elif cat in ("product_name", "product_version_range"):
            c["product"] = name
        elif cat == "architecture":
            c["architecture"] = name
            c["platform"], c["branch"], c["variant"] = parse_arch(name)
        elif cat == "product_version" and "product" not in ctx:
            c["product"] = name
        elif cat == "product_version":
            c["product"] = ctx.get("product") or name
        p = b.get("product")
        if isinstance(p, dict) and p.get("product_id"):
            helper = p.get("product_identification_helper") or {}
            pname = str(p.get("name", ""))
            cp = CsafProduct(
                product_id=p["product_id"],
                name=pname,
                category=cat,
                vendor=c.get("vendor"),
                family=c.get("family"),
                product=(name if cat == "product_version" else pname) if cat else pname,
                architecture=c.get("architecture"),
                platform=c.get("platform"),
                branch=c.get("branch"),
                variant=c.get("variant"),
                cpe=helper.get("cpe"),
            )
            if cat == "product_version":
                cp.product = name or c.get("product")
                cp.phrase = parse_phrase(pname)
            out[cp.product_id] = cp
        _walk(b.get("branches") or (), c, out)


def target_of(p: CsafProduct) -> tuple[str | None, str]:
    """(gpusbom target, version scheme) for a vendor product, from the product-identity
    catalog (its vendor strings, then its CPE); target None when unmapped."""
    from ... import catalog

    name = (p.product or p.name).strip()
    row = catalog.by_vendor_string(name, "NVIDIA")
    if row is None and p.cpe:
        rows = catalog.by_cpe(p.cpe)
        row = rows[0] if rows else None
    if row is None:
        return None, "semver"
    return row.id, row.scheme or "semver"


_KERNEL = re.compile(r"\bkernel[ -]mode\b|\bkernel (?:driver|module|layer)\b|\.ko\)|\bnvidia(?:-uvm)?\.ko\b|"
                     r"Unified Memory driver|\bGPU kernel driver\b|kernel mode layer", re.I)
_USER = re.compile(r"\buser[ -]mode (?:layer|driver|component)\b|\bOpenGL\b|\bVulkan\b|"
                   r"\bOpenCL\b|\bCUDA driver\b|\bnvidia-smi\b|\bNVML\b", re.I)


def _facts(v: dict[str, Any]) -> dict[str, Any]:
    """Facts a finding needs, from a CSAF vulnerability (no prose is kept): the CWE, the
    driver layer the summary names (``kernel`` when it names only the kernel-mode
    driver: the basis of auto-VEX on images, which hold no kernel modules), and the CUDA
    Toolkit tools/libraries it names (``parts``)."""
    from ... import catalog

    out: dict[str, Any] = {}
    cwe = v.get("cwe") or {}
    if isinstance(cwe, dict) and isinstance(cwe.get("id"), str):
        out["cwe"] = [cwe["id"]]
    text = " ".join(str(n.get("text", "")) for n in v.get("notes") or []
                    if isinstance(n, dict) and n.get("category") in ("summary", "description"))
    if text:
        kernel, user = bool(_KERNEL.search(text)), bool(_USER.search(text))
        if kernel and not user:
            out["layer"] = "kernel"
        elif user and not kernel:
            out["layer"] = "user"
        # "nsight-systems" is written "Nsight Systems"
        parts = [p for p in catalog.get("cuda-toolkit").parts
                 if re.search(r"\b" + re.escape(p).replace(r"\-", "[ -]") + r"\b", text, re.I)]
        if parts:
            out["parts"] = parts
        if re.search(r"\bfor (?:all platforms|Windows and Linux|Linux and Windows)\b", text, re.I):
            out["platform_phrase"] = "windows-and-linux"
        elif windows_only_text(text):
            out["platform_phrase"] = "windows"
    title = v.get("title")
    if isinstance(title, str) and title.strip():
        out["title"] = title.strip()
    return out


#: products NVIDIA ships only for Windows (a CVE naming one is Windows-only)
_WINDOWS_PRODUCTS = re.compile(r"\bNsight Visual Studio(?: Edition)?\b", re.I)
_FOR_WINDOWS = re.compile(r"\bfor (?:Microsoft )?Windows\b(?!\s*(?:and|,|/|&|or)\s*Linux)", re.I)
_FOR_LINUX = re.compile(r"\bfor (?:Linux|all platforms)\b|\bLinux and Windows\b|"
                        r"\bWindows and Linux\b", re.I)


def windows_only_text(text: str) -> bool:
    """Whether a CVE's description places it on Windows only: "NVIDIA Nsight Systems for
    Windows contains ...", "NVIDIA Nsight Visual Studio for Windows ...", or a product
    NVIDIA ships only for Windows (Nsight Visual Studio Edition); never when the text also
    names Linux ("for Linux", "Windows and Linux")."""
    if _FOR_LINUX.search(text):
        return False
    return bool(_FOR_WINDOWS.search(text) or _WINDOWS_PRODUCTS.search(text))


def _score(s: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for key, typ in (("cvss_v3", None), ("cvss_v4", "CVSS_V4_0")):
        c = s.get(key)
        if not isinstance(c, dict):
            continue
        t = typ or ("CVSS_V3_0" if str(c.get("version")) == "3.0" else "CVSS_V3_1")
        out.append({"type": t, "vector": c.get("vectorString"), "score": c.get("baseScore")})
    return out


def _doc_urls(doc: dict[str, Any], fallback: str | None) -> list[str]:
    urls = []
    for r in doc.get("references", []) or []:
        u = r.get("url")
        if isinstance(u, str) and u.startswith("https://") and r.get("category") == "self":
            urls.append(u)
    if fallback:
        urls.append(fallback)
    return list(dict.fromkeys(urls))


@shape_checked("CSAF")
def import_csaf(doc: dict[str, Any], *, source_url: str | None = None) -> CsafImport:
    """One CSAF 2.0 document -> a gpusbom advisory record plus what could not be parsed."""
    document = doc.get("document") or {}
    tracking = document.get("tracking") or {}
    tid = str(tracking.get("id", "")).strip()
    vendor_name = (document.get("publisher") or {}).get("name") or "NVIDIA"
    vendor = "NVIDIA" if "nvidia" in vendor_name.lower() else vendor_name
    products: dict[str, CsafProduct] = {}
    _walk((doc.get("product_tree") or {}).get("branches") or (), {}, products)
    imp = CsafImport(record={}, products=products)
    versions = [p for p in products.values() if p.category == "product_version"]
    imp.phrases = len(versions)
    for p in versions:
        if p.phrase is None:
            imp.unparsed.append((p.product_id, p.name))
        else:
            imp.parsed += 1
    vulns_out = []
    for v in doc.get("vulnerabilities") or []:
        vid = v.get("cve") or (v.get("ids") or [{}])[0].get("text") or tid
        status = v.get("product_status") or {}
        scores: list[dict[str, Any]] = []
        for s in v.get("scores") or []:
            for sc in _score(s):
                if sc not in scores:
                    scores.append(sc)
        groups: dict[tuple[Any, ...], dict[str, Any]] = {}

        def group(p: CsafProduct) -> dict[str, Any] | None:
            target, scheme = target_of(p)
            if target is None:
                if (p.product or p.name) not in imp.unmapped:
                    imp.unmapped.append(p.product or p.name)
                return None
            key = (target, p.product, p.platform, p.branch, p.variant)
            g = groups.get(key)  # noqa: B023 - called only within this iteration
            if g is None:
                g = {"target": target, "vendor_product": p.product or p.name, "scheme": scheme}
                for k in ("platform", "branch", "variant"):
                    if getattr(p, k):
                        g[k] = getattr(p, k)
                g["ranges"], g["versions"], g["fixed"], g["phrases"] = [], [], [], []
                g["conditions"] = []
                groups[key] = g  # noqa: B023 - called only within this iteration
            return g

        for pid in status.get("known_affected") or []:
            found = products.get(pid)
            if found is None:
                continue
            p = found
            g = group(p)
            if g is None:
                continue
            g["phrases"].append(p.name)
            ph = p.phrase
            if ph is not None and ph.qualifier and not ph.version and ph.qualifier not in g["conditions"]:
                g["conditions"].append(ph.qualifier)  # "CDI mode only for versions prior to 1.17.5"
            if ph is None:
                g.setdefault("unparsed", []).append(p.name)
                g.setdefault("unparsed_affected", []).append(p.name)
            elif ph.version:
                g["versions"].append(_clean(ph.version))
            else:
                r = {}
                if ph.introduced:
                    r["introduced"] = _clean(ph.introduced)
                if ph.fixed:
                    r["fixed"] = _clean(ph.fixed)
                if ph.last_affected:
                    r["last_affected"] = _clean(ph.last_affected)
                if r not in g["ranges"]:
                    g["ranges"].append(r)
        for pid in status.get("fixed") or []:
            found = products.get(pid)
            if found is None:
                continue
            p = found
            g = group(p)
            if g is None:
                continue
            ph = p.phrase
            if ph is not None and ph.version and _clean(ph.version) not in g["fixed"]:
                g["fixed"].append(_clean(ph.version))
            elif ph is None:
                g.setdefault("unparsed", []).append(p.name)
        affected = []
        for g in groups.values():
            _drop_unparsable(g, imp)
            unparsed = g.pop("unparsed", None)
            vague = g.pop("unparsed_affected", None)
            conditions = g.pop("conditions")
            phrases = g.pop("phrases")
            if not g["ranges"] and not g["versions"]:
                # only fixed versions given: affected is "before the fix" within the group
                if g["fixed"] and not phrases:
                    continue  # a fixed-only group (the product is not affected here)
                g["no_range"] = "vendor phrase not understood: " + "; ".join(unparsed or phrases)
            elif unparsed:
                g["note"] = "some vendor phrases not understood: " + "; ".join(unparsed)
                if vague:
                    # no silent outcome: an affected phrase not understood is its own entry,
                    # which makes review where the understood ranges do not decide
                    sib: dict[str, Any] = {k: g[k] for k in ("target", "vendor_product", "scheme", "platform",
                                             "branch", "variant") if k in g}
                    affected.append({**sib, "no_range": "vendor phrase not understood: "
                                     + "; ".join(vague), "vendor_phrases": list(vague)})
                    phrases = [x for x in phrases if x not in vague]
            # "All versions up to CUDA Toolkit 12.8" with 12.8 listed as fixed: "up to"
            # excludes the fixed release, so the range ends before it
            g["ranges"] = [
                {**{k: x for k, x in r.items() if k != "last_affected"}, "fixed": r["last_affected"]}
                if r.get("last_affected") in g["fixed"] else r
                for r in g["ranges"]
            ]
            if g["target"] == "triton-inference-server":
                g["version_of"] = "container-release"  # NVIDIA names NGC releases (25.07)
            for k in ("ranges", "versions", "fixed"):
                if not g[k]:
                    del g[k]
            if phrases:
                g["vendor_phrases"] = phrases
            if conditions:
                g["note"] = "; ".join([*([g["note"]] if g.get("note") else []), *conditions])
            affected.append(g)
        facts = _facts(v)
        if facts.get("platform_phrase") == "windows":
            # the product tree may say "Windows, Linux" for the product; the CVE's own
            # text places it on Windows only
            for a in affected:
                if a.get("platform") is None:
                    a["platform"] = "windows"
        vulns_out.append({"id": vid, **facts, "severity": scores, "affected": affected})
    rid = f"NVIDIA-{tid}" if vendor == "NVIDIA" and tid and not tid.upper().startswith("NVIDIA") else tid
    initial = str(tracking.get("initial_release_date") or "")[:10]
    current = str(tracking.get("current_release_date") or "")[:10] or None
    imp.record = {
        "id": rid,
        "vendor": vendor,
        "vendor_id": tid,
        "aliases": sorted({v["id"] for v in vulns_out if v["id"] != tid}),
        "title": document.get("title") or rid,
        "published": initial,
        "modified": current,
        "sources": _doc_urls(document, source_url),
        "verification": {
            "status": "verified" if not imp.unparsed else "partial",
            "notes": f"imported from CSAF {document.get('csaf_version', '2.0')}",
        },
        "vulnerabilities": vulns_out,
    }
    return imp


def _drop_unparsable(g: dict[str, Any], imp: CsafImport) -> None:
    """Versions the phrase parser found but the product's scheme cannot compare
    (``0.1.x``) are reported as unparsed, not kept in ranges."""
    from ..versions import InvalidVersion, parse

    def ok(v: str) -> bool:
        if "-" in v and g["scheme"] not in ("deb", "rpm"):
            return False  # "0.0-26.05", "5.8-7.0.6.1": a hyphen is no part of such versions
        try:
            parse(g["scheme"], v)
        except InvalidVersion:
            return False
        return True

    bad: list[str] = []
    keep = []
    for r in g["ranges"]:
        if all(ok(v) for k, v in r.items() if not (k == "introduced" and v == "0")):
            keep.append(r)
        else:
            bad.append(" / ".join(f"{k} {v}" for k, v in r.items()))
    g["ranges"] = keep
    for key in ("versions", "fixed"):
        vals = [v for v in g[key] if ok(v)]
        bad.extend(v for v in g[key] if not ok(v))
        g[key] = vals
    if bad:
        g.setdefault("unparsed", []).extend(bad)
        for b in bad:
            imp.unparsed.append(("(scheme " + g["scheme"] + ")", b))


def _clean(v: str) -> str:
    return v[1:] if v[:1] in ("v", "V") and v[1:2].isdigit() else v


_FINDABLE_PLATFORMS = (None, "linux")


_YYMM = re.compile(r"^\d{2}\.\d{2}(?:\.\d+)?$")


def _container_release_ranges(a: dict[str, Any]) -> None:
    """An entry whose versions are NGC container releases (``24.12``) of a product whose
    packages carry other versions: kept as phrases, no range (the matcher says review)."""
    values = [v for r in a.get("ranges", []) for k, v in r.items() if v != "0"]
    values += list(a.get("versions", []))
    if values and all(_YYMM.match(v) for v in values):
        for k in ("ranges", "versions", "fixed"):
            a.pop(k, None)
        a["no_range"] = ("the vendor names container releases (" + ", ".join(values)
                         + "), not package versions")


def gpu_record(imp: CsafImport) -> tuple[dict[str, Any] | None, str | None]:
    """The record gpusbom keeps of an imported bulletin, or (None, why not).

    Kept per CVE: entries for Linux (or for every platform), plus, for a product that a
    CVE lists only on other platforms, its Windows entries (so that a Linux target is
    shown not affected: ``windows-only``). Dropped: products no scan can find (a product
    row with no package names or collector ids, e.g. the vGPU manager on the hypervisor
    host) and hypervisor platforms."""
    from ... import catalog

    rec = imp.record
    seen_targets: set[str] = set()
    kept_targets: set[str] = set()
    for v in rec["vulnerabilities"]:
        keep = []
        by_target: dict[str, list[dict[str, Any]]] = {}
        for a in v["affected"]:
            by_target.setdefault(a["target"], []).append(a)
        for target, entries in by_target.items():
            seen_targets.add(target)
            row = catalog.get(target)
            if not (row.names or row.collector):
                continue
            if row.extra.get("container_releases"):
                for a in entries:
                    _container_release_ranges(a)
            linux = [a for a in entries if a.get("platform") in _FINDABLE_PLATFORMS]
            if linux:
                keep.extend(linux)
            else:
                keep.extend(a for a in entries if a.get("platform") == "windows")
        v["affected"] = keep
        kept_targets.update(a["target"] for a in keep if a.get("platform") in _FINDABLE_PLATFORMS)
    rec["vulnerabilities"] = [v for v in rec["vulnerabilities"] if v["affected"]]
    if not seen_targets:
        names = sorted(set(imp.unmapped))
        return None, "no GPU-stack product in the catalog: " + ", ".join(names[:6]) + (
            " ..." if len(names) > 6 else "")
    if not kept_targets:
        unfindable = sorted(t for t in seen_targets
                            if not (catalog.get(t).names or catalog.get(t).collector))
        if unfindable and set(unfindable) == seen_targets:
            return None, ("only products no scan can identify: " + ", ".join(unfindable))
        return None, "no Linux entry (" + ", ".join(sorted(seen_targets)) + " on other platforms only)"
    rec["aliases"] = sorted({v["id"] for v in rec["vulnerabilities"]} - {rec["id"]})
    return rec, None
