"""The OCI distribution API over ``requests``: authentication challenges (Basic, bearer
tokens), TLS settings per host, retries with backoff on 429 / 5xx and dropped connections.
"""

from __future__ import annotations

import base64
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit

from ...errors import (
    DigestMismatchError,
    ImageFormatError,
    InputError,
    SourceNotFoundError,
)
from ...safetext import loads_json
from ..image import (
    MAX_JSON_BYTES,
    sha256_digest,
)

if TYPE_CHECKING:
    import requests

from .credentials import Credentials, RegistryOptions, docker_config_dir, load_credentials, scrub
from .ref import DIGEST_RE, ImageRef, RegistryError, normalize_host

log = logging.getLogger(__name__)


#: attempts for one request (429 / 5xx / dropped connections) before giving up
MAX_ATTEMPTS = 5
#: first backoff delay (doubles; a Retry-After header is honoured up to RETRY_AFTER_MAX)
BACKOFF_S = 0.25
RETRY_AFTER_MAX = 30.0


CONNECT_TIMEOUT_S = 15.0
READ_TIMEOUT_S = 120.0


MANIFEST_ACCEPT = (
    "application/vnd.oci.image.index.v1+json, "
    "application/vnd.docker.distribution.manifest.list.v2+json, "
    "application/vnd.oci.image.manifest.v1+json, "
    "application/vnd.docker.distribution.manifest.v2+json"
)


_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"  # noqa: S105 - RFC 9110 token grammar, not a secret
_PARAM_RE = re.compile(rf'\s*({_TOKEN})\s*=\s*(?:"((?:[^"\\]|\\.)*)"|({_TOKEN}))\s*(,|$)')
_SCHEME_RE = re.compile(rf"\s*,?\s*({_TOKEN})(?:\s+|$)")


def parse_challenges(header: str) -> list[tuple[str, dict[str, str]]]:
    """``WWW-Authenticate`` -> [(scheme lowercased, {param: value})], in order."""
    out: list[tuple[str, dict[str, str]]] = []
    pos, n = 0, len(header)
    while pos < n:
        m = _SCHEME_RE.match(header, pos)
        if not m or not m.group(1):
            break
        scheme, pos = m.group(1).lower(), m.end()
        params: dict[str, str] = {}
        while pos < n:
            pm = _PARAM_RE.match(header, pos)
            if not pm:
                break
            value = pm.group(2)
            value = re.sub(r"\\(.)", r"\1", value) if value is not None else pm.group(3)
            params[pm.group(1).lower()] = value
            pos = pm.end()
        out.append((scheme, params))
        if pos < n and not _SCHEME_RE.match(header, pos):
            break
    return out


def backoff(attempt: int, retry_after: str | None = None) -> float:
    if retry_after:
        try:
            return min(max(float(retry_after), 0.0), RETRY_AFTER_MAX)
        except ValueError:
            pass
    return float(BACKOFF_S * 2 ** (attempt - 1))


def _certs_d(host: str, config_dir: str) -> tuple[str | None, tuple[str, str] | None]:
    """Docker's per-registry TLS files: ``certs.d/HOST/ca.crt`` and client.cert/.key."""
    for base in (os.path.join(config_dir, "certs.d"), "/etc/docker/certs.d"):
        d = os.path.join(base, host)
        if not os.path.isdir(d):
            continue
        ca = os.path.join(d, "ca.crt")
        cert, key = os.path.join(d, "client.cert"), os.path.join(d, "client.key")
        return (
            ca if os.path.isfile(ca) else None,
            (cert, key) if os.path.isfile(cert) and os.path.isfile(key) else None,
        )
    return None, None


def short_exc(e: BaseException) -> str:
    """One line for a requests / urllib3 error, without the wrapper noise."""
    inner: BaseException = e
    for _ in range(4):
        nxt = inner.args[0] if inner.args and isinstance(inner.args[0], BaseException) else None
        nxt = nxt or getattr(inner, "reason", None)
        if not isinstance(nxt, BaseException) or nxt is inner:
            break
        inner = nxt
    text = str(inner) or type(inner).__name__
    text = re.sub(r"<urllib3\.[^>]*>: ", "", text)
    m = re.search(r"Caused by \w+\((.*)\)\)?$", text)
    if m:
        text = m.group(1)
    return text.splitlines()[0][:300] if text else type(e).__name__


