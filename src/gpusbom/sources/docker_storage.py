"""A Docker Engine image's layers read from the Engine's own storage, without ``docker save``.

The Engine keeps, per layer (``image/<driver>/layerdb/sha256/<chain id>/``), the layer's
diff_id, the id of its graph-driver directory (``cache-id``) and ``tar-split.json.gz``:
every tar header and padding byte of the layer tar it was loaded from, with the names and
sizes of the files in between. ``docker save`` rebuilds each layer tar from that
metadata and the files' contents in the driver's directory; this module does the same,
in-process, and feeds the rebuilt tar to ``fsview.layer.read_layer``. The bytes are the
ones ``docker save`` would send (the same tar-split assembly), so the sha256 of every
rebuilt layer is checked against its diff_id and the results are those of the save
stream; what is saved is the export (the Engine writing an outer tar through its socket)
and the single pass over it: layers are read in parallel, each from its own files.

Where it applies (otherwise the save stream is used, as before):

* the Engine is local (``DOCKER_HOST`` unset or ``unix://``) and its data root
  (``DockerRootDir``) is readable by this process (in practice: root);
* the graph driver is ``overlay2`` (files under ``overlay2/<cache-id>/diff``, the layer's
  own changes) or ``vfs`` (``vfs/dir/<cache-id>``: a full snapshot of the filesystem up to
  that layer; only the files the layer's tar-split names are read from it, which are
  that layer's versions, so the rebuilt tar is still the layer's diff, not the snapshot);
  the containerd image store (Engine 24+ with the containerd snapshotter) is not read
  here (``containerd:REF?namespace=moby`` reads its content store directly);
* the image config on disk hashes to the image id, every layer's ``diff`` file names its
  diff_id, and the image's manifest digest does not depend on the export: it has a
  repo digest, or the Engine is older than API 1.44 (its ``docker save`` has no OCI index).

File contents are opened one path component at a time with ``O_NOFOLLOW`` below the
layer's directory, so a link in the Engine's storage is never followed (onto the host or
elsewhere); only regular files are read. Any doubt (a missing file, a link, a size or
digest that does not match) raises ``DirectReadError`` and the caller falls back to the
save stream, which then judges the image exactly as before.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import hashlib
import io
import json
import os
import re
import stat
from collections.abc import Iterator
from typing import Any

from .. import settings
from ..errors import GpusbomError
from ..fsview.types import LayerIndex
from .base import ReadContext
from .image import BlobStore, ImageConfig, ImagePlan, LayerPlan, stream_layer
from .image.plan import parse_config

#: the image config is read from disk up to this size (Docker's own limit is 8 MiB)
MAX_CONFIG = 8 << 20
#: file contents are copied in pieces of this size
PIECE = 1 << 20
_CACHE_ID = re.compile(r"^[0-9a-zA-Z_-]{1,128}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_O_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
#: drivers whose directories hold a layer's files at their paths
DRIVERS = ("overlay2", "vfs")


class DirectReadError(GpusbomError):
    """The Engine's storage cannot be read directly for this image (use the save stream)."""


def direct_enabled() -> bool:
    """``GPUSBOM_DOCKER_DIRECT=0`` always uses the save stream."""
    return bool(settings.get("docker_direct"))


def chain_ids(diff_ids: list[str]) -> list[str]:
    """The layers' chain ids (the OCI image spec's ChainID)."""
    out: list[str] = []
    for d in diff_ids:
        out.append(
            d if not out else "sha256:" + hashlib.sha256(f"{out[-1]} {d}".encode()).hexdigest()
        )
    return out


def _read_text(path: str, limit: int = 4096) -> str:
    fd = os.open(path, _O_FILE)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise DirectReadError(f"{path}: not a regular file")
        return os.read(fd, limit).decode("ascii", "replace").strip()
    finally:
        os.close(fd)


def _components(name: str) -> list[str]:
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise DirectReadError(f"unsafe file name {name!r} in the layer's tar-split")
    return parts


def _open_dir_under(root_fd: int, parts: list[str], name: str) -> int:
    """A descriptor of the directory ``parts`` below ``root_fd`` (``root_fd`` itself when
    empty), every component opened with ``O_NOFOLLOW`` (a link on the way is refused)."""
    fd = root_fd
    try:
        for p in parts:
            nfd = os.open(p, _O_DIR, dir_fd=fd)
            if fd != root_fd:
                os.close(fd)
            fd = nfd
    except OSError as e:
        if fd != root_fd:
            os.close(fd)
        raise DirectReadError(
            f"cannot open {name!r} in the layer directory: {e.strerror}"
        ) from None
    return fd


