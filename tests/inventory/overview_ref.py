"""The dashboard overview as it was computed before it was counted per distinct set: a row
per host and image read and counted in Python (the reference the aggregate overview is
compared with in test_inventory_scale)."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from gpusbom.inventory.web.pages import ROW_LIMIT, _branch, _cuda_of, stacks_of


def overview_per_host(store: Any) -> dict[str, Any]:
    """Read from the latest scans' rows only, each table joined once to the ``latest``
    table ingest keeps (devices carry their driver version; findings are read as the
    per-scan counts stored at ingest): no stored component or finding row is read, so a
    fleet of thousands of hosts with years of scans stays fast."""
    from sqlalchemy import select

    from gpusbom.inventory.schema import (
        affected_advisories,
        devices,
        finding_counts,
        latest,
        probes,
    )

    def of_sets(table: Any, col: Any) -> Any:
        # the rows of the sets the latest scans reference, each set read once (hosts that
        # share a set share its rows: mapped below through latest)
        return table.c.set_id.in_(select(col).distinct())

    with store.engine.connect() as conn:
        rows = list(conn.execute(select(latest.c.id, latest.c.kind, latest.c.subject,
                                        latest.c.ts, latest.c.stack_text, latest.c.components,
                                        latest.c.digest, latest.c.n_scans, latest.c.cset,
                                        latest.c.fset, latest.c.pset)
                                 .order_by(latest.c.kind, latest.c.subject)))
        n_scans = {(r.kind, r.subject): r.n_scans for r in rows}
        set_gpus: dict[str, list[str]] = {}
        set_drivers: dict[str, set[str]] = {}
        for r in conn.execute(select(devices.c.set_id, devices.c.model, devices.c.pci_address,
                                     devices.c.compute_capability, devices.c.kernel_driver,
                                     devices.c.driver_version)
                              .where(of_sets(devices, latest.c.cset))
                              .order_by(devices.c.set_id, devices.c.idx)):
            bits = ", ".join(x for x in (r.pci_address, r.compute_capability and
                                         f"cc {r.compute_capability}") if x)
            set_gpus.setdefault(r.set_id, []).append(f"{r.model} ({bits})" if bits
                                                     else r.model)
            if r.kernel_driver:
                set_drivers.setdefault(r.set_id, set()).add(
                    f"{r.kernel_driver} {r.driver_version or '?'}")
        set_sev: dict[str, dict[str, int]] = {}
        for fset, severity, n in conn.execute(
                select(finding_counts.c.set_id, finding_counts.c.severity, finding_counts.c.n)
                .where(of_sets(finding_counts, latest.c.fset))):
            set_sev.setdefault(fset, {})[severity] = n
        set_outcomes: dict[str, set[str]] = {}
        for pset, outcome in conn.execute(select(probes.c.set_id, probes.c.outcome)
                                          .where(of_sets(probes, latest.c.pset)).distinct()):
            set_outcomes.setdefault(pset, set()).add(outcome)
        set_advs: dict[str, list[str]] = {}
        for fset, adv in conn.execute(select(affected_advisories.c.set_id,
                                             affected_advisories.c.advisory)
                                      .where(of_sets(affected_advisories, latest.c.fset))):
            set_advs.setdefault(fset, []).append(adv)
    gpus = {r.id: set_gpus.get(r.cset, []) for r in rows}
    drivers = {r.id: set_drivers[r.cset] for r in rows if r.cset in set_drivers}
    sev = {r.id: set_sev[r.fset] for r in rows if r.fset in set_sev}
    outcomes = {r.id: set_outcomes[r.pset] for r in rows if r.pset in set_outcomes}
    # hosts and images whose latest scan has a finding the advisory affects
    hits: Counter[str] = Counter()
    for r in rows:
        for adv in set_advs.get(r.fset, ()):
            hits[adv] += 1
    touched = [{"advisory": a, "subjects": n} for a, n in sorted(
        hits.items(), key=lambda kv: (-kv[1], kv[0]))[:50]]
    hosts = [r for r in rows if r.kind == "host"]
    images = [r for r in rows if r.kind != "host"]
    by_model: Counter[str] = Counter()
    by_branch: Counter[str] = Counter()
    by_cuda: Counter[str] = Counter()
    by_probe: Counter[str] = Counter()
    host_rows = []
    for h in hosts:
        hg = gpus.get(h.id, [])
        models = sorted({g.split(" (")[0] for g in hg}) or ["no GPU"]
        for m in models:
            by_model[m] += 1
        driver = ", ".join(sorted(drivers.get(h.id, ()))) or None
        vers = re.findall(r"nvidia ([0-9][0-9.]*)", driver or "")
        branch = _branch(vers[0]) if vers else ("none" if not driver else "other")
        by_branch[branch] += 1
        cuda = _cuda_of(h.stack_text)
        by_cuda[cuda] += 1
        got = outcomes.get(h.id, set())
        probe = ("fail" if got & {"fail", "error", "timeout"} else "pass" if "pass" in got
                 else "skipped" if got else "not probed")
        by_probe[probe] += 1
        host_rows.append({"subject": h.subject, "scans": n_scans.get((h.kind, h.subject), 1),
                          "last_scan": h.ts, "gpus": hg, "driver": driver, "cuda": cuda,
                          "probe": probe, "findings": dict(sorted(sev.get(h.id, {}).items()))})
    by_stack: Counter[str] = Counter()
    image_rows = []
    for i in images:
        st = stacks_of(i.stack_text)
        for s in st or ["no GPU stack"]:
            by_stack[s] += 1
        image_rows.append({"subject": i.subject, "kind": i.kind,
                           "scans": n_scans.get((i.kind, i.subject), 1), "last_scan": i.ts,
                           "digest": i.digest, "components": i.components, "stacks": st,
                           "findings": dict(sorted(sev.get(i.id, {}).items()))})

    def counts(c: Counter[str]) -> list[dict[str, Any]]:
        return [{"value": k, "hosts": n} for k, n in sorted(c.items(), key=lambda kv:
                                                             (-kv[1], kv[0]))]

    return {
        "hosts": len(hosts), "images": len(images),
        "by_gpu_model": counts(by_model), "by_driver_branch": counts(by_branch),
        "by_cuda": counts(by_cuda), "by_probe": counts(by_probe),
        "images_by_stack": [{"stack": k, "images": n} for k, n in
                            sorted(by_stack.items(), key=lambda kv: (-kv[1], kv[0]))],
        "advisory_db": None,  # per request (its age)
        "advisories_in_fleet": touched,
        "host_list": host_rows[:ROW_LIMIT], "image_list": image_rows[:ROW_LIMIT],
        "truncated": len(host_rows) > ROW_LIMIT or len(image_rows) > ROW_LIMIT,
    }
