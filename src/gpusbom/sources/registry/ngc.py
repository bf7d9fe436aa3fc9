"""NVIDIA NGC (``nvcr.io``): the API key as registry credentials.

NGC's documented login is HTTP basic / token auth with the user name ``$oauthtoken`` and an
NGC API key as the password (``docker login nvcr.io``); NIM images carry their VEX as OCI
artifacts whose subject is the image digest, which ``referrers`` reads like any other
registry's. The settings, read here and nowhere else:

* ``NGC_API_KEY`` (NVIDIA's name for the key, as the NIM documentation exports it; the
  ``ngc`` CLI's ``NGC_CLI_API_KEY`` is read when it is unset): used for the NGC registry
  when neither ``--username`` nor the Docker config has credentials for it;
* setting ``ngc_registry``: the NGC registry's host (default ``nvcr.io``; a mirror, or a
  test registry on 127.0.0.1), comma-separated for several.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from .ref import normalize_host

__all__ = ["NGC_REGISTRY", "NGC_USER", "NgcSettings", "ngc_settings"]

NGC_REGISTRY = "nvcr.io"
#: the user name NGC's registry takes with an API key
NGC_USER = "$oauthtoken"  # noqa: S105 - a fixed user name, not a secret


@dataclass(frozen=True)
class NgcSettings:
    hosts: tuple[str, ...] = (NGC_REGISTRY,)
    api_key: str | None = field(default=None, repr=False)
    key_origin: str = ""

    def is_ngc(self, registry: str) -> bool:
        return normalize_host(registry) in self.hosts


def ngc_settings(env: Mapping[str, str] | None = None) -> NgcSettings:
    """The NGC knobs from the environment (``env``: ``os.environ``)."""
    from ... import settings

    e = os.environ if env is None else env
    raw = settings.raw("ngc_registry").strip() if env is None else ""
    hosts = tuple(normalize_host(h.strip()) for h in raw.split(",") if h.strip()) or (
        NGC_REGISTRY,)
    for name in ("NGC_API_KEY", "NGC_CLI_API_KEY"):
        key = e.get(name, "").strip()
        if key:
            return NgcSettings(hosts, key, name)
    return NgcSettings(hosts)
