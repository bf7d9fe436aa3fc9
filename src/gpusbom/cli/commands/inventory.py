"""``gpusbom inventory``: the fleet inventory (ingest, query, affected, drift, hosts, images,
metrics, export, serve). The database is ``--db URL`` or ``$GPUSBOM_INVENTORY_DB``, else an SQLite
file in the user data dir. Exit codes: 0 ok, 1 ``affected --fail`` found something,
2 usage, 3 bad input or an unusable database (one line; the password is never shown)."""

from __future__ import annotations

import contextlib
import json
import sys
from enum import Enum
from typing import Annotated, Any

import typer

from ...safetext import loads_json
from .._common import EXIT_OK, EXIT_POLICY
from .._common import fail as _fail
from ..app import app

inventory_app = typer.Typer(
    help="Fleet inventory: keep every scan of every host and image; ask where a component "
    "is, who an advisory affects, what changed.",
    no_args_is_help=True,
)
app.add_typer(inventory_app, name="inventory")

DbOpt = Annotated[
    str | None,
    typer.Option("--db", envvar="GPUSBOM_INVENTORY_DB", show_envvar=True,
                 help="sqlite:///PATH, a file path, or postgresql://USER:PASSWORD@HOST/DB. "
                 "Default: $XDG_DATA_HOME/gpusbom/inventory.db."),
]
DebugOpt = Annotated[bool, typer.Option("--debug", help="Show tracebacks.")]
OutOpt = Annotated[
    str | None, typer.Option("--output", "-o", help="Write to this file (atomically) instead "
                             "of stdout.")
]
AllScansOpt = Annotated[
    bool, typer.Option("--all-scans", help="Every scan kept, not only the latest scan of each "
                       "host and image.")
]


