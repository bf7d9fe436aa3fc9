"""The policy rules, one function each: ``(ctx, settings) -> list[Violation] | None``.

A rule returns None when it does not apply to the target (probes of an image), else its
violations (``level`` error) and warnings (``level`` warning). Rules read only the
internal model (``ScanResult``): components with their properties and products, findings
with their ``AdvisoryMatch``, probe results, unknowns.
"""

from __future__ import annotations

import datetime as _dt
import fnmatch
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from ..model import Component, ComponentType, ScanResult, own_product_version
from .decision import Violation
from .loader import ComponentRule, Policy
from .ranges import RangeError, compare, scheme_for

__all__ = ["RULE_FUNCS", "RULE_TITLES", "RuleContext", "product_instances"]

SEVERITIES = ("critical", "high", "medium", "low")

RULE_TITLES = {
    "advisories": "No affected advisory at or above the policy's severity",
    "driver_branches": "NVIDIA driver branches are on the allow list",
    "minimum_versions": "GPU stack products are at least the policy's minimum versions",
    "deny": "No denied component (or denied version range) is present",
    "allow": "Components listed with allowed version ranges are within them",
    "probes": "Every GPU smoke-test probe passed",
    "completeness": "Every GPU component has a known version (and no unknowns when asked)",
    "advisory_db": "The advisory database is recent enough",
    "compatible_with": "The target runs on the required GPUs / architectures",
    "exceptions": "No policy exception has expired",
}

#: ``minimum_versions`` keys that stand for several products
PRODUCT_ALIASES = {
    "cuda": ("cuda-toolkit", "cudart"),
    "driver": ("@nvidia-driver",),
    "nvidia-driver": ("@nvidia-driver",),
}


@dataclass
class RuleContext:
    result: ScanResult
    policy: Policy
    strict: bool = False
    db: Any = None  # the AdvisoryDB the findings were matched with, when known
    now: _dt.datetime | None = None
    target: str = ""  # the target as the user named it

    def line(self, rule: str) -> int | None:
        return self.policy.line_of(rule)


@dataclass(frozen=True)
class ProductInstance:
    stack: str
    product: str
    version: str | None
    component: Component


