"""Headers that declare a product's version (the rows' ``headers``: ``nccl.h``'s
``NCCL_MAJOR``/``NCCL_MINOR``/``NCCL_PATCH``, ``cuda.h``'s ``CUDA_VERSION`` code, ...).

``versions(name, text)`` is a pure function of one header's text: a host walk's workers run
it where they read the file (``host/premake.py``; ``wanted(path)`` says which files), the
collector asks ``premade`` for their result under ``PREMADE_KIND``."""

from __future__ import annotations

import fnmatch
import re
from functools import partial
from typing import Any

from ...catalog import detection
from ...catalog.detection import HeaderSpec
from ...fsview.spec import PathSpec
from ...model import EvidenceMethod
from .._gpu import (
    Observations,
    install_location,
    int_define,
    is_bundled,
    is_stub,
    parse_defines,
    version_from_code,
)
from .._premade import PremadeParser, premade, text_of
from ..base import CollectContext
from . import P_FILE, P_HEADER

__all__ = ["MAX_SIZE", "PREMADE", "PREMADE_KIND", "collect", "path_specs", "versions", "wanted"]

PREMADE_KIND = "cuda-header"
MAX_SIZE = 4 * 1024 * 1024
_IDENT = re.compile(r"[A-Za-z_]\w*")


def _specs() -> tuple[HeaderSpec, ...]:
    return tuple(h for s in detection.stacks_with("headers") for h in detection.header_specs(s))


def _files(stack: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(h.file for h in detection.header_specs(stack)))


def path_specs(stack: str) -> tuple[PathSpec, ...]:
    return tuple(PathSpec("/**/include/**/" + h, max_size=MAX_SIZE) for h in _files(stack))


def wanted(path: str) -> bool:
    """Is ``path`` a header whose versions some row reads (an ``include/`` file whose name
    one of the rows' header globs matches)?"""
    name = path[path.rfind("/") + 1 :]
    return "/include/" in path and any(fnmatch.fnmatchcase(name, h.file) for h in _specs())


def _one(spec: HeaderSpec, defs: dict[str, str]) -> str | None:
    def val(key: str) -> int | None:
        v = defs.get(key)
        seen = 0
        while v is not None and _IDENT.fullmatch(v) and seen < 4:  # alias chain
            v = defs.get(v)
            seen += 1
        return int_define({key: v}, key) if v is not None else None

    if spec.code:
        code = val(spec.code)
        return version_from_code(code) if code else None
    parts = [val(m) for m in spec.macros]
    if not all(p is not None for p in parts):
        return None
    if spec.optional is not None and (extra := val(spec.optional)) is not None:
        parts.append(extra)
    out = ".".join(str(p) for p in parts)
    if spec.suffix is not None:
        out += defs.get(spec.suffix, "").strip('"')
    return out


def versions(name: str, text: str) -> dict[str, str]:
    """Versions a header declares: {product: version} by the rows' header specs."""
    specs = [h for h in _specs() if fnmatch.fnmatchcase(name, h.file)]
    if not specs:
        return {}
    defs = parse_defines(text)
    out: dict[str, str] = {}
    for spec in specs:
        v = _one(spec, defs)
        if v:
            out[spec.product] = v
    return out


def _read(fs: Any, name: str, path: str) -> dict[str, str]:
    return versions(name, fs.read_text(path))


def collect(ctx: CollectContext, obs: Observations) -> None:
    fs = ctx.fs
    rel = detection.release(obs.stack)
    specs = {h.product: h for h in detection.header_specs(obs.stack)}
    for h in _files(obs.stack):
        for path in fs.glob("/**/include/**/" + h):
            if is_stub(path) or is_bundled(path) or not fs.is_file(path):
                continue
            name = path.rsplit("/", 1)[1]
            try:
                declared = premade(fs, PREMADE_KIND, path, partial(_read, fs, name, path))
            except Exception as e:  # noqa: BLE001 - a bad file is an unknown naming it
                ctx.unknown(f"cannot read header: {e}", path)
                continue
            loc = install_location(path)
            for product, version in declared.items():
                spec = specs.get(product)
                if spec is None:
                    continue  # another stack's header of the same name
                if spec.root_only and not (rel and rel.root_rx.match(loc)):
                    continue  # cuda.h ships with wheels and distro packages too
                prio = P_FILE if spec.rank == "file" else P_HEADER
                ev = ctx.evidence(EvidenceMethod.HEADER.value, path, f"{name}: {version}")
                obs.add(product, loc, ev, version=version, priority=prio, source=name)


#: what a host walk's workers parse for this strategy (``host/premake.py``)
PREMADE = (
    PremadeParser(PREMADE_KIND, lambda p: p.endswith(".h") and wanted(p),
                  lambda p, c: versions(p[p.rfind("/") + 1 :], text_of(c))),
)
