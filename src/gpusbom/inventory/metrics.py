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
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..clock import wall

if TYPE_CHECKING:
    from .store import Store

SEVERITIES = ("critical", "high", "medium", "low", "info", "none", "unknown")
OUTCOMES = ("pass", "fail", "error", "timeout", "skipped")


def _epoch(iso: str) -> float:
    return _dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


#: (metric name, help text, label names, samples: [(label values, value)])
Family = tuple[str, str, tuple[str, ...], list[tuple[tuple[str, ...], float]]]


#: (name, help, label names) of each family, in the order they are written
SPECS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("gpusbom_inventory_scan_timestamp_seconds", "Time of the latest scan (Unix seconds).",
     ("kind", "subject")),
    ("gpusbom_inventory_scan_age_seconds", "Seconds since the latest scan.",
     ("kind", "subject")),
    ("gpusbom_inventory_components", "Components in the latest scan.", ("kind", "subject")),
    ("gpusbom_inventory_findings", "Findings of the latest scan by severity.",
     ("kind", "subject", "severity")),
    ("gpusbom_inventory_gpu_info", "GPUs of the latest host scan (value 1).",
     ("subject", "pci_address", "model", "compute_capability", "driver_version", "uuid")),
    ("gpusbom_inventory_probe_outcome",
     "Smoke-test probe outcome per GPU and backend (state set).",
     ("subject", "backend", "device_id", "device", "pci_address", "outcome")),
)
#: families in the order of the scans' ids (the others: by scan time)
_BY_ID = {"gpusbom_inventory_gpu_info", "gpusbom_inventory_probe_outcome"}
Samples = list[tuple[tuple[str, ...], float]]


class _Sets:
    """The rows of the sets the metrics read (finding counts, devices, probes), by set id;
    a set never changes, so what was read once is kept (``only``: the sets not kept)."""

    def __init__(self) -> None:
        self.counts: dict[str, dict[str, int]] = {}
        self.devs: dict[str, list[Any]] = {}
        self.probes: dict[str, list[Any]] = {}

    def read(self, conn: Any, rows: list[Any]) -> None:
        from sqlalchemy import select

        from .schema import devices, finding_counts, probes

        want: list[tuple[dict[str, Any], Any, set[str]]] = [
                (self.counts, finding_counts, {r.fset for r in rows}),
                (self.devs, devices, {r.cset for r in rows}),
                (self.probes, probes, {r.pset for r in rows})]
        for kept, table, ids in want:
            missing = sorted(ids - kept.keys())
            for i in range(0, len(missing), 500):
                chunk = missing[i:i + 500]
                for sid in chunk:
                    if table is finding_counts:
                        self.counts[sid] = {}
                    elif table is devices:
                        self.devs[sid] = []
                    else:
                        self.probes[sid] = []
                if table is finding_counts:
                    for fset, severity, n in conn.execute(select(
                            table.c.set_id, table.c.severity, table.c.n).where(
                            table.c.set_id.in_(chunk))):
                        self.counts[fset][severity] = n
                elif table is devices:
                    for r in conn.execute(select(
                            table.c.set_id, table.c.pci_address, table.c.model,
                            table.c.compute_capability, table.c.driver_version, table.c.uuid)
                            .where(table.c.set_id.in_(chunk))
                            .order_by(table.c.set_id, table.c.idx)):
                        self.devs[r.set_id].append(r)
                else:
                    for r in conn.execute(select(
                            table.c.set_id, table.c.backend, table.c.device_id,
                            table.c.device, table.c.pci_address, table.c.outcome)
                            .where(table.c.set_id.in_(chunk))
                            .order_by(table.c.set_id, table.c.idx)):
                        self.probes[r.set_id].append(r)


def _latest_select(since: int | None = None) -> Any:
    """The ``latest`` columns the metrics read (``since``: of the rows written after that
    value of the change counter)."""
    from sqlalchemy import select

    from .schema import latest

    stmt = select(latest.c.id, latest.c.kind, latest.c.subject, latest.c.ts,
                  latest.c.ingested_at, latest.c.components, latest.c.cset, latest.c.fset,
                  latest.c.pset, latest.c.seq)
    return stmt if since is None else stmt.where(latest.c.seq > since)


