"""CycloneDX vulnerabilities of a scan: one ``Vulnerability`` per CVE (or advisory) with its
ratings, sources, affected components and their version ranges, and the analysis (state,
justification, response) the matcher and VEX decided; used by :mod:`._cyclonedx_impl`."""

from __future__ import annotations

from decimal import Decimal

from cyclonedx.model import Property, XsUri
from cyclonedx.model.impact_analysis import (
    ImpactAnalysisAffectedStatus,
    ImpactAnalysisJustification,
    ImpactAnalysisState,
)
from cyclonedx.model.vulnerability import (
    BomTarget,
    BomTargetVersionRange,
    Vulnerability,
    VulnerabilityAdvisory,
    VulnerabilityAnalysis,
    VulnerabilityRating,
    VulnerabilityReference,
    VulnerabilityScoreSource,
    VulnerabilitySeverity,
    VulnerabilitySource,
)

from ..model import AdvisoryMatch, Finding, ScanResult
from ._common import prop

_SCORE_METHODS = {
    "CVSS_V3_0": VulnerabilityScoreSource.CVSS_V3,
    "CVSS_V3_1": VulnerabilityScoreSource.CVSS_V3_1,
    "CVSS_V4_0": VulnerabilityScoreSource.CVSS_V4,
}
_STATES = {
    "affected": (ImpactAnalysisState.EXPLOITABLE, ImpactAnalysisAffectedStatus.AFFECTED),
    "review": (ImpactAnalysisState.IN_TRIAGE, ImpactAnalysisAffectedStatus.UNKNOWN),
    "unsupported-branch": (ImpactAnalysisState.IN_TRIAGE, ImpactAnalysisAffectedStatus.UNKNOWN),
    "not-affected": (ImpactAnalysisState.NOT_AFFECTED, ImpactAnalysisAffectedStatus.UNAFFECTED),
}


def _analysis(a: AdvisoryMatch, state: ImpactAnalysisState) -> VulnerabilityAnalysis:
    """``analysis``: state, and for a VEX ``not-affected`` the CycloneDX justification (mapped
    from OpenVEX terms) with the statement's text as detail."""
    if a.status != "not-affected" or not a.justification:
        return VulnerabilityAnalysis(state=state, detail=a.justification or a.reason)
    from ..advisories.vex import cyclonedx_justification

    code, detail = cyclonedx_justification(a.justification)
    return VulnerabilityAnalysis(
        state=state, detail=detail or a.justification,
        justification=ImpactAnalysisJustification(code) if code else None,
    )


_STATUS_RANK = {"affected": 0, "unsupported-branch": 1, "review": 2, "not-affected": 3}