def _norm(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(".", "-")


def product_instances(result: ScanResult) -> Iterator[ProductInstance]:
    """Every GPU-stack product a component provides, with the version the matcher uses."""
    for c in result.components:
        if c.type == ComponentType.DEVICE:
            continue
        own = own_product_version(c)
        for p in c.products:
            yield ProductInstance(p.stack, p.name, p.version or own or c.version, c)


def _label(c: Component, version: str | None = None) -> str:
    v = version if version is not None else c.version
    return f"{c.name} {v}" if v else f"{c.name} (version unknown)"


def _evidence(c: Component) -> tuple[str, ...]:
    paths = [e.path for e in c.evidence if e.path and e.method != "package-db"]
    paths = paths or [e.path for e in c.evidence if e.path]
    return tuple(dict.fromkeys(p for p in paths if p))[:3]


def _names(c: Component) -> tuple[str, ...]:
    names = [c.name, c.properties.get("product") or "", *(p.name for p in c.products), c.bom_ref]
    return tuple(dict.fromkeys(n for n in names if n))


# --------------------------------------------------------------------------- advisories


def rule_advisories(ctx: RuleContext, s: dict[str, Any]) -> list[Violation]:
    threshold = SEVERITIES.index(s["fail_on"])
    fail_review = bool(s.get("fail_on_review", False))
    fail_unscored = bool(s.get("fail_on_unscored", False))
    # a driver branch the bulletin does not list, older than every listed one: the vendor
    # says it "may also be affected"; judged as affected only when the policy asks
    statuses = ("affected", "review",
                *(("unsupported-branch",) if s.get("fail_on_unsupported_branch") else ()))
    out: list[Violation] = []
    for f in ctx.result.findings:
        a = f.advisory
        if a is None or a.status not in statuses:
            continue
        scored = f.severity in SEVERITIES
        if scored and SEVERITIES.index(f.severity) > threshold:
            continue
        if not scored and a.status == "review":
            continue
        if a.status in ("affected", "unsupported-branch"):
            level = "error" if scored or fail_unscored else "warning"
        else:
            level = "error" if fail_review else "warning"
        comp = ctx.result.component_by_ref(f.components[0]) if f.components else None
        subject = _label(comp) if comp else a.product
        installed = a.installed_version or "?"
        score = f"CVSS {a.score:g}" if a.score is not None else "no CVSS score"
        kev = f", in CISA KEV since {a.kev}" if a.kev else ""
        msg = (f"{a.vulnerability} ({f.severity}, {score}, {a.status}{kev}): {a.product} "
               f"{installed} [{a.advisory}]" + (f": {a.reason}" if a.reason else ""))
        if a.status == "review":
            fix = ("a person must judge it: the vendor gives no machine-readable range"
                   + (f"; see {a.urls[0]}" if a.urls else ""))
            if a.fixed_version:
                fix = f"upgrade {a.product} to {a.fixed_version} (or judge it: {a.reason})"
        elif a.status == "unsupported-branch":
            _, _, fixed = (a.reason or "").partition("fixed branches: ")
            fix = f"move {a.product} to a branch the vendor still fixes" + (
                f" ({fixed})" if fixed else "")
        elif a.fixed_version:
            fix = f"upgrade {a.product} to {a.fixed_version}"
        else:
            fix = f"no fixed version for {a.product} {installed} in this line" + (
                f"; see {a.urls[0]}" if a.urls else "")
        out.append(Violation(
            rule="advisories", subject=subject, message=msg, fix=fix, evidence=f.evidence,
            component=comp.bom_ref if comp else None, names=_names(comp) if comp else (a.product,),
            advisory=a.vulnerability, aliases=(a.advisory, *a.aliases), level=level,
            policy_line=ctx.line("advisories"),
        ))
    return out


# --------------------------------------------------------------------------- versions


def rule_driver_branches(ctx: RuleContext, s: dict[str, Any]) -> list[Violation] | None:
    from ..advisories.versions import driver_branch

    allowed = list(s["allow"])
    shown = ", ".join(f"R{b}" for b in allowed)
    out: list[Violation] = []
    seen: set[str] = set()
    found = False
    for p in product_instances(ctx.result):
        if p.stack != "nvidia-driver" or p.component.bom_ref in seen:
            continue
        seen.add(p.component.bom_ref)
        found = True
        branch = driver_branch(p.version) if p.version else None
        if branch in allowed:
            continue
        msg = (f"driver branch R{branch} is not allowed (allowed: {shown})" if branch else
               f"driver version {p.version or 'unknown'}: its branch cannot be told "
               f"(allowed: {shown})")
        out.append(Violation(
            rule="driver_branches", subject=_label(p.component, p.version), message=msg,
            fix=f"use a driver of an allowed branch ({shown})", evidence=_evidence(p.component),
            component=p.component.bom_ref, names=_names(p.component),
            policy_line=ctx.line("driver_branches"),
        ))
    return out if found else None


def _matches_product(key: str, p: ProductInstance) -> bool:
    k = _norm(key)
    for alias in PRODUCT_ALIASES.get(k, (k,)):
        if alias.startswith("@"):
            if p.stack == alias[1:]:
                return True
        elif _norm(p.product) == alias:
            return True
    return False


def rule_minimum_versions(ctx: RuleContext, s: dict[str, str]) -> list[Violation] | None:
    out: list[Violation] = []
    found = False
    line = ctx.line("minimum_versions")
    for key, minimum in s.items():
        seen: set[tuple[str, str | None]] = set()
        for p in product_instances(ctx.result):
            if not _matches_product(key, p) or (p.component.bom_ref, p.version) in seen:
                continue
            seen.add((p.component.bom_ref, p.version))
            found = True
            base = Violation(rule="minimum_versions", subject=_label(p.component, p.version),
                             message="", evidence=_evidence(p.component),
                             component=p.component.bom_ref, names=_names(p.component),
                             policy_line=line, fix=f"upgrade {p.product} to {minimum} or later")
            if not p.version:
                out.append(replace(base, message=f"{p.product}: version unknown; the policy "
                                   f"needs {key} >= {minimum}"))
                continue
            try:
                below = compare(p.version, minimum) < 0
            except RangeError as exc:
                out.append(replace(base, message=f"{p.product}: {exc} (minimum for {key})"))
                continue
            if below:
                out.append(replace(base, message=f"{p.product} {p.version} is below the "
                                   f"minimum {key} {minimum}"))
    return out if found else None


def _component_matches(entry: ComponentRule, c: Component) -> list[tuple[str | None, str | None]]:
    """(version, scheme hint) of every identity of ``c`` the entry names."""
    if entry.ecosystem and _norm(entry.ecosystem) != _norm(c.ecosystem or ""):
        return []
    pat = _norm(entry.component)
    hits: list[tuple[str | None, str | None]] = []
    if fnmatch.fnmatchcase(_norm(c.name), pat):
        hits.append((c.version, scheme_for(c.ecosystem)))
    own = own_product_version(c)
    products = [(p.name, p.version or own or c.version) for p in c.products]
    if not products and c.properties.get("product"):
        products = [(c.properties["product"], c.properties.get("product-version") or c.version)]
    for name, version in products:
        if _norm(name) != _norm(c.name) and fnmatch.fnmatchcase(_norm(name), pat):
            hits.append((version, None))
    return hits


def _list_rule(ctx: RuleContext, rule: str, entries: list[ComponentRule]) -> list[Violation] | None:
    out: list[Violation] = []
    found = False
    for entry in entries:
        for c in ctx.result.components:
            if c.type == ComponentType.DEVICE:
                continue
            for version, hint in _component_matches(entry, c):
                found = True
                base = Violation(rule=rule, subject=_label(c, version), message="",
                                 evidence=_evidence(c), component=c.bom_ref, names=_names(c),
                                 policy_line=entry.line or ctx.line(rule))
                why = f" ({entry.reason})" if entry.reason else ""
                rng = entry.versions
                if rng is None:  # deny without range: the component itself is refused
                    out.append(replace(base, message=f"{entry.component} is denied{why}",
                                       fix=f"remove {c.name}"))
                    continue
                if not version:
                    inside: bool | None = None
                else:
                    try:
                        inside = rng.contains(version, hint=hint)
                    except RangeError:
                        inside = None
                if inside is None:  # fail closed: compliance cannot be shown
                    out.append(replace(
                        base, message=f"{entry.component}: version {version or 'unknown'} cannot be "
                        f"compared with {rule} range {rng}{why}",
                        fix=f"make the version of {c.name} known, or narrow the rule"))
                elif rule == "deny" and inside:
                    out.append(replace(
                        base, message=f"{entry.component} {version} is in the denied range {rng}{why}",
                        fix=f"use a version of {c.name} outside {rng}"))
                elif rule == "allow" and not inside:
                    out.append(replace(
                        base, message=f"{entry.component} {version} is outside the allowed range "
                        f"{rng}{why}", fix=f"use a version of {c.name} in {rng}"))
    return out if found or rule == "deny" else None


def rule_deny(ctx: RuleContext, s: list[ComponentRule]) -> list[Violation] | None:
    return _list_rule(ctx, "deny", s)


def rule_allow(ctx: RuleContext, s: list[ComponentRule]) -> list[Violation] | None:
    return _list_rule(ctx, "allow", s)


# --------------------------------------------------------------------------- probes


_PROBE_FIX = {
    "fail": "the kernel computed a wrong result: check the GPU, its driver and firmware "
            "(gpusbom probe)",
    "error": "the runtime reported an error: check the driver / runtime install (gpusbom probe)",
    "timeout": "the kernel did not finish: check the GPU and driver (gpusbom probe)",
    "skipped": "the runtime could not run the kernel: install the runtime or driver it needs",
}


def rule_probes(ctx: RuleContext, s: dict[str, Any]) -> list[Violation] | None:
    r = ctx.result
    if r.target.kind != "host" and not r.probes:
        return None
    line = ctx.line("probes")
    fail_skipped = s.get("skipped", "ignore") == "fail"
    out: list[Violation] = []
    bad = ("fail", "error", "timeout")
    devices = [p for p in r.probes if p.device is not None]
    for p in sorted(r.probes, key=lambda p: (p.backend, p.device_id or "", p.device or "")):
        if p.outcome == "pass":
            continue
        if s.get("require_pass", True) and p.outcome in bad or (
                fail_skipped and p.outcome == "skipped" and p.device is not None):
            detail = p.reason or p.error_name or ""
            subject = p.label + (f" ({p.device})" if p.device else "")
            comp = r.component_by_ref(p.device_ref) if p.device_ref else None
            out.append(Violation(
                rule="probes", subject=subject,
                message=f"probe {p.outcome}" + (f": {detail}" if detail else ""),
                fix=_PROBE_FIX.get(p.outcome), evidence=_evidence(comp) if comp else (),
                component=p.device_ref, names=(p.label, p.backend, *(_names(comp) if comp else ())),
                policy_line=line,
            ))
    if s.get("require_run", True) and not devices:
        out.append(Violation(
            rule="probes", subject=ctx.target or r.target.reference,
            message="no GPU device was probed" + (
                " (every backend was skipped)" if r.probes else " (no probe results)"),
            fix="run the scan with --host --probe on a machine with a GPU runtime",
            policy_line=line,
        ))
    return out


# --------------------------------------------------------------------------- completeness


def rule_completeness(ctx: RuleContext, s: dict[str, Any]) -> list[Violation]:
    out: list[Violation] = []
    line = ctx.line("completeness")
    if s.get("gpu_versions", True):
        seen: set[tuple[str, str]] = set()
        for p in product_instances(ctx.result):
            if p.version or (p.component.bom_ref, p.product) in seen:
                continue
            seen.add((p.component.bom_ref, p.product))
            out.append(Violation(
                rule="completeness", subject=_label(p.component),
                message=f"GPU component {p.product} ({p.stack}) has no known version",
                fix="make the version readable (version file, package metadata) or waive it",
                evidence=_evidence(p.component), component=p.component.bom_ref,
                names=_names(p.component), policy_line=line,
            ))
    if s.get("unknowns", False) or ctx.strict:
        for u in ctx.result.unknowns:
            out.append(Violation(
                rule="completeness", subject=f"unknown from {u.collector}",
                message=f"scan incomplete: {u.reason}",
                fix="scan with the access the collector needs (e.g. as root), or waive it",
                evidence=(u.path,) if u.path else (), names=(u.collector,), policy_line=line,
            ))
    return out


# --------------------------------------------------------------------------- advisory db


def _db_stamp(ctx: RuleContext) -> tuple[str | None, str]:
    info = getattr(ctx.result, "advisory_db", None)
    for src in (info, ctx.db):
        if src is None:
            continue
        get = src.get if isinstance(src, dict) else (lambda k, s=src: getattr(s, k, None))
        built = get("built") or get("newest")
        if built:
            return str(built), str(get("source") or "advisory database")
    if ctx.db is None:
        from ..advisories.db import load_active

        ctx.db = load_active()
    return ctx.db.built or ctx.db.newest, str(ctx.db.source)


def rule_advisory_db(ctx: RuleContext, s: dict[str, Any]) -> list[Violation]:
    stamp, source = _db_stamp(ctx)
    line = ctx.line("advisory_db")
    limit = float(s["max_age_days"])
    subject = f"advisory database ({source})"
    fix = "update gpusbom's advisory database (a newer gpusbom or gpusbom advisories update)"
    if not stamp:
        return [Violation(rule="advisory_db", subject=subject, message="no build date: its age "
                          "cannot be told", fix=fix, policy_line=line)]
    built = _dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    if built.tzinfo is None:
        built = built.replace(tzinfo=_dt.timezone.utc)
    from ..clock import now as _clock_now

    now = ctx.now or _clock_now()
    age = (now - built).total_seconds() / 86400
    if age <= limit:
        return []
    return [Violation(rule="advisory_db", subject=subject,
                      message=f"built {stamp[:10]}, {age:.0f} days old; the policy allows "
                      f"{limit:g} days", fix=fix, policy_line=line)]


# --------------------------------------------------------------------------- compat


def rule_compatible_with(ctx: RuleContext, s: dict[str, Any]) -> list[Violation]:
    from ..errors import ConfigError

    try:
        from .. import compat
    except ImportError:
        raise ConfigError(f"{ctx.policy.path}:{ctx.line('compatible_with')}: rule "
                          "'compatible_with': needs gpusbom.compat, which this gpusbom lacks"
                          ) from None
    from ..errors import GpusbomError

    try:
        verdicts = compat.evaluate(ctx.result, list(s["targets"]))
    except (GpusbomError, ValueError, KeyError) as exc:
        raise ConfigError(f"{ctx.policy.path}:{ctx.line('compatible_with')}: rule "
                          f"'compatible_with': {exc}") from None
    allow_jit = bool(s.get("allow_jit", True))
    allow_unchecked = bool(s.get("allow_unchecked", False))
    out: list[Violation] = []
    for v in verdicts:
        if v.verdict == compat.RUNS:
            continue
        telling = [x for x in v.reasons if "satisfied" not in x and "not checked" not in x]
        failing = [f"{lib.file} fails" for lib in v.failing if lib.file][:1]
        reasons = "; ".join(failing + (telling or list(v.reasons))[:3]) or v.verdict
        jit = v.verdict == compat.JIT
        warn = (jit and allow_jit) or (v.verdict == compat.UNCHECKED and allow_unchecked)
        out.append(Violation(
            rule="compatible_with", subject=v.target,
            message=f"{v.verdict} on {v.target}: {reasons}",
            fix=("build for this architecture (add its SASS/code object) to avoid JIT"
                 if jit else "nothing in the image is for this GPU's vendor"
                 if v.verdict == compat.NA else "the image's device code could not be judged: "
                 "scan the image itself (not an SBOM without files)"
                 if v.verdict == compat.UNCHECKED
                 else f"rebuild or pick components that support {v.target}"),
            evidence=tuple(v.evidence)[:5], names=(v.target,),
            level="warning" if warn else "error",
            policy_line=ctx.line("compatible_with"),
        ))
    return out


RULE_FUNCS: dict[str, Callable[[RuleContext, Any], list[Violation] | None]] = {
    "advisories": rule_advisories,
    "driver_branches": rule_driver_branches,
    "minimum_versions": rule_minimum_versions,
    "deny": rule_deny,
    "allow": rule_allow,
    "probes": rule_probes,
    "completeness": rule_completeness,
    "advisory_db": rule_advisory_db,
    "compatible_with": rule_compatible_with,
}
