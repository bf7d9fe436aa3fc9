"""What every image source shares: media types, digests, platforms, and reading an image
out of a ``BlobStore`` (an OCI layout or a ``docker save`` tree, on disk or inside a tar).

A store answers three questions about paths relative to the layout root
("index.json", "blobs/sha256/<hex>", "<id>/layer.tar"): does it exist, give me its
bytes (small JSON only, capped), and stream it through ``read_layer``. The two readers
here (``plan_oci`` for OCI layouts, ``plan_docker`` for ``manifest.json``) turn a store
into an ``ImagePlan``; ``read_layers`` then streams the layers it lists, in order.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import platform as _platform
import re
import threading
from abc import ABC, abstractmethod
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, fields, replace
from typing import Any, BinaryIO

from ..errors import DigestMismatchError, ImageFormatError, SourceNotFoundError
from ..fsview.layer import read_layer
from ..fsview.types import Entry, LayerIndex
from ..model import LayerRef, Target
from .base import ReadContext
from .schedule import LayerSchedule, schedule_layers, usable_cpus

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

_DIGEST_RE = re.compile(r"^sha256:[a-f0-9]{64}$")
_HEX_RE = re.compile(r"^[a-f0-9]{64}$")


# --------------------------------------------------------------------------- digests, JSON


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def check_digest(value: Any, where: str) -> str:
    """A descriptor digest, validated (it becomes a path: no ``sha256:../..``)."""
    if not isinstance(value, str) or not _DIGEST_RE.match(value):
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
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ImageFormatError(f"{where} is not valid JSON: {msg}") from None


def _obj(doc: Any, where: str) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise ImageFormatError(f"{where}: expected a JSON object, got {type(doc).__name__}")
    return doc


def _str_list(value: Any) -> list[str]:
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
class Platform:
    os: str
    arch: str
    variant: str | None = None

    @classmethod
    def parse(cls, text: str) -> Platform:
        parts = [p for p in text.strip().lower().split("/")]
        if len(parts) == 1 and parts[0]:  # "arm64" alone: linux
            parts = ["linux", parts[0]]
        if len(parts) not in (2, 3) or not all(parts):
            raise SourceNotFoundError(f"invalid platform {text!r}: expected os/arch[/variant]")
        return cls.make(parts[0], parts[1], parts[2] if len(parts) == 3 else None)

    @classmethod
    def make(cls, os_: str, arch: str, variant: str | None) -> Platform:
        arch = _ARCH_ALIASES.get(arch, arch)
        if arch == "arm64" and variant == "v8":
            variant = None  # the default arm64 variant; "linux/arm64" and ".../v8" are one
        return cls(os_, arch, variant or None)

    @classmethod
    def from_descriptor(cls, d: Any) -> Platform | None:
        if not isinstance(d, dict):
            return None
        os_, arch = d.get("os"), d.get("architecture")
        if not isinstance(os_, str) or not isinstance(arch, str) or not os_ or not arch:
            return None
        variant = d.get("variant")
        return cls.make(os_, arch, variant if isinstance(variant, str) else None)

    def matches(self, want: Platform, *, exact_variant: bool) -> bool:
        if (self.os, self.arch) != (want.os, want.arch):
            return False
        if want.variant is not None or exact_variant:
            return self.variant == want.variant
        return True

    def __str__(self) -> str:
        return f"{self.os}/{self.arch}" + (f"/{self.variant}" if self.variant else "")


def host_platform() -> Platform:
    """The platform images default to: Linux on this machine's architecture."""
    machine = _platform.machine().lower()
    arch = _ARCH_ALIASES.get(machine, machine)
    variant = None
    if machine.startswith("armv7"):
        variant = "v7"
    elif machine.startswith("armv6"):
        variant = "v6"
    return Platform.make("linux", arch, variant)


def wanted_platform(ctx: ReadContext) -> tuple[Platform, bool]:
    """(platform, explicit): the one asked for, or the host's."""
    if ctx.platform:
        return Platform.parse(ctx.platform), True
    return host_platform(), False


# --------------------------------------------------------------------------- stores


class BlobStore(ABC):
    """An image layout seen as paths relative to its root."""

    #: names the input in messages, e.g. "oci:/images/foo"
    label: str
    #: layers may be read by several threads at once (each read opens its own stream)
    parallel_safe: bool = False
    # read_layer works in a forked child (plain files reached through inherited fds; no
    # threads, sessions or sockets): layers may then be read by worker processes
    fork_safe: bool = False

    @abstractmethod
    def exists(self, path: str) -> bool: ...

    @abstractmethod
    def read_small(self, path: str, what: str) -> bytes:
        """Bytes of a small member (at most MAX_JSON_BYTES); ImageFormatError when missing."""

    @abstractmethod
    def read_layer(self, path: str, layer: LayerPlan, total: int, ctx: ReadContext) -> LayerIndex:
        """Stream the layer at ``path`` through ``fsview.layer.read_layer``."""

    def close(self) -> None:  # noqa: B027 - optional hook: most stores hold nothing to release
        pass


