"""Image references as Docker spells them (``ubuntu`` is
``docker.io/library/ubuntu:latest``), registry host names, and the registry's error.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ...errors import (
    InputError,
    UsageError,
)
from ..image import (
    split_reference,
)

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)


DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "registry-1.docker.io"
DOCKER_HUB_AUTH_KEY = "https://index.docker.io/v1/"


_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REPO_RE = re.compile(rf"^{_COMPONENT}(?:/{_COMPONENT})*$")
_HOST_RE = re.compile(r"^(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*|\[[0-9A-Fa-f:.]+\])(?::[0-9]+)?$")
_TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
DIGEST_RE = re.compile(r"^sha256:[a-f0-9]{64}$")


class RegistryError(InputError):
    """The registry refused us, or could not be reached / understood (exit 3)."""


def normalize_host(host: str) -> str:
    """``https://Foo:5000/`` -> ``foo:5000``; Docker Hub's names -> ``docker.io``."""
    h = host.strip()
    if "://" in h:
        h = urlsplit(h).netloc or h.split("://", 1)[1]
    h = h.split("/", 1)[0].lower()
    if h in ("index.docker.io", DOCKER_HUB_API, "registry.hub.docker.com"):
        return DOCKER_HUB
    return h


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
        if digest is not None and not DIGEST_RE.match(digest):
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
