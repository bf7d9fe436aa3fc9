"""``registry:REF`` (and bare references the Docker Engine does not have): an OCI registry.

Speaks the OCI distribution API with ``requests``, with no daemon and nothing staged on
disk: manifests and configs are small JSON documents (capped), and every layer blob is
streamed once, straight from the HTTP response, through ``fsview.layer.read_layer``,
which verifies the blob digest while it reads. Layers are fetched in parallel (a few
threads; decompression and hashing release the GIL).

* References follow Docker's rules: ``ubuntu`` is ``docker.io/library/ubuntu:latest``, and
  Docker Hub's API lives at ``registry-1.docker.io``. A first component with a ``.`` or a
  ``:``, or ``localhost``, is a registry host.
* Authentication: anonymous, ``Basic``, and the bearer-token flow driven by the
  ``WWW-Authenticate`` challenge (including the OAuth2 refresh-token form when the Docker
  config holds an ``identitytoken``). Credentials come from ``RegistryOptions`` (the CLI's
  ``--username`` / ``--password-stdin``), else from the Docker config
  (``$DOCKER_CONFIG/config.json`` or ``~/.docker/config.json``): ``credHelpers``, then
  ``credsStore`` (``docker-credential-NAME get``, the registry host on stdin), then ``auths``.
  Secrets never appear in messages or logs.
* TLS is verified (``REQUESTS_CA_BUNDLE`` and Docker's ``certs.d/HOST/ca.crt`` are honoured);
  ``--insecure-registry HOST`` accepts an unverified certificate or plain HTTP for HOST.
* Requests are retried with backoff on 429 / 5xx and on dropped connections; a layer whose
  connection drops mid-stream resumes with a ``Range`` request (or skips what it already
  read when the registry ignores ranges), so the layer's reader sees one unbroken stream.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit

from ..errors import (
    DigestMismatchError,
    ImageFormatError,
    InputError,
    LayerError,
    SourceNotFoundError,
    UsageError,
)
from ..fsview.types import LayerIndex
from .base import ReadContext, Source, SourceResult
from .image import (
    INDEX_TYPES,
    MANIFEST_TYPES,
    MAX_JSON_BYTES,
    BlobStore,
    ImagePlan,
    LayerPlan,
    LayersCancelled,
    check_manifest_type,
    check_platform,
    choose_manifest,
    is_index,
    make_target,
    parse_json,
    plan_from_manifest,
    read_layers_parallel,
    sha256_digest,
    split_reference,
    stream_layer,
)

if TYPE_CHECKING:
    import requests

log = logging.getLogger(__name__)

DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "registry-1.docker.io"
DOCKER_HUB_AUTH_KEY = "https://index.docker.io/v1/"

#: parallel layer downloads
PARALLEL_LAYERS = 3
#: attempts for one request (429 / 5xx / dropped connections) before giving up
MAX_ATTEMPTS = 5
#: first backoff delay (doubles; a Retry-After header is honoured up to RETRY_AFTER_MAX)
BACKOFF_S = 0.25
RETRY_AFTER_MAX = 30.0
#: a layer stream that read this much since its last drop starts its retry count afresh
RESET_RETRIES_AFTER = 8 << 20
CONNECT_TIMEOUT_S = 15.0
READ_TIMEOUT_S = 120.0
HELPER_TIMEOUT_S = 30.0
READ_CHUNK = 1 << 20

MANIFEST_ACCEPT = (
    "application/vnd.oci.image.index.v1+json, "
    "application/vnd.docker.distribution.manifest.list.v2+json, "
    "application/vnd.oci.image.manifest.v1+json, "
    "application/vnd.docker.distribution.manifest.v2+json"
)

_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REPO_RE = re.compile(rf"^{_COMPONENT}(?:/{_COMPONENT})*$")
_HOST_RE = re.compile(r"^(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*|\[[0-9A-Fa-f:.]+\])(?::[0-9]+)?$")
_TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_DIGEST_RE = re.compile(r"^sha256:[a-f0-9]{64}$")


class RegistryError(InputError):
    """The registry refused us, or could not be reached / understood (exit 3)."""


class _Cancelled(LayersCancelled):
    pass


# --------------------------------------------------------------------------- options


class Secret:
    """A password or token that never shows itself in repr / str / logs."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret(<hidden>)"

    __str__ = __repr__

    def __bool__(self) -> bool:
        return bool(self._value)