# --------------------------------------------------------------------------- plans


@dataclass
class ImageConfig:
    digest: str
    diff_ids: list[str]
    env: dict[str, str]
    labels: dict[str, str]
    created: str | None
    platform: Platform | None
    created_by: list[str | None]  # per layer (history entries that are not empty_layer)


@dataclass
class LayerPlan:
    index: int
    path: str  # in the store
    diff_id: str
    digest: str | None  # blob digest when known (verified while streaming)
    media_type: str | None = None
    size: int | None = None
    created_by: str | None = None


@dataclass
class ImagePlan:
    config: ImageConfig
    layers: list[LayerPlan]
    manifest_digest: str | None = None
    tags: list[str] = field(default_factory=list)
    name: str | None = None


def stream_layer(
    raw: BinaryIO,
    layer: LayerPlan,
    ctx: ReadContext,
    name: str,
    size: int | None,
    *,
    total: int | None = None,
    what: str | None = None,
) -> LayerIndex:
    """Stream one planned layer through ``fsview.layer.read_layer`` with the context's
    matcher, spool, limits and progress, checking the plan's digest and diff_id. With
    ``total``, ``ctx.progress`` hears that the layer starts (shown as ``what``) and, once
    read, that it is done."""
    if total is not None:
        ctx.progress.layer_started(layer.index, total, size, what or name)
    li = read_layer(
        raw,
        index=layer.index,
        name=name,
        matcher=ctx.matcher,
        spool=ctx.spool,
        limits=ctx.limits,
        progress=ctx.progress,
        expected_digest=layer.digest,
        expected_diff_id=layer.diff_id,
        size=size,
    )
    if total is not None:
        ctx.progress.layer_done(layer.index)
    return li


def parse_config(data: bytes, digest: str, where: str) -> ImageConfig:
    doc = _obj(parse_json(data, where), where)
    rootfs = doc.get("rootfs")
    if not isinstance(rootfs, dict) or not isinstance(rootfs.get("diff_ids"), list):
        raise ImageFormatError(f"{where}: image config has no rootfs.diff_ids")
    diff_ids = [check_digest(d, f"{where}: rootfs.diff_ids") for d in rootfs["diff_ids"]]
    cfg_raw = doc.get("config")
    cfg: dict[str, Any] = cfg_raw if isinstance(cfg_raw, dict) else {}
    env: dict[str, str] = {}
    for item in _str_list(cfg.get("Env")):
        key, _, value = item.partition("=")
        env[key] = value
    labels_raw = cfg.get("Labels")
    labels = {str(k): str(v) for k, v in labels_raw.items()} if isinstance(labels_raw, dict) else {}
    created_by: list[str | None] = []
    history = doc.get("history")
    if isinstance(history, list):
        for h in history:
            if isinstance(h, dict) and not h.get("empty_layer"):
                cb = h.get("created_by")
                created_by.append(cb if isinstance(cb, str) else None)
    if len(created_by) != len(diff_ids):
        created_by = [None] * len(diff_ids)
    created = doc.get("created")
    return ImageConfig(
        digest=digest,
        diff_ids=diff_ids,
        env=env,
        labels=labels,
        created=created if isinstance(created, str) else None,
        platform=Platform.from_descriptor(doc),
        created_by=created_by,
    )


def split_reference(ref: str) -> tuple[str, str | None, str | None]:
    """``name[:tag][@digest]`` -> (name, tag, digest)."""
    name, _, digest = ref.partition("@")
    tag = None
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > slash:
        name, tag = name[:colon], name[colon + 1 :]
    return name, tag, digest or None


def check_platform(plan: ImagePlan, ctx: ReadContext, label: str) -> None:
    """An explicit --platform must match the image's config."""
    if not ctx.platform or plan.config.platform is None:
        return
    want = Platform.parse(ctx.platform)
    if not plan.config.platform.matches(want, exact_variant=False):
        raise SourceNotFoundError(
            f"{label}: image is {plan.config.platform}, not the requested platform {want}"
        )


# --------------------------------------------------------------------------- OCI layouts


def _descriptor(d: Any, where: str) -> dict[str, Any]:
    desc = _obj(d, where)
    check_digest(desc.get("digest"), where)
    size = desc.get("size")
    if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 0):
        raise ImageFormatError(f"{where}: invalid size {size!r}")
    return desc


