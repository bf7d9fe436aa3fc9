"""The dashboard's ASGI application (Starlette): pages, their JSON API, OpenAPI, /metrics.

Read-only by default: every page is GET (HEAD) and the store is only read; the one write
path, triage (``writes.py``), answers 403 unless the server has a write token, and then
needs a signed-in session, its CSRF token and this origin. Nothing the server holds is
secret except the database URL (shown with its password hidden) and the tokens (never
shown). Every response carries a strict
Content-Security-Policy: the pages hold no script at all and load styles and images from
this server only, so a string from a hostile image can at worst be shown, never run.

Links are relative (every page lives at the top level: ``search``, ``host?name=...``), so
the dashboard works unchanged behind a reverse proxy that maps a path prefix onto it.
"""

from __future__ import annotations

import base64
import hmac
import logging
import sys
import time
from collections.abc import Awaitable, Callable, MutableMapping
from importlib import resources
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.schemas import SchemaGenerator
from starlette.staticfiles import StaticFiles

from ... import __version__, _gc
from ...errors import InputError, UsageError
from .. import triage
from ..metrics import Exposition
from ..store import Store
from . import findings, fleet, pages, writes

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Message]],
                    Callable[[Message], Awaitable[None]]], Awaitable[None]]

log = logging.getLogger("gpusbom.inventory.web")

CSP = ("default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
       "base-uri 'none'; frame-ancestors 'none'")
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    # same-origin, not no-referrer: with no-referrer browsers send "Origin: null" on form
    # posts, and the write path checks the origin (nothing leaks to other sites either way)
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
]
_HERE = Path(str(resources.files(__package__)))


class Guard:
    """ASGI middleware: the security headers on every response, and (with a token) HTTP
    bearer or basic authentication (any user name, the token as password) on every route."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.token = token.encode() if token else None

    def _authorized(self, scope: Scope) -> bool:
        if self.token is None:
            return True
        auth = next((v for k, v in scope.get("headers", []) if k == b"authorization"), b"")
        scheme, _, cred = auth.partition(b" ")
        given = b""
        if scheme.lower() == b"bearer":
            given = cred.strip()
        elif scheme.lower() == b"basic":
            try:
                given = base64.b64decode(cred.strip(), validate=True).partition(b":")[2]
            except ValueError:
                given = b""
        return hmac.compare_digest(given, self.token)

    async def __call__(self, scope: Scope, receive: Callable[[], Awaitable[Message]],
                       send: Callable[[Message], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        start = time.perf_counter()

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                # Server-Timing: the time this server took, for the benchmark and browsers
                took = f"app;dur={(time.perf_counter() - start) * 1000:.1f}".encode()
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS,
                                      (b"server-timing", took)]
            await send(message)

        if not self._authorized(scope):
            resp = PlainTextResponse("401 unauthorized: give the dashboard's token "
                                     "(Authorization: Bearer TOKEN, or basic auth with the "
                                     "token as password)\n", status_code=401, headers={
                                         "WWW-Authenticate": 'Basic realm="gpusbom", '
                                         'charset="UTF-8"'})
            await resp(scope, receive, send_with_headers)
            return
        await self.app(scope, receive, send_with_headers)


def _templates() -> Any:
    from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

    env = Environment(loader=FileSystemLoader(str(_HERE / "templates")),
                      autoescape=select_autoescape(default=True, default_for_string=True),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["short"] = lambda s, n=12: (s or "")[:n]
    env.filters["sev"] = lambda d: ", ".join(f"{k} {v}" for k, v in sorted((d or {}).items()))
    return env


class Dashboard:
    """The application's state: one store, the advisory database, the caches."""

    def __init__(self, url: str | None, *, adb: Any = None,
                 write_token: str | None = None) -> None:
        from ...advisories.db import load_active

        self.store = Store(url)
        self.adb = adb if adb is not None else load_active()
        self.cache = pages.Cache()
        self.metrics = Exposition(self.store)
        self.env = _templates()
        self.writes = writes.Writes(write_token)
        # the server keeps these to its end: out of the collector's passes (gpusbom._gc)
        _gc.freeze_loaded()

    def html(self, template: str, request: Request, data: dict[str, Any],
             status: int = 200) -> Response:
        body = self.env.get_template(template).render(
            data=data, db=self.store.display_url, version=__version__,
            request_query=request.query_params, writes=self.writes.context(request),
            here=_here(request))
        return HTMLResponse(body, status_code=status)

    def builders(self) -> dict[str, Callable[[Request], dict[str, Any]]]:
        q = _q
        return {
            "overview": lambda r: pages.overview(self.store, self.adb, self.cache),
            "search": lambda r: pages.search(self.store, {
                **{k: q(r, k) for k in pages.SEARCH_FIELDS if k != "label"},
                "label": r.query_params.getlist("label")}),
            "advisories": lambda r: pages.advisories(self.store, self.adb),
            "advisory": lambda r: pages.advisory(self.store, self.adb, q(r, "id"),
                                                     self.cache),
            "matrix": lambda r: fleet.matrix(self.store, self.cache),
            "cell": lambda r: fleet.cell(self.store, self.cache, q(r, "image"), q(r, "gpu")),
            "host": lambda r: self.with_findings(
                fleet.host(self.store, self.cache, q(r, "name")), "host", r),
            "image": lambda r: self.with_findings(
                fleet.image(self.store, self.cache, q(r, "name")), "image", r),
            "triage": lambda r: self.triage_page(r),
        }

    def with_findings(self, data: dict[str, Any], kind: str, r: Request) -> dict[str, Any]:
        """A host or image page with its findings (triage applied) and their trend."""
        sid = data["scan_id"] if kind == "image" else data["scans"][0]["id"]
        result = self.cache.scans(self.store, [sid])[sid]
        table = triage.active(self.store)
        return {**data, "findings": findings.rows(result, table, findings.params_of(
            r.query_params)), "trend": findings.trend(self.store, kind, data["subject"]),
            "kind": kind}

    def triage_page(self, r: Request) -> dict[str, Any]:
        comp, vuln = _q(r, "component"), _q(r, "vulnerability").upper()
        rows = [a.to_dict() for a in triage.all_analyses(self.store)]
        current = next((a for a in rows if (a["component"], a["vulnerability"])
                        == (comp, vuln)), None)
        return {"component": comp, "vulnerability": vuln, "next": _q(r, "next"),
                "current": current, "analyses": rows, "states": list(triage.STATES),
                "justifications": list(triage.JUSTIFICATIONS)}


