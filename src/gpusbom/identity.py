"""What a scanned target is called in every SBOM: root bom-ref, name, version, purl.

One place decides the identity of the thing an SBOM describes, so CycloneDX,
SPDX 2.3, SPDX 3.0 and the inventory agree, and so the same image read from a
registry, a Docker Engine, a ``docker save`` archive, an OCI archive or an OCI
layout gets the same root.

Images (purl spec, ``oci`` type):

- **root bom-ref** ``target:sha256:<config digest>``: the image ID. It is the one
  digest every form of an image carries unchanged. The manifest digest is not: a
  registry manifest names compressed layers and changes when they are recompressed,
  ``docker save`` archives carry no manifest, and a Docker Engine only knows one
  for an image it pulled.
- **name**: the last path segment of the repository (``nvcr.io/nvidia/cuda`` ->
  ``cuda``), lower-cased; an OCI layout whose ``ref.name`` is a bare word uses that
  word (``skopeo copy ... oci:DIR:NAME``); failing both ``image-<12 hex of the image
  ID>``. Never a local path.
- **version** and purl version: the manifest digest when the source has one, else
  the image ID (``gpusbom:image:version-digest`` says which).
- **purl** ``pkg:oci/NAME@VERSION?repository_url=REGISTRY/REPO&tag=TAG&arch=ARCH``;
  ``repository_url`` only when the reference names a registry host.

Hosts: ``target:host:<hostname>:<first 16 hex of sha256(machine-id)>`` (the raw
machine-id is a secret-ish value, systemd asks not to expose it). Input SBOMs: the
subject they describe (an image identity when it is one), else its name and version.
Directories: ``target:dir:<base name>``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from packageurl import PackageURL

from .model import Component, Target

_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_SEGMENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")


@dataclass(frozen=True)
class TargetIdentity:
    """How the SBOM names its subject (every writer uses the same one)."""

    root_ref: str
    name: str
    version: str | None
    purl: str | None = None
    #: ``gpusbom:``-less property pairs that say where the identity came from
    properties: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    #: the digest the root is anchored to (image ID), or None
    anchor: str | None = None

    @property
    def document_name(self) -> str:
        """The SPDX document name: ``NAME@VERSION`` (``NAME`` without a version)."""
        return f"{self.name}@{self.version}" if self.version else self.name


def split_repository(ref: str) -> tuple[str | None, str]:
    """``localhost:5000/a/b:tag`` -> (``localhost:5000``, ``a/b``); the registry is None
    when the first component is not a host (Docker's rule: a dot, a colon or localhost)."""
    ref = ref.split("@", 1)[0]
    head, sep, tail = ref.partition("/")
    registry: str | None = None
    if sep and ("." in head or ":" in head or head == "localhost"):
        registry, ref = head, tail
    last = ref.rsplit("/", 1)[-1]
    if ":" in last:
        ref = ref[: len(ref) - len(last)] + last.split(":", 1)[0]
    return registry, ref


def _tag_of(ref: str) -> str | None:
    last = ref.split("@", 1)[0].rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else None


def _short(digest: str | None) -> str:
    return (digest or "").split(":", 1)[-1][:12]


def _repository(t: Target) -> str | None:
    """The repository reference (with registry when known) the image goes by, if any."""
    if t.name:
        return t.name
    for tag in t.tags:
        if "/" in tag or ":" in tag:
            return tag
    return None


def image_identity(t: Target) -> TargetIdentity:
    anchor = t.image_id if t.image_id and _DIGEST.fullmatch(t.image_id) else None
    repo = _repository(t)
    registry, path = split_repository(repo) if repo else (None, "")
    name = path.rsplit("/", 1)[-1].lower() if path else ""
    tags = [x for x in (_tag_of(tag) if (":" in tag or "/" in tag) else tag for tag in t.tags) if x]
    if not name and t.source in ("oci", "oci-archive") and len(t.tags) == 1:
        # an OCI layout's ref.name that is one bare word names the image (skopeo oci:DIR:NAME)
        word = t.tags[0].lower()
        if _SEGMENT.fullmatch(word):
            name, tags = word, []
    if not name or not _SEGMENT.fullmatch(name):
        name = f"image-{_short(anchor or t.manifest_digest)}" if (anchor or t.manifest_digest) \
            else "image"
    version = t.manifest_digest or anchor
    props: list[tuple[str, str]] = []
    if path:
        props.append(("image:repository", f"{registry}/{path}" if registry else path))
    props.append(("image:version-digest", "manifest" if t.manifest_digest else "config"))
    purl: str | None = None
    if version:
        qualifiers: dict[str, str] = {}
        if registry and path:
            qualifiers["repository_url"] = f"{registry}/{path}"
        if tags:
            qualifiers["tag"] = tags[0]
        if t.platform:
            parts = t.platform.split("/")
            if len(parts) >= 2 and parts[1]:
                qualifiers["arch"] = parts[1]
        try:
            purl = PackageURL(type="oci", name=name, version=version,
                              qualifiers=qualifiers).to_string()
        except ValueError:
            purl = None
    root = f"target:{anchor or t.manifest_digest or 'image:' + name}"
    return TargetIdentity(root_ref=root, name=name, version=version, purl=purl,
                          properties=tuple(props), anchor=anchor)


def machine_id_hash(machine_id: str) -> str:
    """The first 16 hex of sha256 of a machine-id: stable per machine, not the id itself."""
    return hashlib.sha256(machine_id.strip().encode()).hexdigest()[:16]


def host_identity(t: Target) -> TargetIdentity:
    name = t.name or "host"
    mid = t.host_id
    root = f"target:host:{name}" + (f":{mid}" if mid else "")
    props = (("host:machine-id-sha256", mid),) if mid else ()
    return TargetIdentity(root_ref=root, name=name, version=None, properties=props)


def sbom_identity(t: Target) -> TargetIdentity:
    """An input SBOM's subject: an image identity when it names an image by digest, else
    the subject's own purl (``pkg:container/...`` from cdxgen), else its name@version."""
    if t.kind == "image" and (t.image_id or t.manifest_digest):
        return image_identity(t)
    name = t.name or "sbom"
    version = t.image_id or (t.tags[0] if t.tags else None)
    if t.subject_purl:
        return TargetIdentity(root_ref=f"target:{t.subject_purl}", name=name, version=version,
                              purl=t.subject_purl)
    root = f"target:sbom:{name}" + (f"@{version}" if version else "")
    return TargetIdentity(root_ref=root, name=name, version=version)


def directory_identity(t: Target) -> TargetIdentity:
    name = t.name or "rootfs"
    return TargetIdentity(root_ref=f"target:dir:{name}", name=name, version=None)


def target_identity(t: Target) -> TargetIdentity:
    """The identity of any target (dispatch on its kind and source)."""
    if t.source == "sbom":
        return sbom_identity(t)
    if t.kind == "image":
        return image_identity(t)
    if t.kind == "host":
        return host_identity(t)
    if t.kind == "directory":
        return directory_identity(t)
    name = t.name or t.kind
    return TargetIdentity(root_ref=f"target:{t.kind}:{name}", name=name, version=None)


# ------------------------------------------------------------------ component CPEs

def product_rows(c: Component) -> list[Any]:
    """The catalog rows of the GPU products a component provides (``products``).
    Package-name matches are left out on
    purpose: ``libdrm-amdgpu1`` is listed under the amdgpu driver for advisories, but its
    version is libdrm's, and a driver CPE with it would claim a driver version."""
    from . import catalog

    rows: list[Any] = []
    for p in c.products:
        rows.extend(catalog.by_collector(p.stack, p.name))
    return list(dict.fromkeys(rows))


def fill_product_cpes(components: list[Component]) -> None:
    """Give every GPU-product component without a CPE the one NVD names its product by.

    The CPE is the first ``cpe`` of the component's catalog row, with the product
    version (``catalog.product_version``: ``12.4.127`` of ``12.4.127-1``). A row whose
    CPE is not confirmed from NVD records is marked ``cpe_guessed: true`` in the
    catalog, and the component then says so (``gpusbom:cpe:guessed``). Components
    without a version get no CPE: a versionless CPE matches every CVE of the product.
    """
    from . import catalog

    for c in components:
        if c.cpe or not c.version:
            continue
        for row in product_rows(c):
            if not row.cpe:
                continue
            version = catalog.product_version(row, c.ecosystem, c.version)
            if not version:
                continue
            c.cpe = catalog.cpe23(row.cpe[0], version)
            if row.extra.get("cpe_guessed"):
                c.properties["cpe:guessed"] = "true"
            break
