"""triton-server: NVIDIA Triton Inference Server in an image.

Evidence: env ``TRITON_SERVER_VERSION`` (server version, e.g. ``2.52.0``) and
``NVIDIA_TRITON_SERVER_VERSION`` (the NGC container release, e.g. ``24.11``), the label
``com.nvidia.tritonserver.version``, ``/opt/tritonserver/TRITON_VERSION`` and the
``/opt/tritonserver`` tree (``bin/tritonserver``, ``lib/libtritonserver.so``,
``backends/<name>/``). One component ``triton-inference-server`` (stack
``triton-inference-server``): version = the server version; properties ``release`` (the
server version), ``container-release`` (NGC release), ``backends``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..fsview.spec import PathSpec
from ..model import Component, ComponentType, EvidenceMethod
from . import register
from ._gpu import Observations
from .base import VIEW_ERRORS, CollectContext, Collector

__all__ = ["TritonServerCollector"]

ROOT = "/opt/tritonserver"
NAME = "triton-inference-server"
LABEL = "com.nvidia.tritonserver.version"
_VERSION_RX = re.compile(r"^\d+\.\d+(?:\.\d+)?$")


@register
class TritonServerCollector(Collector):
    id = "triton-server"
    version = "1"
    phase = 2
    paths = (
        PathSpec(ROOT + "/TRITON_VERSION", max_size=4096),
        PathSpec(ROOT + "/bin/tritonserver", max_size=0),
        PathSpec(ROOT + "/lib/libtritonserver.so", max_size=0),
    )

    def collect(self, ctx: CollectContext) -> Iterable[Component]:
        fs = ctx.fs
        env = ctx.target.env or {}
        labels = ctx.target.labels or {}
        obs = Observations("triton-inference-server")
        obs.cpe_products[NAME] = "triton_inference_server"
        has_root = fs.is_dir(ROOT)
        loc = ROOT if has_root else ""
        server = env.get("TRITON_SERVER_VERSION", "").strip()
        ngc = env.get("NVIDIA_TRITON_SERVER_VERSION", "").strip()
        label = labels.get(LABEL, "").strip()
        vfile = ROOT + "/TRITON_VERSION"
        if fs.is_file(vfile):
            try:
                v = fs.read_text(vfile).strip()
            except Exception as e:  # noqa: BLE001 - a bad file is an unknown naming it
                ctx.unknown(f"cannot read {vfile}: {e}", vfile)
                v = ""
            if _VERSION_RX.match(v):
                obs.add(
                    NAME,
                    loc,
                    ctx.evidence(EvidenceMethod.VERSION_FILE.value, vfile, v),
                    version=v,
                    priority=4,
                    source="TRITON_VERSION",
                )
        for p in (ROOT + "/bin/tritonserver", ROOT + "/lib/libtritonserver.so"):
            if fs.is_file(p):
                obs.add(NAME, loc, ctx.evidence(EvidenceMethod.FILENAME.value, p))
        if server:
            obs.add(
                NAME,
                loc,
                ctx.evidence(EvidenceMethod.ENV.value, None, f"TRITON_SERVER_VERSION={server}"),
                version=server,
                priority=3,
                source="env TRITON_SERVER_VERSION",
            )
        if label:
            # the label holds the server version or the container release, depending on the image
            is_ngc = bool(ngc) and label == ngc or not re.match(r"^\d+\.\d+\.\d+", label)
            obs.add(
                NAME,
                loc,
                ctx.evidence(EvidenceMethod.LABEL.value, None, f"{LABEL}={label}"),
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
                ctx.evidence(EvidenceMethod.ENV.value, None, f"NVIDIA_TRITON_SERVER_VERSION={ngc}"),
                container_release=ngc,
            )
        o = obs.get(NAME, loc)
        if o is None or not o.evidence:
            return []
        if has_root and fs.is_dir(ROOT + "/backends"):
            try:
                backends = [
                    b for b in fs.listdir(ROOT + "/backends") if fs.is_dir(f"{ROOT}/backends/{b}")
                ]
            except VIEW_ERRORS as e:
                ctx.unknown(f"cannot list the backends: {e}", ROOT + "/backends")
                backends = []
            if backends:
                o.properties["backends"] = ", ".join(sorted(backends))
        chosen = obs.chosen_version(o)
        if chosen:
            o.properties["release"] = chosen
        out = obs.build()
        for c in out:
            c.type = ComponentType.APPLICATION
        return out
