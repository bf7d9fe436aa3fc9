"""Dashboard pages about GPUs: the compatibility matrix (stored images x host GPU kinds,
``gpusbom check`` verdicts), one host, one image.

Host GPU kinds come from the stored device and driver rows of the latest host scans (the
same fields ``check --against`` reads from a host scan), grouped so that a fleet of
thousands of identical nodes is a handful of columns; verdicts are computed once per
(image scan, GPU kind) and cached by scan id.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

from ...compat import GpuTarget, evaluate_platform, platforms_from_host
from ...compat.states import FAIL, JIT, RUNS, STATES
from ...errors import InputError
from ...model import Component, ComponentType, ScanResult, Target
from ..store import Store
from .pages import Cache, stacks_of

VERDICT_ORDER = STATES


def platform_key(p: GpuTarget) -> str:
    g = p.gpu
    return "|".join((g.vendor, g.label, str(g.cc or ""), str(g.gfx or ""), p.driver or "",
                     p.rocm_kmd or ""))


def _driver_rows(conn: Any, sets: Any) -> Any:
    """The driver components of the component sets ``sets`` (a subquery of set ids; each
    filter an indexed column)."""
    from sqlalchemy import or_, select

    from ..schema import components

    return conn.execute(select(components.c.set_id, components.c.name,
                               components.c.version, components.c.type,
                               components.c.properties).where(
        components.c.set_id.in_(sets), or_(
            components.c.type == ComponentType.DEVICE_DRIVER.value,
            components.c.product == "libcuda", components.c.name == "amdgpu-dkms")))


def host_platforms(store: Store, cache: Cache) -> dict[str, tuple[GpuTarget, list[str]]]:
    """GPU kind key -> (platform without host, hosts), from the latest host scans' rows.
    Hosts of one component set have the same GPUs and driver: the platforms are computed
    once per distinct set (a fleet of 10,000 identical nodes: one) and the hosts mapped
    onto them from ``latest``."""
    from sqlalchemy import select

    from ..schema import devices, latest

    with store.engine.connect() as conn:
        hosts = conn.execute(select(latest.c.subject, latest.c.cset)
                             .where(latest.c.kind == "host")
                             .order_by(latest.c.subject)).all()
        sets = select(latest.c.cset).where(latest.c.kind == "host").distinct()
        comps: dict[str, list[Component]] = {}
        for r in conn.execute(select(devices.c.set_id, devices.c.model, devices.c.properties)
                              .where(devices.c.set_id.in_(sets))
                              .order_by(devices.c.set_id, devices.c.idx)):
            comps.setdefault(r.set_id, []).append(Component(
                name=r.model or "GPU", version=None, type=ComponentType.DEVICE,
                properties=dict(r.properties or {})))
        for r in _driver_rows(conn, sets):
            comps.setdefault(r.set_id, []).append(Component(
                name=r.name, version=r.version, type=ComponentType(r.type),
                properties=dict(r.properties or {})))
    per_set: dict[str, list[tuple[str, GpuTarget]]] = {}
    for cset in {c for _, c in hosts}:
        hit = cache.get(("platforms", cset))
        if hit is None:
            mini = ScanResult(target=Target(kind="host", reference="host", name="host"),
                              components=comps.get(cset, []))
            hit = []
            for p in platforms_from_host(mini):
                base = replace(p, host=None, evidence=(), gpu=replace(p.gpu, count=1,
                                                                      addresses=()))
                hit.append((platform_key(base), base))
            cache.put(("platforms", cset), hit)
        per_set[cset] = hit
    out: dict[str, tuple[GpuTarget, list[str]]] = {}
    for subj, cset in hosts:
        for k, base in per_set[cset]:
            out.setdefault(k, (base, []))[1].append(subj)
    return dict(sorted(out.items(), key=lambda kv: kv[1][0].name))


def _latest_images(store: Store) -> list[Any]:
    return sorted(store.scans(kind="image", all_scans=False)
                  + store.scans(kind="sbom", all_scans=False), key=lambda s: s.subject)


def _verdict(cache: Cache, image: ScanResult, sid: str, key: str, plat: GpuTarget) -> Any:
    hit = cache.get(("verdict", sid, key))
    if hit is None:
        hit = cache.put(("verdict", sid, key), evaluate_platform(image, plat))
    return hit


def matrix(store: Store, cache: Cache) -> dict[str, Any]:
    plats = host_platforms(store, cache)
    infos = _latest_images(store)
    loaded = cache.scans(store, [s.id for s in infos])
    cols = [{"key": k, "gpu": p.gpu.label, "arch": str(p.gpu.cc.sm if p.gpu.cc else
                                                       p.gpu.gfx or ""),
             "driver": p.driver or p.rocm_kmd, "name": p.name, "hosts": len(h),
             "host_sample": h[:5]} for k, (p, h) in plats.items()]
    rows = []
    for s in infos:
        img = loaded.get(s.id)
        if img is None:
            continue
        cells = []
        for k, (p, _h) in plats.items():
            v = _verdict(cache, img, s.id, k, p)
            bad = [lib for lib in v.failing if lib.file]
            first = bad[0].reason if bad else next(
                (r for r in v.reasons if v.verdict == RUNS or FAIL in r or JIT in r
                 or "fail" in r.lower()), v.reasons[0] if v.reasons else "")
            cells.append({"gpu": k, "verdict": v.verdict, "reason": first,
                          "file": bad[0].file if bad else None, "summary": v.summary()})
        rows.append({"image": s.subject, "kind": s.kind, "scan_id": s.id, "cells": cells})
    counts = {x: sum(1 for r in rows for c in r["cells"] if c["verdict"] == x)
              for x in VERDICT_ORDER}
    return {"columns": cols, "rows": rows, "counts": counts}


def cell(store: Store, cache: Cache, image: str, gpu: str) -> dict[str, Any]:
    plats = host_platforms(store, cache)
    if gpu not in plats:
        raise InputError(f"no host GPU kind {gpu!r} in the inventory")
    plat, hosts = plats[gpu]
    info = next((s for s in _latest_images(store) if s.subject == image), None)
    if info is None:
        raise InputError(f"no image {image!r} in the inventory")
    img = cache.scans(store, [info.id])[info.id]
    v = _verdict(cache, img, info.id, gpu, plat)
    return {"image": image, "scan_id": info.id, "gpu": gpu, "platform": plat.name,
            "hosts": hosts[:200], "host_count": len(hosts), "verdict": v.verdict,
            "reasons": list(v.reasons), "evidence": list(v.evidence[:50]),
            "libraries": [{"name": lib.name, "kind": lib.kind, "verdict": lib.verdict,
                           "reason": lib.reason, "file": lib.file,
                           "targets": lib.targets} for lib in v.libraries],
            "failing": [{"file": lib.file, "verdict": lib.verdict, "targets": lib.targets,
                         "reason": lib.reason} for lib in v.failing if lib.file],
            "summary": v.summary()}


# ------------------------------------------------------------------------------ host


def _history(store: Store, name: str, kind: str) -> list[Any]:
    hist = [s for s in store.history(name) if (s.kind == "host") == (kind == "host")]
    if not hist:
        raise InputError(f"no {kind} {name!r} in the inventory")
    subj = hist[-1].subject
    return [s for s in hist if s.subject == subj]


def host(store: Store, cache: Cache, name: str) -> dict[str, Any]:
    from ..drift import _driver, diff

    hist = _history(store, name, "host")
    recent = hist[-12:]  # the drift timeline: the last 12 scans
    docs = cache.scans(store, [s.id for s in recent])
    latest = docs[recent[-1].id]
    gpus = []
    for c in latest.components:
        if c.type != ComponentType.DEVICE:
            continue
        p = c.properties
        gpus.append({"model": c.name, "pci_address": p.get("pci:address"),
                     "compute_capability": p.get("cuda:compute-capability")
                     or p.get("amd:gfx-target"), "vbios": p.get("nvidia:vbios"),
                     "gsp_firmware": p.get("nvidia:gsp-firmware"),
                     "uuid": p.get("nvidia:uuid") or p.get("uuid"),
                     "mig": p.get("nvidia:mig-mode"), "ecc": p.get("nvidia:ecc-mode")})
    firmware = [{"name": c.name, "version": c.version} for c in latest.components
                if c.type == ComponentType.FIRMWARE][:200]
    probes = []
    for s in reversed(recent):
        for pr in docs[s.id].probes:
            probes.append({"scan_id": s.id, "ts": s.ts, "backend": pr.backend,
                           "device": pr.device, "device_id": pr.device_id,
                           "outcome": pr.outcome, "reason": pr.error_name or pr.reason,
                           "seconds": pr.seconds})
    timeline = []
    for old, new in itertools.pairwise(recent):
        changes = diff(docs[old.id], docs[new.id])
        timeline.append({"from": old.id, "to": new.id, "ts": new.ts,
                         "changes": [{"section": c.section, "change": c.change, "key": c.key,
                                      "before": c.before, "after": c.after}
                                     for c in changes[:200]],
                         "total": len(changes)})
    timeline.reverse()
    subject = hist[-1].subject
    # images found on the node (scan --images labels each gpusbom.node=HOST): the latest
    # scan of each image on this node
    on_node: dict[str, Any] = {}
    for s in store.scans(kind="image", labels={"gpusbom.node": None}):  # oldest first
        if s.labels.get("gpusbom.node") == subject:
            on_node[s.subject] = s
    images = [{"subject": s.subject, "scan_id": s.id, "ts": s.ts,
               "running": s.labels.get("gpusbom.node.running")}
              for s in sorted(on_node.values(), key=lambda x: x.subject)]
    return {"subject": subject, "scans": [{"id": s.id, "ts": s.ts, "components": s.components}
                                          for s in reversed(hist)],
            "labels": hist[-1].labels, "stack": hist[-1].stack_text, "gpus": gpus,
            "driver": [{"name": k, "version": v} for k, v in sorted(_driver(latest).items())],
            "firmware": firmware, "probes": probes[:500], "drift": timeline,
            "images": images}


# ------------------------------------------------------------------------------ image


def image(store: Store, cache: Cache, name: str) -> dict[str, Any]:
    hist = _history(store, name, "image")
    s = hist[-1]
    r = cache.scans(store, [s.id])[s.id]
    layers = [{"index": x.index, "diff_id": x.diff_id, "size": x.size,
               "created_by": x.created_by} for x in r.target.layers]
    findings = [{"id": f.id, "severity": f.severity, "title": f.title,
                 "status": f.advisory.status if f.advisory else None,
                 "advisory": f.advisory.advisory if f.advisory else None,
                 "fixed_version": f.advisory.fixed_version if f.advisory else None}
                for f in r.findings][:1000]
    code = []
    for c in r.components:  # one row per file with device code (the package's own union:
        for d in c.device_code:  # a summary, not shown here)
            t = d.targets
            code.append({"name": c.name, "version": c.version, "sass": t.get("cuda:sass"),
                         "ptx": t.get("cuda:ptx"), "gfx": t.get("hip:gfx") or t.get(
                             "hip:targets"), "path": d.path})
    coverage = []
    for k, (plat, hosts) in host_platforms(store, cache).items():
        v = _verdict(cache, r, s.id, k, plat)
        coverage.append({"gpu": k, "platform": plat.name, "hosts": len(hosts),
                         "verdict": v.verdict, "summary": v.summary()})
    comps = [{"name": c.name, "version": c.version, "type": c.type.value,
              "ecosystem": c.ecosystem, "purl": c.purl,
              "path": next((e.path for e in c.evidence if e.path), None)}
             for c in r.components][:3000]
    return {"subject": s.subject, "scan_id": s.id, "reference": r.target.reference,
            "digest": s.digest, "ts": s.ts, "labels": dict(r.target.labels),
            "stack": stacks_of(s.stack_text), "stack_text": s.stack_text,
            "layers": layers, "findings": findings, "gpu_code": code[:1000],
            "coverage": coverage, "components": comps,
            "scans": [{"id": x.id, "ts": x.ts} for x in reversed(hist)]}
