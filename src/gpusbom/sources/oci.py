"""``oci:DIR[:TAG]``: an OCI image layout directory.

Every file of the layout is opened relative to the layout root, one path component
at a time, with ``O_NOFOLLOW``: a layout whose blob (or ``blobs`` directory) is a
symlink, say to ``/etc/shadow``, is refused rather than followed. Manifest and config
digests are checked here; layer digests by ``read_layer``.
"""

from __future__ import annotations

import errno
import os
import stat

from ..errors import DigestMismatchError, ImageFormatError, SourceNotFoundError, UnsafeArchiveError
from ..fsview.types import LayerIndex
from .archive import split_selector
from .base import ReadContext, Source, SourceResult
from .image import (
    MAX_JSON_BYTES,
    BlobStore,
    LayerPlan,
    check_platform,
    make_target,
    plan_oci,
    read_layers,
    stream_layer,
)

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _what(path: str) -> str:
    if path.startswith("blobs/") and path.count("/") == 2:
        _, alg, hexpart = path.split("/")
        return f"blob {alg}:{hexpart}"
    return path


class DirStore(BlobStore):
    """A layout directory; paths never leave it and links are never followed."""

    parallel_safe = True  # each layer opens its own file descriptor
    fork_safe = True  # a forked child reads a layer through the inherited directory fd

    def __init__(self, root: str, label: str) -> None:
        self.label = label
        try:
            self._root = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise SourceNotFoundError(f"{label}: no such directory") from None
        except NotADirectoryError:
            raise SourceNotFoundError(f"{label}: not a directory (use oci-archive:)") from None
        except OSError as e:
            raise SourceNotFoundError(f"{label}: cannot open: {e.strerror}") from None

    def close(self) -> None:
        if self._root >= 0:
            os.close(self._root)
            self._root = -1

    def _refuse_if_link(self, name: str, dir_fd: int, shown: str) -> None:
        try:
            st = os.lstat(name, dir_fd=dir_fd)
        except OSError:
            return
        if stat.S_ISLNK(st.st_mode):
            raise UnsafeArchiveError(f"{self.label}: {shown} is a symlink; refusing to follow it")

    def _open(self, path: str) -> int | None:
        """fd of the regular file at ``path`` (relative), None if absent."""
        parts = path.split("/")
        if any(p in ("", ".", "..") for p in parts):
            raise ImageFormatError(f"{self.label}: invalid path {path!r}")
        fd = self._root
        try:
            for i, comp in enumerate(parts[:-1]):
                shown = "/".join(parts[: i + 1])
                try:
                    nfd = os.open(comp, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    return None
                except OSError as e:
                    if e.errno in (errno.ELOOP, errno.ENOTDIR):
                        self._refuse_if_link(comp, fd, shown)
                        return None
                    raise ImageFormatError(
                        f"{self.label}: cannot open {shown}: {e.strerror}"
                    ) from None
                if fd != self._root:
                    os.close(fd)
                fd = nfd
            try:
                ffd = os.open(parts[-1], _FILE_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                return None
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.EMLINK):
                    self._refuse_if_link(parts[-1], fd, _what(path))
                if e.errno == errno.EISDIR:
                    raise ImageFormatError(
                        f"{self.label}: {_what(path)} is not a regular file"
                    ) from None
                raise ImageFormatError(
                    f"{self.label}: cannot open {_what(path)}: {e.strerror}"
                ) from None
        finally:
            if fd != self._root:
                os.close(fd)
        if not stat.S_ISREG(os.fstat(ffd).st_mode):
            os.close(ffd)
            raise ImageFormatError(f"{self.label}: {_what(path)} is not a regular file")
        return ffd

    def exists(self, path: str) -> bool:
        fd = self._open(path)
        if fd is None:
            return False
        os.close(fd)
        return True

    def read_small(self, path: str, what: str) -> bytes:
        fd = self._open(path)
        if fd is None:
            raise ImageFormatError(f"{self.label}: {what} is missing ({path})")
        with os.fdopen(fd, "rb") as f:
            data = f.read(MAX_JSON_BYTES + 1)
        if len(data) > MAX_JSON_BYTES:
            raise ImageFormatError(
                f"{self.label}: {what} is larger than the {MAX_JSON_BYTES} bytes allowed "
                "for image metadata"
            )
        return data

    def read_layer(self, path: str, layer: LayerPlan, total: int, ctx: ReadContext) -> LayerIndex:
        fd = self._open(path)
        if fd is None:
            raise ImageFormatError(f"{self.label}: layer {layer.index} {_what(path)} is missing")
        size = os.fstat(fd).st_size
        if layer.size is not None and size != layer.size:
            os.close(fd)
            raise DigestMismatchError(
                f"{self.label}: layer {layer.index} {_what(path)}: size mismatch: expected "
                f"{layer.size} bytes ({layer.digest}), got {size}"
            )
        what = _what(path)
        where = f"{self.label}: layer {layer.index} {what}"
        with os.fdopen(fd, "rb", buffering=1 << 20) as f:
            return stream_layer(f, layer, ctx, where, size, total=total, what=what)


class OciLayoutSource(Source):
    """``oci:DIR[:TAG]``."""

    scheme = "oci"

    def read(self, ctx: ReadContext) -> SourceResult:
        path, tag = split_selector(self.location)
        label = f"oci:{path}"
        store = DirStore(path, label)
        try:
            if not store.exists("oci-layout"):
                raise ImageFormatError(f"{label}: not an OCI image layout (no oci-layout file)")
            plan = plan_oci(store, ctx, tag)
            check_platform(plan, ctx, label)
            layers = read_layers(store, plan, ctx)
        finally:
            store.close()
        return SourceResult(target=make_target(self.reference, "oci", plan, layers), layers=layers)
