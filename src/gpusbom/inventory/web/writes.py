"""The dashboard's write path (triage) and downloads.

Read-only is the default: without a write token (``inventory serve --write-token-file``)
every POST answers 403. With one, a person signs in (``login``: the token and a name, kept
as the analyses' author) and gets a session cookie (HttpOnly, SameSite=Strict, random id,
held in this process only); every write form carries a CSRF token (HMAC of the session id
with a per-process key) and every POST must come from this origin (``Origin``, else
``Referer``, equal to the request's own scheme://host). A script can write with the header
``X-Gpusbom-Write-Token: TOKEN`` instead (a header no cross-site form can send).

Downloads: the stored scan of a host or image as CycloneDX / SPDX (the existing writers),
and the recorded analyses as OpenVEX / CycloneDX VEX.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import secrets
import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from ...errors import InputError, UsageError
from .. import triage

COOKIE = "gpusbom_session"
SESSION_SECONDS = 8 * 3600
MAX_BODY = 64 * 1024
SBOM_FORMATS = {"cyclonedx": ("cyclonedx-json", "cdx.json"),
                "spdx": ("spdx-json", "spdx.json")}


class Writes:
    """Sessions and CSRF of one server process."""

    def __init__(self, token: str | None) -> None:
        self.token = token.encode() if token else None
        self.key = secrets.token_bytes(32)
        self.sessions: dict[str, tuple[str, float]] = {}

    @property
    def enabled(self) -> bool:
        return self.token is not None

    def csrf(self, sid: str) -> str:
        return hmac.new(self.key, sid.encode(), hashlib.sha256).hexdigest()

    def session(self, request: Request) -> tuple[str, str] | None:
        """(session id, author) of a signed-in request."""
        sid = request.cookies.get(COOKIE, "")
        got = self.sessions.get(sid)
        if not sid or got is None:
            return None
        if got[1] < time.monotonic():
            self.sessions.pop(sid, None)
            return None
        return sid, got[0]

    def context(self, request: Request) -> dict[str, Any]:
        """What the templates need: writes on?, signed in as, the CSRF token."""
        s = self.session(request) if self.enabled else None
        return {"enabled": self.enabled, "author": s[1] if s else None,
                "csrf": self.csrf(s[0]) if s else None}

    def _token_ok(self, given: str) -> bool:
        return self.token is not None and hmac.compare_digest(given.encode(), self.token)

    @staticmethod
    def same_origin(request: Request) -> bool:
        host = request.headers.get("host", "")
        want = f"{request.url.scheme}://{host}"
        origin = request.headers.get("origin")
        if origin is not None:
            return origin == want
        ref = request.headers.get("referer")
        if ref:
            u = urlsplit(ref)
            return f"{u.scheme}://{u.netloc}" == want
        return False

    async def form(self, request: Request) -> dict[str, str]:
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY:
                raise UsageError(f"request body over {MAX_BODY} bytes")
        ctype = request.headers.get("content-type", "").split(";")[0].strip()
        if ctype == "application/json":
            doc = json.loads(body or b"{}")
            if not isinstance(doc, dict):
                raise UsageError("a JSON object is needed")
            return {str(k): str(v) for k, v in doc.items() if v is not None}
        if ctype != "application/x-www-form-urlencoded":
            raise UsageError("send a form (application/x-www-form-urlencoded) or JSON")
        return {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace"),
                                             keep_blank_values=True).items()}

    def authorize(self, request: Request, fields: dict[str, str]) -> str | None:
        """The author of an allowed write, else None (the caller answers 403)."""
        if not self.enabled:
            return None
        header = request.headers.get("x-gpusbom-write-token")
        if header is not None:
            return (fields.get("author") or "api") if self._token_ok(header) else None
        s = self.session(request)
        if s is None or not self.same_origin(request):
            return None
        if not hmac.compare_digest(fields.get("csrf", ""), self.csrf(s[0])):
            return None
        return s[1]

    def login(self, request: Request, fields: dict[str, str]) -> Response:
        if not self.enabled:
            return forbidden("this dashboard is read-only (start it with --write-token-file)")
        if not self.same_origin(request):
            return forbidden("cross-origin sign-in refused")
        name = fields.get("author", "").strip()[:255]
        if not self._token_ok(fields.get("token", "")) or not name:
            return forbidden("wrong write token (or no name given)")
        sid = secrets.token_urlsafe(32)
        self.sessions[sid] = (name, time.monotonic() + SESSION_SECONDS)
        resp = RedirectResponse(_back(fields.get("next")), status_code=303)
        resp.set_cookie(COOKIE, sid, max_age=SESSION_SECONDS, httponly=True,
                        samesite="strict", secure=request.url.scheme == "https")
        return resp

    def logout(self, request: Request, fields: dict[str, str]) -> Response:
        s = self.session(request)
        if s is None or not self.same_origin(request) or not hmac.compare_digest(
                fields.get("csrf", ""), self.csrf(s[0])):
            return forbidden("not signed in, or the form's CSRF token is wrong")
        self.sessions.pop(s[0], None)
        resp = RedirectResponse("./", status_code=303)
        resp.delete_cookie(COOKIE)
        return resp


def forbidden(text: str) -> Response:
    return PlainTextResponse(f"403 forbidden: {text}\n", status_code=403)


def _back(target: str | None) -> str:
    """A relative page of this dashboard to go back to (never another site)."""
    t = (target or "").strip()
    u = urlsplit(t)
    if not t or u.scheme or u.netloc or t.startswith(("/", "\\")) or "\\" in t:
        return "./"
    return t


def record(store: Any, writes: Writes, request: Request, fields: dict[str, str]) -> Response:
    author = writes.authorize(request, fields)
    if author is None:
        return forbidden("writes need the write token: sign in (login), from this "
                         "dashboard's own pages (CSRF token and origin are checked)")
    if fields.get("action") == "delete":
        triage.delete(store, fields.get("component", ""), fields.get("vulnerability", ""))
    else:
        triage.record(store, {**fields, "author": author})
    return RedirectResponse(_back(fields.get("next")), status_code=303)


# ------------------------------------------------------------------ downloads


def sbom(store: Any, cache: Any, kind: str, name: str, fmt: str) -> Response:
    from ...writers import WriterOptions, get_writer

    if fmt not in SBOM_FORMATS:
        raise UsageError(f"format {fmt!r}: use cyclonedx or spdx")
    kinds = ("host",) if kind == "host" else ("image", "sbom")
    infos = [s for k in kinds for s in store.scans(kind=k, subject=name, all_scans=False)]
    if not infos:
        raise InputError(f"no {kind} {name!r} in the inventory")
    info = infos[-1]
    result = cache.scans(store, [info.id])[info.id]
    out = io.StringIO()
    writer, ext = SBOM_FORMATS[fmt]
    get_writer(writer).write(result, out, WriterOptions())
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)[:80]
    return Response(out.getvalue(), media_type="application/json", headers={
        "content-disposition": f'attachment; filename="{safe}.{ext}"'})


def vex(store: Any, fmt: str) -> Response:
    if fmt == "openvex":
        doc, ext = triage.openvex(store), "openvex.json"
    elif fmt == "cyclonedx":
        doc, ext = triage.cyclonedx_vex(store), "vex.cdx.json"
    else:
        raise UsageError(f"format {fmt!r}: use openvex or cyclonedx")
    return Response(json.dumps(doc, indent=2, sort_keys=True) + "\n",
                    media_type="application/json",
                    headers={"content-disposition": f'attachment; filename="triage.{ext}"'})