@dataclass
class RegistryOptions:
    """What the CLI passes through: explicit credentials and insecure hosts."""

    username: str | None = None
    password: Secret | None = field(default=None, repr=False)
    insecure: tuple[str, ...] = ()
    parallel: int = PARALLEL_LAYERS
    docker_config: str | None = (
        None  # directory holding config.json; None: $DOCKER_CONFIG / ~/.docker
    )

    def __post_init__(self) -> None:
        if isinstance(self.password, str):
            self.password = Secret(self.password)
        if (self.username is None) != (self.password is None):
            raise UsageError("registry credentials need both a username and a password")
        self.insecure = tuple(normalize_host(h) for h in self.insecure)


def normalize_host(host: str) -> str:
    """``https://Foo:5000/`` -> ``foo:5000``; Docker Hub's names -> ``docker.io``."""
    h = host.strip()
    if "://" in h:
        h = urlsplit(h).netloc or h.split("://", 1)[1]
    h = h.split("/", 1)[0].lower()
    if h in ("index.docker.io", DOCKER_HUB_API, "registry.hub.docker.com"):
        return DOCKER_HUB
    return h


# --------------------------------------------------------------------------- references


@dataclass(frozen=True)
class ImageRef:
    registry: str  # "docker.io", "nvcr.io", "127.0.0.1:5000"
    repository: str  # "library/ubuntu"
    tag: str | None
    digest: str | None

    @classmethod
    def parse(cls, text: str) -> ImageRef:
        if not text or any(c.isspace() for c in text):
            raise UsageError(f"invalid image reference {text!r}")
        name, tag, digest = split_reference(text)
        if digest is not None and not _DIGEST_RE.match(digest):
            raise UsageError(f"invalid image reference {text!r}: digest must be sha256:<64 hex>")
        if tag is not None and not _TAG_RE.match(tag):
            raise UsageError(f"invalid image reference {text!r}: bad tag {tag!r}")
        first, sep, rest = name.partition("/")
        if sep and ("." in first or ":" in first or first == "localhost" or first != first.lower()):
            if not _HOST_RE.match(first):
                raise UsageError(f"invalid image reference {text!r}: bad registry host {first!r}")
            registry, repo = normalize_host(first), rest
        else:
            registry, repo = DOCKER_HUB, name
        if registry == DOCKER_HUB and "/" not in repo:
            repo = "library/" + repo
        if not _REPO_RE.match(repo) or len(repo) > 255:
            raise UsageError(
                f"invalid image reference {text!r}: repository {repo!r} must be lowercase "
                "path components of letters, digits and separators"
            )
        if tag is None and digest is None:
            tag = "latest"
        return cls(registry, repo, tag, digest)

    @property
    def api_host(self) -> str:
        return DOCKER_HUB_API if self.registry == DOCKER_HUB else self.registry

    @property
    def name(self) -> str:
        return f"{self.registry}/{self.repository}"

    @property
    def reference(self) -> str:
        """What the manifest endpoint takes: the digest when pinned, else the tag."""
        return self.digest or self.tag or "latest"

    def __str__(self) -> str:
        s = self.name
        if self.tag:
            s += ":" + self.tag
        if self.digest:
            s += "@" + self.digest
        return s


# --------------------------------------------------------------------------- credentials


@dataclass
class Credentials:
    username: str | None = None
    password: Secret | None = field(default=None, repr=False)
    identity_token: Secret | None = field(default=None, repr=False)
    origin: str = ""  # where they came from, for messages ("--username", "config.json auths")


