"""Image sources: where the bytes of a scan come from.

``resolve_source(reference)`` turns what the user typed into a ``Source``:

* an explicit prefix: ``docker:REF``, ``registry:REF``, ``docker-archive:PATH[:NAME:TAG|:@N]``,
  ``oci-archive:PATH[:TAG]``, ``oci:DIR[:TAG]``, ``dir:PATH``, ``sif:PATH``,
  ``containerd:REF``, ``containers-storage:REF``;
* a path to an existing file (a SIF file, told apart by its magic; a ``docker save`` or
  OCI archive, told apart by its members) or directory (an OCI layout if it has ``oci-layout``, else a root filesystem);
* otherwise an image reference (``name[:tag][@sha256:...]``), looked up in this order:
  1. the local Docker Engine, when it is reachable and has the image;
  2. the registry the reference names (Docker Hub when it names none), pulled directly.
  When neither has it, the error says why each failed.

``docker:`` always means the Engine, so the official ``docker`` image is ``docker:docker:TAG``;
``registry:`` (or ``--source registry``) always means the registry, skipping the Engine.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import ImageFormatError, SourceNotFoundError, UsageError
from ..fsview.types import Limits
from .base import ReadContext, Source, SourceResult

if TYPE_CHECKING:
    from .archive import AutoArchiveSource, DockerArchiveSource, OciArchiveSource
    from .containerd import ContainerdSource
    from .containers_storage import ContainersStorageSource
    from .directory import DirectorySource
    from .docker_engine import DockerEngineSource
    from .oci import OciLayoutSource
    from .registry import RegistryOptions, RegistrySource
    from .sif import SifSource

#: scheme -> (module of this package, class); a source's module loads when it is used: a
#: scan of an archive imports no registry client (the registry, containerd and SIF modules
#: cost ~20 ms of every run on a 2-core VM)
_SOURCE_CLASSES: dict[str, tuple[str, str]] = {
    "containerd": ("containerd", "ContainerdSource"),
    "containers-storage": ("containers_storage", "ContainersStorageSource"),
    "docker": ("docker_engine", "DockerEngineSource"),
    "docker-archive": ("archive", "DockerArchiveSource"),
    "oci-archive": ("archive", "OciArchiveSource"),
    "oci": ("oci", "OciLayoutSource"),
    "dir": ("directory", "DirectorySource"),
    "registry": ("registry", "RegistrySource"),
    "sif": ("sif", "SifSource"),
}
#: other names this package exports, by module
_EXPORTS: dict[str, str] = {
    "AutoArchiveSource": "archive",
    "RegistryOptions": "registry",
    **{cls: mod for mod, cls in _SOURCE_CLASSES.values()},
}


def __getattr__(name: str) -> Any:
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{mod}"), name)


class _Sources(Mapping[str, "type[Source]"]):
    """scheme -> Source class, each imported on first use."""

    def __getitem__(self, scheme: str) -> type[Source]:
        mod, cls = _SOURCE_CLASSES[scheme]
        got: type[Source] = getattr(importlib.import_module(f"{__name__}.{mod}"), cls)
        return got

    def __iter__(self) -> Iterator[str]:
        return iter(_SOURCE_CLASSES)

    def __len__(self) -> int:
        return len(_SOURCE_CLASSES)

    def __contains__(self, scheme: object) -> bool:
        return scheme in _SOURCE_CLASSES


SOURCES: Mapping[str, type[Source]] = _Sources()
RESERVED: tuple[str, ...] = ()

_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOCKER_REF = re.compile(
    rf"^(?:[A-Za-z0-9.-]+(?::[0-9]+)?/)?{_COMPONENT}(?:/{_COMPONENT})*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$"
)

_HINT = (
    "Pass registry:REF, docker-archive:PATH, oci-archive:PATH, oci:DIR[:TAG], dir:PATH "
    "or sif:PATH"
)


def _explicit(
    scheme: str, reference: str, location: str, registry: RegistryOptions | None = None
) -> Source:
    if scheme in RESERVED:
        raise UsageError(f"{reference!r}: {scheme} sources are not implemented yet")
    cls = SOURCES.get(scheme)
    if cls is None:
        known = ", ".join(sorted(SOURCES))
        raise UsageError(f"unknown source {scheme!r} (expected one of: {known})")
    if not location:
        raise UsageError(f"{reference!r}: nothing after '{scheme}:'")
    if scheme == "registry":
        from .registry import RegistrySource

        return RegistrySource(reference, location, registry)
    return cls(reference, location)


def resolve_source(
    reference: str, *, source: str | None = None, registry: RegistryOptions | None = None
) -> Source:
    """The Source for ``reference``; ``source`` forces a scheme (then the prefix is optional).

    ``registry``: credentials and insecure hosts for registry pulls (explicit or fallback).
    """
    if not reference:
        raise UsageError("empty image reference")
    if source is not None:
        return _explicit(source, reference, reference.removeprefix(source + ":"), registry)
    scheme, sep, rest = reference.partition(":")
    if sep and (scheme in SOURCES or scheme in RESERVED):
        return _explicit(scheme, reference, rest, registry)

    if os.path.isfile(reference):
        from .archive import AutoArchiveSource, DockerArchiveSource, OciArchiveSource, sniff_archive
        from .sif import SifSource, is_sif

        if is_sif(reference):
            return SifSource(reference, reference)
        kind = sniff_archive(reference, Limits())
        if kind == "docker-archive":
            return DockerArchiveSource(reference, reference)
        if kind == "oci-archive":
            return OciArchiveSource(reference, reference)
        if kind == "compressed":
            return AutoArchiveSource(reference, reference)
        raise ImageFormatError(
            f"{reference}: not an image archive (no manifest.json or index.json)"
        )
    if os.path.isdir(reference):
        from .directory import DirectorySource
        from .oci import OciLayoutSource

        if os.path.isfile(os.path.join(reference, "oci-layout")):
            return OciLayoutSource(reference, reference)
        return DirectorySource(reference, reference)
    if os.path.lexists(reference):
        raise ImageFormatError(f"{reference}: not a regular file or directory")

    if _DOCKER_REF.match(reference):
        from .docker_engine import DockerEngineSource
        from .registry import RegistrySource

        engine = DockerEngineSource(reference, reference)
        why = engine.probe()
        if why is None:
            return engine
        tried = f"tried docker ({why})"
        try:
            remote = RegistrySource(reference, reference, registry)
        except UsageError as e:
            tried += f"; not a registry reference ({e})"
        else:
            why_remote = remote.probe()
            if why_remote is None:
                return remote
            tried += f"; tried registry ({why_remote})"
    else:
        tried = "it is not a valid image reference"
    raise SourceNotFoundError(
        f"image {reference!r} not found: {tried}; it is not a file or directory. {_HINT}"
    )


__all__ = [
    "SOURCES",
    "AutoArchiveSource",
    "ContainerdSource",
    "ContainersStorageSource",
    "DirectorySource",
    "DockerArchiveSource",
    "DockerEngineSource",
    "OciArchiveSource",
    "OciLayoutSource",
    "ReadContext",
    "RegistryOptions",
    "RegistrySource",
    "SifSource",
    "Source",
    "SourceResult",
    "resolve_source",
]
