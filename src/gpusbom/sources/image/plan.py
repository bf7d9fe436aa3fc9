"""From a ``BlobStore`` to an ``ImagePlan``: which manifest (platform, tag), which config,
which layers in which order. ``plan_oci`` reads OCI layouts (``index.json``), ``plan_docker``
``docker save`` trees (``manifest.json``); ``plan_from_manifest`` is shared with the registry.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from ...errors import DigestMismatchError, ImageFormatError, SourceNotFoundError
from ...fsview.types import LayerIndex
from ..base import ReadContext
from .oci import (
    CONFIG_TYPES,
    CONTAINERD_NAME,
    DIGEST_RE,
    INDEX_TYPES,
    LAYER_TYPES,
    MANIFEST_TYPES,
    REF_NAME,
    OciPlatform,
    blob_path,
    check_digest,
    digest_from_name,
    json_object,
    parse_json,
    sha256_digest,
    str_list,
    verify,
    wanted_platform,
)

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
    """What an image's configuration blob says that a scan uses."""

    digest: str
    diff_ids: list[str]
    env: dict[str, str]
    labels: dict[str, str]
    created: str | None
    platform: OciPlatform | None
    created_by: list[str | None]  # per layer (history entries that are not empty_layer)


@dataclass
class LayerPlan:
    """One layer to read: where its blob is and the digests to verify."""

    index: int
    path: str  # in the store
    diff_id: str
    digest: str | None  # blob digest when known (verified while streaming)
    media_type: str | None = None
    size: int | None = None
    created_by: str | None = None


@dataclass
class ImagePlan:
    """An image to read: its configuration and its layers, bottom first."""

    config: ImageConfig
    layers: list[LayerPlan]
    manifest_digest: str | None = None
    tags: list[str] = field(default_factory=list)
    name: str | None = None


def parse_config(data: bytes, digest: str, where: str) -> ImageConfig:
    doc = json_object(parse_json(data, where), where)
    rootfs = doc.get("rootfs")
    if not isinstance(rootfs, dict) or not isinstance(rootfs.get("diff_ids"), list):
        raise ImageFormatError(f"{where}: image config has no rootfs.diff_ids")
    diff_ids = [check_digest(d, f"{where}: rootfs.diff_ids") for d in rootfs["diff_ids"]]
    cfg_raw = doc.get("config")
    cfg: dict[str, Any] = cfg_raw if isinstance(cfg_raw, dict) else {}
    env: dict[str, str] = {}
    for item in str_list(cfg.get("Env")):
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
        platform=OciPlatform.from_descriptor(doc),
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
    want = OciPlatform.parse(ctx.platform)
    if not plan.config.platform.matches(want, exact_variant=False):
        raise SourceNotFoundError(
            f"{label}: image is {plan.config.platform}, not the requested platform {want}"
        )


# --------------------------------------------------------------------------- OCI layouts


def _descriptor(d: Any, where: str) -> dict[str, Any]:
    desc = json_object(d, where)
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
    p = OciPlatform.from_descriptor(d.get("platform"))
    return not (p is not None and p.os == "unknown")


def _choose(
    descs: list[dict[str, Any]], ctx: ReadContext, label: str, *, top: bool
) -> dict[str, Any]:
    images = [d for d in descs if _is_image_descriptor(d)]
    if not images:
        raise SourceNotFoundError(f"{label}: the index lists no image manifests")
    want, explicit = wanted_platform(ctx)
    with_platform = [(d, OciPlatform.from_descriptor(d.get("platform"))) for d in images]
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
        layout = json_object(
            parse_json(store.read_small("oci-layout", "oci-layout"), f"{label}: oci-layout"),
            f"{label}: oci-layout",
        )
        version = layout.get("imageLayoutVersion")
        if not isinstance(version, str) or not version.startswith("1."):
            raise ImageFormatError(f"{label}: unsupported imageLayoutVersion {version!r}")
    if not store.exists("index.json"):
        raise ImageFormatError(f"{label}: not an OCI image layout (no index.json)")
    where = f"{label}: index.json"
    index = json_object(parse_json(store.read_small("index.json", "index.json"), where), where)
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
        doc = json_object(doc, f"{label}: manifest {desc['digest']}")
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
            urls = str_list(d.get("urls"))
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
            urls = str_list(foreign.get("urls")) if isinstance(foreign, dict) else []
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
    tags = str_list(entry.get("RepoTags"))
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
            if want & set(str_list(e.get("RepoTags"))):
                return e
        avail = ", ".join(t for e in entries for t in str_list(e.get("RepoTags"))) or "none"
        raise SourceNotFoundError(f"{where}: no image tagged {selector!r} (tags: {avail})")
    if len(entries) == 1:
        return entries[0]
    avail = ", ".join(t for e in entries for t in str_list(e.get("RepoTags"))) or "untagged"
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
            if not isinstance(digest, str) or not DIGEST_RE.match(digest):
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
