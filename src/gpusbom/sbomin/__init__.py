"""Read existing SBOMs back into the internal model (``gpusbom scan --sbom``).

    load_sbom(path | "-") -> ScanResult

Formats, detected from the content (never from the file name):

- gpusbom native JSON (``-o json``): ``ScanResult.from_dict`` after a type check;
- CycloneDX JSON (1.2-1.7) and XML (1.0-1.7), from gpusbom or any other tool;
- SPDX 2.2 / 2.3, JSON and tag-value (parsed with spdx-tools); SPDX 3 is refused.

Components of gpusbom's own CycloneDX/SPDX output come back with their bom-refs,
``gpusbom:*`` properties, evidence, probe results and relationships. Components of
other tools get the identities the advisory matcher needs (``ecosystem`` from the purl,
and the GPU ``stack``/``product``/``product-version`` gpusbom's collectors would give
the same package, see ``_classify``) and one ``sbom-declared`` evidence per location the
SBOM names.

Every problem with the input raises ``InputError`` with one line naming the file. The
input is bounded (``MAX_SBOM_BYTES``) and XML is parsed with defusedxml (no entity
expansion, no external entities, no DTD fetching).
"""

from __future__ import annotations

from ..errors import InputError
from ..model import ScanResult
from ._read import MAX_SBOM_BYTES, read_input

__all__ = ["MAX_SBOM_BYTES", "load_sbom", "parse_sbom", "sniff"]


def sniff(path: str) -> str | None:
    """``gpusbom`` / ``cyclonedx`` / ``spdx`` when the file at ``path`` is an SBOM gpusbom
    reads, None when it is something else (see ``_detect.sniff``)."""
    from ._detect import sniff as _sniff

    return _sniff(path)


def load_sbom(path: str, *, max_bytes: int | None = None) -> ScanResult:
    """Read the SBOM at ``path`` (``-``: standard input) as a ``ScanResult``.

    Raises ``InputError`` (one line naming the file) when the input is missing, empty,
    too large, not an SBOM gpusbom reads, or malformed.
    """
    from ._detect import parse

    data = read_input(path, max_bytes=MAX_SBOM_BYTES if max_bytes is None else max_bytes)
    return parse(data, path)


def parse_sbom(data: bytes, name: str) -> ScanResult:
    """The SBOM in ``data`` (named ``name`` in messages: a file inside an image, say) as a
    ``ScanResult``; the same formats and ``InputError``s as :func:`load_sbom`."""
    from ._detect import parse

    if len(data) > MAX_SBOM_BYTES:
        raise InputError(f"{name}: larger than {MAX_SBOM_BYTES} bytes")
    return parse(data, name)