def _open_file_in(dir_fd: int, base: str, name: str) -> int:
    """A descriptor of the regular file ``base`` in ``dir_fd`` (not followed if a link)."""
    try:
        fd = os.open(base, _O_FILE, dir_fd=dir_fd)
    except OSError as e:
        raise DirectReadError(
            f"cannot open {name!r} in the layer directory: {e.strerror}"
        ) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise DirectReadError(f"{name!r} in the layer directory is not a regular file")
    return fd


class TarSplitStream(io.RawIOBase):
    """The layer tar rebuilt from ``tar-split.json.gz`` and the files below ``layer_dir``."""

    def __init__(self, tar_split: str, layer_dir: str) -> None:
        self._split_path = tar_split
        self._parent: list[str] | None = None  # the directory of the last file read
        self._parent_fd = -1
        self._gen: Iterator[bytes] | None = None
        self._buf = b""
        self._dir_fd = -1
        try:
            self._dir_fd = os.open(layer_dir, _O_DIR)
        except OSError as e:
            raise DirectReadError(f"cannot open the layer directory {layer_dir}: {e}") from None

    def readable(self) -> bool:
        return True

    def _pieces(self) -> Iterator[bytes]:
        try:
            yield from self._entries()
        except (OSError, ValueError, EOFError) as e:  # a damaged tar-split (gzip, base64)
            raise DirectReadError(f"unreadable tar-split {self._split_path}: {e}") from None

    def _entries(self) -> Iterator[bytes]:
        with gzip.open(self._split_path, "rb") as f:
            for line in f:
                if not line.strip():
                    continue
                try:
                    ent = json.loads(line)
                    kind = ent["type"]
                except (ValueError, KeyError, TypeError):
                    raise DirectReadError("malformed tar-split entry") from None
                if kind == 2:  # a segment: raw tar header / padding bytes
                    payload = ent.get("payload")
                    if payload:
                        yield base64.b64decode(payload)
                    continue
                if kind != 1:
                    raise DirectReadError(f"unknown tar-split entry type {kind!r}")
                size = ent.get("size") or 0
                if not isinstance(size, int) or size < 0:
                    raise DirectReadError("malformed tar-split file size")
                if size == 0:
                    continue
                raw_name = ent.get("name_raw")  # set for names that are not UTF-8
                name = os.fsdecode(base64.b64decode(raw_name)) if raw_name else ent.get("name")
                if not isinstance(name, str):
                    raise DirectReadError("tar-split file entry without a name")
                yield from self._file(name, size)

    def _file(self, name: str, size: int) -> Iterator[bytes]:
        parts = _components(name)
        parent = parts[:-1]
        if parent != self._parent:  # tar order keeps a directory's files together
            self._close_parent()
            self._parent_fd = _open_dir_under(self._dir_fd, parent, name)
            self._parent = parent
        fd = _open_file_in(self._parent_fd, parts[-1], name)
        try:
            if os.fstat(fd).st_size != size:
                raise DirectReadError(f"{name!r} in the layer directory has another size")
            left = size
            while left > 0:
                data = os.read(fd, min(PIECE, left))
                if not data:
                    raise DirectReadError(f"{name!r} in the layer directory is shorter")
                left -= len(data)
                yield data
        finally:
            os.close(fd)

    def _close_parent(self) -> None:
        if self._parent_fd != -1 and self._parent_fd != self._dir_fd:
            os.close(self._parent_fd)
        self._parent_fd = -1
        self._parent = None

    def readinto(self, b: Any) -> int:
        if self._gen is None:
            self._gen = self._pieces()
        want = len(b)
        buf = self._buf
        if not buf:
            parts: list[bytes] = []
            got = 0
            # gather small pieces (512-byte headers) into one read, up to the caller's size
            for piece in self._gen:
                parts.append(piece)
                got += len(piece)
                if got >= want:
                    break
            buf = b"".join(parts)
        n = min(want, len(buf))
        b[:n] = buf[:n]
        self._buf = buf[n:]
        return n

    def close(self) -> None:
        if self._gen is not None:
            with contextlib.suppress(Exception):
                self._gen.close()  # type: ignore[attr-defined]
        self._close_parent()
        if self._dir_fd >= 0:
            os.close(self._dir_fd)
            self._dir_fd = -1
        super().close()