def docker_config_dir(explicit: str | None = None) -> str:
    return (
        explicit
        or os.environ.get("DOCKER_CONFIG")
        or os.path.join(os.path.expanduser("~"), ".docker")
    )


def _auth_keys(registry: str) -> set[str]:
    if registry == DOCKER_HUB:
        return {DOCKER_HUB, "index.docker.io", DOCKER_HUB_API, "registry.hub.docker.com"}
    return {registry}


def _helper_server(registry: str) -> str:
    return DOCKER_HUB_AUTH_KEY if registry == DOCKER_HUB else registry


def run_credential_helper(name: str, server: str, secrets: list[str]) -> Credentials | None:
    """``docker-credential-NAME get`` with ``server`` on stdin; None when it has nothing."""
    if not re.match(r"^[A-Za-z0-9._-]+$", name):
        raise RegistryError(f"invalid docker credential helper name {name!r}")
    exe = shutil.which(f"docker-credential-{name}")
    if exe is None:
        raise RegistryError(
            f"the Docker config names credential helper {name!r} for {server}, but "
            f"docker-credential-{name} is not on PATH"
        )
    try:
        proc = subprocess.run(  # noqa: S603 - the credential helper docker's config names, no shell
            [exe, "get"],
            input=server.encode(),
            capture_output=True,
            timeout=HELPER_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RegistryError(
            f"docker-credential-{name} failed for {server}: {type(e).__name__}"
        ) from None
    if proc.returncode != 0:
        out = (proc.stdout or b"").decode("utf-8", "replace").strip()
        if "credentials not found" in out.lower() or not out:
            return None
        # the helper's message, never its output when it looks like JSON (it may hold secrets)
        shown = out.splitlines()[0][:200] if not out.startswith("{") else "(output hidden)"
        raise RegistryError(
            f"docker-credential-{name} failed for {server} (exit {proc.returncode}): "
            f"{_scrub(shown, secrets)}"
        )
    try:
        doc = json.loads(proc.stdout.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise RegistryError(
            f"docker-credential-{name} returned something that is not JSON for {server}"
        ) from None
    if not isinstance(doc, dict):
        raise RegistryError(f"docker-credential-{name} returned unexpected JSON for {server}")
    user, secret = doc.get("Username"), doc.get("Secret")
    if not isinstance(secret, str) or not secret:
        return None
    origin = f"docker-credential-{name}"
    if user == "<token>":
        return Credentials(identity_token=Secret(secret), origin=origin)
    return Credentials(
        username=user if isinstance(user, str) else "", password=Secret(secret), origin=origin
    )


def load_credentials(registry: str, opts: RegistryOptions) -> Credentials | None:
    """Credentials for ``registry``: the options', else the Docker config's (helpers first)."""
    if opts.username is not None and opts.password is not None:
        return Credentials(opts.username, opts.password, origin="--username")
    path = os.path.join(docker_config_dir(opts.docker_config), "config.json")
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_JSON_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as e:
        log.debug("cannot read %s: %s", path, e.strerror)
        return None
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise RegistryError(f"{path} is not valid JSON") from None
    if not isinstance(doc, dict):
        raise RegistryError(f"{path}: expected a JSON object")
    keys = _auth_keys(registry)
    server = _helper_server(registry)
    helpers = doc.get("credHelpers")
    if isinstance(helpers, dict):
        for k, helper in helpers.items():
            if isinstance(k, str) and normalize_host(k) in keys and isinstance(helper, str):
                log.debug("credentials for %s: credential helper %s", registry, helper)
                return run_credential_helper(helper, server, [])
    auths = doc.get("auths")
    entry: dict[str, Any] | None = None
    if isinstance(auths, dict):
        for k, v in auths.items():
            if isinstance(k, str) and normalize_host(k) in keys and isinstance(v, dict):
                entry = v
                break
    store = doc.get("credsStore")
    if isinstance(store, str) and store:
        log.debug("credentials for %s: credential store %s", registry, store)
        creds = run_credential_helper(store, server, [])
        if creds is not None:
            return creds
    if entry is None:
        return None
    return _from_auth_entry(entry, path)


def _from_auth_entry(entry: dict[str, Any], path: str) -> Credentials | None:
    origin = f"{path} auths"
    token = entry.get("identitytoken")
    if isinstance(token, str) and token:
        return Credentials(identity_token=Secret(token), origin=origin)
    auth = entry.get("auth")
    if isinstance(auth, str) and auth:
        try:
            user, sep, pw = base64.b64decode(auth, validate=False).decode("utf-8").partition(":")
        except (ValueError, UnicodeDecodeError):
            raise RegistryError(f"{path}: an auths entry has an invalid 'auth' value") from None
        if not sep:
            raise RegistryError(f"{path}: an auths entry's 'auth' is not base64 of user:password")
        return Credentials(user, Secret(pw), origin=origin)
    name, secret = entry.get("username"), entry.get("password")
    if isinstance(name, str) and isinstance(secret, str) and secret:
        return Credentials(name, Secret(secret), origin=origin)
    return None


def _scrub(text: str, secrets: list[str]) -> str:
    for s in secrets:
        if s and len(s) >= 3:
            text = text.replace(s, "***")
    return text


# --------------------------------------------------------------------------- challenges

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


# --------------------------------------------------------------------------- client


def _backoff(attempt: int, retry_after: str | None = None) -> float:
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


def _short_exc(e: BaseException) -> str:
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
            log.debug("%s: https failed (%s); trying http", self.host, _short_exc(e))
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
    ) -> requests.Response:
        """``method`` ``path``; authenticates on 401 and retries 429 / 5xx / dropped connections."""
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
                    f"{self.label}: TLS verification failed ({_short_exc(e)}); trust its CA "
                    f"(REQUESTS_CA_BUNDLE or certs.d/{self.host}/ca.crt) or pass "
                    f"--insecure-registry {self.ref.registry}"
                ) from None
            except requests.exceptions.ConnectionError as e:
                # refused / unknown host: not worth retrying; resets and timeouts are
                fatal = "NewConnectionError" in repr(e) or "NameResolutionError" in repr(e)
                if fatal or attempt >= MAX_ATTEMPTS:
                    raise RegistryError(
                        f"{self.label}: cannot reach {self.host} for {what}: "
                        f"{_scrub(_short_exc(e), self._secrets())}"
                        + ("" if fatal else f" (after {attempt} attempts)")
                    ) from None
                delay = _backoff(attempt)
                log.debug("%s %s: %s; retrying in %.2fs", method, path, _short_exc(e), delay)
                time.sleep(delay)
                continue
            except requests.exceptions.Timeout as e:
                if attempt >= MAX_ATTEMPTS:
                    raise RegistryError(
                        f"{self.label}: {what}: timed out after {attempt} attempts ({_short_exc(e)})"
                    ) from None
                time.sleep(_backoff(attempt))
                continue
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
                delay = _backoff(attempt, retry_after)
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
            doc = json.loads(body.decode("utf-8")) if body else None
        except Exception:  # noqa: BLE001 - best effort
            doc = None
        finally:
            resp.close()
        errs = doc.get("errors") if isinstance(doc, dict) else None
        if isinstance(errs, list) and errs and isinstance(errs[0], dict):
            code, msg = errs[0].get("code"), errs[0].get("message")
            text = " ".join(str(x) for x in (code, msg) if x)
            if text:
                return ": " + _scrub(text.splitlines()[0][:200], self._secrets())
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
        if not realm or urlsplit(realm).scheme not in ("http", "https"):
            raise RegistryError(f"{self.label}: bearer challenge without a usable realm")
        realm_host = normalize_host(urlsplit(realm).netloc)
        scope = f"repository:{self.ref.repository}:pull"
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
                    f"({_short_exc(e)})"
                ) from None
            except (requests.exceptions.ConnectionError, requests.exceptions.Timeout) as e:
                if attempt >= MAX_ATTEMPTS or "NewConnectionError" in repr(e):
                    raise RegistryError(
                        f"{self.label}: cannot reach the token service {realm_host}: "
                        f"{_scrub(_short_exc(e), self._secrets())}"
                    ) from None
                time.sleep(_backoff(attempt))
                continue
            status = resp.status_code
            log.debug("token %s -> %d", realm_host, status)
            if (status == 429 or status >= 500) and attempt < MAX_ATTEMPTS:
                ra = resp.headers.get("Retry-After")
                resp.close()
                time.sleep(_backoff(attempt, ra))
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
                doc = resp.json()
            except ValueError:
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
                f"{self.label}: {what}: the connection broke: {_short_exc(e)}"
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
        if want is None and header_digest and _DIGEST_RE.match(header_digest):
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
                doc = resp.json()
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


