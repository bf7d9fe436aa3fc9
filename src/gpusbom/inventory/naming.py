"""One naming rule for images and SBOMs in the inventory: ``registry/repo:tag`` from what the
user gave, shown as ``registry/repo:tag@digest`` (:func:`display`).

- a tag that is a whole reference (``docker.io/evalgpu/nvidia-pip:latest``, as
  ``docker save`` writes RepoTags) is the name as it is; a bare tag (``latest``, what a
  registry or an OCI layout's ``ref.name`` gives) is appended to the repository name;
- never a local path: an archive or layout without a repository name is named by its file
  name (``demo.oci.tar:demo``), and an SBOM whose subject is a path (Syft names an archive
  input by its path: ``/tmp/x/image.tar``) by that path's file name;
- the digest is not part of the subject (it changes when the tag moves: the subject keeps
  one history per tag); it is shown after ``@``.
"""

from __future__ import annotations

import posixpath

from ..model import Target

__all__ = ["display", "subject_of_target"]

_SCHEMES = ("registry:", "docker:", "docker-daemon:", "podman:", "containerd:",
            "docker-archive:", "oci-archive:", "oci:", "dir:", "sbom:", "sif:", "file:")
_LOCAL = ("docker-archive:", "oci-archive:", "oci:", "dir:", "sbom:", "sif:", "file:")


def _is_path(text: str) -> bool:
    return text.startswith(("/", "./", "../", "~")) or "\\" in text


def _basename(text: str) -> str:
    return posixpath.basename(text.rstrip("/")) or text


def _is_reference(tag: str) -> bool:
    """``repo:tag`` or ``host/repo:tag`` rather than a bare tag."""
    return "/" in tag or ":" in tag


def _local_name(ref: str) -> str | None:
    """The file name of a local input (``oci:DIR:name`` -> DIR's name), else None."""
    for scheme in _LOCAL:
        if ref.startswith(scheme):
            path = ref[len(scheme):]
            if scheme == "oci:" and ":" in path.rsplit("/", 1)[-1]:
                path = path.rsplit(":", 1)[0]
            return _basename(path)
    if _is_path(ref):
        return _basename(ref)
    return None


def subject_of_target(t: Target) -> str:
    """The subject of an image, directory or SBOM target (hosts are named by host name)."""
    name = t.name.strip() if t.name else None
    if name and _is_path(name):
        name = _basename(name)
    tags = [x.strip() for x in t.tags if x and x.strip()]
    for whole in tags:
        if _is_reference(whole) and not _is_path(whole):
            return whole
    tag = tags[0] if tags else None
    if name:
        last = name.rsplit("/", 1)[-1]
        return f"{name}:{tag}" if tag and ":" not in last else name
    ref = t.reference.strip()
    local = _local_name(ref)
    if local is not None:
        return f"{local}:{tag}" if tag else local
    for scheme in _SCHEMES:
        ref = ref.removeprefix(scheme)
    return ref


def display(subject: str, digest: str | None) -> str:
    """``registry/repo:tag@sha256:...``: the subject with the digest it had at that scan."""
    if not digest or "@" in subject:
        return subject
    return f"{subject}@{digest}"
