"""triton-server: NVIDIA Triton Inference Server in an image.

The product and where it is found are the catalog row that names this collector
(``collected_by: triton-server``; fields in ``catalog/detection.py`` and the row's comment).
Evidence: the server version's env var (``TRITON_SERVER_VERSION``, e.g. ``2.52.0``) and the
NGC container release's (``NVIDIA_TRITON_SERVER_VERSION``, e.g. ``24.11``), the row's label
(``com.nvidia.tritonserver.version``), the version file of the row's root
(``/opt/tritonserver/TRITON_VERSION``) and the root's files (``bin/tritonserver``,
``lib/libtritonserver.so``) and its listed directory (``backends/<name>/``). One component
(stack and name the row's): version = the server version; properties ``release`` (the
server version), ``container-release`` (NGC release), ``backends``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .. import catalog
from ..catalog import detection
from ..fsview.spec import PathSpec
from ..model import Component, ComponentType, EvidenceMethod
from . import register
from ._gpu import Observations
from .base import VIEW_ERRORS, CollectContext, Collector

__all__ = ["TritonServerCollector"]

COLLECTOR_ID = "triton-server"


def _row() -> catalog.Product:
    rows = detection.collected_by(COLLECTOR_ID)
    if not rows:  # a packaging bug: the shipped catalog has the row (tests load it)
        raise RuntimeError(f"catalog: no row is collected by {COLLECTOR_ID}")
    return rows[0]


def _release(row: catalog.Product) -> detection.ReleaseSpec:
    rel = detection.release(row.stack)
    if rel is None or not rel.txt_file or rel.txt_rx is None or not rel.env_release:
        raise RuntimeError(f"catalog: {row.id}: a release row with a version file and env")
    return rel


_ROW = _row()
_REL = _release(_ROW)
ROOT = _REL.root
NAME = _REL.product
#: the root's version file; files whose presence is evidence; the directory listed
VERSION_SOURCE = _REL.txt_file or ""
VERSION_FILE = f"{ROOT}/{VERSION_SOURCE}"
ROOT_FILES = tuple(f"{ROOT}/{f}" for f in detection.strs(_ROW, "root_files"))
LISTED = detection.string(_ROW, "root_listed")
LABELS = detection.strs(_ROW, "labels")


@register
class TritonServerCollector(Collector):
    id = COLLECTOR_ID
    version = "1"
    phase = 2
    paths = (
        PathSpec(VERSION_FILE, max_size=4096),
        *(PathSpec(p, max_size=0) for p in ROOT_FILES),
    )

    def collect(self, ctx: CollectContext) -> Iterable[Component]:
        fs = ctx.fs
        env = ctx.target.env or {}
        labels = ctx.target.labels or {}
        obs = Observations(_ROW.stack)
        if _REL.cpe_product:
            obs.cpe_products[NAME] = _REL.cpe_product
        has_root = fs.is_dir(ROOT)
        loc = ROOT if has_root else ""
        server_var = _REL.env_release or ""
        server = env.get(server_var, "").strip()
        ngc_var = _REL.env_noted[0] if _REL.env_noted else ""
        ngc = env.get(ngc_var, "").strip() if ngc_var else ""
        # the first of the row's labels the image sets
        label_name = next((k for k in LABELS if labels.get(k, "").strip()), None)
        label = labels.get(label_name, "").strip() if label_name else ""
        vfile = VERSION_FILE
        if fs.is_file(vfile):
            try:
                v = fs.read_text(vfile).strip()
            except Exception as e:  # noqa: BLE001 - a bad file is an unknown naming it
                ctx.unknown(f"cannot read {vfile}: {e}", vfile)
                v = ""
            m = _REL.txt_rx.match(v) if _REL.txt_rx is not None else None
            if m:
                obs.add(
                    NAME,
                    loc,
                    ctx.evidence(EvidenceMethod.VERSION_FILE.value, vfile, v),
                    version=m.group(1),
                    priority=4,
                    source=VERSION_SOURCE,
                )
        for p in ROOT_FILES:
            if fs.is_file(p):
                obs.add(NAME, loc, ctx.evidence(EvidenceMethod.FILENAME.value, p))
        if server:
            obs.add(
                NAME,
                loc,
                ctx.evidence(EvidenceMethod.ENV.value, None, f"{server_var}={server}"),
                version=server,
                priority=3,
                source=f"env {server_var}",
            )
        if label:
            # the label holds the server version or the container release, depending on the image
            is_ngc = bool(ngc) and label == ngc or not re.match(r"^\d+\.\d+\.\d+", label)
            obs.add(
                NAME,
                loc,
                ctx.evidence(EvidenceMethod.LABEL.value, None, f"{label_name}={label}"),
                version=None if is_ngc else label,
                priority=2,
                source="label",
            )
            if is_ngc:
                obs.add(NAME, loc, container_release=label)
        if ngc:
            obs.add(
                NAME,
                loc,
                ctx.evidence(EvidenceMethod.ENV.value, None, f"{ngc_var}={ngc}"),
                container_release=ngc,
            )
        o = obs.get(NAME, loc)
        if o is None or not o.evidence:
            return []
        listed = f"{ROOT}/{LISTED}" if LISTED else None
        if has_root and listed and fs.is_dir(listed):
            try:
                subdirs = [b for b in fs.listdir(listed) if fs.is_dir(f"{listed}/{b}")]
            except VIEW_ERRORS as e:
                ctx.unknown(f"cannot list the {LISTED}: {e}", listed)
                subdirs = []
            if subdirs and LISTED:
                o.properties[LISTED] = ", ".join(sorted(subdirs))
        chosen = obs.chosen_version(o)
        if chosen:
            o.properties["release"] = chosen
        out = obs.build()
        for c in out:
            c.type = ComponentType.APPLICATION
        return out
