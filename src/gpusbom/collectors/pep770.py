"""PEP 770: SBOMs a wheel ships in ``<name>.dist-info/sboms/`` (maturin's cargo-cyclonedx
document, auditwheel's list of the libraries it grafted, ...). The Python collector reports
them on the distribution's component (``declared-sboms``, one ``sbom-declared`` evidence per
file); ``gpusbom.declared`` reads the documents themselves."""

from __future__ import annotations

from ..fsview.spec import PathSpec
from ..model import Component, EvidenceMethod
from .base import VIEW_ERRORS, CollectContext

#: the directory PEP 770 names, inside a ``.dist-info``
SBOM_DIR = "sboms"
#: the largest declared SBOM read (the wheels seen ship 2 KB - 0.5 MB)
MAX_DECLARED_SBOM = 16 << 20
#: what the collector captures
SPEC = PathSpec(f"/**/*.dist-info/{SBOM_DIR}/*", max_size=MAX_DECLARED_SBOM)
#: the detail of the evidence (what tells a PEP 770 document from an input SBOM's evidence)
DETAIL = "PEP 770"


def attach(ctx: CollectContext, comp: Component, dist_info: str) -> None:
    """Evidence and the ``declared-sboms`` property on ``comp`` for each file in
    ``dist_info/sboms/``."""
    try:
        paths = [p for p in ctx.fs.glob(f"{dist_info}/{SBOM_DIR}/*") if ctx.fs.is_file(p)]
    except VIEW_ERRORS as e:
        ctx.unknown(f"cannot list the declared SBOMs: {e}", f"{dist_info}/{SBOM_DIR}")
        return
    if not paths:
        return
    comp.properties["declared-sboms"] = ", ".join(p.rsplit("/", 1)[1] for p in sorted(paths))
    for p in sorted(paths):
        comp.evidence.append(ctx.evidence(EvidenceMethod.SBOM.value, p, DETAIL))