def _here(request: Request) -> str:
    """This page as a relative link (``image?name=...``), to come back to after a write."""
    path = request.url.path.rsplit("/", 1)[-1] or "./"
    return path + (f"?{request.url.query}" if request.url.query else "")


def _q(request: Request, key: str) -> str:
    return str(request.query_params.get(key, ""))[:1000]


def _error_status(exc: BaseException) -> int:
    return 404 if isinstance(exc, InputError) else 400 if isinstance(exc, UsageError) else 500


def _endpoints(dash: Dashboard, name: str, build: Callable[[Request], dict[str, Any]],
               doc: str) -> tuple[Callable[[Request], Response], Callable[[Request], Response]]:
    def compute(request: Request) -> tuple[dict[str, Any], int]:
        try:
            return build(request), 200
        except (InputError, UsageError) as exc:
            return {"error": str(exc)}, _error_status(exc)
        except Exception:  # noqa: BLE001 - a request handler: logged with its traceback, 500
            log.exception("page %s failed", name)
            return {"error": "internal error (see the server log)"}, 500

    def page(request: Request) -> Response:
        data, status = compute(request)
        if status != 200:
            return dash.html("error.html", request, data, status)
        return dash.html(f"{name}.html", request, data)

    def api(request: Request) -> Response:
        data, status = compute(request)
        return JSONResponse(data, status_code=status)

    page.__name__ = f"page_{name}"
    api.__name__ = f"api_{name}"
    api.__doc__ = doc
    return page, api