class EngineDirStore(BlobStore):
    """Layers (paths: chain id hex) rebuilt from a local Engine's graph-driver storage."""

    parallel_safe = True  # each layer reads its own files
    fork_safe = True  # plain files only, opened in the reader

    def __init__(self, root: str, driver: str, label: str) -> None:
        self.root = root
        self.driver = driver
        self.label = label

    def exists(self, path: str) -> bool:
        return os.path.isdir(self._layerdb(path))

    def read_small(self, path: str, what: str) -> bytes:
        raise DirectReadError(f"{self.label}: {what} is not read from the layer store")

    def _layerdb(self, chain_hex: str) -> str:
        return os.path.join(self.root, "image", self.driver, "layerdb", "sha256", chain_hex)

    def layer_dir(self, chain_hex: str, diff_id: str) -> tuple[str, str]:
        """(tar-split path, layer directory) of one layer, after checking its diff file."""
        db = self._layerdb(chain_hex)
        if _read_text(os.path.join(db, "diff")) != diff_id:
            raise DirectReadError(
                f"{self.label}: layer store entry {chain_hex} is for another diff_id"
            )
        cache_id = _read_text(os.path.join(db, "cache-id"))
        if not _CACHE_ID.match(cache_id):
            raise DirectReadError(f"{self.label}: malformed cache-id in {db}")
        if self.driver == "overlay2":
            d = os.path.join(self.root, "overlay2", cache_id, "diff")
        else:
            d = os.path.join(self.root, "vfs", "dir", cache_id)
        split = os.path.join(db, "tar-split.json.gz")
        if not os.path.isfile(split) or not os.path.isdir(d):
            raise DirectReadError(f"{self.label}: layer {diff_id} has no tar-split or directory")
        return split, d

    def read_layer(self, path: str, layer: LayerPlan, total: int, ctx: ReadContext) -> LayerIndex:
        split, d = self.layer_dir(path, layer.diff_id)
        where = f"{self.label}: layer {layer.index} ({layer.diff_id})"
        stream = TarSplitStream(split, d)
        try:
            with io.BufferedReader(stream, PIECE) as f:
                return stream_layer(f, layer, ctx, where, None)
        finally:
            stream.close()


def _local_root(client: Any) -> tuple[str, str, dict[str, Any]] | None:
    """(data root, driver, info) of a local Engine whose storage this process can read."""
    host = os.environ.get("DOCKER_HOST", "")
    if host and not host.startswith("unix://"):
        return None
    try:
        info = client.api.info()
    except Exception:  # noqa: BLE001 - no direct path then; the save stream reports errors
        return None
    root, driver = info.get("DockerRootDir"), info.get("Driver")
    if not isinstance(root, str) or driver not in DRIVERS or not os.path.isabs(root):
        return None
    if not os.access(os.path.join(root, "image", driver), os.R_OK | os.X_OK):
        return None
    return root, driver, info


def plan_direct(
    client: Any, inspect: dict[str, Any], label: str
) -> tuple[EngineDirStore, ImagePlan] | None:
    """The store and plan for reading ``inspect``'s image from the Engine's storage, or None
    when it does not apply (see the module docstring)."""
    if not direct_enabled():
        return None
    found = _local_root(client)
    if found is None:
        return None
    root, driver, _ = found
    image_id = inspect.get("Id")
    if not isinstance(image_id, str) or not image_id.startswith("sha256:"):
        return None
    hexid = image_id[7:]
    if not _HEX64.match(hexid):
        return None
    repo_digests = [d for d in inspect.get("RepoDigests") or [] if isinstance(d, str)]
    if not repo_digests and _api_at_least(_api_version(client), (1, 44)):
        return None  # the save stream's OCI index names a manifest only the export makes
    cfg_path = os.path.join(root, "image", driver, "imagedb", "content", "sha256", hexid)
    try:
        fd = os.open(cfg_path, _O_FILE)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            data = os.read(fd, MAX_CONFIG + 1)
        finally:
            os.close(fd)
    except OSError:
        return None
    if len(data) > MAX_CONFIG or "sha256:" + hashlib.sha256(data).hexdigest() != image_id:
        return None
    try:
        config: ImageConfig = parse_config(data, image_id, f"{label}: config {image_id}")
    except GpusbomError:
        return None
    store = EngineDirStore(root, driver, label)
    layers: list[LayerPlan] = []
    for i, (diff_id, chain) in enumerate(
        zip(config.diff_ids, chain_ids(config.diff_ids), strict=True)
    ):
        try:
            store.layer_dir(chain[7:], diff_id)
        except (DirectReadError, OSError):
            return None
        layers.append(
            LayerPlan(
                index=i,
                path=chain[7:],
                diff_id=diff_id,
                digest=diff_id,  # the rebuilt tar is the diff: its sha256 is checked
                created_by=config.created_by[i],
            )
        )
    return store, ImagePlan(config=config, layers=layers)


def _api_version(client: Any) -> str:
    try:
        v = client.api.version().get("ApiVersion")
    except Exception:  # noqa: BLE001 - unknown: treated as a new Engine
        return ""
    return v if isinstance(v, str) else ""


def _api_at_least(version: str, want: tuple[int, int]) -> bool:
    try:
        major, minor = (int(x) for x in version.split(".")[:2])
    except ValueError:
        return True  # unknown: assume a new Engine (the cautious answer here)
    return (major, minor) >= want