def _read_blob_json(store: BlobStore, desc: dict[str, Any], what: str) -> tuple[bytes, Any]:
    digest = desc["digest"]
    where = f"{store.label}: {what} {digest}"
    path = blob_path(digest)
    if not store.exists(path):
        raise ImageFormatError(f"{where} is missing ({path})")
    data = store.read_small(path, f"{what} {digest}")
    verify(data, digest, where)
    size = desc.get("size")
    if isinstance(size, int) and size != len(data):
        raise DigestMismatchError(f"{where}: size {len(data)} differs from descriptor size {size}")
    return data, parse_json(data, where)


def _is_image_descriptor(d: dict[str, Any]) -> bool:
    mt = d.get("mediaType")
    if mt is not None and mt not in INDEX_TYPES and mt not in MANIFEST_TYPES:
        return False  # signatures, SBOM artifacts, ...
    ann = d.get("annotations")
    if isinstance(ann, dict) and ann.get("vnd.docker.reference.type") == "attestation-manifest":
        return False
    p = Platform.from_descriptor(d.get("platform"))
    return not (p is not None and p.os == "unknown")


def _choose(
    descs: list[dict[str, Any]], ctx: ReadContext, label: str, *, top: bool
) -> dict[str, Any]:
    images = [d for d in descs if _is_image_descriptor(d)]
    if not images:
        raise SourceNotFoundError(f"{label}: the index lists no image manifests")
    want, explicit = wanted_platform(ctx)
    with_platform = [(d, Platform.from_descriptor(d.get("platform"))) for d in images]
    platforms = [p for _, p in with_platform if p is not None]
    if len(images) == 1:
        only_p = with_platform[0][1]
        if explicit and only_p is not None and not only_p.matches(want, exact_variant=False):
            raise SourceNotFoundError(
                f"{label}: no image for platform {want} (available: {only_p})"
            )
        return images[0]
    if platforms and len(platforms) == len(images):
        hits = [
            d for d, p in with_platform if p is not None and p.matches(want, exact_variant=False)
        ]
        exact = [
            d for d, p in with_platform if p is not None and p.matches(want, exact_variant=True)
        ]
        if exact:
            return exact[0]
        if hits:
            return hits[0]
        avail = ", ".join(sorted({str(p) for p in platforms}))
        whose = "" if explicit else " (the host's; pass --platform to choose)"
        raise SourceNotFoundError(
            f"{label}: no image for platform {want}{whose}; available: {avail}"
        )
    if top:
        tags = sorted({t for d in images if (t := _tag_of(d))})
        hint = f" (tags: {', '.join(tags)})" if tags else ""
        raise SourceNotFoundError(
            f"{label}: the layout holds {len(images)} images; pass {label}:TAG to choose one{hint}"
        )
    raise ImageFormatError(f"{label}: image index lists several manifests without platforms")


def _tag_of(d: dict[str, Any]) -> str | None:
    ann = d.get("annotations")
    if isinstance(ann, dict):
        for key in (REF_NAME, CONTAINERD_NAME):
            v = ann.get(key)
            if isinstance(v, str) and v:
                return v
    return None


def _match_tag(descs: list[dict[str, Any]], tag: str, label: str) -> list[dict[str, Any]]:
    def names(d: dict[str, Any]) -> list[str]:
        ann = d.get("annotations")
        if not isinstance(ann, dict):
            return []
        return [v for k in (REF_NAME, CONTAINERD_NAME) if isinstance(v := ann.get(k), str)]

    hits = [d for d in descs if tag in names(d)]
    if not hits:  # "foo:1.0" against a containerd name "docker.io/library/foo:1.0"
        hits = [d for d in descs if any(n.endswith("/" + tag) for n in names(d))]
    if not hits:
        tags = sorted({n for d in descs for n in names(d)})
        avail = ", ".join(tags) if tags else "none"
        raise SourceNotFoundError(f"{label}: no image tagged {tag!r} (tags: {avail})")
    return hits