# OpenAPI descriptions of the API routes (YAML after "---", read by SchemaGenerator)
_DOCS = {
    "overview": "Hosts by GPU model, driver branch, CUDA version and probe outcome; images by "
                "stack; the advisory database's age.",
    "search": "Where is a component: the query language of `gpusbom inventory query`.",
    "advisories": "The advisories of the database with the hosts/images they touched at scan "
                  "time.",
    "advisory": "The hosts and images an advisory touches (re-matched now), with fixed "
                "version and status, and the not-affected statements the scans recorded.",
    "matrix": "Stored images x host GPU kinds, coloured by `gpusbom check` verdict.",
    "cell": "One matrix cell: the verdict of an image on a host GPU kind, with its reasons.",
    "host": "One host: GPUs, driver, firmware, images on the node, probe history, drift.",
    "image": "One image: stack, layers, findings, SASS/PTX/gfx coverage per GPU kind.",
    "triage": "The recorded analyses (triage), and the one of a component and vulnerability.",
}
_PARAMS = {
    "search": [("component", "Package or GPU product name (cudnn)"),
               ("version", "Version range ('<9.1', '>=9.0,<9.1')"),
               ("scheme", "Version scheme (deb, rpm, pep440, ...)"),
               ("host", "Host name glob"), ("image", "Image name:tag glob"),
               ("kind", "host, image or sbom"), ("label", "KEY=GLOB or KEY; repeatable"),
               ("all_scans", "Any value: every scan kept, not only the latest")],
    "advisory": [("id", "Advisory id or CVE")],
    "cell": [("image", "Image subject (name:tag)"), ("gpu", "GPU kind key (see /api/matrix)")],
    "host": [("name", "Host name")],
    "image": [("name", "Image subject (name:tag)"), ("q", "Findings: CVE, advisory or "
              "component"), ("severity", "Findings of a severity"), ("status", "Findings of "
              "a status"), ("sort", "severity, vulnerability, component, status or path")],
    "triage": [("component", "Component (purl without qualifiers)"),
               ("vulnerability", "Vulnerability id")],
}


def _doc(name: str) -> str:
    lines = ["---", f"summary: {_DOCS[name]!r}", f"operationId: {name}"]
    if name in _PARAMS:
        lines.append("parameters:")
        for pname, text in _PARAMS[name]:
            req = "true" if name in ("advisory", "cell", "host", "image") and pname in (
                "id", "image", "gpu", "name") else "false"
            lines += [f"  - name: {pname}", "    in: query", f"    required: {req}",
                      f"    description: {text!r}", "    schema: {type: string}"]
    lines += ["responses:", "  '200': {description: 'The page data (JSON)'}",
              "  '400': {description: 'Bad parameter (error: text)'}",
              "  '404': {description: 'No such host, image, advisory (error: text)'}",
              "  '401': {description: 'Missing or wrong token (with --auth-token-file)'}"]
    return "\n".join(lines)


def create_app(url: str | None, *, token: str | None = None, adb: Any = None,
               write_token: str | None = None) -> ASGIApp:
    """The dashboard over the inventory at ``url``; ``token``: required on every request;
    ``write_token``: enables triage (signed-in sessions, CSRF-checked forms)."""
    dash = Dashboard(url, adb=adb, write_token=write_token)
    routes: list[Any] = []
    paths = {"overview": "/"}
    for name, build in dash.builders().items():
        page, api = _endpoints(dash, name, build, _doc(name))
        path = paths.get(name, f"/{name}")
        routes.append(Route(path, page, methods=["GET"], include_in_schema=False))
        routes.append(Route(f"/api/{name}", api, methods=["GET"]))

    schemas = SchemaGenerator({"openapi": "3.0.3", "info": {
        "title": "gpusbom inventory dashboard", "version": __version__,
        "description": "Read-only JSON API of the fleet inventory: one route per page."}})

    def openapi(request: Request) -> Response:
        return JSONResponse(schemas.get_schema(routes=app.routes))

    def metrics(request: Request) -> Response:
        try:
            text = dash.metrics.render(pages.inventory_version(dash.store))
        except Exception:  # noqa: BLE001 - a request handler: logged with its traceback, 500
            log.exception("metrics failed")
            return PlainTextResponse("metrics unavailable (see the server log)\n", 500)
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4; charset=utf-8")

    routes += _write_routes(dash)
    routes += [
        Route("/api/openapi.json", openapi, methods=["GET"], include_in_schema=False),
        Route("/metrics", metrics, methods=["GET"], include_in_schema=False),
        Mount("/static", StaticFiles(directory=str(_HERE / "static")), name="static"),
    ]
    app = Starlette(routes=routes)
    app.state.dashboard = dash
    return Guard(app, token)


