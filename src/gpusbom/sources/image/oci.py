"""The OCI image spec as gpusbom reads it: media types, digests and blob paths, capped JSON,
and OCI platforms (``os/arch[/variant]``; not to be confused with ``compat.GpuTarget``, a GPU
target).
"""

from __future__ import annotations

import hashlib
import platform as _platform
import re
from dataclasses import dataclass
from typing import Any

from ...errors import DigestMismatchError, ImageFormatError, SourceNotFoundError
from ...safetext import loads_json
from ..base import ReadContext

#: manifest.json, index.json, image manifests and configs larger than this are refused
MAX_JSON_BYTES = 16 << 20

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
INDEX_TYPES = frozenset({OCI_INDEX, DOCKER_LIST})
MANIFEST_TYPES = frozenset({OCI_MANIFEST, DOCKER_MANIFEST})
CONFIG_TYPES = frozenset(
    {"application/vnd.oci.image.config.v1+json", "application/vnd.docker.container.image.v1+json"}
)
LAYER_TYPES = frozenset(
    {
        "application/vnd.oci.image.layer.v1.tar",
        "application/vnd.oci.image.layer.v1.tar+gzip",
        "application/vnd.oci.image.layer.v1.tar+zstd",
        "application/vnd.oci.image.layer.nondistributable.v1.tar",
        "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
        "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd",
        "application/vnd.docker.image.rootfs.diff.tar",
        "application/vnd.docker.image.rootfs.diff.tar.gzip",
        "application/vnd.docker.image.rootfs.diff.tar.zstd",
        "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
    }
)
REF_NAME = "org.opencontainers.image.ref.name"
CONTAINERD_NAME = "io.containerd.image.name"

DIGEST_RE = re.compile(r"^sha256:[a-f0-9]{64}$")
_HEX_RE = re.compile(r"^[a-f0-9]{64}$")


# --------------------------------------------------------------------------- digests, JSON


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def check_digest(value: Any, where: str) -> str:
    """A descriptor digest, validated (it becomes a path: no ``sha256:../..``)."""
    if not isinstance(value, str) or not DIGEST_RE.match(value):
        if isinstance(value, str) and ":" in value and not value.startswith("sha256:"):
            raise ImageFormatError(f"{where}: unsupported digest algorithm in {value!r}")
        raise ImageFormatError(f"{where}: invalid digest {value!r}")
    return value


def blob_path(digest: str) -> str:
    alg, hexpart = digest.split(":", 1)
    return f"blobs/{alg}/{hexpart}"


def digest_from_name(path: str) -> str | None:
    """``blobs/sha256/<hex>``, ``<hex>.json`` or ``<hex>.tar`` name their content's digest."""
    base = path.rsplit("/", 1)[-1]
    for suffix in (".json", ".tar"):
        base = base.removesuffix(suffix)
    if _HEX_RE.match(base) and (path.startswith("blobs/sha256/") or "/" not in path):
        return "sha256:" + base
    return None


def verify(data: bytes, digest: str, where: str) -> None:
    actual = sha256_digest(data)
    if actual != digest:
        raise DigestMismatchError(f"{where}: digest mismatch: expected {digest}, got {actual}")


def parse_json(data: bytes, where: str) -> Any:
    try:
        return loads_json(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ImageFormatError(f"{where} is not valid JSON: {msg}") from None


def json_object(doc: Any, where: str) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise ImageFormatError(f"{where}: expected a JSON object, got {type(doc).__name__}")
    return doc


def str_list(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


# --------------------------------------------------------------------------- platforms

_ARCH_ALIASES = {
    "x86_64": "amd64",
    "x86-64": "amd64",
    "aarch64": "arm64",
    "armv7l": "arm",
    "armv6l": "arm",
    "i386": "386",
    "i686": "386",
    "ppc64le": "ppc64le",
    "s390x": "s390x",
    "riscv64": "riscv64",
}


@dataclass(frozen=True)
class OciPlatform:
    """An image platform (os, architecture, variant)."""

    os: str
    arch: str
    variant: str | None = None

    @classmethod
    def parse(cls, text: str) -> OciPlatform:
        parts = [p for p in text.strip().lower().split("/")]
        if len(parts) == 1 and parts[0]:  # "arm64" alone: linux
            parts = ["linux", parts[0]]
        if len(parts) not in (2, 3) or not all(parts):
            raise SourceNotFoundError(f"invalid platform {text!r}: expected os/arch[/variant]")
        return cls.make(parts[0], parts[1], parts[2] if len(parts) == 3 else None)

    @classmethod
    def make(cls, os_: str, arch: str, variant: str | None) -> OciPlatform:
        arch = _ARCH_ALIASES.get(arch, arch)
        if arch == "arm64" and variant == "v8":
            variant = None  # the default arm64 variant; "linux/arm64" and ".../v8" are one
        return cls(os_, arch, variant or None)

    @classmethod
    def from_descriptor(cls, d: Any) -> OciPlatform | None:
        if not isinstance(d, dict):
            return None
        os_, arch = d.get("os"), d.get("architecture")
        if not isinstance(os_, str) or not isinstance(arch, str) or not os_ or not arch:
            return None
        variant = d.get("variant")
        return cls.make(os_, arch, variant if isinstance(variant, str) else None)

    def matches(self, want: OciPlatform, *, exact_variant: bool) -> bool:
        if (self.os, self.arch) != (want.os, want.arch):
            return False
        if want.variant is not None or exact_variant:
            return self.variant == want.variant
        return True

    def __str__(self) -> str:
        return f"{self.os}/{self.arch}" + (f"/{self.variant}" if self.variant else "")


def host_platform() -> OciPlatform:
    """The platform images default to: Linux on this machine's architecture."""
    machine = _platform.machine().lower()
    arch = _ARCH_ALIASES.get(machine, machine)
    variant = None
    if machine.startswith("armv7"):
        variant = "v7"
    elif machine.startswith("armv6"):
        variant = "v6"
    return OciPlatform.make("linux", arch, variant)


def wanted_platform(ctx: ReadContext) -> tuple[OciPlatform, bool]:
    """(platform, explicit): the one asked for, or the host's."""
    if ctx.platform:
        return OciPlatform.parse(ctx.platform), True
    return host_platform(), False