def plan_oci(store: BlobStore, ctx: ReadContext, tag: str | None) -> ImagePlan:
    """Read index.json (and nested indexes) down to one image manifest and its config."""
    label = store.label
    if store.exists("oci-layout"):
        layout = _obj(
            parse_json(store.read_small("oci-layout", "oci-layout"), f"{label}: oci-layout"),
            f"{label}: oci-layout",
        )
        version = layout.get("imageLayoutVersion")
        if not isinstance(version, str) or not version.startswith("1."):
            raise ImageFormatError(f"{label}: unsupported imageLayoutVersion {version!r}")
    if not store.exists("index.json"):
        raise ImageFormatError(f"{label}: not an OCI image layout (no index.json)")
    where = f"{label}: index.json"
    index = _obj(parse_json(store.read_small("index.json", "index.json"), where), where)
    manifests = index.get("manifests")
    if not isinstance(manifests, list):
        raise ImageFormatError(f"{where}: has no manifests list")
    descs = [_descriptor(d, where) for d in manifests]
    if tag is not None:
        descs = _match_tag(descs, tag, label)
    tags = sorted({t for d in descs if (t := _tag_of(d))})
    desc = _choose(descs, ctx, label, top=True)
    top_tag = _tag_of(desc)
    for _depth in range(8):
        mt = desc.get("mediaType")
        _, doc = _read_blob_json(store, desc, "manifest")
        doc = _obj(doc, f"{label}: manifest {desc['digest']}")
        mt = mt or doc.get("mediaType")
        if is_index(mt, doc):
            desc = choose_manifest(doc, ctx, label, f"{label}: image index {desc['digest']}")
            continue
        check_manifest_type(mt, label, desc["digest"])
        plan = plan_from_manifest(store, desc["digest"], doc, ctx)
        if top_tag:
            plan.tags = [top_tag]
            plan.name = _name_from_tag(desc, top_tag)
        elif tags:
            plan.tags = tags
        return plan
    raise ImageFormatError(f"{label}: image indexes nested too deeply")


def is_index(media_type: str | None, doc: dict[str, Any]) -> bool:
    """An image index / manifest list (by media type, else by shape)."""
    return media_type in INDEX_TYPES or (
        media_type is None and "manifests" in doc and "layers" not in doc
    )


def check_manifest_type(media_type: str | None, label: str, digest: str) -> None:
    if media_type is not None and media_type not in MANIFEST_TYPES:
        raise ImageFormatError(f"{label}: manifest {digest} has unsupported media type {media_type}")


def choose_manifest(
    index: dict[str, Any], ctx: ReadContext, label: str, where: str
) -> dict[str, Any]:
    """The descriptor for ``ctx.platform`` (or the host's) from an image index document."""
    inner = index.get("manifests")
    if not isinstance(inner, list):
        raise ImageFormatError(f"{where}: has no manifests list")
    return _choose([_descriptor(d, where) for d in inner], ctx, label, top=False)


def _name_from_tag(desc: dict[str, Any], tag: str) -> str | None:
    ann = desc.get("annotations") if isinstance(desc.get("annotations"), dict) else {}
    full = ann.get(CONTAINERD_NAME) if isinstance(ann, dict) else None
    if isinstance(full, str):
        return split_reference(full)[0]
    if "/" in tag or ":" in tag:
        return split_reference(tag)[0]
    return None


def plan_from_manifest(
    store: BlobStore, manifest_digest: str, doc: dict[str, Any], ctx: ReadContext
) -> ImagePlan:
    """Plan an image from its (digest-checked) manifest; the config is read from ``store``."""
    label = store.label
    where = f"{label}: manifest {manifest_digest}"
    if doc.get("schemaVersion") != 2:
        raise ImageFormatError(f"{where}: unsupported schemaVersion {doc.get('schemaVersion')!r}")
    cdesc = _descriptor(doc.get("config"), f"{where}: config")
    cmt = cdesc.get("mediaType")
    if cmt not in CONFIG_TYPES:
        raise ImageFormatError(f"{where}: not a container image (config media type {cmt})")
    cdata, _ = _read_blob_json(store, cdesc, "config")
    config = parse_config(cdata, cdesc["digest"], f"{label}: config {cdesc['digest']}")
    layers = doc.get("layers")
    if not isinstance(layers, list):
        raise ImageFormatError(f"{where}: has no layers list")
    if len(layers) != len(config.diff_ids):
        raise ImageFormatError(
            f"{where}: lists {len(layers)} layers but the config has {len(config.diff_ids)} diff_ids"
        )
    plans: list[LayerPlan] = []
    for i, raw in enumerate(layers):
        d = _descriptor(raw, f"{where}: layer {i}")
        mt = d.get("mediaType")
        if mt not in LAYER_TYPES:
            raise ImageFormatError(f"{where}: layer {i} has unsupported media type {mt}")
        path = blob_path(d["digest"])
        if not store.exists(path):
            urls = _str_list(d.get("urls"))
            if urls:
                raise ImageFormatError(
                    f"{where}: layer {i} ({d['digest']}) is a foreign layer that is not in the "
                    f"layout (urls: {', '.join(urls)}); gpusbom does not download it"
                )
            raise ImageFormatError(f"{where}: layer {i} blob {d['digest']} is missing ({path})")
        plans.append(
            LayerPlan(
                index=i,
                path=path,
                diff_id=config.diff_ids[i],
                digest=d["digest"],
                media_type=mt,
                size=d.get("size"),
                created_by=config.created_by[i],
            )
        )
    return ImagePlan(config=config, layers=plans, manifest_digest=manifest_digest)


