"""triton: OpenAI Triton (the GPU kernel compiler) installed from a wheel.

Distributions: ``triton``, ``pytorch-triton``, ``pytorch-triton-rocm``,
``pytorch-triton-xpu``, ``triton-xpu``; all install the ``triton`` package next to
their ``.dist-info``. Reported per install: the version from
``triton/__init__.py`` (``__version__``), the backends it carries
(``triton/backends/{nvidia,amd,intel}``), and what it bundles:

* NVIDIA tools in ``triton/backends/nvidia/bin`` (``ptxas``, ``ptxas-blackwell``,
  ``cuobjdump``, ``nvdisasm``): each tool's version from the
  ``Cuda compilation tools, release X.Y, VX.Y.Z`` string it carries, found by a
  bounded chunked scan of its bytes (never by running it). They are recorded as
  ``triton:bundled:<tool>`` properties of the Triton component: a bundled
  ``ptxas`` is not a CUDA toolkit, so they carry no ``cuda`` stack of their own.
* headers of other stacks (``backends/nvidia/include/cuda.h``,
  ``backends/amd/include/hip/hip_version.h``): ``triton:bundled-header:cuda`` /
  ``triton:bundled-header:hip``.

Evidence sits on files the wheel owns (``triton/__init__.py`` and the tools), so
fusion merges this into the wheel's ``pkg:pypi`` component.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from functools import partial
from typing import TYPE_CHECKING

from .._pep503 import canonicalize_name
from ..catalog import packages
from ..fsview.spec import PathSpec
from ..model import Component, ComponentType, EvidenceMethod
from . import register
from ._libs import generic_purl, scan_bytes, scan_stream
from ._premade import PremadeParser, premade
from .base import VIEW_ERRORS, CollectContext, Collector

if TYPE_CHECKING:
    from ..fsview.types import ContentRef

__all__ = ["TRITON_DISTRIBUTIONS", "TritonCollector", "dist_info_name", "py_string_assign"]

#: the PyPI distributions of OpenAI Triton (catalog/packages.yaml)
TRITON_DISTRIBUTIONS = tuple(packages.names_of("triton", "pypi"))
BACKENDS = ("nvidia", "amd", "intel")
NVIDIA_TOOLS = ("ptxas", "ptxas-blackwell", "cuobjdump", "nvdisasm")
_SMALL = 1024 * 1024
_TOOL_MAX = 256 * 1024 * 1024
_TOOL_RX = re.compile(rb"Cuda compilation tools, release (\d+\.\d+), V(\d+\.\d+\.\d+)")
_TOOL_NEEDLE = b"Cuda compilation tools, release "  # every _TOOL_RX match starts with it
_DIST_RX = re.compile(r"^([^/]+?)-([^-/]+)\.dist-info$")


def dist_info_name(dist_info_dir: str) -> tuple[str, str] | None:
    """(canonical project name, version) from a ``name-version.dist-info`` directory name."""
    m = _DIST_RX.match(posixpath.basename(dist_info_dir))
    if not m:
        return None
    return str(canonicalize_name(m.group(1))), m.group(2)


def py_string_assign(text: str, name: str) -> str | None:
    """The string literal assigned to ``name`` at module level (``x = '1'``, ``x: str = "1"``,
    ``x = version = '1'``), read with a regular expression: the file is never run."""
    rx = re.compile(
        r"^" + re.escape(name) + r"\s*(?::\s*[^=\n]+)?=\s*(?:[A-Za-z_][A-Za-z0-9_]*\s*=\s*)*"
        r"(?:[rRuU])?(['\"])([^'\"\n]*)\1",
        re.MULTILINE,
    )
    m = rx.search(text)
    return m.group(2) if m else None


def tool_release(m: re.Match[bytes] | None) -> tuple[str, str] | None:
    """(version, the text that says it) of a ``_TOOL_RX`` match in a bundled tool (parsed
    by a host walk's worker, ``host/premake.py``, or here)."""
    if m is None:
        return None
    return m.group(2).decode(), m.group(0).decode("ascii", "replace")


def _scan_tool(ctx: CollectContext, path: str) -> tuple[tuple[str, str] | None]:
    return (tool_release(scan_bytes(ctx, path, _TOOL_RX, _TOOL_MAX, _TOOL_NEEDLE)),)


_TRITON_BIN = "/triton/backends/nvidia/bin/"


def _premade_tool(path: str, c: ContentRef) -> tuple[tuple[str, str] | None]:
    with c.open() as f:
        return (tool_release(scan_stream(f, _TOOL_RX, _TOOL_MAX, _TOOL_NEEDLE)),)


#: what a host walk's workers parse for this collector (``host/premake.py``): a bundled
#: ptxas is tens of MB, its release string is found there, on every core, rather than
#: after the walk in the scanning process
PREMADE = (
    PremadeParser("triton-tool",
                  lambda p: p[p.rfind("/") + 1 :] in NVIDIA_TOOLS and _TRITON_BIN in p,
                  _premade_tool),
)


def _define_int(text: str, name: str) -> int | None:
    m = re.search(r"^\s*#\s*define\s+" + re.escape(name) + r"\s+(\d+)\b", text, re.MULTILINE)
    return int(m.group(1)) if m else None


@register
class TritonCollector(Collector):
    id = "triton"
    version = "1"
    paths = (
        PathSpec("/**/*.dist-info/METADATA", max_size=16 * 1024 * 1024),
        PathSpec("/**/triton/__init__.py", max_size=_SMALL),
        PathSpec("/**/triton/backends/nvidia/bin/*", max_size=_TOOL_MAX),
        PathSpec("/**/triton/backends/nvidia/include/cuda.h", max_size=4 * _SMALL),
        PathSpec("/**/triton/backends/amd/include/hip/hip_version.h", max_size=_SMALL),
        PathSpec("/**/triton/backends/*/__init__.py", max_size=_SMALL),
        PathSpec("/**/triton/backends/*/compiler.py", max_size=0),
    )

    def collect(self, ctx: CollectContext) -> Iterable[Component]:
        out: list[Component] = []
        for meta in ctx.fs.glob("/**/*.dist-info/METADATA"):
            dist_dir = posixpath.dirname(meta)
            nv = dist_info_name(dist_dir)
            if nv is None or nv[0] not in TRITON_DISTRIBUTIONS:
                continue
            site = posixpath.dirname(dist_dir)
            comp = self._install(ctx, site, nv[0], nv[1], meta)
            if comp is not None:
                out.append(comp)
        return out

    def _install(
        self, ctx: CollectContext, site: str, dist: str, dist_version: str, meta: str
    ) -> Component | None:
        fs = ctx.fs
        pkg = posixpath.join(site, "triton")
        init = pkg + "/__init__.py"
        props = {
            "stack": "triton",
            "product": "triton",
            "location": site,
            "package-dir": pkg,
            "triton:distribution": dist,
        }
        evidence = []
        version: str | None = None
        if fs.is_file(init):
            try:
                version = py_string_assign(fs.read_text(init), "__version__")
            except Exception as e:  # noqa: BLE001 - a bad file is an unknown naming it
                ctx.unknown(f"cannot read triton/__init__.py: {e}", init)
            if version:
                evidence.append(
                    ctx.evidence(
                        EvidenceMethod.VERSION_FILE.value, init, f"__version__ = {version!r}"
                    )
                )
        if not version:
            # no package dir (or no __version__): the distribution's metadata names the version
            version = dist_version
            evidence.append(
                ctx.evidence(EvidenceMethod.PACKAGE_METADATA.value, meta, f"{dist} {dist_version}")
            )
        backends = [b for b in BACKENDS if fs.is_dir(f"{pkg}/backends/{b}")]
        if backends:
            props["triton:backends"] = ", ".join(backends)
        tools: list[str] = []
        for tool in NVIDIA_TOOLS:
            path = f"{pkg}/backends/nvidia/bin/{tool}"
            if not fs.is_file(path):
                continue
            (found,) = premade(fs, "triton-tool", path, partial(_scan_tool, ctx, path))
            if found is None:
                props[f"triton:bundled:{tool}"] = "unknown"
                tools.append(f"{tool} (version unknown)")
                evidence.append(ctx.evidence(EvidenceMethod.FILENAME.value, path, "bundled tool"))
                continue
            tver, said = found
            props[f"triton:bundled:{tool}"] = tver
            tools.append(f"{tool} {tver}")
            evidence.append(ctx.evidence(EvidenceMethod.ELF.value, path, said))
        if tools:
            props["triton:bundled-tools"] = ", ".join(tools)
        cuda_h = f"{pkg}/backends/nvidia/include/cuda.h"
        if fs.is_file(cuda_h):
            try:
                code = _define_int(fs.read_text(cuda_h), "CUDA_VERSION")
            except VIEW_ERRORS as e:
                ctx.unknown(f"bundled CUDA header: {e}", cuda_h)
                code = None
            if code:
                props["triton:bundled-header:cuda"] = f"{code // 1000}.{code % 1000 // 10}"
                evidence.append(
                    ctx.evidence(EvidenceMethod.HEADER.value, cuda_h, f"CUDA_VERSION {code}")
                )
        hip_h = f"{pkg}/backends/amd/include/hip/hip_version.h"
        if fs.is_file(hip_h):
            try:
                text = fs.read_text(hip_h)
                parts = [_define_int(text, f"HIP_VERSION_{k}") for k in ("MAJOR", "MINOR", "PATCH")]
            except VIEW_ERRORS as e:
                ctx.unknown(f"bundled HIP header: {e}", hip_h)
                parts = [None]
            if all(p is not None for p in parts):
                hv = ".".join(str(p) for p in parts)
                props["triton:bundled-header:hip"] = hv
                evidence.append(
                    ctx.evidence(EvidenceMethod.HEADER.value, hip_h, f"HIP_VERSION {hv}")
                )
        return Component(
            name="triton",
            version=version,
            type=ComponentType.LIBRARY,
            purl=generic_purl("openai", "triton", version),
            supplier="OpenAI",
            properties=props,
            evidence=evidence,
            ecosystem="generic",
        )