# --------------------------------------------------------------------------- blob stream


class BlobStream(io.RawIOBase):
    """A layer blob as one unbroken raw stream; dropped connections resume transparently.

    After a drop the blob is asked for again from the current offset (``Range``); a
    registry that ignores the range answers 200, and the bytes already read are skipped.
    Either way the reader upstream sees each byte once, in order.
    """

    def __init__(
        self,
        client: RegistryClient,
        digest: str,
        size: int | None,
        where: str,
        cancel: threading.Event,
    ) -> None:
        self._client = client
        self._digest = digest
        self._size = size
        self._where = where
        self._cancel = cancel
        self._resp: Any = None
        self._raw: Any = None
        self.pos = 0
        self.drops = 0
        self._fails = 0
        self._since_fail = 0

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        if self._resp is not None:
            self._resp.close()
            self._resp = self._raw = None
        super().close()

    def _open(self) -> None:
        resp = self._client.open_blob(self._digest, self._where, offset=self.pos)
        raw = resp.raw
        if self.pos and resp.status_code == 206:
            cr = resp.headers.get("Content-Range", "")
            m = re.match(r"bytes (\d+)-", cr)
            if not m or int(m.group(1)) != self.pos:
                resp.close()
                raise LayerError(f"{self._where}: the registry answered a bad range ({cr!r})")
        elif self.pos:  # 200: the whole blob again; skip what we have
            left = self.pos
            while left > 0:
                chunk = raw.read(min(READ_CHUNK, left), decode_content=False)
                if not chunk:
                    resp.close()
                    raise ConnectionError("connection closed while skipping to the resume offset")
                left -= len(chunk)
        self._resp, self._raw = resp, raw

    def _drop(self, why: str) -> None:
        if self._resp is not None:
            self._resp.close()
        self._resp = self._raw = None
        self.drops += 1
        if self._since_fail >= RESET_RETRIES_AFTER:
            self._fails = 0
        self._fails += 1
        self._since_fail = 0
        total = f" of {self._size}" if self._size is not None else ""
        if self._fails >= MAX_ATTEMPTS:
            raise LayerError(
                f"{self._where}: the registry connection dropped {self._fails} times in a row "
                f"(last at byte {self.pos}{total}: {why}); giving up"
            )
        delay = _backoff(self._fails)
        log.debug(
            "%s: connection dropped at byte %d (%s); resuming in %.2fs",
            self._where,
            self.pos,
            why,
            delay,
        )
        time.sleep(delay)

    def readinto(self, b: Any) -> int:
        if len(b) == 0:
            return 0
        while True:
            if self._cancel.is_set():
                raise _Cancelled()
            try:
                if self._raw is None:
                    self._open()
                data = self._raw.read(len(b), decode_content=False)
            except InputError:
                raise
            except Exception as e:  # noqa: BLE001 - resets, IncompleteRead, timeouts
                self._drop(_short_exc(e))
                continue
            n = len(data)
            if n == 0:
                if self._size is not None and self.pos < self._size:
                    self._drop(f"connection closed after {self.pos} bytes")
                    continue
                return 0
            b[:n] = data
            self.pos += n
            self._since_fail += n
            return n


