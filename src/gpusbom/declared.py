"""Declared SBOMs: the SBOMs that packages inside the target ship themselves (PEP 770:
``<name>.dist-info/sboms/*`` of an installed wheel), each parsed into a ``ScanResult``
(``gpusbom.sbomin``) so that a reconcile view can merge them with what the scan found.

    from gpusbom.declared import scan_declared
    result, declared = scan_declared(ScanRequest(reference="oci:DIR"))
    for d in declared:  # d.component: the bom-ref of the distribution that ships it
        d.document.components if d.document else d.error

The scan reports every such file on its Python component (``gpusbom:declared-sboms``, one
``sbom-declared`` evidence with detail ``PEP 770`` per file); :func:`declared_sboms` reads
them back from the scan's view. A document that cannot be read is kept with its ``error``
(one line), never raised: it is the image's content, not gpusbom's input.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .collectors.pep770 import DETAIL, MAX_DECLARED_SBOM
from .errors import GpusbomError
from .model import EvidenceMethod, ScanResult

if TYPE_CHECKING:
    from .fsview.view import FsView
    from .pipeline import ScanRequest

__all__ = ["DeclaredSbom", "declared_sboms", "scan_declared"]


@dataclass(frozen=True)
class DeclaredSbom:
    """One SBOM a component of the scan declares."""

    component: str  # bom-ref of the component that ships it
    path: str  # inside the target
    layer: str | None  # diff_id of the layer holding it
    document: ScanResult | None  # None when it could not be read (see ``error``)
    error: str | None = None


def declared_sboms(result: ScanResult, fs: FsView) -> list[DeclaredSbom]:
    """The declared SBOMs ``result``'s components name, read from ``fs`` (the view the
    scan was made from), in component order."""
    from .sbomin import parse_sbom

    out: list[DeclaredSbom] = []
    for c in result.components:
        for ev in c.evidence:
            if ev.method != EvidenceMethod.SBOM.value or ev.detail != DETAIL or not ev.path:
                continue
            doc, err = None, None
            try:
                entry = fs.lookup(ev.path)
                if entry is None:
                    raise GpusbomError(f"{ev.path}: not in the target")
                if (entry.size or 0) > MAX_DECLARED_SBOM:
                    raise GpusbomError(f"{ev.path}: larger than {MAX_DECLARED_SBOM} bytes")
                doc = parse_sbom(fs.read_bytes(ev.path), ev.path)
            except (GpusbomError, OSError, ValueError) as e:
                err = str(e).splitlines()[0] if str(e) else type(e).__name__
            out.append(DeclaredSbom(component=c.bom_ref, path=ev.path, layer=ev.layer,
                                    document=doc, error=err))
    return out


def scan_declared(req: ScanRequest) -> tuple[ScanResult, list[DeclaredSbom]]:
    """Scan ``req`` and read the SBOMs its components declare while the view is open."""
    from .pipeline import scan_open

    with scan_open(req) as scanned:
        fs = scanned.view.fs
        found = [] if fs is None else declared_sboms(scanned.result, fs)
        return scanned.result, found