def _write_routes(dash: Dashboard) -> list[Any]:
    w = dash.writes

    async def post(request: Request) -> Response:
        try:
            fields = await w.form(request)
            name = request.url.path.rsplit("/", 1)[-1]
            if name == "login":
                return w.login(request, fields)
            if name == "logout":
                return w.logout(request, fields)
            resp = writes.record(dash.store, w, request, fields)
        except (UsageError, ValueError) as exc:
            return PlainTextResponse(f"400 bad request: {exc}\n", status_code=400)
        except Exception:  # noqa: BLE001 - a request handler: logged with its traceback, 500
            log.exception("write failed")
            return PlainTextResponse("internal error (see the server log)\n", 500)
        if resp.status_code == 303:
            dash.cache = pages.Cache()  # pages show the analyses: rebuild them
        return resp

    def login_page(request: Request) -> Response:
        return dash.html("login.html", request, {"next": _q(request, "next")})

    def download(request: Request) -> Response:
        try:
            if request.url.path.endswith("/vex"):
                return writes.vex(dash.store, _q(request, "format") or "openvex")
            return writes.sbom(dash.store, dash.cache, _q(request, "kind"), _q(request, "name"),
                               _q(request, "format") or "cyclonedx")
        except (InputError, UsageError) as exc:
            return PlainTextResponse(f"{exc}\n", status_code=_error_status(exc))

    return [Route("/triage", post, methods=["POST"], include_in_schema=False),
            Route("/login", post, methods=["POST"], include_in_schema=False),
            Route("/logout", post, methods=["POST"], include_in_schema=False),
            Route("/login", login_page, methods=["GET"], include_in_schema=False),
            Route("/sbom", download, methods=["GET"], include_in_schema=False),
            Route("/vex", download, methods=["GET"], include_in_schema=False)]


def parse_bind(bind: str) -> tuple[str, int]:
    """``127.0.0.1:8080``, ``[::1]:8080``, ``:8080`` (all addresses) -> (host, port)."""
    text = bind.strip()
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"--bind {bind!r}: use HOST:PORT (127.0.0.1:8080, [::1]:8080)")
    host = host.strip("[]") or "0.0.0.0"  # noqa: S104 - only when the user asks for ":PORT"
    return host, int(port)


def read_token(path: str, option: str = "--auth-token-file") -> str:
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise InputError(f"{option} {path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise InputError(f"{option} {path}: not UTF-8 text") from None
    if not token or "\n" in token:
        raise InputError(f"{option} {path}: put one token (one line, not empty) in it")
    return token


#: how often ``serve`` runs the configured retention
RETENTION_SECONDS = 3600.0


def start_retention(store: Any) -> Any:
    """The retention policy (``inventory_keep_days`` / ``inventory_keep_last``) run by a
    daemon thread every hour while the dashboard serves; none configured: no thread."""
    import threading

    from ... import settings

    days, last = settings.raw("inventory_keep_days"), settings.raw("inventory_keep_last")
    if not (days.strip() or last.strip()):
        return None
    keep_days = int(days) if days.strip() else None
    keep_last = int(last) if last.strip() else None
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            try:
                r = store.prune(keep_days=keep_days, keep_last=keep_last)
                if r.scans:
                    print(f"gpusbom inventory: retention pruned {r.scans} scan(s)",
                          file=sys.stderr)
            except Exception as exc:  # noqa: BLE001 - the server keeps serving; said once per run
                print(f"gpusbom inventory: warning: retention: {exc}", file=sys.stderr)
            stop.wait(RETENTION_SECONDS)

    threading.Thread(target=run, name="gpusbom-retention", daemon=True).start()
    return stop


def serve(url: str | None, *, bind: str = "127.0.0.1:8080", token_file: str | None = None,
          write_token_file: str | None = None) -> None:
    import ipaddress

    import uvicorn

    host, port = parse_bind(bind)
    token = read_token(token_file) if token_file else None
    write_token = read_token(write_token_file, "--write-token-file") \
        if write_token_file else None
    app = create_app(url, token=token, write_token=write_token)
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback and token is None:
        print(f"warning: serving on {host}:{port} without --auth-token-file: anyone who can "
              "reach it sees the inventory", file=sys.stderr)
    print(f"gpusbom inventory dashboard on http://{bind.strip()}/ ("
          f"{app.app.state.dashboard.store.display_url})", file=sys.stderr)  # type: ignore[attr-defined]
    start_retention(app.app.state.dashboard.store)  # type: ignore[attr-defined]
    uvicorn.run(app, host=host, port=port, log_level="warning", server_header=False,
                proxy_headers=False, access_log=False)