# --------------------------------------------------------------------------- store, source


class RegistryStore(BlobStore):
    """Blob paths (``blobs/sha256/<hex>``) served by a registry repository."""

    parallel_safe = True  # each layer is its own HTTP stream

    def __init__(self, client: RegistryClient, label: str) -> None:
        self.client = client
        self.label = label
        self.cancel = threading.Event()

    def exists(self, path: str) -> bool:
        # blobs are asked for when needed; a missing one is a clear error then
        return path.startswith("blobs/sha256/")

    def read_small(self, path: str, what: str) -> bytes:
        digest = _digest_of(path)
        return self.client.get_blob_small(digest, what.split(" ")[0])

    def read_layer(self, path: str, layer: LayerPlan, total: int, ctx: ReadContext) -> LayerIndex:
        digest = _digest_of(path)
        where = f"{self.label}: layer {layer.index} blob {digest}"
        stream = BlobStream(self.client, digest, layer.size, where, self.cancel)
        try:
            with io.BufferedReader(stream, READ_CHUNK) as f:
                return stream_layer(f, layer, ctx, where, layer.size)
        finally:
            stream.close()

    def close(self) -> None:
        self.cancel.set()
        self.client.close()


def _digest_of(path: str) -> str:
    return "sha256:" + path.rsplit("/", 1)[-1]


