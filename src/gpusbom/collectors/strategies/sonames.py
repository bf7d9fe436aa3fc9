"""Versioned shared libraries of a stack's products: ``libcudart.so.12.4.127`` (regular
files only: a symlink's name and ``.so`` / ``.so.<major>`` names are not versions), also
auditwheel's renamed copies (``libcudart-9335f6a2.so.10.2``: vendored into another wheel)."""

from __future__ import annotations

from ...catalog import detection
from ...fsview.spec import PathSpec
from ...model import EvidenceMethod
from .._gpu import Observations, install_location, is_bundled, is_regular, is_stub, parse_soname
from ..base import CollectContext
from . import P_FILE, renamed_stem, soname_product

__all__ = ["collect", "path_specs"]


def path_specs(stack: str) -> tuple[PathSpec, ...]:
    """Listing-only globs of the rows' library files, anywhere."""
    return tuple(PathSpec("/**/" + g, max_size=0) for g in detection.gather(stack, "sonames"))


def collect(ctx: CollectContext, obs: Observations) -> None:
    fs = ctx.fs
    # one pass over the kept shared libraries, filtered by stem (not one glob per stem)
    for path in fs.glob("/**/lib*.so.*"):
        if is_stub(path) or is_bundled(path):
            continue
        so = parse_soname(path)
        if so is None or so.suffix is None:
            continue
        stem, renamed = so.stem, renamed_stem(so.stem)
        if renamed is not None:
            stem = renamed[0]
        product = soname_product(obs.stack, stem)
        if product is None or not is_regular(fs, path):
            continue  # unversioned names and symlinks are not versions
        loc = install_location(path)
        detail = path.rsplit("/", 1)[1]
        ev = ctx.evidence(EvidenceMethod.SONAME.value, path, detail)
        o = obs.add(product, loc, ev, version=so.version, priority=P_FILE,
                    source="soname " + detail)
        if renamed is not None:
            # a vendored copy renamed by auditwheel (torch/lib, <project>.libs/)
            o.properties["vendored-as"] = detail
            o.properties["vendored-in"] = loc
