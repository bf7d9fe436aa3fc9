"""Decoding what gpusbom's own writers put into CycloneDX/SPDX (``gpusbom:*`` names).

The writers (``writers/_cyclonedx_impl.py``, ``_spdx_impl.py``, ``_common.py``,
``_probes.py``) are the reference for every format here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from ..model import (
    PROPERTY_NAMESPACE,
    Evidence,
    Finding,
    LayerRef,
    ProbeResult,
    Target,
    Unknown,
)

PREFIX = PROPERTY_NAMESPACE + ":"

#: ``collector=X; method=Y[; path=P][; layer=L][; sha256=H][; declared=ALG:H][; detail=D]`` (CycloneDX additionalContext
#: and the SPDX ``gpusbom:evidence:`` comment lines; detail comes last and may hold "; ")
_EVIDENCE_RX = re.compile(
    r"^collector=(?P<collector>[^;]*); method=(?P<method>[^;]*)"
    r"(?:; path=(?P<path>.*?))?(?:; layer=(?P<layer>[^;]*))?(?:; sha256=(?P<sha256>[0-9a-f]{64}))?"
    r"(?:; declared=(?P<declared>[a-z0-9]+:[0-9a-f]+))?"
    r"(?:; detail=(?P<detail>.*))?$",
    re.DOTALL,
)
_FINDING_RX = re.compile(r"^\[(?P<sev>[^\]]*)\] (?P<id>\S+): (?P<title>.*?)(?: \((?P<refs>[^()]*)\))?$")

#: ``ProbeResult`` fields as ``_probes.py`` names them
_PROBE_FIELDS = {
    "outcome", "device", "device-id", "kernel", "max-abs-error", "error-code", "error-name",
    "reason", "seconds",
}  # fmt: skip


def unprefixed(name: str) -> str | None:
    return name[len(PREFIX):] if name.startswith(PREFIX) else None


def parse_evidence(text: str, path: str | None = None) -> Evidence | None:
    m = _EVIDENCE_RX.match(text.strip())
    if not m:
        return None
    return Evidence(
        collector=m.group("collector"),
        method=m.group("method"),
        path=m.group("path") or path,
        layer=m.group("layer") or None,
        detail=m.group("detail") or None,
        sha256=m.group("sha256") or None,
        declared_digest=m.group("declared") or None,
    )


def probes_from(pairs: Iterable[tuple[str, str]], device_ref: str | None) -> list[ProbeResult]:
    """``probe:<backend>[#n]:<field>`` pairs (without the ``gpusbom:`` prefix) -> results."""
    by_key: dict[str, dict[str, str]] = {}
    for key, value in pairs:
        if not key.startswith("probe:") or key == "probe:summary":
            continue
        rest = key[len("probe:"):]
        if ":" not in rest:
            continue
        pkey, fld = rest.split(":", 1)
        by_key.setdefault(pkey, {})[fld] = value
    out: list[ProbeResult] = []
    for pkey, f in sorted(by_key.items()):
        if "outcome" not in f:
            continue
        backend = pkey.split("#", 1)[0]
        out.append(ProbeResult(
            backend=backend,
            outcome=f["outcome"],
            device=f.get("device"),
            device_id=f.get("device-id"),
            kernel=f.get("kernel"),
            reason=f.get("reason"),
            error_code=_int(f.get("error-code")),
            error_name=f.get("error-name"),
            max_abs_error=_float(f.get("max-abs-error")),
            seconds=_float(f.get("seconds")),
            facts={k: v for k, v in sorted(f.items()) if k not in _PROBE_FIELDS},
            device_ref=device_ref,
        ))
    return out


def _int(v: str | None) -> int | None:
    try:
        return int(v) if v is not None else None
    except ValueError:
        return None


def _float(v: str | None) -> float | None:
    try:
        return float(v) if v is not None else None
    except ValueError:
        return None


def apply_target_pairs(t: Target, pairs: Iterable[tuple[str, str]]) -> bool:
    """Fill ``t`` from ``target:*``/``image:*``/``os:*`` pairs; True when any was gpusbom's."""
    own = False
    layers: dict[int, str] = {}
    for key, value in pairs:
        if key == "target:kind":
            t.kind, own = value, True
        elif key == "target:reference":
            own = True  # the reference is the SBOM's now (sbom:PATH); the kind and ids stay
        elif key == "image:digest":
            t.manifest_digest = value
        elif key == "image:id":
            t.image_id = value
        elif key == "image:platform":
            t.platform = value
        elif key == "image:created":
            t.created = value
        elif key == "image:tag":
            t.tags.append(value)
        elif key.startswith("image:layer:"):
            idx = key[len("image:layer:"):]
            if idx.isdigit():
                layers[int(idx)] = value
        elif key.startswith("image:label:"):
            t.labels[key[len("image:label:"):]] = value
        elif key.startswith("image:env:"):
            t.env[key[len("image:env:"):]] = value
        elif key.startswith("os:"):
            t.os_release[key[len("os:"):]] = value
    t.layers = [LayerRef(index=i, diff_id=d) for i, d in sorted(layers.items())]
    return own


def unknown_from(text: str) -> Unknown:
    """``collector: reason (path)`` (``_common.unknown_text``)."""
    collector, _, rest = text.partition(": ")
    path = None
    if rest.endswith(")") and " (" in rest:
        head, _, tail = rest.rpartition(" (")
        if tail[:-1].startswith("/"):
            rest, path = head, tail[:-1]
    return Unknown(collector=collector, reason=rest, path=path)


def finding_from(text: str) -> Finding | None:
    """``[severity] id: title (refs)`` (``_common.finding_text``): a finding other than an
    advisory (those are matched again). The SBOM does not carry its kind: ``declared``."""
    m = _FINDING_RX.match(text)
    if not m:
        return None
    fid = m.group("id")
    refs = tuple(r for r in (m.group("refs") or "").split(", ") if r)
    return Finding(id=fid, kind="declared",
                   severity=m.group("sev"), title=m.group("title"), components=refs)


def apply_document_pair(parts: Any, key: str, value: str) -> bool:
    """A document-level ``gpusbom:`` pair of gpusbom's own SBOM (CycloneDX metadata property
    or SPDX document comment line) that both formats carry the same way: collector
    versions, unknowns and findings. True when ``key`` was one of them."""
    if key.startswith("collector:") and key.endswith(":version"):
        parts.collectors[key[len("collector:"):-len(":version")]] = value
    elif key.startswith("unknown:"):
        parts.unknowns.append(unknown_from(value))
    elif key.startswith("finding:"):
        f = finding_from(value)
        if f is not None:
            parts.findings.append(f)
    else:
        return False
    return True
