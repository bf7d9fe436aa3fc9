"""Versions the binaries carry (classifier rows: getter constants, rodata strings), and
products linked into other binaries (a row marked ``embedded``: a static CUDA runtime,
NCCL or CUTLASS compiled into an application or a framework library)."""

from __future__ import annotations

from ...catalog import detection
from ...catalog.classifiers import ROWS
from ...fsview.spec import PathSpec
from .._classify import hits, is_executable_path, paths_for
from .._gpu import Observations, install_location, is_bundled, is_stub, parse_soname
from ..base import CollectContext
from . import P_FILE, renamed_stem, soname_product

__all__ = ["collect", "path_specs", "products"]


def products(stack: str) -> tuple[str, ...]:
    """The stack's products some classifier row reads (in row order, once each)."""
    return tuple(dict.fromkeys(r.product for r in ROWS if r.stack == stack))


def path_specs(stack: str) -> tuple[PathSpec, ...]:
    return paths_for(products(stack))


def collect(ctx: CollectContext, obs: Observations) -> None:
    wanted = products(obs.stack)
    embedded = detection.products_with(obs.stack, "embedded")
    for entry in ctx.fs.entries():
        analysis = entry.analysis
        if not analysis or not any(k.startswith("classify/") for k in analysis):
            continue
        path = entry.path
        if is_stub(path) or is_bundled(path):
            continue
        for hit in hits(analysis, path, wanted):
            row = hit.row
            so = parse_soname(path)
            stem = so.stem if so else ""
            renamed = renamed_stem(stem)
            own = soname_product(obs.stack, renamed[0] if renamed else stem) == row.product
            if not own and row.product not in embedded:
                continue
            if not own:
                # linked into another binary: a component of that binary
                loc = path
                props = {"linkage": "static", "embedded-in": path}
            else:
                loc, props = install_location(path), {}
            ev = ctx.evidence(hit.method, path, f"{hit.detail} ({row.confidence})")
            conf = "low" if hit.version is None else row.confidence
            o = obs.add(row.product, loc, ev, version=hit.version, priority=P_FILE,
                        source=f"{hit.method} {row.id} {conf}")
            for k, v in props.items():
                o.properties.setdefault(k, v)
            if hit.version is None:
                o.properties.setdefault("version-confidence", "low")
            if is_executable_path(path):
                o.properties.setdefault("embedded-in-executable", path)
