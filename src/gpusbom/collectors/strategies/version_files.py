"""The release's roots (``/usr/local/cuda``, ``/usr/local/cuda-12.4``: the release row's
``root``) and the files there that name versions: ``version.json`` (the release under the
release row's ``version_json`` key, each product under its own row's key, for products
*seen as files* at that root: version.json lists the whole SDK even when a runtime image
holds a part of it), ``version.txt`` (CUDA <= 11.0), the compiler's executable, the
release row's ``bin_tools`` (present or absent), and, lacking all of these, the root's
directory name."""

from __future__ import annotations

from typing import Any

from ...catalog import detection
from ...catalog.detection import ReleaseSpec
from ...fsview.spec import PathSpec
from ...model import ComponentType, EvidenceMethod
from ...safetext import loads_json
from .._gpu import Observations
from ..base import VIEW_ERRORS, CollectContext
from . import P_DIR, P_PKG, P_VJSON

__all__ = ["Roots", "collect", "path_specs"]


def path_specs(stack: str) -> tuple[PathSpec, ...]:
    rel = detection.release(stack)
    if rel is None:
        return ()
    root = rel.root + "*"
    comp = detection.with_role(stack, "compiler")
    bins = ((comp.bin,) if comp and comp.bin else ()) + rel.bin_tools
    return (
        *((PathSpec(f"{root}/{rel.json_file}", max_size=1024 * 1024),) if rel.json_file else ()),
        *((PathSpec(f"{root}/{rel.txt_file}", max_size=64 * 1024),) if rel.txt_file else ()),
        *(PathSpec(f"{root}/bin/{t}", max_size=0) for t in bins),
    )


class Roots:
    """The release roots one scan found, with the ``bin_tools`` present under each."""

    def __init__(self) -> None:
        self.roots: list[str] = []
        self.bin_tools: dict[str, list[str]] = {}


def _version_json(ctx: CollectContext, path: str) -> tuple[str, dict[str, Any]] | None:
    if not ctx.fs.is_file(path):
        return None
    try:
        data = loads_json(ctx.fs.read_bytes(path))
    except Exception as e:  # noqa: BLE001 - a bad file is an unknown naming it
        ctx.unknown(f"cannot read CUDA version.json: {e}", path)
        return None
    return (path, data) if isinstance(data, dict) else None


def collect(ctx: CollectContext, obs: Observations) -> Roots:
    out = Roots()
    rel = detection.release(obs.stack)
    if rel is None:
        return out
    fs = ctx.fs
    roots: list[str] = []
    for p in fs.glob(rel.root + "*"):
        try:
            real = fs.realpath(p)
        except VIEW_ERRORS:  # a link loop is no toolkit root
            continue
        if rel.root_rx.match(real) and fs.is_dir(real) and real not in roots:
            roots.append(real)
    roots.sort()
    comp = detection.with_role(obs.stack, "compiler")
    for root in roots:
        vj = _version_json(ctx, f"{root}/{rel.json_file}") if rel.json_file else None
        txt = f"{root}/{rel.txt_file}" if rel.txt_file else None
        compiler = f"{root}/bin/{comp.bin}" if comp and comp.bin else None
        has_files = any(o.location == root for o in obs.items())
        if not (vj or (txt and fs.is_file(txt)) or (compiler and fs.is_file(compiler))
                or has_files):
            continue
        out.roots.append(root)
        out.bin_tools[root] = [t for t in rel.bin_tools if fs.is_file(f"{root}/bin/{t}")]
        if vj:
            _from_version_json(ctx, obs, rel, root, vj, comp, compiler)
        if txt and fs.is_file(txt) and rel.txt_rx is not None:
            try:
                m = rel.txt_rx.search(fs.read_text(txt))
            except VIEW_ERRORS as e:
                ctx.unknown(f"cannot read {rel.txt_file}: {e}", txt)
                m = None
            if m:
                obs.add(rel.product, root,
                        ctx.evidence(EvidenceMethod.VERSION_FILE.value, txt, m.group(0)),
                        version=m.group(1), priority=P_PKG, source=rel.txt_file or "")
        if comp and compiler and fs.is_file(compiler) and obs.get(comp.product, root) is None:
            obs.add(comp.product, root, ctx.evidence(EvidenceMethod.FILENAME.value, compiler),
                    ctype=ComponentType.APPLICATION)
        tk = obs.get(rel.product, root)
        if tk is None or not tk.versions:
            # no version file: the release header of the root (already added) or its name
            m = rel.root_rx.match(root)
            first = next((o for o in obs.items() if o.location == root and o.evidence), None)
            if m and m.group(1) and first is not None:
                obs.add(rel.product, root, first.evidence[0] if tk is None else None,
                        version=m.group(1), priority=P_DIR, source=f"directory {root}")
    return out


def _from_version_json(ctx: CollectContext, obs: Observations, rel: ReleaseSpec, root: str,
                       vj: tuple[str, dict[str, Any]], comp: detection.Found | None,
                       compiler: str | None) -> None:
    fs = ctx.fs
    vpath, data = vj
    source = rel.json_file or ""
    for key in rel.found.version_json:
        entry = data.get(key)
        ver = entry.get("version") if isinstance(entry, dict) else None
        if ver:
            obs.add(rel.product, root,
                    ctx.evidence(EvidenceMethod.VERSION_FILE.value, vpath, f"{key}: {ver}"),
                    version=str(ver), priority=P_VJSON, source=source)
    for f in detection.found(obs.stack):
        if f is rel.found:
            continue
        for key in f.version_json:
            entry = data.get(key)
            if not isinstance(entry, dict) or not entry.get("version"):
                continue
            if comp is not None and f is comp and compiler and fs.is_file(compiler):
                obs.add(f.product, root, ctx.evidence(EvidenceMethod.FILENAME.value, compiler),
                        ctype=ComponentType.APPLICATION)
            if obs.get(f.product, root) is not None:
                obs.add(f.product, root,
                        ctx.evidence(EvidenceMethod.VERSION_FILE.value, vpath,
                                     f"{key}: {entry['version']}"),
                        version=str(entry["version"]), priority=P_VJSON, source=source)