class RegistryClient:
    """One registry, one repository: authentication, retries, TLS and plain-HTTP rules."""

    def __init__(self, ref: ImageRef, opts: RegistryOptions) -> None:
        import requests
        from requests.adapters import HTTPAdapter

        self.ref = ref
        self.opts = opts
        self.host = ref.api_host
        self.label = f"registry {ref.registry}"
        self.insecure = ref.registry in opts.insecure or normalize_host(self.host) in opts.insecure
        self._lock = threading.Lock()
        self._session = requests.Session()
        adapter = HTTPAdapter(pool_connections=2, pool_maxsize=max(4, opts.parallel + 2))
        self._session.mount("https://", adapter)
        self._session.mount("http://", adapter)
        self._session.headers["User-Agent"] = "gpusbom"
        ca, client_cert = _certs_d(self.host, docker_config_dir(opts.docker_config))
        if self.insecure:
            import urllib3

            urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
            self._session.verify = False
        elif ca is not None:
            self._session.verify = ca
        if client_cert is not None:
            self._session.cert = client_cert
        self._base: str | None = None
        self._auth_header: str | None = None  # "Bearer ..." / "Basic ..."; never logged
        self._challenge: tuple[str, dict[str, str]] | None = None
        self._creds: Credentials | None = None
        self._creds_loaded = False

    # secrets we know of, to scrub from anything we show
    def _secrets(self) -> list[str]:
        out = []
        c = self._creds
        if c is not None:
            for s in (c.password, c.identity_token):
                if s:
                    out.append(s.reveal())
        if self._auth_header:
            out.append(self._auth_header.split(" ", 1)[-1])
        return out

    def _credentials(self) -> Credentials | None:
        if not self._creds_loaded:
            self._creds = load_credentials(self.ref.registry, self.opts)
            self._creds_loaded = True
        return self._creds

    def close(self) -> None:
        self._session.close()

    # ----------------------------------------------------------------- base URL

    def base(self) -> str:
        if self._base is not None:
            return self._base
        import requests

        if not self.insecure:
            self._base = f"https://{self.host}"
            return self._base
        # --insecure-registry: https without verification, else plain http (as Docker does)
        try:
            self._session.get(
                f"https://{self.host}/v2/", timeout=(CONNECT_TIMEOUT_S, 30), allow_redirects=False
            ).close()
            self._base = f"https://{self.host}"
        except requests.exceptions.SSLError:
            self._base = f"http://{self.host}"
        except requests.exceptions.ConnectionError as e:
            log.debug("%s: https failed (%s); trying http", self.host, short_exc(e))
            self._base = f"http://{self.host}"
        log.debug("%s: using %s", self.host, self._base)
        return self._base

    # ----------------------------------------------------------------- requests

    def request(
        self,
        method: str,
        path: str,
        *,
        what: str,
        headers: dict[str, str] | None = None,
        stream: bool = False,
        ok: tuple[int, ...] = (200,),
        not_found: Callable[[str], InputError] | None = None,
        data: bytes | None = None,
    ) -> requests.Response:
        """``method`` ``path`` (with body ``data``: a push); authenticates on 401 and retries
        429 / 5xx / dropped connections."""
        import requests

        url = self.base() + path
        authed_once = False
        attempt = 0
        while True:
            attempt += 1
            h = dict(headers or {})
            with self._lock:
                auth = self._auth_header
            if auth:
                h["Authorization"] = auth
            try:
                resp = self._session.request(
                    method,
                    url,
                    headers=h,
                    stream=stream,
                    data=data,
                    timeout=(CONNECT_TIMEOUT_S, READ_TIMEOUT_S),
                )
            except requests.exceptions.SSLError as e:
                if "WRONG_VERSION_NUMBER" in str(e) or "wrong version number" in str(e):
                    raise RegistryError(
                        f"{self.label}: {self.host} does not answer TLS (a plain-HTTP "
                        f"registry?); pass --insecure-registry {self.ref.registry} to allow "
                        "plain HTTP"
                    ) from None
                raise RegistryError(
                    f"{self.label}: TLS verification failed ({short_exc(e)}); trust its CA "
                    f"(REQUESTS_CA_BUNDLE or certs.d/{self.host}/ca.crt) or pass "
                    f"--insecure-registry {self.ref.registry}"
                ) from None
            except requests.exceptions.ConnectionError as e:
                # refused / unknown host: not worth retrying; resets and timeouts are
                fatal = "NewConnectionError" in repr(e) or "NameResolutionError" in repr(e)
                if fatal or attempt >= MAX_ATTEMPTS:
                    raise RegistryError(
                        f"{self.label}: cannot reach {self.host} for {what}: "
                        f"{scrub(short_exc(e), self._secrets())}"
                        + ("" if fatal else f" (after {attempt} attempts)")
                    ) from None
                delay = backoff(attempt)
                log.debug("%s %s: %s; retrying in %.2fs", method, path, short_exc(e), delay)
                time.sleep(delay)
                continue
            except requests.exceptions.Timeout as e:
                if attempt >= MAX_ATTEMPTS:
                    raise RegistryError(
                        f"{self.label}: {what}: timed out after {attempt} attempts ({short_exc(e)})"
                    ) from None
                time.sleep(backoff(attempt))
                continue
            except requests.exceptions.RequestException as e:  # malformed answer or URL
                raise RegistryError(
                    f"{self.label}: {what}: {scrub(short_exc(e), self._secrets())}"
                ) from None
            status = resp.status_code
            log.debug("%s %s -> %d", method, path, status)
            if status in ok:
                return resp
            if status == 401 and not authed_once:
                challenge = resp.headers.get("WWW-Authenticate", "")
                resp.close()
                self._authenticate(challenge, auth, what)
                authed_once = True
                attempt = 0
                continue
            if status == 429 or 500 <= status < 600:
                retry_after = resp.headers.get("Retry-After")
                detail = self._error_detail(resp)
                if attempt >= MAX_ATTEMPTS:
                    raise RegistryError(
                        f"{self.label}: {what}: HTTP {status}{detail} after {attempt} attempts"
                    )
                delay = backoff(attempt, retry_after)
                log.debug("%s %s: HTTP %d; retrying in %.2fs", method, path, status, delay)
                time.sleep(delay)
                continue
            detail = self._error_detail(resp)
            if status == 401:
                raise RegistryError(self._auth_failed_message(what, detail))
            if status == 403:
                raise RegistryError(
                    f"{self.label}: access to {self.ref.repository} denied{detail} ({self._who()})"
                )
            if status == 404 and not_found is not None:
                raise not_found(detail)
            raise RegistryError(f"{self.label}: {what}: unexpected HTTP {status}{detail}")

    def _who(self) -> str:
        c = self._credentials()
        if c is None:
            return "anonymous; log in with docker login or pass --username/--password-stdin"
        if c.username:
            return f"as user {c.username!r} from {c.origin}"
        return f"with a token from {c.origin}"

    def _auth_failed_message(self, what: str, detail: str) -> str:
        c = self._credentials()
        if c is None:
            return (
                f"{self.label}: {what}: authentication required{detail}; log in with "
                "docker login or pass --username and --password-stdin"
            )
        return (
            f"{self.label}: {what}: authentication failed{detail} ({self._who()}): "
            "wrong username or password?"
        )

    def _error_detail(self, resp: requests.Response) -> str:
        """``: CODE: message`` from a registry error body (small, secrets scrubbed)."""
        try:
            body = resp.raw.read(64 << 10, decode_content=True) if resp.raw is not None else b""
            doc = loads_json(body.decode("utf-8")) if body else None
        except Exception:  # noqa: BLE001 - best effort
            doc = None
        finally:
            resp.close()
        errs = doc.get("errors") if isinstance(doc, dict) else None
        if isinstance(errs, list) and errs and isinstance(errs[0], dict):
            code, msg = errs[0].get("code"), errs[0].get("message")
            text = " ".join(str(x) for x in (code, msg) if x)
            if text:
                return ": " + scrub(text.splitlines()[0][:200], self._secrets())
        return ""

    # ----------------------------------------------------------------- auth

    def _authenticate(self, header: str, used: str | None, what: str) -> None:
        challenges = parse_challenges(header)
        by_scheme = {s: p for s, p in challenges}
        with self._lock:
            if self._auth_header is not None and self._auth_header != used:
                return  # another thread already refreshed it
            creds = self._credentials()
            if "bearer" in by_scheme:
                self._auth_header = "Bearer " + self._fetch_token(by_scheme["bearer"], creds, what)
            elif "basic" in by_scheme:
                if creds is None or creds.password is None:
                    raise RegistryError(self._auth_failed_message(what, ""))
                if used is not None and used.startswith("Basic "):
                    raise RegistryError(self._auth_failed_message(what, ""))
                raw = f"{creds.username or ''}:{creds.password.reveal()}".encode()
                self._auth_header = "Basic " + base64.b64encode(raw).decode()
            else:
                shown = ", ".join(s for s, _ in challenges) or "none"
                raise RegistryError(
                    f"{self.label}: {what}: HTTP 401 with an unsupported authentication "
                    f"challenge ({shown})"
                )

    def _fetch_token(self, params: dict[str, str], creds: Credentials | None, what: str) -> str:
        import requests

        realm = params.get("realm")
        try:
            usable = bool(realm) and urlsplit(realm).scheme in ("http", "https")
        except ValueError:  # "Invalid IPv6 URL" and the like
            usable = False
        if not usable or realm is None:
            raise RegistryError(f"{self.label}: bearer challenge without a usable realm")
        realm_host = normalize_host(urlsplit(realm).netloc)
        # the challenge names the scope a push needs (pull,push); a read asks for pull
        scope = params.get("scope") or f"repository:{self.ref.repository}:pull"
        query: dict[str, str] = {"scope": scope}
        if params.get("service"):
            query["service"] = params["service"]
        verify: Any = self._session.verify
        if realm_host not in self.opts.insecure and urlsplit(realm).netloc != self.host:
            ca, _ = _certs_d(urlsplit(realm).netloc, docker_config_dir(self.opts.docker_config))
            verify = ca if ca else True
        attempt = 0
        while True:
            attempt += 1
            try:
                if creds is not None and creds.identity_token is not None:
                    form = dict(query)
                    form.update(
                        grant_type="refresh_token",
                        refresh_token=creds.identity_token.reveal(),
                        client_id="gpusbom",
                    )
                    resp = self._session.post(
                        realm, data=form, timeout=(CONNECT_TIMEOUT_S, 60), verify=verify
                    )
                else:
                    auth = None
                    if creds is not None and creds.password is not None:
                        auth = (creds.username or "", creds.password.reveal())
                    resp = self._session.get(
                        realm + ("&" if "?" in realm else "?") + urlencode(query),
                        auth=auth,
                        timeout=(CONNECT_TIMEOUT_S, 60),
                        verify=verify,
                    )
            except requests.exceptions.SSLError as e:
                raise RegistryError(
                    f"{self.label}: TLS verification of the token service {realm_host} failed "
                    f"({short_exc(e)})"
                ) from None
            except (requests.exceptions.ConnectionError, requests.exceptions.Timeout) as e:
                if attempt >= MAX_ATTEMPTS or "NewConnectionError" in repr(e):
                    raise RegistryError(
                        f"{self.label}: cannot reach the token service {realm_host}: "
                        f"{scrub(short_exc(e), self._secrets())}"
                    ) from None
                time.sleep(backoff(attempt))
                continue
            except requests.exceptions.RequestException as e:  # a realm that is no URL, ...
                raise RegistryError(
                    f"{self.label}: cannot ask the token service {realm_host}: "
                    f"{scrub(short_exc(e), self._secrets())}"
                ) from None
            status = resp.status_code
            log.debug("token %s -> %d", realm_host, status)
            if (status == 429 or status >= 500) and attempt < MAX_ATTEMPTS:
                ra = resp.headers.get("Retry-After")
                resp.close()
                time.sleep(backoff(attempt, ra))
                continue
            if status in (401, 403):
                resp.close()
                raise RegistryError(self._auth_failed_message(what, ""))
            if status != 200:
                detail = self._error_detail(resp)
                raise RegistryError(
                    f"{self.label}: the token service {realm_host} answered HTTP {status}{detail}"
                )
            try:
                doc = loads_json(resp.content)
            except (ValueError, requests.exceptions.RequestException):
                doc = None
            finally:
                resp.close()
            token = None
            if isinstance(doc, dict):
                token = doc.get("token") or doc.get("access_token")
            if not isinstance(token, str) or not token:
                raise RegistryError(f"{self.label}: the token service {realm_host} sent no token")
            return token

    # ----------------------------------------------------------------- reads

    def read_capped(self, resp: requests.Response, what: str) -> bytes:
        buf = bytearray()
        try:
            for chunk in resp.iter_content(64 << 10):
                buf += chunk
                if len(buf) > MAX_JSON_BYTES:
                    raise ImageFormatError(
                        f"{self.label}: {what} is larger than the {MAX_JSON_BYTES} bytes "
                        "allowed for image metadata"
                    )
        except InputError:
            raise
        except Exception as e:  # noqa: BLE001 - requests / urllib3 errors mid-body
            raise RegistryError(
                f"{self.label}: {what}: the connection broke: {short_exc(e)}"
            ) from None
        finally:
            resp.close()
        return bytes(buf)

    def get_manifest(self, reference: str) -> tuple[bytes, str | None, str]:
        """(body, media type, digest) of manifest ``reference`` (tag or digest), digest-checked."""
        repo = self.ref.repository
        what = (
            f"manifest {repo}:{reference}"
            if ":" not in reference
            else f"manifest {repo}@{reference}"
        )

        def missing(detail: str) -> InputError:
            if "NAME_UNKNOWN" in detail:
                return SourceNotFoundError(f"{self.label}: repository {repo!r} not found{detail}")
            kind = "digest" if reference.startswith("sha256:") else "tag"
            return SourceNotFoundError(f"{self.label}: {repo} has no {kind} {reference!r}{detail}")

        try:
            resp = self.request(
                "GET",
                f"/v2/{repo}/manifests/{reference}",
                what=what,
                headers={"Accept": MANIFEST_ACCEPT},
                stream=True,
                not_found=missing,
            )
        except SourceNotFoundError as e:
            raise self._explain_missing(e, reference) from None
        header_digest = resp.headers.get("Docker-Content-Digest")
        ctype = resp.headers.get("Content-Type", "").split(";")[0].strip() or None
        body = self.read_capped(resp, what)
        digest = sha256_digest(body)
        want = reference if reference.startswith("sha256:") else None
        if want is None and header_digest and DIGEST_RE.match(header_digest):
            want = header_digest
        if want is not None and digest != want:
            raise DigestMismatchError(
                f"{self.label}: {what}: digest mismatch: expected {want}, got {digest}"
            )
        return body, ctype, digest

    def _explain_missing(self, e: SourceNotFoundError, reference: str) -> SourceNotFoundError:
        """Tell an unknown repository from an unknown tag (the tag list says which)."""
        import requests

        repo = self.ref.repository
        if "NAME_UNKNOWN" in str(e) or reference.startswith("sha256:"):
            return e
        try:
            resp = self._session.get(
                self.base() + f"/v2/{repo}/tags/list",
                headers={"Authorization": self._auth_header} if self._auth_header else {},
                timeout=(CONNECT_TIMEOUT_S, 30),
            )
        except requests.exceptions.RequestException:
            return e
        try:
            if resp.status_code == 404:
                return SourceNotFoundError(
                    f"{self.label}: repository {repo!r} not found (no tag {reference!r} either)"
                )
            if resp.status_code == 200:
                doc = loads_json(resp.content)
                tags = doc.get("tags") if isinstance(doc, dict) else None
                if isinstance(tags, list) and tags:
                    shown = ", ".join(str(t) for t in tags[:10]) + (
                        ", ..." if len(tags) > 10 else ""
                    )
                    return SourceNotFoundError(
                        f"{self.label}: {repo} has no tag {reference!r} (tags: {shown})"
                    )
                if isinstance(tags, list) or tags is None:
                    return SourceNotFoundError(
                        f"{self.label}: repository {repo!r} not found (it has no tags)"
                    )
        except ValueError:
            pass
        finally:
            resp.close()
        return e

    def get_blob_small(self, digest: str, what: str) -> bytes:
        repo = self.ref.repository

        def missing(detail: str) -> InputError:
            return ImageFormatError(f"{self.label}: {what} {digest} is missing from {repo}{detail}")

        resp = self.request(
            "GET",
            f"/v2/{repo}/blobs/{digest}",
            what=f"{what} {digest}",
            headers={"Accept-Encoding": "identity"},
            stream=True,
            not_found=missing,
        )
        return self.read_capped(resp, f"{what} {digest}")

    def open_blob(self, digest: str, what: str, *, offset: int = 0) -> requests.Response:
        repo = self.ref.repository
        headers = {"Accept-Encoding": "identity"}
        if offset:
            headers["Range"] = f"bytes={offset}-"

        def missing(detail: str) -> InputError:
            return ImageFormatError(f"{self.label}: {what} is missing from {repo}{detail}")

        return self.request(
            "GET",
            f"/v2/{repo}/blobs/{digest}",
            what=what,
            headers=headers,
            stream=True,
            ok=(200, 206),
            not_found=missing,
        )
