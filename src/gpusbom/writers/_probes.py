"""Probe results (``ScanResult.probes``) as name/value pairs, shared by the writers.

On a device component: ``gpusbom:probe:<backend>:<field>`` (a second result of the same
backend on that component, e.g. two OpenCL platforms driving one GPU, uses
``<backend>#2``). Results of a whole backend (runtime missing, enumeration failed) go
to the document: ``gpusbom:probe:<backend>:outcome`` / ``:reason`` in metadata.
"""

from __future__ import annotations

from ..model import ProbeResult, ScanResult
from ._common import prop

#: fields first, in this order; then the runtime's facts, sorted
_FIELDS = ("outcome", "device", "device-id", "kernel", "max-abs-error", "error-code", "error-name",
           "reason", "seconds")


def _fields(p: ProbeResult) -> dict[str, str]:
    d: dict[str, str] = {"outcome": p.outcome}
    if p.device is not None:
        d["device"] = p.device
    if p.device_id is not None:
        d["device-id"] = p.device_id
    if p.kernel:
        d["kernel"] = p.kernel
    if p.max_abs_error is not None:
        d["max-abs-error"] = f"{p.max_abs_error:g}"
    if p.error_code is not None:
        d["error-code"] = str(p.error_code)
    if p.error_name:
        d["error-name"] = p.error_name
    if p.reason:
        d["reason"] = " ".join(p.reason.split())
    if p.seconds is not None:
        d["seconds"] = f"{p.seconds:.3f}"
    return d


def probe_pairs(p: ProbeResult, key: str) -> list[tuple[str, str]]:
    f = _fields(p)
    out = [(prop(f"probe:{key}:{k}"), f[k]) for k in _FIELDS if k in f]
    out += [(prop(f"probe:{key}:{k}"), " ".join(v.split()) or "-")
            for k, v in sorted(p.facts.items()) if k not in f]
    return out


def keyed(probes: list[ProbeResult]) -> list[tuple[str, ProbeResult]]:
    """(``cuda``, p), (``opencl``, p), (``opencl#2``, p) ..."""
    seen: dict[str, int] = {}
    out = []
    for p in probes:
        seen[p.backend] = seen.get(p.backend, 0) + 1
        n = seen[p.backend]
        out.append((p.backend if n == 1 else f"{p.backend}#{n}", p))
    return out


def component_probe_pairs(result: ScanResult, ref: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for key, p in keyed(result.probes_for(ref)):
        out += probe_pairs(p, key)
    return out


def unattached_probes(result: ScanResult) -> list[ProbeResult]:
    refs = {c.bom_ref for c in result.components}
    return sorted((p for p in result.probes if p.device_ref not in refs),
                  key=lambda p: (p.backend, p.device_id or "", p.device or ""))


def document_probe_pairs(result: ScanResult) -> list[tuple[str, str]]:
    """Backend-level results, and device results attached to no component."""
    out: list[tuple[str, str]] = []
    for key, p in keyed(unattached_probes(result)):
        out += probe_pairs(p, key)
    if result.probes:
        counts: dict[str, int] = {}
        for p in result.probes:
            counts[p.outcome] = counts.get(p.outcome, 0) + 1
        out.append((prop("probe:summary"), ", ".join(f"{n} {o}" for o, n in sorted(counts.items()))))
    return out


def probe_detail(p: ProbeResult) -> str:
    """One short line for people: why it is not a pass, or what passed."""
    if p.outcome == "pass":
        return "max abs error 0"
    if p.outcome == "fail":
        return (f"max abs error {p.max_abs_error:g}" if p.max_abs_error is not None
                else (p.reason or "wrong result"))
    if p.outcome == "error":
        head = " ".join(x for x in (p.error_name, f"({p.error_code})" if p.error_code is not None else "")
                        if x)
        return f"{head}: {p.reason}" if p.reason and head else (head or p.reason or "")
    return p.reason or ""


def probe_facts_text(p: ProbeResult) -> str:
    f = p.facts
    bits = []
    for k, label in (("compute-capability", "cc"), ("isa", "isa"), ("triton-target", "target"),
                     ("simd-width", "simd"), ("max-work-group-size", "max-wg"),
                     ("local-memory-bytes", "lmem"), ("runtime-version", "runtime"),
                     ("runtime", "runtime"), ("triton-version", "triton"), ("api-version", "api"),
                     ("driver-version", "driver")):
        if f.get(k):
            bits.append(f"{label} {f[k]}")
    # the runtime library and ICD the launch really used, by file name
    for k, label in (("runtime-library", "lib"), ("icd", "icd")):
        if f.get(k):
            bits.append(f"{label} " + ",".join(x.rsplit("/", 1)[-1] for x in f[k].split(",")))
    return "; ".join(bits)