# --------------------------------------------------------------------------- docker save


def plan_docker(
    store: BlobStore, ctx: ReadContext, selector: str | None = None, image_id: str | None = None
) -> ImagePlan:
    """Read ``manifest.json`` of a ``docker save`` tree (legacy or the Docker 25+ OCI layout).

    ``selector``: "name:tag" in RepoTags, or "@N" (the Nth entry). ``image_id``: pick the
    entry whose config has this digest (the Docker Engine source knows it from inspect).
    """
    label = store.label
    where = f"{label}: manifest.json"
    if not store.exists("manifest.json"):
        hint = (
            " (it looks like an OCI layout: use oci-archive:)" if store.exists("index.json") else ""
        )
        raise ImageFormatError(f"{label}: not a docker-archive (no manifest.json){hint}")
    doc = parse_json(store.read_small("manifest.json", "manifest.json"), where)
    if not isinstance(doc, list) or not doc or not all(isinstance(e, dict) for e in doc):
        raise ImageFormatError(f"{where}: expected a non-empty list of image entries")
    entries: list[dict[str, Any]] = doc
    entry = _pick_docker_entry(store, entries, selector, image_id, where)
    config_path = entry.get("Config")
    layer_paths = entry.get("Layers")
    if (
        not isinstance(config_path, str)
        or not isinstance(layer_paths, list)
        or not all(isinstance(p, str) for p in layer_paths)
    ):
        raise ImageFormatError(f"{where}: entry needs a Config string and a Layers list")
    if not store.exists(config_path):
        raise ImageFormatError(f"{where}: config {config_path} is missing from the archive")
    cdata = store.read_small(config_path, f"config {config_path}")
    cdigest = sha256_digest(cdata)
    named = digest_from_name(config_path)
    if named is not None and named != cdigest:
        raise DigestMismatchError(
            f"{label}: config {config_path}: digest mismatch: expected {named}, got {cdigest}"
        )
    config = parse_config(cdata, cdigest, f"{label}: config {config_path}")
    if len(layer_paths) != len(config.diff_ids):
        raise ImageFormatError(
            f"{where}: lists {len(layer_paths)} layers but the config has "
            f"{len(config.diff_ids)} diff_ids"
        )
    sources = entry.get("LayerSources") if isinstance(entry.get("LayerSources"), dict) else {}
    plans: list[LayerPlan] = []
    for i, path in enumerate(layer_paths):
        diff_id = config.diff_ids[i]
        if not store.exists(path):
            foreign = sources.get(diff_id) if isinstance(sources, dict) else None
            urls = _str_list(foreign.get("urls")) if isinstance(foreign, dict) else []
            if urls:
                raise ImageFormatError(
                    f"{where}: layer {i} ({diff_id}) is a foreign layer that is not in the "
                    f"archive (urls: {', '.join(urls)}); gpusbom does not download it"
                )
            raise ImageFormatError(f"{where}: layer {i} ({path}) is missing from the archive")
        plans.append(
            LayerPlan(
                index=i,
                path=path,
                diff_id=diff_id,
                digest=digest_from_name(path) if path.startswith("blobs/") else None,
                created_by=config.created_by[i],
            )
        )
    tags = _str_list(entry.get("RepoTags"))
    plan = ImagePlan(
        config=config,
        layers=plans,
        tags=tags,
        name=split_reference(tags[0])[0] if tags else None,
        manifest_digest=_docker_manifest_digest(store, cdigest),
    )
    return plan


def _pick_docker_entry(
    store: BlobStore,
    entries: list[dict[str, Any]],
    selector: str | None,
    image_id: str | None,
    where: str,
) -> dict[str, Any]:
    if image_id is not None:
        for e in entries:
            c = e.get("Config")
            if isinstance(c, str) and digest_from_name(c) == image_id:
                return e
        if len(entries) == 1:
            return entries[0]
        raise SourceNotFoundError(f"{where}: no entry for image {image_id}")
    if selector:
        if selector.startswith("@") and selector[1:].isdigit():
            n = int(selector[1:])
            if n >= len(entries):
                raise SourceNotFoundError(f"{where}: no entry @{n} ({len(entries)} images)")
            return entries[n]
        want = {selector, selector + ":latest"}
        for e in entries:
            if want & set(_str_list(e.get("RepoTags"))):
                return e
        avail = ", ".join(t for e in entries for t in _str_list(e.get("RepoTags"))) or "none"
        raise SourceNotFoundError(f"{where}: no image tagged {selector!r} (tags: {avail})")
    if len(entries) == 1:
        return entries[0]
    avail = ", ".join(t for e in entries for t in _str_list(e.get("RepoTags"))) or "untagged"
    raise SourceNotFoundError(
        f"{store.label}: the archive holds {len(entries)} images; pass "
        f"{store.label}:NAME:TAG or {store.label}:@N to choose one (tags: {avail})"
    )


