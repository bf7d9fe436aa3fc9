"""fingerprints: shared libraries the fingerprint database knows (``gpusbom.fingerprints``),
by SHA-256 or else ELF build-id (read as the file streamed, ``binary.scanloop``): the
database's product and exact version, whatever the file's name (renamed, stripped,
vendored), above every other source, which stay as evidence (one that disagrees is named in
``disagreement``). Properties ``identification-method`` (``sha256`` / ``build-id``),
``identification-confidence`` (``exact``), ``fingerprint-source`` (the artifact the record
was built from) and, for a renamed copy, ``fingerprint-file``.

Generic: the database names the products; no product is named here.
"""

from __future__ import annotations

from ...fsview.spec import PathSpec
from ...model import EvidenceMethod
from .._gpu import Observations, install_location, is_bundled, is_stub
from ..base import CollectContext
from ..gpu_binaries import stream_scanner
from . import P_FINGERPRINT

__all__ = ["collect", "path_specs"]


def path_specs() -> tuple[PathSpec, ...]:
    """Every shared library's SHA-256 and build-id (the database's keys): gpu-binaries'
    stream scanner, shared (the matcher runs one factory once per file)."""
    return tuple(PathSpec(p, max_size=0, stream=(stream_scanner,))
                 for p in ("/**/*.so", "/**/*.so.*"))


def collect(ctx: CollectContext, obs: Observations) -> None:
    db = None
    for entry in ctx.fs.entries():
        analysis = entry.analysis
        if not analysis or not (analysis.get("build_id") or analysis.get("sha256")):
            continue
        path = entry.path
        if is_stub(path) or is_bundled(path):
            continue
        if db is None:
            from ...fingerprints.active import load_active

            db = load_active()  # FingerprintError (naming the file) when damaged
        sha, bid = analysis.get("sha256"), analysis.get("build_id")
        match = db.lookup(sha256=sha if isinstance(sha, str) else None,
                          build_id=bid if isinstance(bid, str) else None)
        if match is None:
            continue
        rec = match.record
        key = rec.sha256 if match.method == "sha256" else rec.build_id
        name = path.rsplit("/", 1)[-1]
        method = (EvidenceMethod.FINGERPRINT_SHA256 if match.method == "sha256"
                  else EvidenceMethod.FINGERPRINT_BUILD_ID)
        ev = ctx.evidence(method.value, path,
                          f"{name}: {match.method} {key} is {rec.file} of {rec.source}")
        o = obs.add(match.product, install_location(path), ev, version=match.version,
                    priority=P_FINGERPRINT, source=f"fingerprint {match.method}")
        o.properties["identification-method"] = match.method
        o.properties["identification-confidence"] = match.confidence
        o.properties["fingerprint-source"] = rec.source
        if name != rec.file:
            o.properties.setdefault("fingerprint-file", rec.file)