class RegistrySource(Source):
    """``registry:[HOST[:PORT]/]REPO[:TAG][@sha256:DIGEST]``."""

    scheme = "registry"

    def __init__(
        self,
        reference: str,
        location: str,
        options: RegistryOptions | None = None,
    ) -> None:
        super().__init__(reference, location)
        self.options = options or RegistryOptions()
        self.ref = ImageRef.parse(location)
        self._client: RegistryClient | None = None
        self._top: tuple[bytes, str | None, str] | None = None

    @property
    def label(self) -> str:
        return f"registry:{self.ref}"

    def client(self) -> RegistryClient:
        if self._client is None:
            self._client = RegistryClient(self.ref, self.options)
        return self._client

    def probe(self) -> str | None:
        """None when the registry has the reference, else why not (one line)."""
        try:
            self._top = self.client().get_manifest(self.ref.reference)
        except InputError as e:
            return str(e)
        return None

    def read(self, ctx: ReadContext) -> SourceResult:
        client = self.client()
        store = RegistryStore(client, self.label)
        try:
            plan = self._plan(client, store, ctx)
            check_platform(plan, ctx, self.label)
            layers = read_layers_parallel(store, plan, ctx, self.options.parallel)
        finally:
            store.close()
            self._client = None
        return SourceResult(
            target=make_target(self.reference, "registry", plan, layers), layers=layers
        )

    def _plan(self, client: RegistryClient, store: RegistryStore, ctx: ReadContext) -> ImagePlan:
        body, ctype, digest = self._top or client.get_manifest(self.ref.reference)
        self._top = None
        label = self.label
        for _ in range(8):
            where = f"{label}: manifest {digest}"
            doc = parse_json(body, where)
            if not isinstance(doc, dict):
                raise ImageFormatError(f"{where}: expected a JSON object")
            mt = doc.get("mediaType") if isinstance(doc.get("mediaType"), str) else None
            mt = mt or (ctype if ctype in INDEX_TYPES or ctype in MANIFEST_TYPES else None)
            if is_index(mt, doc):
                desc = choose_manifest(doc, ctx, label, f"{label}: image index {digest}")
                want = desc["digest"]
                body, ctype, digest = client.get_manifest(want)
                size = desc.get("size")
                if isinstance(size, int) and size != len(body):
                    raise DigestMismatchError(
                        f"{label}: manifest {want}: size {len(body)} differs from the index's {size}"
                    )
                continue
            check_manifest_type(mt, label, digest)
            plan = plan_from_manifest(store, digest, doc, ctx)
            plan.name = self.ref.name
            plan.tags = [self.ref.tag] if self.ref.tag else []
            return plan
        raise ImageFormatError(f"{label}: image indexes nested too deeply")