def _docker_manifest_digest(store: BlobStore, config_digest: str) -> str | None:
    """Docker 25+ archives also hold an OCI index: find the manifest of our config (best effort)."""
    if not store.exists("index.json"):
        return None
    try:
        index = parse_json(store.read_small("index.json", "index.json"), "index.json")
        for d in index.get("manifests", []) if isinstance(index, dict) else []:
            digest = d.get("digest") if isinstance(d, dict) else None
            if not isinstance(digest, str) or not _DIGEST_RE.match(digest):
                continue
            path = blob_path(digest)
            if not store.exists(path):
                continue
            data = store.read_small(path, f"manifest {digest}")
            if sha256_digest(data) != digest:
                continue
            doc = parse_json(data, "manifest")
            cfg = doc.get("config") if isinstance(doc, dict) else None
            if isinstance(cfg, dict) and cfg.get("digest") == config_digest:
                return digest
    except (ImageFormatError, AttributeError):
        return None
    return None


# --------------------------------------------------------------------------- layers, target


def finish_layer(li: LayerIndex, layer: LayerPlan, where: str) -> LayerIndex:
    """Check the streamed layer against the plan and fill its LayerRef."""
    got = li.ref.diff_id
    if got is not None and got != layer.diff_id:
        raise DigestMismatchError(
            f"{where}: layer {layer.index} ({layer.path}): diff_id mismatch: expected "
            f"{layer.diff_id}, got {got}"
        )
    digest = layer.digest if layer.digest != layer.diff_id else None
    li.ref = LayerRef(
        index=layer.index,
        diff_id=layer.diff_id,
        digest=digest,
        media_type=layer.media_type,
        size=layer.size if layer.size is not None else li.ref.size,
        created_by=layer.created_by,
    )
    return li


