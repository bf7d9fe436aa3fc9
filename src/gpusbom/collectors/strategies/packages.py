"""Package records of a stack's products: wheels (``METADATA`` of the rows' ``dist_info``
distributions, located through their ``RECORD``: the cu12 ``nvidia/<comp>`` layout and the
cu13 shared ``nvidia/cu13`` one) and conda-meta records (the catalog's conda names)."""

from __future__ import annotations

from functools import partial
from typing import Any

from ...catalog import detection, names
from ...fsview.spec import PathSpec
from ...model import EvidenceMethod
from ...safetext import loads_json
from .._gpu import Observations, install_location, parse_soname
from .._premade import premade
from ..base import VIEW_ERRORS, CollectContext
from ..python import parse_core_metadata
from . import P_HEADER, P_PKG, soname_product

__all__ = ["META_MAX", "collect_conda", "collect_wheels", "path_specs", "wheel_product"]

META_MAX = 16 * 1024 * 1024
_CONDA_MAX = 64 * 1024 * 1024


def wheel_product(name: str) -> str | None:
    """``nvidia-cuda-runtime-cu12`` / ``nvidia-cuda-runtime`` -> its product; None if it is
    not one of the catalog's CUDA wheels."""
    return names.cuda_wheel(name)


def path_specs(stack: str) -> tuple[PathSpec, ...]:
    dists = detection.gather(stack, "dist_info")
    return (
        *(PathSpec(f"/**/{d}.dist-info/METADATA", max_size=META_MAX) for d in dists),
        *(PathSpec(f"/**/{d}.dist-info/RECORD", max_size=META_MAX) for d in dists),
        PathSpec("/**/conda-meta/*.json", max_size=_CONDA_MAX),
    )


def _read_meta(fs: Any, path: str) -> Any:
    return parse_core_metadata(fs.read_text(path))


def collect_wheels(ctx: CollectContext, obs: Observations) -> None:
    fs = ctx.fs
    metas: set[str] = set()
    for d in detection.gather(obs.stack, "dist_info"):
        metas.update(fs.glob(f"/**/{d}.dist-info/METADATA"))
    for meta in sorted(metas):
        dist_dir = meta.rsplit("/", 1)[0]
        try:  # parsed by a host walk's worker (the python collector's parse), or here
            dist = premade(fs, "py-metadata", meta, partial(_read_meta, fs, meta))
        except Exception as e:  # noqa: BLE001 - a bad file is an unknown naming it
            ctx.unknown(f"cannot read wheel metadata: {e}", meta)
            continue
        product = wheel_product(dist.name)
        if product is None:
            continue
        site = dist_dir.rsplit("/", 1)[0]
        loc, lib = _wheel_location(ctx, obs.stack, dist_dir, site, product)
        ev = ctx.evidence(
            EvidenceMethod.PACKAGE_METADATA.value, meta, f"{dist.name} {dist.version}"
        )
        o = obs.add(
            product, loc, ev, version=dist.version, priority=P_PKG, source=f"wheel {dist.name}",
            # named only when no package database owns the files (else fusion merges)
            pypi_package=dist.name if ctx.owner(meta) is None else "",
        )
        if lib and not any(e.path == lib for e in o.evidence):
            o.evidence.append(ctx.evidence(EvidenceMethod.SONAME.value, lib, lib.rsplit("/", 1)[1]))


def _wheel_location(
    ctx: CollectContext, stack: str, dist_dir: str, site: str, product: str
) -> tuple[str, str | None]:
    """(install location, a library the wheel owns) from its RECORD."""
    fs = ctx.fs
    files: list[str] = []
    try:
        for line in fs.read_text(dist_dir + "/RECORD").splitlines():
            rel = line.split(",", 1)[0].strip()
            if rel and not rel.startswith("..") and ".dist-info/" not in rel:
                files.append(site + "/" + rel)
    except VIEW_ERRORS as e:  # RECORD is optional: absent is normal, unreadable is not
        if fs.exists(dist_dir + "/RECORD"):
            ctx.unknown(f"cannot read RECORD: {e}", dist_dir + "/RECORD")
    libs = []
    for f in files:
        so = parse_soname(f)
        if so and soname_product(stack, so.stem) == product:
            libs.append(f)
    for f in sorted(libs, key=lambda p: (len(p), p)):
        if fs.is_file(f):
            return install_location(f), f
    if libs:
        return install_location(libs[0]), None
    if files:
        return install_location(files[0]), None
    return site, None


def collect_conda(ctx: CollectContext, obs: Observations) -> None:
    fs = ctx.fs
    products = names.cuda_conda()
    pins = set(detection.gather(obs.stack, "conda_pins"))
    for path in fs.glob("/**/conda-meta/*.json"):
        stem = path.rsplit("/", 1)[1][: -len(".json")]
        parts = stem.rsplit("-", 2)
        if len(parts) != 3 or parts[0] not in products:
            continue
        try:
            rec = loads_json(fs.read_bytes(path))
            name, version = str(rec["name"]), str(rec["version"])
        except Exception as e:  # noqa: BLE001 - a bad file is an unknown naming it
            ctx.unknown(f"cannot read conda record: {e}", path)
            continue
        product = products.get(name)
        if product is None:
            continue
        prefix = path.rsplit("/conda-meta/", 1)[0] or "/"
        ev = ctx.evidence(EvidenceMethod.PACKAGE_METADATA.value, path, f"conda {name} {version}")
        # a record that pins the release without being it (cuda-version) weighs as a header
        prio = P_HEADER if name in pins else P_PKG
        obs.add(product, prefix, ev, version=version, priority=prio, source=f"conda {name}",
                conda_package=name)
