"""``containerd:REF``: an image in containerd's own store on disk (no daemon, no socket).

containerd keeps image records in its metadata database
(``ROOT/io.containerd.metadata.v1.bolt/meta.db``, bbolt: ``v1/<namespace>/images/<name>/
target/{digest,mediatype,size}``) and the blobs in its content store
(``ROOT/io.containerd.content.v1.content/blobs/sha256/<hex>``, the same tree as an OCI
layout's ``blobs``). Both are read here, the database with ``bolt``'s read-only reader and
the blobs through ``oci.DirStore`` (links refused, digests checked), so a node's images are
read from ``/var/lib/containerd``, or from a node root mounted elsewhere, whether containerd
runs or not.

Options after the reference, as a query: ``containerd:REF?namespace=NS&root=DIR`` (``root``:
a mounted node's ``/``; containerd's root is ``DIR/var/lib/containerd``) or
``&dir=CONTAINERD_ROOT`` (containerd's root itself). The namespace defaults to
``$CONTAINERD_NAMESPACE`` (what ``ctr`` reads), else ``k8s.io`` (the kubelet's).

Running containers (``containers()``): a container record (``v1/<ns>/containers/<id>``,
with its ``image``) is running while its task's bundle directory exists in containerd's
state directory (``/run/containerd/io.containerd.runtime.v2.task/<ns>/<id>``): the runtime
v2 shim creates it when the task starts and removes it when the task is deleted.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from ..errors import ImageFormatError, SourceNotFoundError, UsageError
from .base import ReadContext, Source, SourceResult
from .bolt import Bolt, BoltError, Bucket
from .image import (
    blob_path,
    check_digest,
    check_manifest_type,
    check_platform,
    choose_manifest,
    is_index,
    make_target,
    parse_json,
    plan_from_manifest,
    read_layers,
    split_reference,
    verify,
)
from .oci import DirStore

DEFAULT_NAMESPACE = "k8s.io"
META_DB = "io.containerd.metadata.v1.bolt/meta.db"
CONTENT = "io.containerd.content.v1.content"
TASKS = "io.containerd.runtime.v2.task"


@dataclass
class ContainerdImage:
    namespace: str
    name: str
    digest: str
    media_type: str | None
    size: int | None


@dataclass
class ContainerdContainer:
    namespace: str
    id: str
    image: str
    running: bool


def split_options(location: str) -> tuple[str, dict[str, str]]:
    ref, sep, query = location.partition("?")
    opts: dict[str, str] = {}
    if sep:
        for k, v in parse_qs(query, keep_blank_values=True).items():
            if k not in ("namespace", "root", "dir"):
                raise UsageError(f"containerd:{location}: unknown option {k!r} "
                                 "(namespace, root, dir)")
            opts[k] = v[-1]
    return ref, opts


def containerd_root(opts: dict[str, str]) -> str:
    if "dir" in opts:
        return opts["dir"]
    return os.path.join(opts.get("root", "/"), "var/lib/containerd")


def _open_meta(root: str, label: str) -> tuple[Any, Bucket]:
    path = os.path.join(root, META_DB)
    try:
        f = open(path, "rb")  # noqa: SIM115 - the caller closes it
    except FileNotFoundError:
        raise SourceNotFoundError(
            f"{label}: no containerd metadata database at {path}"
        ) from None
    except OSError as e:
        raise SourceNotFoundError(f"{label}: cannot open {path}: {e.strerror}") from None
    try:
        db = Bolt(f, os.fstat(f.fileno()).st_size, path)
        v1 = db.root().bucket(b"v1")
    except BoltError as e:
        f.close()
        raise ImageFormatError(f"{label}: {e}") from None
    if v1 is None:
        f.close()
        raise ImageFormatError(f"{label}: {path} has no v1 bucket (not containerd's)")
    return f, v1


def _str(b: Bucket, key: bytes) -> str | None:
    v = b.get(key)
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else None


def _varint(v: bytes | Bucket | None) -> int | None:
    """containerd stores sizes as Go varints (zig-zag)."""
    if not isinstance(v, bytes) or not v:
        return None
    result = shift = 0
    for b in v[:10]:
        result |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            break
    return (result >> 1) ^ -(result & 1)


def list_images(root: str, namespace: str | None = None, label: str = "containerd") -> list[
    ContainerdImage
]:
    """Every image record (of ``namespace``, or of all namespaces)."""
    f, v1 = _open_meta(root, label)
    out: list[ContainerdImage] = []
    try:
        for ns, _, nsb in v1.items():
            if nsb is None or (namespace is not None and ns.decode() != namespace):
                continue
            images = nsb.bucket(b"images")
            if images is None:
                continue
            for name, _, ib in images.items():
                target = ib.bucket(b"target") if ib is not None else None
                if target is None:
                    continue
                digest = _str(target, b"digest")
                if digest is None:
                    continue
                out.append(ContainerdImage(
                    ns.decode("utf-8", "replace"), name.decode("utf-8", "replace"), digest,
                    _str(target, b"mediatype"), _varint(target.get(b"size")),
                ))
    except BoltError as e:
        raise ImageFormatError(f"{label}: {e}") from None
    finally:
        f.close()
    return out


def containers(root: str, state: str, label: str = "containerd") -> list[ContainerdContainer]:
    """Every container record with its image, and whether its task runs (see the module doc)."""
    f, v1 = _open_meta(root, label)
    out: list[ContainerdContainer] = []
    try:
        for ns, _, nsb in v1.items():
            cb = nsb.bucket(b"containers") if nsb is not None else None
            if cb is None:
                continue
            nss = ns.decode("utf-8", "replace")
            for cid, _, c in cb.items():
                if c is None:
                    continue
                ids = cid.decode("utf-8", "replace")
                running = bool(ids) and "/" not in ids and ids not in (".", "..") and os.path.isdir(
                    os.path.join(state, TASKS, nss, ids)
                )
                out.append(ContainerdContainer(nss, ids, _str(c, b"image") or "", running))
    except BoltError as e:
        raise ImageFormatError(f"{label}: {e}") from None
    finally:
        f.close()
    return out


def _candidates(ref: str) -> list[str]:
    """``foo`` -> docker.io/library/foo:latest and the other spellings containerd stores."""
    name, tag, digest = split_reference(ref)
    names = [name]
    first = name.split("/", 1)[0]
    if "/" not in name:
        names.append(f"docker.io/library/{name}")
    elif "." not in first and ":" not in first and first != "localhost":
        names.append(f"docker.io/{name}")
    out = []
    for n in names:
        if digest:
            out.append(f"{n}@{digest}")
            out.append(f"{n}:{tag or 'latest'}@{digest}")
        out.append(f"{n}:{tag or 'latest'}")
    return out


def find_image(images: list[ContainerdImage], ref: str) -> ContainerdImage | None:
    by_name = {i.name: i for i in images}
    for cand in [ref, *_candidates(ref)]:
        if cand in by_name:
            return by_name[cand]
    if ref.startswith("sha256:"):
        hits = [i for i in images if i.digest == ref]
        if hits:
            return hits[0]
    return None


class ContainerdSource(Source):
    """``containerd:REF[?namespace=NS&root=DIR|dir=CONTAINERD_ROOT]``."""

    scheme = "containerd"

    def read(self, ctx: ReadContext) -> SourceResult:
        ref, opts = split_options(self.location)
        namespace = opts.get("namespace") or os.environ.get("CONTAINERD_NAMESPACE") or (
            DEFAULT_NAMESPACE
        )
        root = containerd_root(opts)
        label = f"containerd:{ref}"
        images = list_images(root, namespace, label)
        img = find_image(images, ref)
        if img is None:
            avail = ", ".join(sorted(i.name for i in images)[:10]) or "none"
            raise SourceNotFoundError(
                f"{label}: no such image in namespace {namespace} of {root} (images: {avail})"
            )
        content = os.path.join(root, CONTENT)
        store = DirStore(content, f"containerd:{img.name}")
        try:
            desc: dict[str, Any] = {"digest": check_digest(img.digest, label)}
            if img.media_type:
                desc["mediaType"] = img.media_type
            for _ in range(8):
                digest = desc["digest"]
                path = blob_path(digest)
                if not store.exists(path):
                    raise ImageFormatError(
                        f"{store.label}: blob {digest} is not in the content store {content}"
                    )
                data = store.read_small(path, f"manifest {digest}")
                verify(data, digest, f"{store.label}: manifest {digest}")
                doc = parse_json(data, f"{store.label}: manifest {digest}")
                if not isinstance(doc, dict):
                    raise ImageFormatError(f"{store.label}: manifest {digest} is not an object")
                mt = desc.get("mediaType") or doc.get("mediaType")
                if is_index(mt, doc):
                    desc = choose_manifest(doc, ctx, store.label, f"{store.label}: index {digest}")
                    continue
                check_manifest_type(mt, store.label, digest)
                plan = plan_from_manifest(store, digest, doc, ctx)
                break
            else:
                raise ImageFormatError(f"{store.label}: image indexes nested too deeply")
            name, tag, _ = split_reference(img.name)
            plan.tags = [tag] if tag else []  # as for OCI layouts: the subject is name:tag
            plan.name = name
            plan.manifest_digest = img.digest
            check_platform(plan, ctx, store.label)
            layers = read_layers(store, plan, ctx)
        finally:
            store.close()
        return SourceResult(
            target=make_target(self.reference, "containerd", plan, layers), layers=layers
        )
