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

``collector`` is the ``prometheus_client`` collector the prometheus writer turns into text
(``gpusbom inventory metrics``). ``render`` (the dashboard's /metrics) writes the same
bytes (a test compares them) formatted directly: ``generate_latest``
validates and escapes every label name of every sample, which at ~25,000 samples (a fleet
of 2,000 hosts) costs more than reading the inventory. Write it to a node-exporter textfile
directory with ``--output`` (atomic rename).
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


#: (metric name, help text, label names, samples: [(label values, value)])
Family = tuple[str, str, tuple[str, ...], list[tuple[tuple[str, ...], float]]]


def families(store: Store, now: float) -> list[Family]:
    """The gauges of the latest scan of every host and image, read from the ``latest``
    table and the per-scan counts stored at ingest (no finding row is read)."""
    from sqlalchemy import select

    from .schema import devices, finding_counts, latest, probes, scans

    def of_latest(table: Any) -> Any:
        return latest.join(table, table.c.scan_id == latest.c.scan_id)

    with store.engine.connect() as conn:
        infos = conn.execute(select(scans.c.id, scans.c.kind, scans.c.subject, scans.c.ts,
                                    scans.c.components).select_from(
            latest.join(scans, scans.c.id == latest.c.scan_id)).order_by(
            scans.c.ts, scans.c.ingested_at, scans.c.id)).all()
        counts: dict[str, dict[str, int]] = {}
        for sid, severity, n in conn.execute(
                select(finding_counts.c.scan_id, finding_counts.c.severity,
                       finding_counts.c.n).select_from(of_latest(finding_counts))):
            counts.setdefault(sid, {})[severity] = n
        dev_rows = conn.execute(select(
            devices.c.scan_id, devices.c.pci_address, devices.c.model,
            devices.c.compute_capability, devices.c.driver_version, devices.c.uuid)
            .select_from(of_latest(devices)).order_by(devices.c.scan_id, devices.c.idx)).all()
        probe_rows = conn.execute(select(
            probes.c.scan_id, probes.c.backend, probes.c.device_id, probes.c.device,
            probes.c.pci_address, probes.c.outcome).select_from(of_latest(probes))
            .order_by(probes.c.scan_id, probes.c.idx)).all()
    subject = {sid: subj for sid, _k, subj, _t, _c in infos}
    ts: list[tuple[tuple[str, ...], float]] = []
    age: list[tuple[tuple[str, ...], float]] = []
    comps: list[tuple[tuple[str, ...], float]] = []
    sev: list[tuple[tuple[str, ...], float]] = []
    for sid, kind, subj, when, n_comps in infos:
        t = _epoch(when)
        ts.append(((kind, subj), t))
        age.append(((kind, subj), max(0.0, now - t)))
        comps.append(((kind, subj), n_comps))
        have = counts.get(sid, {})
        for name in dict.fromkeys((*SEVERITIES, *sorted(have))):
            sev.append(((kind, subj, name), have.get(name, 0)))
    gpu: list[tuple[tuple[str, ...], float]] = [((subject[r.scan_id], r.pci_address or "", r.model or "",
             r.compute_capability or "", r.driver_version or "", r.uuid or ""), 1)
           for r in dev_rows if r.scan_id in subject]
    probe: list[tuple[tuple[str, ...], float]] = [((subject[r.scan_id], r.backend, r.device_id or "", r.device or "",
               r.pci_address or "", outcome), 1 if outcome == r.outcome else 0)
             for r in probe_rows if r.scan_id in subject
             for outcome in dict.fromkeys((*OUTCOMES, r.outcome))]
    per_subject = ("kind", "subject")
    return [
        ("gpusbom_inventory_scan_timestamp_seconds", "Time of the latest scan (Unix seconds).",
         per_subject, ts),
        ("gpusbom_inventory_scan_age_seconds", "Seconds since the latest scan.", per_subject,
         age),
        ("gpusbom_inventory_components", "Components in the latest scan.", per_subject, comps),
        ("gpusbom_inventory_findings", "Findings of the latest scan by severity.",
         ("kind", "subject", "severity"), sev),
        ("gpusbom_inventory_gpu_info", "GPUs of the latest host scan (value 1).",
         ("subject", "pci_address", "model", "compute_capability", "driver_version", "uuid"),
         gpu),
        ("gpusbom_inventory_probe_outcome",
         "Smoke-test probe outcome per GPU and backend (state set).",
         ("subject", "backend", "device_id", "device", "pci_address", "outcome"), probe),
    ]


def _escape(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r'\"')


def text(fams: list[Family]) -> str:
    """The Prometheus text format (0.0.4) of gauge families, as ``generate_latest`` writes
    it: label names sorted, label values escaped, values as Go formats floats."""
    from prometheus_client.utils import floatToGoString

    numbers: dict[float, str] = {}
    out: list[str] = []
    for name, doc, labels, samples in fams:
        # HELP text escapes backslash and newline only, label values the quote too
        doc = doc.replace("\\", r"\\").replace("\n", r"\n")
        out.append(f"# HELP {name} {doc}\n# TYPE {name} gauge\n")
        # one format string per family: the label names sorted (as the library writes them)
        line = (name + "{{" + ",".join(f'{labels[i]}="{{{i}}}"' for i in sorted(
            range(len(labels)), key=lambda i: labels[i])) + f"}}}} {{{len(labels)}}}\n")
        for values, value in samples:
            num = numbers.get(value)
            if num is None:
                num = numbers[value] = floatToGoString(value)  # type: ignore[no-untyped-call]
            out.append(line.format(*[_escape(v) for v in values], num))
    return "".join(out)


class _Collector:
    """The same gauges as a ``prometheus_client`` collector (``gpusbom inventory metrics``
    writes it through the registered prometheus writer)."""

    def __init__(self, store: Store, now: float) -> None:
        self.store = store
        self.now = now

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        for name, doc, labels, samples in families(self.store, self.now):
            g = GaugeMetricFamily(name, doc, labels=list(labels))
            for values, value in samples:
                g.add_metric(list(values), value)
            yield g


def collector(store: Store, *, now: float | None = None) -> Any:
    """The metrics of ``store`` as a Prometheus collector (read when it is collected)."""
    return _Collector(store, time.time() if now is None else now)


def render(store: Store, *, now: float | None = None) -> str:
    """The exposition text (the dashboard's /metrics): the bytes the prometheus writer
    makes of ``collector(store)``, formatted directly."""
    return text(families(store, time.time() if now is None else now))


class Exposition:
    """``render`` for a server: the text of every gauge is kept until ``version`` (of the
    stored scans) changes, and the scan ages are computed per request from the kept scan
    times, as ``render`` computes them."""

    AGE = "gpusbom_inventory_scan_age_seconds"
    TS = "gpusbom_inventory_scan_timestamp_seconds"

    def __init__(self, store: Store) -> None:
        self.store = store
        self._kept: tuple[Any, list[tuple[Family, str | None]]] | None = None

    def render(self, version: Any, *, now: float | None = None) -> str:
        now = time.time() if now is None else now
        kept = self._kept
        if kept is None or kept[0] != version:
            fams = families(self.store, now)
            kept = self._kept = (version, [(f, None if f[0] == self.AGE else text([f]))
                                           for f in fams])
        times = next(f for f, _ in kept[1] if f[0] == self.TS)[3]
        parts = []
        for (name, doc, labels, _samples), txt in kept[1]:
            if txt is None:
                txt = text([(name, doc, labels,
                             [(values, max(0.0, now - t)) for values, t in times])])
            parts.append(txt)
        return "".join(parts)
