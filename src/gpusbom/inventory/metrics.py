"""Prometheus text exposition of the inventory (``gpusbom inventory metrics``).

For the latest scan of every host and image:

- ``gpusbom_inventory_scan_timestamp_seconds`` / ``gpusbom_inventory_scan_age_seconds``
- ``gpusbom_inventory_components``: components in the scan
- ``gpusbom_inventory_findings{severity=...}``: findings the scan recorded, by severity
  (every severity is present, 0 when none, so alerts can compare)
- ``gpusbom_inventory_gpu_info``: one series per GPU (model, PCI address, compute
  capability, kernel driver version), value 1
- ``gpusbom_inventory_probe_outcome{outcome=...}``: a state set per probed GPU and
  backend: 1 for the outcome of the last probe, 0 for the others

Written with prometheus_client, so the output is valid exposition format; write it to a
node-exporter textfile directory with ``--output`` (atomic rename).
"""

from __future__ import annotations

import datetime as _dt
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .store import Store

SEVERITIES = ("critical", "high", "medium", "low", "info", "none", "unknown")
OUTCOMES = ("pass", "fail", "error", "timeout", "skipped")


def _epoch(iso: str) -> float:
    return _dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


class _Collector:
    def __init__(self, store: Store, now: float) -> None:
        self.store = store
        self.now = now

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily
        from sqlalchemy import func, select

        from .schema import devices, findings, probes

        store = self.store
        latest = store.scans(all_scans=False)
        by_id = {s.id: s for s in latest}
        ts = GaugeMetricFamily("gpusbom_inventory_scan_timestamp_seconds",
                               "Time of the latest scan (Unix seconds).",
                               labels=["kind", "subject"])
        age = GaugeMetricFamily("gpusbom_inventory_scan_age_seconds",
                                "Seconds since the latest scan.", labels=["kind", "subject"])
        comps = GaugeMetricFamily("gpusbom_inventory_components",
                                  "Components in the latest scan.", labels=["kind", "subject"])
        for s in latest:
            t = _epoch(s.ts)
            ts.add_metric([s.kind, s.subject], t)
            age.add_metric([s.kind, s.subject], max(0.0, self.now - t))
            comps.add_metric([s.kind, s.subject], s.components)
        sev = GaugeMetricFamily("gpusbom_inventory_findings",
                                "Findings of the latest scan by severity.",
                                labels=["kind", "subject", "severity"])
        gpu = GaugeMetricFamily("gpusbom_inventory_gpu_info",
                                "GPUs of the latest host scan (value 1).",
                                labels=["subject", "pci_address", "model", "compute_capability",
                                        "driver_version", "uuid"])
        probe = GaugeMetricFamily("gpusbom_inventory_probe_outcome",
                                  "Smoke-test probe outcome per GPU and backend (state set).",
                                  labels=["subject", "backend", "device_id", "device",
                                          "pci_address", "outcome"])
        counts: dict[str, dict[str, int]] = {}
        with store.engine.connect() as conn:
            latest_ids = store.latest_scan_ids()
            for sid, severity, n in conn.execute(
                    select(findings.c.scan_id, findings.c.severity, func.count()).where(
                        findings.c.scan_id.in_(latest_ids)).group_by(
                        findings.c.scan_id, findings.c.severity)):
                counts.setdefault(sid, {})[severity] = n
            dev_rows = list(conn.execute(select(devices).where(
                devices.c.scan_id.in_(latest_ids)).order_by(devices.c.scan_id, devices.c.idx)))
            probe_rows = list(conn.execute(select(probes).where(
                probes.c.scan_id.in_(latest_ids)).order_by(probes.c.scan_id, probes.c.idx)))
        for s in latest:
            have = counts.get(s.id, {})
            for name in dict.fromkeys((*SEVERITIES, *sorted(have))):
                sev.add_metric([s.kind, s.subject, name], have.get(name, 0))
        for r in dev_rows:
            si = by_id.get(r.scan_id)
            if si is None:
                continue
            gpu.add_metric([si.subject, r.pci_address or "", r.model or "",
                            r.compute_capability or "", r.driver_version or "", r.uuid or ""], 1)
        for r in probe_rows:
            si = by_id.get(r.scan_id)
            if si is None:
                continue
            for outcome in dict.fromkeys((*OUTCOMES, r.outcome)):
                probe.add_metric([si.subject, r.backend, r.device_id or "", r.device or "",
                                  r.pci_address or "", outcome], 1 if outcome == r.outcome else 0)
        yield from (ts, age, comps, sev, gpu, probe)


def collector(store: Store, *, now: float | None = None) -> Any:
    """The metrics of ``store`` as a Prometheus collector (read when it is collected)."""
    return _Collector(store, time.time() if now is None else now)


def render(store: Store, *, now: float | None = None) -> str:
    from ..writers.prometheus import exposition

    return exposition(collector(store, now=now))