def layer_workers() -> int:
    """Layers read at once. Each layer is inflated in its own thread, which releases the
    GIL, so a second layer in flight uses a second core; ``GPUSBOM_LAYER_WORKERS`` overrides."""
    env = os.environ.get("GPUSBOM_LAYER_WORKERS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    return max(1, min(3, os.cpu_count() or 1))


def layer_processes(store: BlobStore, total: int) -> int:
    """Worker processes for reading layers (0: threads in this process).

    One layer's pipeline (read+hash, inflate, tar walk) is three threads under one
    interpreter lock, so several layers in one process stop scaling at about three; in
    processes they scale with the cores. Used for fork-safe stores on machines with 4 or more
    cores; ``GPUSBOM_LAYER_PROCESSES`` (a number, or 0 for none) overrides."""
    if total <= 1 or not getattr(store, "fork_safe", False) or not hasattr(os, "fork"):
        return 0
    env = os.environ.get("GPUSBOM_LAYER_PROCESSES", "")
    if env.isdigit():
        return min(int(env), total)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cpus = cpus or 1
    return min(total, 6, max(3, cpus // 2)) if cpus >= 4 else 0


def read_layers(
    store: BlobStore, plan: ImagePlan, ctx: ReadContext, workers: int | None = None
) -> list[LayerIndex]:
    """Stream every layer once: several at a time when the store allows it, largest first,
    large gzip layers on several threads (``sources.schedule``); cached layers not at all
    (``fsview.layercache``)."""
    cache = getattr(ctx, "layer_cache", None)
    if cache is not None:
        return cache.read_layers(  # type: ignore[no-any-return]
            plan, ctx, lambda p, c: read_layers(store, p, c, workers)
        )
    total = len(plan.layers)
    procs = layer_processes(store, total) if workers is None else 0
    sched = schedule_layers(
        [la.size for la in plan.layers],
        cpus=usable_cpus(),
        max_memory=ctx.limits.max_memory,
        processes=procs if procs > 1 else 0,
    )
    if sched.processes > 1:
        return read_layers_forked(store, plan, ctx, sched.processes, sched)
    n = layer_workers() if workers is None else workers
    if not store.parallel_safe or n <= 1 or total <= 1:
        out = []
        for i, layer in enumerate(plan.layers):
            lctx = _with_threads(ctx, sched.threads[i])
            li = store.read_layer(layer.path, layer, total, lctx)
            out.append(finish_layer(li, layer, store.label))
        return out
    return read_layers_parallel(store, plan, ctx, n)


def _with_threads(ctx: ReadContext, threads: int) -> ReadContext:
    """``ctx`` with ``threads`` inflate threads granted to its layer."""
    if threads <= 1 or ctx.limits.inflate_threads == threads:
        return ctx
    return replace(ctx, limits=replace(ctx.limits, inflate_threads=threads))


class SharedSpool:
    """A per-layer view of the scan's Spool that is safe with parallel layer readers."""

    def __init__(self, spool: Any, lock: threading.Lock) -> None:
        self._spool = spool
        self._lock = lock
        self._seen = 0
        self.limits = getattr(spool, "limits", None)
        self.dir = getattr(spool, "dir", None)

    def new_path(self) -> str:
        with self._lock:
            return str(self._spool.new_path())

    @property
    def bytes(self) -> int:
        with self._lock:
            self._seen = self._spool.bytes
            return self._seen

    @bytes.setter
    def bytes(self, value: int) -> None:  # "spool.bytes += n" from one thread: apply the delta
        with self._lock:
            self._spool.bytes += value - self._seen
            self._seen = self._spool.bytes


class CombinedProgress:
    """Parallel layers shown as one task (the sink shows one layer at a time)."""

    def __init__(self, sink: Any, total_bytes: int | None, layers: int, label: str) -> None:
        self._sink = sink
        self._lock = threading.Lock()
        start_all = getattr(sink, "layers_started", None)
        if callable(start_all):
            start_all(layers, total_bytes, label)
        else:
            sink.layer_started(layers - 1, layers, total_bytes, label)

    def layer_started(self, index: int, total: int, size: int | None, name: str) -> None:
        pass

    def advance(self, nbytes: int) -> None:
        with self._lock:
            self._sink.advance(nbytes)

    def layer_done(self, index: int) -> None:
        pass

    def finish(self, layers: int) -> None:
        with self._lock:
            self._sink.layer_done(layers - 1)


class LayersCancelled(Exception):
    """Raised inside a layer reader once another layer has failed."""


def read_layers_parallel(
    store: BlobStore, plan: ImagePlan, ctx: ReadContext, workers: int
) -> list[LayerIndex]:
    """Stream every layer once, ``workers`` at a time; results in order; first error wins.

    Stores with a ``cancel`` event (the registry) stop their other downloads when a
    layer fails; others finish the layers already started. Layers start largest first.
    """
    cache = getattr(ctx, "layer_cache", None)
    if cache is not None:
        return cache.read_layers(  # type: ignore[no-any-return]
            plan, ctx, lambda p, c: read_layers_parallel(store, p, c, workers)
        )
    total = len(plan.layers)
    if total == 0:
        return []
    sizes = [la.size for la in plan.layers]
    total_bytes = (
        sum(s for s in sizes if s is not None) if all(s is not None for s in sizes) else None
    )
    progress = CombinedProgress(ctx.progress, total_bytes, total, store.label)
    lock = threading.Lock()
    cancel: threading.Event | None = getattr(store, "cancel", None)
    failed = threading.Event()

    def one(layer: LayerPlan) -> LayerIndex:
        if failed.is_set():
            raise LayersCancelled()
        lctx = ReadContext(
            matcher=ctx.matcher,
            spool=SharedSpool(ctx.spool, lock),  # type: ignore[arg-type]
            limits=ctx.limits,
            progress=progress,
            platform=ctx.platform,
        )
        try:
            li = store.read_layer(layer.path, layer, total, lctx)
        except BaseException:
            failed.set()
            raise
        return finish_layer(li, layer, store.label)

    pool = ThreadPoolExecutor(max_workers=max(1, min(workers, total)), thread_name_prefix="layer")
    by_size = sorted(range(total), key=lambda i: -(plan.layers[i].size or 0))
    submitted = {i: pool.submit(one, plan.layers[i]) for i in by_size}
    futures = [submitted[i] for i in range(total)]
    try:
        wait(futures, return_when=FIRST_EXCEPTION)
        for fut in futures:
            exc = fut.exception() if fut.done() else None
            if exc is not None and not isinstance(exc, LayersCancelled) and not getattr(
                exc, "cancelled_by_peer", False
            ):
                raise exc
        return [fut.result() for fut in futures]
    except BaseException:
        failed.set()
        if cancel is not None:
            cancel.set()
        for fut in futures:
            fut.cancel()
        raise
    finally:
        pool.shutdown(wait=True)
        progress.finish(total)


class _ForkSpool:
    """The scan's Spool as seen from a layer worker process: its own file names in the same
    private directory, and the byte budget shared through a counter in shared memory."""

    def __init__(self, spool: Any, counter: Any, index: int) -> None:
        self.dir = spool.dir
        self.limits = getattr(spool, "limits", None)
        self._counter = counter
        self._index = index
        self._n = 0
        self._seen = 0

    def new_path(self) -> str:
        self._n += 1
        return os.path.join(self.dir, f"l{self._index:05d}-{self._n:07d}")

    @property
    def bytes(self) -> int:
        with self._counter.get_lock():
            self._seen = int(self._counter.value)
            return self._seen

    @bytes.setter
    def bytes(self, value: int) -> None:  # "spool.bytes += n": apply the delta
        with self._counter.get_lock():
            self._counter.value += value - self._seen
            self._seen = int(self._counter.value)


_FORK_JOB: tuple[Any, ...] | None = None  # what forked layer workers inherit


def _read_layer_in_child(i: int) -> LayerIndex:
    from ..fsview.types import NullProgress

    assert _FORK_JOB is not None  # noqa: S101 - type narrowing of an invariant
    store, plan, ctx, counter, sched = _FORK_JOB
    layer = plan.layers[i]
    threads = sched.threads[i] if sched is not None else 0
    lctx = ReadContext(
        matcher=ctx.matcher,
        spool=_ForkSpool(ctx.spool, counter, i),  # type: ignore[arg-type]
        limits=replace(ctx.limits, inflate_threads=threads) if threads > 1 else ctx.limits,
        progress=NullProgress(),
        platform=ctx.platform,
    )
    li = store.read_layer(layer.path, layer, len(plan.layers), lctx)
    return finish_layer(li, layer, store.label)


def read_layers_forked(
    store: BlobStore,
    plan: ImagePlan,
    ctx: ReadContext,
    procs: int,
    sched: LayerSchedule | None = None,
) -> list[LayerIndex]:
    """Stream every layer once, in ``procs`` forked worker processes; results in order,
    the first error wins (the other workers are stopped). Children inherit the plan, the
    matcher and the open store; they return the layer index (captured content in memory,
    or in the scan's spool directory)."""
    import multiprocessing

    global _FORK_JOB
    total = len(plan.layers)
    sizes = [la.size for la in plan.layers]
    total_bytes = (
        sum(s for s in sizes if s is not None) if all(s is not None for s in sizes) else None
    )
    progress = CombinedProgress(ctx.progress, total_bytes, total, store.label)
    mp = multiprocessing.get_context("fork")
    counter = mp.Value("q", int(getattr(ctx.spool, "bytes", 0)))
    _FORK_JOB = (store, plan, ctx, counter, sched)
    import gc

    gc.freeze()  # the collector leaves inherited objects alone: fewer copied pages per worker
    pool = mp.Pool(processes=procs)
    try:
        # largest first, handed out one at a time: small layers fill the gaps
        order = sched.order if sched is not None else list(range(total))
        got: dict[int, LayerIndex] = {}
        for i, li in zip(order, pool.imap(_read_layer_in_child, order, chunksize=1), strict=False):
            got[i] = li
            size = plan.layers[i].size
            if size:
                progress.advance(size)
        pool.close()
        if hasattr(ctx.spool, "bytes"):
            ctx.spool.bytes = int(counter.value)
        return [got[i] for i in range(total)]
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()
        gc.unfreeze()
        _FORK_JOB = None
        progress.finish(total)


def make_target(reference: str, scheme: str, plan: ImagePlan, layers: list[LayerIndex]) -> Target:
    cfg = plan.config
    return Target(
        kind="image",
        reference=reference,
        source=scheme,
        name=plan.name,
        tags=list(plan.tags),
        manifest_digest=plan.manifest_digest,
        image_id=cfg.digest,
        platform=str(cfg.platform) if cfg.platform else None,
        env=dict(cfg.env),
        labels=dict(cfg.labels),
        created=cfg.created,
        layers=[li.ref for li in layers],
    )


def with_layer_index(li: LayerIndex, index: int) -> LayerIndex:
    """A copy of ``li`` whose entries (and ref) say they come from layer ``index``."""

    def remap(value: Any) -> Any:
        if isinstance(value, Entry):
            return replace(value, layer=index)
        if isinstance(value, dict):
            return {k: remap(v) for k, v in value.items()}
        if isinstance(value, list):
            return [remap(v) for v in value]
        if isinstance(value, set):
            return set(value)
        return value

    new = copy.copy(li)
    for f in fields(li):
        setattr(new, f.name, remap(getattr(li, f.name)))
    new.ref = replace(li.ref, index=index)
    return new
