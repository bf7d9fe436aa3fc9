"""Which CUDA Toolkit parts (tools and libraries a toolkit CVE may name: cuobjdump,
nvdisasm, nvJPEG, Nsight Systems ...) any file of the target holds.

The file names of each part are the catalog's (``part_files`` of the toolkit's row: the
row that declares them). The CUDA collector searches the target's whole file list for them (every CUDA
root, wheels, conda environments, per-tool packages: any directory) and records on each
toolkit component which parts it searched for (``parts-searched``) and which it found
(``parts-found``). The advisory matcher then shows a toolkit CVE whose named parts no
file holds as not affected (``cuda-part-absent``), on an image, host or directory scan
only: an SBOM lists no files.
"""

from __future__ import annotations

import functools
from typing import Any

from ..fsview.spec import PathSpec

__all__ = ["found", "part_files", "path_specs"]


@functools.lru_cache(maxsize=1)
def part_files() -> dict[str, tuple[str, ...]]:
    """part -> base-name globs of the files that hold it (the catalog's ``part_files``)."""
    from .. import catalog

    raw: Any = next((r.extra["part_files"] for r in catalog.products() if r.extra.get("part_files")),
               {})
    out: dict[str, tuple[str, ...]] = {}
    if isinstance(raw, dict):
        for part, globs in raw.items():
            if isinstance(globs, list) and all(isinstance(g, str) for g in globs):
                out[str(part)] = tuple(globs)
    return out


def path_specs() -> tuple[PathSpec, ...]:
    """One listing-only glob (``/**/NAME``) per file name of every part."""
    globs = sorted({g for gs in part_files().values() for g in gs})
    return tuple(PathSpec("/**/" + g, max_size=0) for g in globs)


def found(fs: Any) -> dict[str, str]:
    """part -> the first file (sorted) of the target that holds it."""
    out: dict[str, str] = {}
    for part, globs in part_files().items():
        for g in globs:
            hits = fs.glob("/**/" + g)
            if hits:
                out[part] = hits[0]
                break
    return out


def annotate(props: dict[str, str], present: dict[str, str]) -> None:
    """Record the search on a toolkit component's properties."""
    props["parts-searched"] = " ".join(sorted(part_files()))
    props["parts-found"] = " ".join(sorted(present))