class Fmt(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"


class Kind(str, Enum):
    host = "host"
    image = "image"
    sbom = "sbom"


FmtOpt = Annotated[Fmt, typer.Option("--format", "-f", help="table, json or csv.")]


def _emit(text: str, output: str | None) -> None:
    if output:
        from ..output import write_atomic

        write_atomic(output, text)
    else:
        sys.stdout.write(text)


def _labels(values: list[str] | None, *, need_value: bool) -> dict[str, Any]:
    from ...errors import UsageError

    out: dict[str, Any] = {}
    for v in values or ():
        key, eq, val = v.partition("=")
        if not key.strip() or (need_value and not eq):
            raise UsageError(f"--label {v!r}: use KEY=VALUE" + ("" if need_value else
                                                                 " or KEY"))
        out[key.strip()] = val if eq else None
    return out


def _read_input(path: str) -> Any:
    """A gpusbom JSON scan, or CycloneDX / SPDX from any tool (via gpusbom.sbomin)."""
    import os
    import tempfile

    from ...errors import InputError
    from ...model import ScanResult

    name = "stdin" if path == "-" else path
    if path == "-":
        data = sys.stdin.buffer.read()
    else:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            raise InputError(f"{path}: no such file") from None
        except IsADirectoryError:
            raise InputError(f"{path}: is a directory, not a scan or SBOM file") from None
        except OSError as exc:
            raise InputError(f"{path}: cannot read: {exc.strerror}") from None
    doc: Any = None
    with contextlib.suppress(ValueError, UnicodeDecodeError):
        doc = loads_json(data)
    if isinstance(doc, dict) and str(doc.get("schema", "")).startswith("gpusbom/scan/"):
        try:
            return ScanResult.from_dict(doc)
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"{name}: not a valid gpusbom scan: {type(exc).__name__}: "
                             f"{str(exc)[:200]}") from None
    try:
        from ...sbomin import load_sbom
    except ImportError:
        raise InputError(f"{name}: not a gpusbom JSON scan (CycloneDX / SPDX input needs "
                         "gpusbom.sbomin)") from None
    if path != "-":
        return load_sbom(path)
    fd, tmp = tempfile.mkstemp(prefix="gpusbom-stdin-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return load_sbom(tmp)
    finally:
        os.unlink(tmp)


@inventory_app.command("ingest")
def ingest(
    files: Annotated[list[str], typer.Argument(help="gpusbom JSON scans, CycloneDX or SPDX "
                                               "SBOMs (JSON, XML, tag-value); - for stdin.")],
    db: DbOpt = None,
    label: Annotated[
        list[str] | None, typer.Option("--label", "-l", help="KEY=VALUE added to the scan's "
                                       "labels (cluster, pool, ...); repeatable.")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No line per file.")] = False,
    debug: DebugOpt = False,
) -> None:
    """Store scans. Every file is read and checked before anything is stored; each scan is
    stored in its own transaction; a scan already stored (same content) is kept once."""
    try:
        from ...errors import UsageError
        from ...inventory import Store

        if files.count("-") > 1:
            raise UsageError("stdin (-) can be read once")
        extra = _labels(label, need_value=True)
        results = [(f, _read_input(f)) for f in files]
        with Store(db) as store:
            for f, result in results:
                sid, created = store.ingest(result, labels=extra)
                if not quiet:
                    from ...inventory.normalize import scan_kind, subject_of

                    state = "stored" if created else "already stored"
                    print(f"{'stdin' if f == '-' else f}: {state} {sid[:12]} "
                          f"({scan_kind(result)} {subject_of(result)})", file=sys.stderr)
        code = EXIT_OK
    except Exception as exc:  # noqa: BLE001 - the one place errors become exit codes
        code = _fail(exc, debug)
    raise typer.Exit(code)


_QUERY_COLUMNS = ("kind", "subject", "component", "version", "product", "matched_version",
                  "location", "ts", "scan_id")


@inventory_app.command("query")
def query(
    component: Annotated[str | None, typer.Argument(help="Package or GPU product name "
                                                    "(cudnn finds debs, wheels and bare "
                                                    "libraries).")] = None,
    version: Annotated[str | None, typer.Option("--version", "-V", help="Range: '<9.1', "
                                                "'>=9.0,<9.1', '==2.28.3'.")] = None,
    scheme: Annotated[str | None, typer.Option("--scheme", help="Compare versions in this "
                                               "scheme (deb, rpm, pep440, semver, numeric, "
                                               "nvidia-driver, intel) instead of picking one "
                                               "per component.")] = None,
    host: Annotated[str | None, typer.Option("--host", help="Host name (glob).")] = None,
    image: Annotated[str | None, typer.Option("--image", help="Image name:tag (glob).")] = None,
    label: Annotated[list[str] | None, typer.Option("--label", "-l", help="KEY=GLOB or KEY "
                                                    "(present); repeatable.")] = None,
    kind: Annotated[Kind | None, typer.Option("--kind", help="host, image or sbom.")] = None,
    all_scans: AllScansOpt = False,
    fmt: FmtOpt = Fmt.table,
    output: OutOpt = None,
    db: DbOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Where is a component (and in which versions)? One row per component found."""
    try:
        from ...errors import UsageError
        from ...inventory import Store, parse_range
        from ...inventory.render import as_dict, render

        if version and not component:
            raise UsageError("--version needs a component name")
        rng = parse_range(version, scheme) if version else None
        with Store(db) as store:
            rows = store.query(component, rng, host=host, image=image,
                               kind=kind.value if kind else None,
                               labels=_labels(label, need_value=False), all_scans=all_scans)
        dicts = [as_dict(r) for r in rows]
        if fmt == Fmt.table:
            for d in dicts:
                d["scan_id"] = d["scan_id"][:12]
        _emit(render(dicts, _QUERY_COLUMNS, fmt.value), output)
        if fmt == Fmt.table and not output:
            subjects = {(r.kind, r.subject) for r in rows}
            print(f"{len(rows)} component(s) on {len(subjects)} host(s)/image(s)",
                  file=sys.stderr)
        code = EXIT_OK
    except Exception as exc:  # noqa: BLE001
        code = _fail(exc, debug)
    raise typer.Exit(code)


_AFFECTED_COLUMNS = ("kind", "subject", "advisory", "vulnerability", "severity", "status",
                     "component", "installed_version", "fixed_version", "scan_id")


@inventory_app.command("affected")
def affected(
    advisory: Annotated[str | None, typer.Argument(help="Advisory id or CVE.")] = None,
    all_advisories: Annotated[bool, typer.Option("--all", help="Every advisory in the "
                                                 "database.")] = False,
    include_review: Annotated[bool, typer.Option("--include-review", help="Also components "
                                                 "a person must review (no machine-readable "
                                                 "range).")] = False,
    fail: Annotated[bool, typer.Option("--fail", help="Exit 1 when anything is affected.")
                    ] = False,
    kind: Annotated[Kind | None, typer.Option("--kind", help="host, image or sbom.")] = None,
    all_scans: AllScansOpt = False,
    fmt: FmtOpt = Fmt.table,
    output: OutOpt = None,
    db: DbOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Hosts and images affected by an advisory: the stored scans re-matched against the
    current advisory database (nothing is rescanned)."""
    try:
        from ...advisories.db import load_active
        from ...errors import UsageError
        from ...inventory import Store
        from ...inventory.render import as_dict, render

        if bool(advisory) == all_advisories:
            raise UsageError("give an advisory id (or CVE) or --all")
        adb = load_active()
        with Store(db) as store:
            rows = store.affected(adb, advisory, include_review=include_review,
                                  all_scans=all_scans, kind=kind.value if kind else None)
        dicts = [as_dict(r) for r in rows]
        if fmt == Fmt.table:
            for d in dicts:
                d["scan_id"] = d["scan_id"][:12]
        _emit(render(dicts, _AFFECTED_COLUMNS, fmt.value), output)
        if fmt == Fmt.table and not output:
            subjects = {(r.kind, r.subject) for r in rows if r.status == "affected"}
            print(f"{len(subjects)} host(s)/image(s) affected ({adb.source} advisory database, "
                  f"data as of {adb.built or adb.newest})", file=sys.stderr)
        code = EXIT_POLICY if fail and any(r.status == "affected" for r in rows) else EXIT_OK
    except Exception as exc:  # noqa: BLE001
        code = _fail(exc, debug)
    raise typer.Exit(code)


@inventory_app.command("drift")
def drift(
    subject: Annotated[str | None, typer.Argument(help="Host name or image name:tag.")] = None,
    from_scan: Annotated[str | None, typer.Option("--from", help="Older scan (id prefix).")
                         ] = None,
    to_scan: Annotated[str | None, typer.Option("--to", help="Newer scan (id prefix).")
                       ] = None,
    fmt: Annotated[Fmt, typer.Option("--format", "-f", help="table, json or csv.")
                   ] = Fmt.table,
    output: OutOpt = None,
    db: DbOpt = None,
    debug: DebugOpt = False,
) -> None:
    """What changed on a host or image between its last two scans (or --from/--to):
    driver, devices, probe outcomes, components."""
    try:
        from ...inventory import Store
        from ...inventory.render import as_dict, render

        with Store(db) as store:
            d = store.drift(subject, from_scan=from_scan, to_scan=to_scan)
        if fmt == Fmt.json:
            text = json.dumps({"kind": d.kind, "subject": d.subject, "from": as_dict(d.old),
                               "to": as_dict(d.new),
                               "changes": [as_dict(c) for c in d.changes]},
                              indent=2, ensure_ascii=False) + "\n"
        elif fmt == Fmt.csv:
            text = render([as_dict(c) for c in d.changes],
                          ("section", "change", "key", "before", "after"), "csv")
        else:
            head = (f"{d.kind} {d.subject}: {d.old.id[:12]} ({d.old.ts}) -> "
                    f"{d.new.id[:12]} ({d.new.ts}): {len(d.changes)} change(s)\n")
            text = head + (render([as_dict(c) for c in d.changes],
                                  ("section", "change", "key", "before", "after"), "table")
                           if d.changes else "")
        _emit(text, output)
        code = EXIT_OK
    except Exception as exc:  # noqa: BLE001
        code = _fail(exc, debug)
    raise typer.Exit(code)


def _subjects(kind: str, fmt: Fmt, output: str | None, db: str | None, debug: bool) -> int:
    try:
        from ...inventory import Store
        from ...inventory.render import render

        with Store(db) as store:
            subs = store.subjects(kind)
        rows = []
        for s in subs:
            rows.append({
                "subject": s.subject, "scans": s.scans, "last_scan": s.latest.ts,
                "scan_id": s.latest.id if fmt != Fmt.table else s.latest.id[:12],
                "digest": s.latest.digest, "components": s.latest.components,
                "gpus": list(s.gpus), "driver": s.driver,
                "findings": dict(sorted(s.findings.items())),
                "labels": s.latest.labels, "stack": s.latest.stack_text,
            })
        cols = ("subject", "scans", "last_scan", "components", "gpus", "driver", "findings",
                "scan_id") if kind == "host" else ("subject", "scans", "last_scan", "digest",
                                                   "components", "findings", "scan_id")
        _emit(render(rows, cols, fmt.value), output)
        return EXIT_OK
    except Exception as exc:  # noqa: BLE001
        return _fail(exc, debug)


_COMPAT_COLUMNS = ("image", "host", "gpu", "driver", "verdict", "reason")


@inventory_app.command("compat")
def compat(
    image: Annotated[str | None, typer.Option("--image", help="Image name:tag (glob).")] = None,
    host: Annotated[str | None, typer.Option("--host", help="Host name (glob).")] = None,
    failing: Annotated[bool, typer.Option("--failing", help="Only the pairs predicted to "
                                          "fail.")] = False,
    fail: Annotated[bool, typer.Option("--fail", help="Exit 1 when an image is predicted to "
                                       "fail on a host.")] = False,
    on_node: Annotated[bool, typer.Option("--on-node", help="Only the images each host holds "
                                          "(scan --root/--host --images), each checked against "
                                          "its own node.")] = False,
    fmt: FmtOpt = Fmt.table,
    output: OutOpt = None,
    db: DbOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Which images will fail on which hosts: gpusbom check of the latest scan of every stored
    image against the latest scan of every stored host (GPUs and driver; nothing rescanned).
    One row per (image, host, GPU kind): runs, runs-with-jit or will-fail, with the first
    reason. With --on-node: the images found on each node, against that node."""
    import fnmatch

    try:
        from ...compat import check_against_host
        from ...inventory import Store
        from ...inventory.normalize import subject_of
        from ...inventory.render import render

        with Store(db) as store:
            hosts = store.latest_scans(kind="host")
            if on_node:
                # the latest scan of each (node, image) pair, from the gpusbom.node label
                latest: dict[tuple[str, str], str] = {}
                for info in store.scans(kind="image", labels={"gpusbom.node": None}):
                    latest[(info.labels["gpusbom.node"], info.subject)] = info.id  # oldest first
                loaded = store.load(list(latest.values()))
                images = [loaded[i] for i in latest.values() if i in loaded]
            else:
                images = store.latest_scans(kind="image")
        images = [s for s in images if image is None or fnmatch.fnmatch(subject_of(s), image)]
        hosts = [s for s in hosts if host is None or fnmatch.fnmatch(subject_of(s), host)]
        rows: list[dict[str, Any]] = []
        for img in sorted(images, key=lambda s: (subject_of(s),
                                                 s.target.labels.get("gpusbom.node", ""))):
            for h in sorted(hosts, key=subject_of):
                if on_node and img.target.labels.get("gpusbom.node") != subject_of(h):
                    continue
                for v in check_against_host(img, h):
                    if failing and v.verdict != "will-fail":
                        continue
                    why = next((r for r in v.reasons if "fail" in r.lower()),
                               v.reasons[0] if v.reasons else "")
                    rows.append({"image": subject_of(img), "host": subject_of(h),
                                 "gpu": v.target, "driver": v.driver, "verdict": v.verdict,
                                 "reason": why if fmt == Fmt.table else "; ".join(v.reasons),
                                 "evidence": v.evidence})
        cols = _COMPAT_COLUMNS if fmt != Fmt.json else (*_COMPAT_COLUMNS, "evidence")
        _emit(render(rows, cols, fmt.value), output)
        if fmt == Fmt.table and not output:
            bad = {(r["image"], r["host"]) for r in rows if r["verdict"] == "will-fail"}
            print(f"{len(images)} image(s) x {len(hosts)} host(s): {len(bad)} pair(s) predicted "
                  "to fail", file=sys.stderr)
        code = EXIT_POLICY if fail and any(r["verdict"] == "will-fail" for r in rows) \
            else EXIT_OK
    except Exception as exc:  # noqa: BLE001
        code = _fail(exc, debug)
    raise typer.Exit(code)


@inventory_app.command("hosts")
def hosts(fmt: FmtOpt = Fmt.table, output: OutOpt = None, db: DbOpt = None,
          debug: DebugOpt = False) -> None:
    """Every host: latest scan, GPUs, kernel driver, findings by severity."""
    raise typer.Exit(_subjects("host", fmt, output, db, debug))


@inventory_app.command("images")
def images(fmt: FmtOpt = Fmt.table, output: OutOpt = None, db: DbOpt = None,
           debug: DebugOpt = False) -> None:
    """Every image: latest scan, digest, components, findings by severity."""
    raise typer.Exit(_subjects("image", fmt, output, db, debug))


@inventory_app.command("metrics")
def metrics(output: OutOpt = None, db: DbOpt = None, debug: DebugOpt = False) -> None:
    """Prometheus text format: findings by severity per host, probe outcome per GPU, scan
    age. --output FILE.prom for node-exporter's textfile collector (written atomically)."""
    try:
        from ...inventory import Store

        with Store(db) as store:
            text = store.metrics()
        _emit(text, output)
        code = EXIT_OK
    except Exception as exc:  # noqa: BLE001
        code = _fail(exc, debug)
    raise typer.Exit(code)


@inventory_app.command("export")
def export(
    scan: Annotated[str, typer.Argument(help="Scan id (prefix), or a host / image: its latest "
                                        "scan.")],
    output: OutOpt = None,
    db: DbOpt = None,
    debug: DebugOpt = False,
) -> None:
    """A stored scan as gpusbom JSON, exactly as ingested (feed it to scan --sbom, check...)."""
    try:
        from ...errors import InputError, UsageError
        from ...inventory import Store

        with Store(db) as store:
            hist = store.history(scan)
            sid = hist[-1].id if hist else None
            if sid is None:
                try:
                    sid = store.resolve(scan).id
                except (InputError, UsageError):
                    raise InputError(f"inventory: no scan or host/image {scan!r}") from None
            doc = json.loads(store.document(sid))
        _emit(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", output)
        code = EXIT_OK
    except Exception as exc:  # noqa: BLE001
        code = _fail(exc, debug)
    raise typer.Exit(code)


@inventory_app.command("serve")
def serve(
    db: DbOpt = None,
    bind: Annotated[str, typer.Option("--bind", help="HOST:PORT to listen on ([::1]:8080 for "
                                      "IPv6). Localhost by default: put a reverse proxy or "
                                      "--auth-token-file in front of anything wider.")
                    ] = "127.0.0.1:8080",
    auth_token_file: Annotated[
        str | None, typer.Option("--auth-token-file", help="A file holding one token: every "
                                 "request then needs 'Authorization: Bearer TOKEN' (or basic "
                                 "auth with the token as password).")] = None,
    debug: DebugOpt = False,
) -> None:
    """A read-only web dashboard over the inventory: fleet overview, search, advisories,
    the image x GPU compatibility matrix, hosts, images; a JSON API for each page
    (/api/openapi.json) and Prometheus /metrics. Runs until interrupted."""
    try:
        from ...inventory.web import serve as _serve

        _serve(db, bind=bind, token_file=auth_token_file)
        code = EXIT_OK
    except KeyboardInterrupt:
        code = EXIT_OK
    except Exception as exc:  # noqa: BLE001
        code = _fail(exc, debug)
    raise typer.Exit(code)
