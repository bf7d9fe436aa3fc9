"""CVE JSON 5 records (CVEProject/cvelistV5, and the CVE files NVIDIA publishes beside its
CSAF bulletins) -> gpusbom advisory records.

What the vendors put in ``containers.cna.affected[]`` varies, and all of it is read:

- NVIDIA: ``product`` names (``GeForce``, ``NVIDIA Container Toolkit``), the driver branch
  in ``platforms`` (``Linux(R580)``) and free-text versions (``All driver versions prior
  to 580.126.09``) -> the CSAF importer's phrase parser;
- structured ranges (``version`` + ``lessThan`` / ``lessThanOrEqual``, as GHSA-derived
  records and CISA's ADP container write them);
- ``status: unaffected`` versions -> fixed versions; a ``defaultStatus: affected`` with
  only unaffected versions listed gives no machine-readable range (``no_range``, the
  fixed versions kept): the record does not claim which versions are affected;
- Intel's phrasing: ``before version 2.0.2`` / ``before versions 2024.1`` /
  ``before version v3.0`` (a fixed version), ``versions 15.40 and 15.45`` (exact versions),
  ``before versions 31.0.101.3790/31.0.101.2114`` (one fix per release line the record does
  not name: no range, both fixes kept, ``review``) and ``See references`` (no versions in
  the record: ``review``). Intel's records say vendor ``n/a``: the assigner is the vendor.
  Product strings are matched with the (R)/(TM) marks removed; ``... for Windows`` /
  ``WHQL`` / ``DCH`` place the entry on Windows (never matched on Linux);
- AMD's records name the hardware (``AMD Radeon(TM) RX 6000 Series Graphics Cards``) as the
  product and the software in the unaffected version string (``Radeon Software For Linux
  25.10.1``, ``AMD Software: Adrenalin Edition 23.12.1 (23.30.13.01)``): a product that
  maps to nothing is mapped through those strings, and the version in them is the fix.

Scores: ``metrics[].cvssV4_0`` / ``cvssV3_1`` / ``cvssV3_0`` of the CNA, then of ADP
containers. Products gpusbom does not identify go to ``unmapped``; phrases it cannot
parse go to ``unparsed`` and make the entry ``no_range`` (``review``), never silence.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from typing import Any

from ..versions import InvalidVersion, parse
from . import shape_checked
from .csaf import CsafProduct, parse_arch, parse_phrase, target_of
from .csaf import phrase_class as csaf_phrase_class

__all__ = ["Cve5Import", "advisory_id", "by_advisory", "import_cve5", "phrase_class",
           "product_platform", "target_for", "vendor_product", "version_understood"]

# products of other vendors, by name (NVIDIA's go through the CSAF importer's table)
_OTHER_TARGETS = [
    (re.compile(r"level[ -]?zero", re.IGNORECASE), "level-zero", "semver"),
    (re.compile(r"DPC\+\+", re.IGNORECASE), "intel-dpcpp-compiler", "intel"),
    (re.compile(r"oneMKL|math kernel library", re.IGNORECASE), "intel-onemkl", "intel"),
    (re.compile(r"compute[ -]runtime", re.IGNORECASE), "intel-graphics-driver", "intel"),
    (re.compile(r"^py ?torch$", re.IGNORECASE), "torch", "pep440"),
]
_VENDORS = {"nvidia": "NVIDIA", "intel": "Intel", "amd": "AMD", "github_m": "GitHub",
            "mitre": "MITRE", "vuldb": "VulDB"}
_NONE = {"", "0", "*", "n/a", "unspecified", "unknown"}


def target_for(vendor: str, product: str, cpes: list[str]) -> tuple[str | None, str]:
    """(gpusbom target, version scheme) for a CVE record's vendor/product: the catalog's
    vendor strings (within the vendor: Intel, AMD), then its CPEs, then the old table."""
    from ... import catalog

    who = _intel_amd(vendor)
    if who is not None:
        row = catalog.by_vendor_string(product, who)
        if row is None:
            for c in cpes:
                rows = catalog.by_cpe(c)
                if rows:
                    row = rows[0]
                    break
        if row is not None:
            return row.id, row.scheme or "intel"
    for rx, target, scheme in _OTHER_TARGETS:
        if rx.search(product):
            return target, scheme
    if "nvidia" in vendor.lower() or any(":nvidia:" in c for c in cpes):
        return target_of(CsafProduct(product_id="", name=product, category="product_name",
                                     product=product, cpe=cpes[0] if cpes else None))
    return None, "semver"


@dataclass
class Cve5Import:
    record: dict[str, Any] | None
    unparsed: list[str] = field(default_factory=list)
    unmapped: list[str] = field(default_factory=list)
    skipped: str | None = None
    phrases: int = 0  # version strings of products gpusbom identifies
    parsed: int = 0  # of those, the ones turned into a range, version or fixed version
    unparsed_phrases: list[str] = field(default_factory=list)  # as written, for reports


_BEFORE = re.compile(r"^(?:before|prior to|below)\s+(?:versions?\s+)?v?(\S+)$", re.IGNORECASE)
_EXACT = re.compile(r"^versions?\s+(v?\d[\w.]*(?:\s*(?:,|and|&)\s*v?\d[\w.]*)*)$", re.IGNORECASE)
_NUMBERED = re.compile(r"\d+(?:\.\d+)+")
_WHOLE_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)+(?![\w.])")
# AMD joins several software releases in one version string: "AMD Software: Adrenalin
# Edition 25.6.1 (25.10.13.01), AMD Software: PRO Edition 25.Q2 (25.10.10)", "BKC 26
# (ROCm 7.0.1)": each comma part and each parenthesised part is read on its own
_AMD_PARTS = re.compile(r",\s+|\s*[()]\s*")
_MARKS = re.compile(r"\((?:R|TM|C)\)|[\u2122\u00ae\u00a9*]", re.IGNORECASE)
_WINDOWS = re.compile(r"\bfor Windows\b|\bWindows\b|\bWHQL\b|\bDCH\b", re.IGNORECASE)
_MACOS = re.compile(r"\bfor mac ?OS\b", re.IGNORECASE)
_LINUX = re.compile(r"\bfor linux\b", re.IGNORECASE)


def vendor_product(text: str) -> str:
    """A vendor product string without trademark marks and HTML entities (Intel writes
    ``Arc™ &amp; Iris(R) Xe``), spaces collapsed: ``Intel(R) Arc(TM) & Iris(R) Xe
    Graphics`` -> ``Intel Arc & Iris Xe Graphics``."""
    return " ".join(_MARKS.sub(" ", html.unescape(text)).split())


def product_platform(text: str) -> str | None:
    """The platform a product string names (``... software for Windows``), else None."""
    if _LINUX.search(text):
        return "linux"
    if _WINDOWS.search(text):
        return "windows"
    if _MACOS.search(text):
        return "macos"
    return None


def _phrase(text: str) -> dict[str, Any] | None:
    """A free-text version -> {"version": ...}, {"versions": [...]}, {"lines": [fix, ...]}
    or a range dict; None if not understood."""
    t = " ".join(text.split())
    if re.fullmatch(r".*\d\.", t):
        t = t[:-1]  # Intel's "before version 2025.0.": the sentence's full stop
    m = _BEFORE.match(t)
    if m:
        fixes = [_clean(x) for x in m.group(1).split("/") if x]
        return {"fixed": fixes[0]} if len(fixes) == 1 else {"lines": fixes}
    m = _EXACT.match(t)
    if m:
        return {"versions": [_clean(x) for x in re.split(r"\s*(?:,|and|&)\s*", m.group(1)) if x]}
    ph = parse_phrase(text)
    if ph is None:
        return None
    if ph.version:
        return {"version": _clean(ph.version)}
    r = {k: _clean(getattr(ph, k)) for k in ("introduced", "fixed", "last_affected")
         if getattr(ph, k)}
    return r or None


def phrase_class(text: str) -> str:
    """A CVE 5 version string with its versions and numbers abstracted (report grouping)."""
    return csaf_phrase_class(text)


def _clean(v: str) -> str:
    return v[1:] if v[:1] in ("v", "V") and v[1:2].isdigit() else v


def _ok(scheme: str, v: str) -> bool:
    try:
        parse(scheme, v)
    except InvalidVersion:
        return False
    return True


def _scores(containers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for c in containers:
        for m in c.get("metrics") or []:
            for key, typ in (("cvssV4_0", "CVSS_V4_0"), ("cvssV3_1", "CVSS_V3_1"),
                             ("cvssV3_0", "CVSS_V3_0")):
                x = m.get(key) if isinstance(m, dict) else None
                if isinstance(x, dict) and isinstance(x.get("baseScore"), (int, float)):
                    e = {"type": typ, "vector": x.get("vectorString"),
                         "score": float(x["baseScore"])}
                    if e not in out:
                        out.append(e)
    return out


@shape_checked("CVE JSON 5")
def import_cve5(doc: dict[str, Any], *, source_url: str | None = None,
                published: str | None = None) -> Cve5Import:
    """One CVE JSON 5 record -> a gpusbom record. ``published``: the date to use when the
    record carries none (NVIDIA's CVE files beside a bulletin have no dates: pass the
    bulletin's); without any date no record is made (``skipped``)."""
    meta = doc.get("cveMetadata") or {}
    cve = str(meta.get("cveId", "")).strip()
    if not cve:
        return Cve5Import(None, ["record without cveMetadata.cveId"], skipped="no id")
    if meta.get("state") == "REJECTED":
        return Cve5Import(None, skipped=f"{cve}: rejected")
    cna = (doc.get("containers") or {}).get("cna") or {}
    adp = [a for a in (doc.get("containers") or {}).get("adp") or [] if isinstance(a, dict)]
    imp = Cve5Import(record=None)
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    for a in cna.get("affected") or []:
        vendor, product = str(a.get("vendor", "")), str(a.get("product", ""))
        if vendor.strip().lower() in ("", "n/a", "unspecified"):
            # Intel's records say vendor "n/a": the assigner is the vendor
            vendor = str(meta.get("assignerShortName") or vendor)
        ia = _intel_amd(vendor)
        # matched without the (R)/(TM) marks; kept in the record as the vendor writes it
        name = vendor_product(product) if ia else product
        versions = [v for v in a.get("versions") or [] if isinstance(v, dict)]
        target, scheme = target_for(vendor, name, list(a.get("cpes") or []))
        if target is not None:
            parts = [(target, scheme, product, list(a.get("versions") or []))]
        elif ia == "AMD":
            parts = _amd_by_version(versions)  # the software is named in the versions
        else:
            parts = []
        if not parts:
            if product not in imp.unmapped:
                imp.unmapped.append(product)
            continue
        for target, scheme, vprod, vers in parts:
            plats: list[str | None] = list(a.get("platforms") or []) or [None]
            for plat in plats:
                platform, branch, variant = parse_arch(plat) if plat else (None, None, None)
                if platform is None and ia:
                    platform = product_platform(vendor_product(vprod)) or _row_platform(target)
                if branch and scheme != "nvidia-driver":
                    branch = None  # a release line of a non-driver product: not a driver branch
                key = (target, vprod, platform, branch, variant)
                g = groups.setdefault(key, {
                    "target": target, "vendor_product": vprod, "scheme": scheme,
                    **{k: v for k, v in (("platform", platform), ("branch", branch),
                                         ("variant", variant)) if v},
                    "ranges": [], "versions": [], "fixed": [], "phrases": [], "bad": [],
                    "lines": [], "default": a.get("defaultStatus"), "named": ia == "AMD",
                })
                for v in vers:
                    imp.phrases += 1
                    imp.parsed += _version(v, g, scheme)
    affected = []
    for g in groups.values():
        bad, phrases, default = g.pop("bad"), g.pop("phrases"), g.pop("default")
        lines = g.pop("lines")
        g.pop("named")
        imp.unparsed.extend(f"{g['vendor_product']}: {b}" for b in bad)
        imp.unparsed_phrases.extend(bad)
        if lines and not g["ranges"] and not g["versions"]:
            g["no_range"] = ("one fixed version per release line (" + ", ".join(lines)
                             + "); the record does not say which line a version is on")
        elif not g["ranges"] and not g["versions"]:
            if default == "affected" and g["fixed"]:
                g["no_range"] = ("vendor lists only unaffected versions ("
                                 + ", ".join(g["fixed"]) + "); affected versions not stated")
            elif not phrases and not bad:
                continue  # nothing said to be affected for this product
            else:
                g["no_range"] = "vendor gives no machine-readable versions: " + "; ".join(
                    bad or phrases)
        elif bad:
            g["note"] = "some vendor versions not understood: " + "; ".join(bad)
        for k in ("ranges", "versions", "fixed"):
            if not g[k]:
                del g[k]
        if phrases:
            g["vendor_phrases"] = phrases
        affected.append(g)
    if not affected:
        imp.skipped = f"{cve}: no product gpusbom identifies"
        return imp
    title = str(cna.get("title") or "").strip() or _fact_title(cna, affected)
    if not title:
        for d in cna.get("descriptions") or []:
            if isinstance(d, dict) and str(d.get("lang", "")).startswith("en"):
                title = " ".join(str(d.get("value", "")).split())[:200]
                break
    date = str(meta.get("datePublished") or cna.get("datePublic")
               or (cna.get("providerMetadata") or {}).get("dateUpdated") or published or "")[:10]
    if not re.match(r"^\d{4}-\d{2}-\d{2}$", date):
        imp.skipped = f"{cve}: the record has no publication date"
        return imp
    assigner = str(meta.get("assignerShortName") or "")
    sources = [f"https://www.cve.org/CVERecord?id={cve}"]
    if source_url and source_url.startswith("https://"):
        sources.append(source_url)
    for r in cna.get("references") or []:
        u = r.get("url") if isinstance(r, dict) else None
        if isinstance(u, str) and u.startswith("https://") and u not in sources \
                and len(sources) < 6:
            sources.append(u)
    vuln: dict[str, Any] = {"id": cve, "severity": _scores([cna, *adp]), "affected": affected}
    if title:
        vuln["title"] = title
    cwes = sorted({str(d.get("cweId")) for pt in cna.get("problemTypes") or []
                   for d in (pt.get("descriptions") or []) if isinstance(d, dict)
                   and re.fullmatch(r"CWE-\d+", str(d.get("cweId", "")))})
    if cwes:
        vuln["cwe"] = cwes
    text = " ".join(str(d.get("value", "")) for d in cna.get("descriptions") or []
                    if isinstance(d, dict))
    if "disputed" in [str(t).lower() for t in cna.get("tags") or []] or "** DISPUTED **" in text:
        vuln["state"] = "disputed"
    # the vendor's advisory id from every reference (older Intel records link http://)
    sa = advisory_id([*sources, *(str(r.get("url", "")) for r in cna.get("references") or []
                                  if isinstance(r, dict))])
    imp.record = {
        "id": sa or cve,
        "vendor": _VENDORS.get(assigner.lower(), assigner or "CVE"),
        "aliases": [],
        "title": title or cve,
        "published": date,
        "modified": str(meta.get("dateUpdated") or "")[:10] or None,
        "sources": sources,
        "verification": {
            "status": "verified" if not imp.unparsed else "partial",
            "notes": "imported from CVE JSON 5"
            + ("; not understood: " + "; ".join(imp.unparsed) if imp.unparsed else ""),
        },
        "vulnerabilities": [vuln],
    }
    if sa:
        imp.record["vendor_id"] = sa
        imp.record["aliases"] = [cve]
    return imp


def _fact_title(cna: dict[str, Any], affected: list[dict[str, Any]]) -> str:
    """A title made of the record's facts, not its prose: the products, the CWE name and
    the impact class (Intel's records carry no title): ``Intel(R) oneAPI DPC++/C++
    Compiler software: Uncontrolled Search Path Element (escalation of privilege)``."""
    cwe, impact = "", ""
    for pt in cna.get("problemTypes") or []:
        for d in pt.get("descriptions") or [] if isinstance(pt, dict) else []:
            if not isinstance(d, dict):
                continue
            text = " ".join(str(d.get("description", "")).split())
            if d.get("cweId"):
                cwe = cwe or re.sub(r"^CWE-\d+:?\s*", "", text)
            elif text and len(text) <= 60:
                impact = impact or text
    products = list(dict.fromkeys(str(a["vendor_product"]) for a in affected))
    if not cwe or not products:
        return ""
    head = ", ".join(products[:3]) + (f" and {len(products) - 3} more" if len(products) > 3 else "")
    return f"{head}: {cwe}" + (f" ({impact.lower()})" if impact else "")


_SA = re.compile(r"intel-sa-(\d{5})|amd-sb-(\d{4,5})", re.IGNORECASE)


def advisory_id(urls: list[str]) -> str | None:
    """The vendor's advisory id a CVE record's references name (INTEL-SA-01072 from
    ``.../intel-sa-01072.html``, AMD-SB-6019), kept as the record id."""
    for u in urls:
        m = _SA.search(u)
        if m:
            return f"INTEL-SA-{m.group(1)}" if m.group(1) else f"AMD-SB-{m.group(2)}"
    return None


def by_advisory(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Records of several CVEs of one vendor advisory (same id) as one record."""
    out: dict[str, dict[str, Any]] = {}
    for r in records:
        have = out.get(r["id"])
        if have is None:
            out[r["id"]] = {**r, "vulnerabilities": list(r["vulnerabilities"]),
                            "aliases": list(r.get("aliases", []))}
            continue
        have["vulnerabilities"].extend(r["vulnerabilities"])
        have["aliases"] = sorted({*have["aliases"], *r.get("aliases", [])})
        have["sources"] = list(dict.fromkeys([*have["sources"], *r["sources"]]))
        have["published"] = min(have["published"], r["published"])
    return list(out.values())


def _version(v: Any, g: dict[str, Any], scheme: str) -> int:
    """Read one ``versions[]`` entry into the group; 1 when it was understood."""
    if not isinstance(v, dict):
        g["bad"].append(repr(v))
        return 0
    status = v.get("status")
    text = str(v.get("version", "")).strip()
    lt, lte = v.get("lessThan"), v.get("lessThanOrEqual")
    if status == "unaffected":
        if lt is None and lte is None:
            got = _phrase(text) if text else None
            ver = got.get("version") if got else None
            if ver is None and g["named"]:
                # AMD's "Radeon Software For Linux 25.10.1": the release inside the name,
                # a whole token only ("PRO Edition 25.Q3.1" names no numeric release)
                m = _WHOLE_NUMBER.search(text)
                ver = m.group(0) if m else None
            if ver and _ok(scheme, ver):
                if ver not in g["fixed"]:
                    g["fixed"].append(ver)
                return 1
            if g["named"] and text:
                g["bad"].append(text)  # "PRO Edition 25.Q2": counted, never guessed
        return 0
    if status != "affected":
        return 0
    g["phrases"].append(text)
    if lt is not None or lte is not None:
        r: dict[str, str] = {}
        if text.lower() not in _NONE:
            r["introduced"] = _clean(text)
        if lt is not None and str(lt).strip() not in ("*", ""):
            r["fixed"] = _clean(str(lt).strip())
        elif lte is not None and str(lte).strip() not in ("*", ""):
            r["last_affected"] = _clean(str(lte).strip())
        if not r or any(not _ok(scheme, x) for x in r.values()):
            g["bad"].append(f"{text} < {lt or lte}" if (lt or lte) else text)
            return 0
        if r not in g["ranges"]:
            g["ranges"].append(r)
        if "fixed" in r and r["fixed"] not in g["fixed"]:
            g["fixed"].append(r["fixed"])
        return 1
    got = _phrase(text)
    flat = [x for x in got.values() for x in (x if isinstance(x, list) else [x])] if got else []
    if got is None or any(not _ok(scheme, x) for x in flat):
        g["bad"].append(text)
        return 0
    if "lines" in got:
        # one fix per release line: never a range (which line a version is on is unknown)
        for x in got["lines"]:
            if x not in g["fixed"]:
                g["fixed"].append(x)
            if x not in g["lines"]:
                g["lines"].append(x)
        return 0
    for x in got.get("versions", [got["version"]] if "version" in got else []):
        if x not in g["versions"]:
            g["versions"].append(x)
    if "version" not in got and "versions" not in got and got not in g["ranges"]:
        g["ranges"].append(got)
    return 1


def version_understood(v: Any, scheme: str = "intel", *, named: bool = False) -> tuple[bool, str]:
    """(understood, text) for one ``versions[]`` entry of any product, read as the importer
    reads it (real-data checks count phrases of products the catalog does not name too)."""
    g: dict[str, Any] = {"ranges": [], "versions": [], "fixed": [], "phrases": [], "bad": [],
                         "lines": [], "named": named}
    ok = _version(v, g, scheme) == 1
    text = g["bad"][0] if g["bad"] else str(v.get("version", "")) if isinstance(v, dict) else ""
    return ok, text


def _intel_amd(vendor: str) -> str | None:
    v = vendor.lower()
    return "Intel" if "intel" in v else "AMD" if v.startswith(("amd", "advanced micro")) else None


def _row_platform(target: str) -> str | None:
    """``windows`` for a catalog row of a product that never runs on Linux."""
    from ... import catalog

    try:
        row = catalog.get(target)
    except KeyError:
        return None
    return row.platforms[0] if row.platforms and "linux" not in row.platforms else None


def _amd_by_version(versions: list[dict[str, Any]]) -> list[tuple[str, str, str, list[Any]]]:
    """AMD entries whose product is hardware: (target, scheme, software name, versions)
    per software product named in the version strings."""
    from ... import catalog

    out: dict[tuple[str, str], tuple[str, str, str, list[Any]]] = {}
    for v in versions:
        for part in str(v.get("version", "")).split(", "):
            last: list[Any] | None = None  # the entry a "(25.10.32)" build number belongs to
            for raw in (x.strip() for x in _AMD_PARTS.split(part) if x.strip()):
                row = catalog.by_vendor_string(vendor_product(raw), "AMD")
                if row is None:
                    m = _WHOLE_NUMBER.fullmatch(raw)
                    if m and last is not None and not _WHOLE_NUMBER.search(last[-1]["version"]):
                        # "PRO Edition 23.Q4 (23.30.13.03)": the release is quarter-named,
                        # the driver version in parentheses is the number the vendor gives
                        last[-1] = {**last[-1], "version": f"{last[-1]['version']} {raw}"}
                    continue
                m = _WHOLE_NUMBER.search(raw)
                name = " ".join((raw[:m.start()] if m else raw).split()).rstrip(" :") or raw
                got = out.setdefault((row.id, name), (row.id, row.scheme or "intel", name, []))
                got[3].append({**v, "version": raw})
                last = got[3]
    return list(out.values())