def _vulnerability(group: list[Finding], refs: set[str]) -> Vulnerability | None:
    """One CycloneDX vulnerability for one vulnerability id, with every component it
    affects in ``affects`` (each with its installed version and status). The state and
    rating are the most severe of the group's: affected before review before not-affected."""
    pairs = [(f, r) for f in group for r in f.components if r in refs and f.advisory is not None]
    if not pairs:
        return None
    ranked = sorted(group, key=lambda f: (
        _STATUS_RANK.get(f.advisory.status if f.advisory else "", 9),
        -(f.advisory.score or 0) if f.advisory else 0, f.advisory.advisory if f.advisory else ""))
    lead = ranked[0]
    a = lead.advisory
    assert a is not None  # noqa: S101 - type narrowing of an invariant
    state, _ = _STATES.get(a.status, (ImpactAnalysisState.IN_TRIAGE,
                                      ImpactAnalysisAffectedStatus.UNKNOWN))
    advisories = sorted({f.advisory.advisory for f in group if f.advisory})
    urls = sorted({u for f in group if f.advisory for u in f.advisory.urls
                   if u.startswith("https://")})
    lead_urls = [u for u in a.urls if u.startswith("https://")]
    source = VulnerabilitySource(name=a.advisory, url=XsUri(lead_urls[0]) if lead_urls else None)
    ratings = []
    if a.score is not None:
        sev = VulnerabilitySeverity(lead.severity) if lead.severity in {
            x.value for x in VulnerabilitySeverity} else VulnerabilitySeverity.UNKNOWN
        ratings.append(VulnerabilityRating(
            source=source, score=Decimal(str(a.score)), severity=sev,
            method=_SCORE_METHODS.get(a.score_type or "", VulnerabilityScoreSource.OTHER),
            vector=a.vector,
        ))
    props: list[Property] = []
    affects: dict[str, list[BomTargetVersionRange]] = {}
    aliases: set[tuple[str, str]] = set()
    for f, r in sorted(pairs, key=lambda p: (p[1], p[0].advisory.advisory if p[0].advisory else "")):
        fa = f.advisory
        assert fa is not None  # noqa: S101 - type narrowing of an invariant
        _, vstatus = _STATES.get(fa.status, (ImpactAnalysisState.IN_TRIAGE,
                                             ImpactAnalysisAffectedStatus.UNKNOWN))
        versions = affects.setdefault(r, [])
        if fa.installed_version:
            rng = BomTargetVersionRange(version=fa.installed_version, status=vstatus)
            if rng not in versions:
                versions.append(rng)
        # per affected component: what gpusbom concluded for it, keyed by its bom-ref
        props.append(Property(name=prop("advisory:status"), value=f"{r} {fa.status}"))
        props.append(Property(name=prop("advisory:product"), value=f"{r} {fa.product}"))
        if fa.rule:
            props.append(Property(name=prop("advisory:rule"), value=f"{r} {fa.rule}"))
        if fa.cve_state:
            props.append(Property(name=prop("advisory:cve-state"), value=f"{r} {fa.cve_state}"))
        if fa.installed_version:
            props.append(Property(name=prop("advisory:installed-version"),
                                  value=f"{r} {fa.installed_version}"))
        if fa.fixed_version:
            props.append(Property(name=prop("advisory:fixed-version"),
                                  value=f"{r} {fa.fixed_version}"))
        for x in fa.aliases:
            aliases.add((x, fa.advisory))
        for ev in f.evidence:
            props.append(Property(name=prop("path"), value=ev))
    fixes = sorted({f.advisory.fixed_version for f in group
                    if f.advisory and f.advisory.fixed_version})
    # from a database ``advisories update`` fetched: CISA KEV's dateAdded, the vendor's text
    kev = next((f.advisory.kev for f in ranked if f.advisory and f.advisory.kev), None)
    if kev:
        props.insert(0, Property(name=prop("kev"), value=kev))
    text = next((f.advisory.description for f in ranked
                 if f.advisory and f.advisory.description), None)
    return Vulnerability(
        bom_ref=f"vuln:{a.vulnerability}",
        id=a.vulnerability,
        source=source,
        references=[VulnerabilityReference(id=x, source=VulnerabilitySource(name=adv))
                    for x, adv in sorted(aliases) if x != a.vulnerability],
        ratings=ratings,
        description=text or lead.title,
        detail=lead.detail,
        recommendation=("upgrade to " + " or ".join(fixes)) if fixes else None,
        advisories=[VulnerabilityAdvisory(url=XsUri(u), title=", ".join(advisories))
                    for u in urls],
        # an analysis only where there is one (a VEX statement or gpusbom's proof of not
        # affected): a plain version match is not "exploitable"
        analysis=_analysis(a, state) if a.status == "not-affected" else None,
        cwes=sorted({int(c.split("-")[1]) for f in group if f.advisory
                     for c in f.advisory.cwe if c.split("-")[-1].isdigit()}) or None,
        affects=[BomTarget(ref=r, versions=v or None) for r, v in sorted(affects.items())],
        properties=props,
    )


def vulnerabilities(result: ScanResult, refs: set[str]) -> list[Vulnerability]:
    """One entry per vulnerability id (a CVE affecting three components is one entry
    with three ``affects``, as the CycloneDX spec intends)."""
    groups: dict[str, list[Finding]] = {}
    for f in result.findings:
        if f.kind == "advisory" and f.advisory is not None:
            groups.setdefault(f.advisory.vulnerability, []).append(f)
    out = []
    for _vid, group in sorted(groups.items()):
        v = _vulnerability(group, refs)
        if v is not None:
            out.append(v)
    return out