def _in_order(rows: Any) -> list[Any]:
    """By scan time (then ingest time and id), compared as Python compares text: the same
    order whatever the database's collation."""
    return sorted(rows, key=lambda r: (r.ts, r.ingested_at, r.id))


def _latest_rows(conn: Any) -> list[Any]:
    # fetched at once (iterating a result fetches row by row: 10,000 hosts in 33-70 ms
    # instead of 27)
    return _in_order(conn.execute(_latest_select()).all())


class _LatestRows:
    """The ``latest`` rows a server holds, brought up to date by reading the rows written
    since the largest change-counter value it holds (``latest.seq``; writers give those
    values out in commit order, ``writer.bump``): one push among 10,000 hosts reads one
    row. Everything is read again when ``latest`` was rebuilt (``latest_rebuilt``: its rows
    deleted and written again, the one way a subject leaves it)."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], Any] = {}
        self.seq = -1
        self.rebuilt: int | None = None
        self.last_read = 0  # rows the last read fetched

    def read(self, conn: Any) -> list[Any]:
        from sqlalchemy import select

        from .schema import changes
        from .writer import LATEST_REBUILT

        rebuilt = int(conn.execute(select(changes.c.value).where(
            changes.c.name == LATEST_REBUILT)).scalar() or 0)
        if rebuilt != self.rebuilt:
            self.rows, self.seq = {}, -1
        got = conn.execute(_latest_select(self.seq)).all()
        self.last_read = len(got)
        for r in got:
            self.rows[(r.kind, r.subject)] = r
            self.seq = max(self.seq, r.seq)
        self.rebuilt = rebuilt
        return _in_order(self.rows.values())


def _scan_samples(r: Any, sets: _Sets) -> dict[str, Samples]:
    """One latest scan's samples of every family but the age."""
    have = sets.counts.get(r.fset, {})
    return {
        "gpusbom_inventory_scan_timestamp_seconds": [((r.kind, r.subject), _epoch(r.ts))],
        "gpusbom_inventory_components": [((r.kind, r.subject), r.components)],
        "gpusbom_inventory_findings": [((r.kind, r.subject, name), have.get(name, 0))
                                       for name in dict.fromkeys((*SEVERITIES, *sorted(have)))],
        "gpusbom_inventory_gpu_info": [
            ((r.subject, d.pci_address or "", d.model or "", d.compute_capability or "",
              d.driver_version or "", d.uuid or ""), 1) for d in sets.devs.get(r.cset, ())],
        "gpusbom_inventory_probe_outcome": [
            ((r.subject, p.backend, p.device_id or "", p.device or "", p.pci_address or "",
              outcome), 1 if outcome == p.outcome else 0)
            for p in sets.probes.get(r.pset, ()) for outcome in dict.fromkeys((*OUTCOMES,
                                                                              p.outcome))],
    }


def families(store: Store, now: float) -> list[Family]:
    """The gauges of the latest scan of every host and image, read from the ``latest``
    table and the rows of the sets it references, each set once (no finding row is read:
    the per-set counts stored at ingest)."""
    sets = _Sets()
    with store.engine.connect() as conn:
        rows = _latest_rows(conn)
        sets.read(conn, rows)
    per = [_scan_samples(r, sets) for r in rows]
    by_id = sorted(range(len(rows)), key=lambda i: rows[i].id)
    out: list[Family] = []
    for name, doc, labels in SPECS:
        if name == "gpusbom_inventory_scan_age_seconds":
            samples: Samples = [((r.kind, r.subject), max(0.0, now - _epoch(r.ts)))
                                for r in rows]
        else:
            order = by_id if name in _BY_ID else range(len(rows))
            samples = [x for i in order for x in per[i][name]]
        out.append((name, doc, labels, samples))
    return out


def _escape(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r'\"')


def text(fams: list[Family]) -> str:
    """The Prometheus text format (0.0.4) of gauge families, as ``generate_latest`` writes
    it: label names sorted, label values escaped, values as Go formats floats."""
    numbers: dict[float, str] = {}
    out: list[str] = []
    for name, doc, labels, samples in fams:
        out.append(_header(name, doc))
        out.append(_lines(name, labels, samples, numbers))
    return "".join(out)


