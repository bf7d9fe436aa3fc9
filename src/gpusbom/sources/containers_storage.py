"""``containers-storage:REF``: an image in a Podman/CRI-O/Buildah store on disk.

containers/storage keeps, under its root (``/var/lib/containers/storage``):

* ``<driver>-images/images.json``: the images (id = config digest hex, ``names``, the
  manifest ``digest``, the top ``layer`` id) and, in ``<driver>-images/<id>/``, their "big
  data" files: ``manifest`` and the config, stored under ``=`` + base64 of the key
  (``sha256:<id>``) because the key has a ``:``;
* ``<driver>-layers/layers.json``: layers with ``parent`` and ``diff-digest`` (the diff_id);
* the layer contents as directories: ``overlay/<id>/diff`` (only that layer's changes,
  overlay whiteouts and opaque directories) or ``vfs/dir/<id>`` (a full copy of the tree up
  to that layer).

Layers are read as directories through ``fsview.dirwalk`` (no tar, no decompression),
each checked against the config's diff_ids by position. Overlay layers are read one by one
and squashed as usual; a vfs image is read from its top layer directory alone (each vfs
directory already holds everything below it), so its files are attributed to the top layer.

Options: ``containers-storage:REF?root=DIR`` (a mounted node's ``/``) or ``?dir=STORAGE_ROOT``
and ``&driver=overlay|vfs`` (default: whichever store has the image).
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from ..errors import ImageFormatError, SourceNotFoundError, UsageError
from ..fsview.dirwalk import walk_layer_dir
from ..fsview.layer import index_members, shadow_salt
from ..fsview.types import LayerIndex
from ..model import LayerRef
from .base import ReadContext, Source, SourceResult
from .image import (
    MAX_JSON_BYTES,
    ImagePlan,
    LayerPlan,
    check_platform,
    make_target,
    parse_config,
    parse_json,
    sha256_digest,
    split_reference,
)

DRIVERS = ("overlay", "vfs")
MAX_STORE_JSON = 256 << 20  # images.json / layers.json of a big node


@dataclass
class StoredImage:
    driver: str
    id: str
    names: list[str]
    digest: str | None
    top_layer: str | None


def split_options(location: str) -> tuple[str, dict[str, str]]:
    ref, sep, query = location.partition("?")
    opts: dict[str, str] = {}
    if sep:
        for k, v in parse_qs(query, keep_blank_values=True).items():
            if k not in ("root", "dir", "driver"):
                raise UsageError(
                    f"containers-storage:{location}: unknown option {k!r} (root, dir, driver)"
                )
            opts[k] = v[-1]
    if opts.get("driver", "overlay") not in DRIVERS:
        raise UsageError(f"containers-storage:{location}: driver must be overlay or vfs")
    return ref, opts


def storage_root(opts: dict[str, str]) -> str:
    if "dir" in opts:
        return opts["dir"]
    return os.path.join(opts.get("root", "/"), "var/lib/containers/storage")


def read_store_json(path: str, label: str, cap: int = MAX_STORE_JSON) -> Any:
    """A JSON file of the store (``images.json``, ``layers.json``; ``node_images`` reads
    ``containers.json``), opened without following a link, at most ``cap`` bytes; None
    when it is absent."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise ImageFormatError(f"{label}: cannot open {path}: {e.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        data = f.read(cap + 1)
    if len(data) > cap:
        raise ImageFormatError(f"{label}: {path} is larger than {cap} bytes")
    return parse_json(data, f"{label}: {path}")


def list_images(root: str, label: str = "containers-storage",
                driver: str | None = None) -> list[StoredImage]:
    out: list[StoredImage] = []
    for drv in DRIVERS if driver is None else (driver,):
        doc = read_store_json(os.path.join(root, f"{drv}-images", "images.json"), label)
        if doc is None:
            continue
        if not isinstance(doc, list):
            raise ImageFormatError(f"{label}: {drv}-images/images.json is not a list")
        for im in doc:
            if not isinstance(im, dict) or not isinstance(im.get("id"), str):
                continue
            names = [n for n in im.get("names") or [] if isinstance(n, str)]
            digest = im.get("digest") if isinstance(im.get("digest"), str) else None
            layer = im.get("layer") if isinstance(im.get("layer"), str) else None
            out.append(StoredImage(drv, im["id"], names, digest, layer))
    return out


def find_image(images: list[StoredImage], ref: str) -> StoredImage | None:
    name, tag, _digest = split_reference(ref)
    want = {ref, f"{name}:{tag or 'latest'}"}
    for prefix in ("localhost/", "docker.io/", "docker.io/library/"):
        want.add(f"{prefix}{name}:{tag or 'latest'}")
    for im in images:
        if want & set(im.names):
            return im
    hexpart = ref.removeprefix("sha256:")
    if len(hexpart) >= 12 and all(c in "0123456789abcdef" for c in hexpart):
        hits = [im for im in images if im.id.startswith(hexpart)]
        if len(hits) == 1:
            return hits[0]
    return None


def _safe_id(value: str, label: str) -> str:
    if not value or "/" in value or value in (".", "..") or len(value) > 128:
        raise ImageFormatError(f"{label}: invalid layer or image id {value!r}")
    return value


def _big_data_name(key: str) -> str:
    # containers/storage: keys with characters outside [A-Za-z0-9._-] are stored as "=" + base64
    if all(c.isalnum() or c in "._-" for c in key):
        return key
    return "=" + base64.b64encode(key.encode()).decode()


class ContainersStorageSource(Source):
    """``containers-storage:REF[?root=DIR|dir=STORAGE_ROOT&driver=overlay|vfs]``."""

    scheme = "containers-storage"

    def read(self, ctx: ReadContext) -> SourceResult:
        ref, opts = split_options(self.location)
        root = storage_root(opts)
        label = f"containers-storage:{ref}"
        if not os.path.isdir(root):
            raise SourceNotFoundError(f"{label}: no containers-storage directory at {root}")
        images = list_images(root, label, opts.get("driver"))
        img = find_image(images, ref)
        if img is None:
            avail = ", ".join(sorted(n for i in images for n in i.names)[:10]) or "none"
            raise SourceNotFoundError(f"{label}: no such image in {root} (images: {avail})")
        drv = img.driver
        image_dir = os.path.join(root, f"{drv}-images", _safe_id(img.id, label))
        config_digest = "sha256:" + img.id
        cpath = os.path.join(image_dir, _big_data_name(config_digest))
        try:
            with open(cpath, "rb") as f:
                cdata = f.read(MAX_JSON_BYTES + 1)
        except OSError as e:
            raise ImageFormatError(f"{label}: cannot read the image config: {e.strerror}") from None
        if sha256_digest(cdata) != config_digest:
            raise ImageFormatError(f"{label}: the stored config does not match image id {img.id}")
        config = parse_config(cdata, config_digest, f"{label}: config")
        layers_doc = read_store_json(os.path.join(root, f"{drv}-layers", "layers.json"), label)
        if not isinstance(layers_doc, list):
            raise ImageFormatError(f"{label}: {drv}-layers/layers.json is missing or not a list")
        by_id = {la["id"]: la for la in layers_doc if isinstance(la, dict) and "id" in la}
        chain: list[dict[str, Any]] = []
        cur = img.top_layer
        while cur is not None:
            if len(chain) > len(by_id):
                raise ImageFormatError(f"{label}: the layer parents form a loop")
            la = by_id.get(cur)
            if la is None:
                raise ImageFormatError(f"{label}: layer {cur} is not in layers.json")
            chain.append(la)
            parent = la.get("parent")
            cur = parent if isinstance(parent, str) and parent else None
        chain.reverse()
        if len(chain) != len(config.diff_ids):
            raise ImageFormatError(
                f"{label}: {len(chain)} stored layers but the config lists "
                f"{len(config.diff_ids)} diff_ids"
            )
        for i, (la, diff_id) in enumerate(zip(chain, config.diff_ids, strict=False)):
            if la.get("diff-digest") not in (None, diff_id):
                raise ImageFormatError(
                    f"{label}: stored layer {i} has diff {la.get('diff-digest')}, "
                    f"the config says {diff_id}"
                )
        layers: list[LayerIndex] = []
        total = len(chain)
        for i, la in enumerate(chain):
            lid = _safe_id(str(la["id"]), label)
            ref_i = LayerRef(
                index=i, diff_id=config.diff_ids[i],
                size=la.get("diff-size") if isinstance(la.get("diff-size"), int) else None,
                created_by=config.created_by[i],
            )
            if drv == "vfs" and i < total - 1:
                layers.append(LayerIndex(ref=ref_i, shadow_salt=shadow_salt()))
                continue
            path = os.path.join(root, "overlay", lid, "diff") if drv == "overlay" else (
                os.path.join(root, "vfs", "dir", lid)
            )
            where = f"{label}: layer {i} ({lid[:12]})"
            ctx.progress.layer_started(i, total, None, where)
            entries, whiteouts, opaque, shadow, count = index_members(
                walk_layer_dir(path, where, ctx.limits), index=i, name=where,
                matcher=ctx.matcher, spool=ctx.spool, limits=ctx.limits,
            )
            ctx.progress.layer_done(i)
            layers.append(LayerIndex(
                ref=ref_i, entries=entries, whiteouts=whiteouts, opaque_dirs=opaque,
                file_count=count, shadow_hashes=shadow, shadow_salt=shadow_salt(),
            ))
        plan = ImagePlan(
            config=config,
            layers=[LayerPlan(index=i, path="", diff_id=d, digest=None)
                    for i, d in enumerate(config.diff_ids)],
            manifest_digest=img.digest,
            # as for OCI layouts: short tags of the first name (the subject is name:tag)
            tags=[t for n in img.names if (t := split_reference(n)[1]) and
                  split_reference(n)[0] == split_reference(img.names[0])[0]],
            name=split_reference(img.names[0])[0] if img.names else None,
        )
        check_platform(plan, ctx, label)
        target = make_target(self.reference, "containers-storage", plan, layers)
        return SourceResult(target=target, layers=layers)


def stored_manifest(root: str, img: StoredImage) -> bytes | None:
    """The image's stored manifest bytes (for callers that want its digest checked)."""
    path = os.path.join(root, f"{img.driver}-images", img.id, "manifest")
    try:
        with open(path, "rb") as f:
            return f.read(MAX_JSON_BYTES)
    except OSError:
        return None


__all__ = ["ContainersStorageSource", "StoredImage", "find_image", "list_images",
           "stored_manifest"]
