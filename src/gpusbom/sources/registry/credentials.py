"""What a pull is allowed to use: explicit credentials and insecure hosts
(``RegistryOptions``), else the Docker config's ``credHelpers``, ``credsStore`` and ``auths``.
Secrets never appear in messages or logs.
"""

from __future__ import annotations

import base64
import logging
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...errors import (
    UsageError,
)
from ...safetext import loads_json
from ..image import (
    MAX_JSON_BYTES,
)

if TYPE_CHECKING:
    pass

from .ref import DOCKER_HUB, DOCKER_HUB_API, DOCKER_HUB_AUTH_KEY, RegistryError, normalize_host

log = logging.getLogger(__name__)


#: parallel layer downloads
PARALLEL_LAYERS = 3


HELPER_TIMEOUT_S = 30.0


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
    #: read the image's OCI referrers (attached SBOMs, VEX, attestations; ``referrers``)
    attachments: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.password, str):
            self.password = Secret(self.password)
        if (self.username is None) != (self.password is None):
            raise UsageError("registry credentials need both a username and a password")
        self.insecure = tuple(normalize_host(h) for h in self.insecure)


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
            f"{scrub(shown, secrets)}"
        )
    try:
        doc = loads_json(proc.stdout.decode("utf-8"))
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
    """Credentials for ``registry``: the options', else the Docker config's (helpers first),
    else, for NGC's registry, ``$oauthtoken`` and the NGC API key (``ngc``)."""
    if opts.username is not None and opts.password is not None:
        return Credentials(opts.username, opts.password, origin="--username")
    found = _docker_config_credentials(registry, opts)
    if found is not None:
        return found
    from .ngc import NGC_USER, ngc_settings

    ngc = ngc_settings()
    if ngc.api_key and ngc.is_ngc(registry):
        return Credentials(NGC_USER, Secret(ngc.api_key), origin=ngc.key_origin)
    return None


def _docker_config_credentials(registry: str, opts: RegistryOptions) -> Credentials | None:
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
        doc = loads_json(data.decode("utf-8"))
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


def scrub(text: str, secrets: list[str]) -> str:
    for s in secrets:
        if s and len(s) >= 3:
            text = text.replace(s, "***")
    return text
