"""CUDA Toolkit CVEs and the toolkit's parts (the tools and libraries a bulletin names).

A toolkit bulletin names the CUDA Toolkit, and its description the part the flaw is in
(``Vulnerability.parts``: cuobjdump, nvdisasm, nvJPEG, Nsight Systems ...). Three rules:

- a per-part package (``cuda-cuobjdump-12-8``, ``libnvjpeg-12-8``, conda ``cuda-nvdisasm``:
  catalog rows with ``part_of: cuda-toolkit`` and ``part``) is judged as its part of the
  toolkit release line in its name (``12-8``: every CUDA 12.8.x release) for a CVE that
  names that part, and is not the component of a CVE that names other parts;
- a toolkit component of an image, host or directory scan carries which parts the
  collector searched the whole file list for and found (``collectors.cuda_parts``): a CVE
  whose parts no file holds is not affected (``component_not_present``), with the file
  names searched;
- a CUDA library component judged as its toolkit release (cudart, cuBLAS ...) is not the
  component of a CVE that names other parts.
"""

from __future__ import annotations

import functools
import re

from .. import catalog
from ..model import Component
from .db import Affected, Vulnerability
from .verdicts import Verdict, _judge

__all__ = ["PartPackage", "absent_justification", "judge_part_package", "part_package"]

#: parts whose version begins with their toolkit's major.minor (cuobjdump 12.8.55 of 12.8)
_RELEASE_LINE_PARTS = frozenset({"cuobjdump", "nvdisasm", "cu++filt", "nvprune", "nvcc",
                                 "cudart", "nvrtc", "nvjitlink", "cupti", "nvvp"})
_XY = re.compile(r"-(\d+)-(\d+)$")
_MM = re.compile(r"^(?:\d+:)?(\d+)\.(\d+)")


class PartPackage(tuple[str, str, str]):
    """(part, toolkit release line ``12.8``, how that was read)."""

    __slots__ = ()

    @property
    def part(self) -> str:
        return self[0]

    @property
    def line(self) -> str:
        return self[1]

    @property
    def how(self) -> str:
        return self[2]


@functools.lru_cache(maxsize=4096)
def _part_row(ecosystem: str, name: str) -> str | None:
    for row in catalog.by_package(ecosystem, name):
        part = row.extra.get("part")
        if row.part_of == "cuda-toolkit" and isinstance(part, str):
            return part
    return None


def part_package(c: Component) -> PartPackage | None:
    """The toolkit part a package component is, with its release line; None when the
    component is no per-part package or its release line cannot be read."""
    if c.ecosystem not in ("deb", "rpm", "conda", "pypi"):
        return None
    part = _part_row(c.ecosystem, c.name)
    if part is None:
        return None
    base = re.sub(r"-(?:dev|devel)(?=-\d+-\d+$)", "", c.name.lower())
    m = _XY.search(base)
    if m:
        line = f"{m.group(1)}.{m.group(2)}"
        return PartPackage((part, line, f"package {c.name} is {part} of CUDA {line}"))
    mm = _MM.match(c.version or "")
    if part in _RELEASE_LINE_PARTS and mm:
        line = f"{mm.group(1)}.{mm.group(2)}"
        return PartPackage((part, line, f"{c.name} {c.version} is {part} of a CUDA {line}.x "
                                        "release"))
    return None


def judge_part_package(entries: list[Affected], c: Component, pp: PartPackage,
                       vuln: Vulnerability) -> Verdict | None:
    """A per-part package against one toolkit CVE's entries (None: not its component or
    not affected)."""
    if vuln.parts and pp.part not in vuln.parts:
        return None  # the vendor places the CVE in another part of the toolkit
    lo, hi = _judge(entries, c, pp.line), _judge(entries, c, f"{pp.line}.99999")
    if lo is None and hi is None:
        return None
    named = bool(vuln.parts)
    if lo is not None and hi is not None and lo.status == hi.status == "affected":
        reason = f"{pp.how}; every CUDA {pp.line}.x release is in the vendor range ({lo.reason})"
        if named:
            return Verdict("affected", lo.fixed, f"{reason}; the vendor places {vuln.id} "
                           f"in {pp.part}", "cuda-release")
        return Verdict("review", lo.fixed, f"{reason}; the bulletin names the CUDA Toolkit "
                       f"as a whole, not whether {pp.part} carries the flaw", "cuda-release")
    either = lo or hi
    return Verdict("review", either.fixed if either else None,
                   f"{pp.how}; some CUDA {pp.line}.x releases are in the vendor range, others "
                   "not, and the package's version does not say which release it is",
                   "cuda-release")


def absent_justification(vuln: Vulnerability, c: Component) -> str | None:
    """``component_not_present`` text when the scan searched every file of the target for
    every part the CVE names and found none; None otherwise."""
    if not vuln.parts:
        return None
    searched = set(c.properties.get("parts-searched", "").split())
    found = set(c.properties.get("parts-found", "").split())
    parts = set(vuln.parts)
    if not searched or not parts <= searched or parts & found:
        return None
    from ..collectors.cuda_parts import part_files

    files = part_files()
    names = ", ".join(sorted(parts))
    globs = sorted({g for p in parts for g in files.get(p, ())})
    where = (f"no file named {', '.join(globs)} in any directory of the target (every CUDA "
             "root, wheels, conda environments, per-tool packages)") if globs else (
        "a product NVIDIA ships only for other platforms")
    return (f"component_not_present: the vendor places {vuln.id} in {names}; gpusbom "
            f"searched the target's full file list: {where}")