def _header(name: str, doc: str) -> str:
    # HELP text escapes backslash and newline only, label values the quote too
    doc = doc.replace("\\", r"\\").replace("\n", r"\n")
    return f"# HELP {name} {doc}\n# TYPE {name} gauge\n"


def _lines(name: str, labels: tuple[str, ...], samples: Samples,
           numbers: dict[float, str]) -> str:
    from prometheus_client.utils import floatToGoString

    # one format string per family: the label names sorted (as the library writes them)
    line = (name + "{{" + ",".join(f'{labels[i]}="{{{i}}}"' for i in sorted(
        range(len(labels)), key=lambda i: labels[i])) + f"}}}} {{{len(labels)}}}\n")
    out = []
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
    return _Collector(store, wall() if now is None else now)


def render(store: Store, *, now: float | None = None) -> str:
    """The exposition text (the dashboard's /metrics): the bytes the prometheus writer
    makes of ``collector(store)``, formatted directly."""
    return text(families(store, wall() if now is None else now))


class Exposition:
    """``render`` for a server, incremental: the ``latest`` rows are kept and only those
    written since are read (``_LatestRows``), the lines of each latest scan are kept by
    (scan id, finding set), the rows of each set by set id, so when ``version`` (the
    change counter) moves only the scans that changed are read and formatted again (one
    push among 10,000 hosts: one host's row and lines); the scan ages are computed per
    request from the kept scan times, as ``render`` computes them. Requests served
    side by side (the server's threads) build one at a time."""

    AGE = "gpusbom_inventory_scan_age_seconds"

    def __init__(self, store: Store) -> None:
        self.store = store
        self._sets = _Sets()
        self._chunks: dict[tuple[Any, ...], dict[str, Any]] = {}
        self._kept: tuple[Any, list[str], list[tuple[str, float]]] | None = None
        self._latest = _LatestRows()
        self._lock = threading.Lock()

    def render(self, version: Any, *, now: float | None = None) -> str:
        from prometheus_client.utils import floatToGoString

        now = wall() if now is None else now
        kept = self._kept
        if kept is None or kept[0] != version:
            with self._lock:
                kept = self._kept
                if kept is None or kept[0] != version:
                    kept = self._kept = (version, *self._build())
        _version, parts, times = kept
        # the ages: each scan's label text kept, the number formatted per request
        age = "".join([prefix + floatToGoString(max(0.0, now - t)) + "\n"  # type: ignore[no-untyped-call]
                       for prefix, t in times])
        return parts[0] + _header(self.AGE, SPECS[1][1]) + age + parts[1]

    def _build(self) -> tuple[list[str], list[tuple[str, float]]]:
        with self.store.engine.connect() as conn:
            rows = self._latest.read(conn)
            # a scan's lines are those of its id (its content) and its current findings
            keys = [(r.id, r.fset) for r in rows]
            kept = self._chunks
            # only the sets of the scans not formatted before are looked up
            self._sets.read(conn, [r for r, k in zip(rows, keys, strict=True)
                                   if k not in kept])
        numbers: dict[float, str] = {}
        chunks: dict[tuple[Any, ...], dict[str, Any]] = {}
        per = []
        times: list[tuple[str, float]] = []
        for r, key in zip(rows, keys, strict=True):
            got = kept.get(key)
            if got is None:
                samples = _scan_samples(r, self._sets)
                got = {name: _lines(name, labels, samples[name], numbers)
                       for name, _doc, labels in SPECS if name != self.AGE}
                # the age line of this scan without its number ("... {labels} ")
                got[self.AGE] = _lines(self.AGE, SPECS[1][2],
                                       [((r.kind, r.subject), 0.0)], {})[:-len("0.0\n")]
                got["epoch"] = _epoch(r.ts)
            chunks[key] = got
            per.append(got)
            times.append((got[self.AGE], got["epoch"]))
        self._chunks = chunks
        by_id = [per[i] for i in sorted(range(len(rows)), key=lambda i: rows[i].id)]
        texts: list[list[str]] = [[], []]  # the families before the age, and after it
        for n, (name, doc, _labels) in enumerate(SPECS):
            if name == self.AGE:
                continue
            texts[n > 1].append(_header(name, doc) + "".join(
                [c[name] for c in (by_id if name in _BY_ID else per)]))
        return ["".join(texts[0]), "".join(texts[1])], times
