"""How each component was identified, and how sure that is (#38).

Every component says which method decided its identity and version
(``identification-method``) and the confidence of that method (``identification-confidence``):

- ``exact``: the file's SHA-256 or ELF build-id is a known release's (the fingerprint
  database: ``sha256``, ``build-id``), or static-library markers only one release holds;
- ``high``: a package manager's record (``package-db``, ``package-metadata``), a release's
  own version file (``version-file``), a getter constant or version string in the binary that
  names the full release (``elf-symbol`` / ``elf-rodata`` rows of confidence high), a live
  device;
- ``medium``: a short form of the release from the binary (``cudaRuntimeGetVersion``: 12.4
  of 12.4.127), the release of a sibling library shipped with it (``sibling``: cuBLAS from
  its cuBLASLt);
- ``low``: a file name (``soname``, a directory), a header, image env/labels, the presence of
  a product with no version, an input SBOM's declaration.

Collectors that weigh several sources (the GPU stacks' ``Observations``) set both properties
from the source their version came from; :func:`annotate` fills them in for every other
component from its evidence. A package that absorbed a GPU observation (fusion) is
identified by its package record; what decided each GPU product's version stays as
``product-identification`` (``cudnn@9.14.0: header (low)``). Where two methods disagree the
higher one decided and the other is kept as evidence (``disagreement``,
``rejected-versions``).
"""

from __future__ import annotations

from collections.abc import Iterable

from .model import Component

__all__ = ["CONFIDENCE_SCORE", "LEVELS", "METHOD_CONFIDENCE", "annotate", "decided_by"]

#: the confidence levels, best first
LEVELS = ("exact", "high", "medium", "low")
#: a level as the number CycloneDX's evidence.identity.confidence takes (0..1)
CONFIDENCE_SCORE = {"exact": "1", "high": "0.8", "medium": "0.5", "low": "0.2"}
#: an evidence method -> the confidence it gives when it decides (``elf-symbol`` and
#: ``elf-rodata`` carry their classifier row's own confidence instead)
METHOD_CONFIDENCE = {
    "fingerprint-sha256": "exact",
    "fingerprint-build-id": "exact",
    "fingerprint-static-marker": "exact",
    "package-db": "high",
    "package-metadata": "high",
    "version-file": "high",
    "device": "high",
    "probe": "high",
    "elf-symbol": "medium",
    "elf-rodata": "medium",
    "sibling": "medium",
    "header": "low",
    "soname": "low",
    "filename": "low",
    "env": "low",
    "label": "low",
    "elf": "low",
    "sbom-declared": "low",
}
#: which evidence method decides when a component has several (better first)
_RANK = tuple(METHOD_CONFIDENCE)
#: the property names
METHOD, CONFIDENCE = "identification-method", "identification-confidence"
_PACKAGE_METHODS = ("package-db", "package-metadata")


def decided_by(source: str, priority: int) -> tuple[str, str]:
    """(method, confidence) of an observation's version source: the source strings the GPU
    strategies give (``fingerprint sha256``, ``elf-symbol cublaslt-getter high``,
    ``soname libcudart.so.12.4.127``, ``wheel nvidia-cublas-cu12``, ``sibling libcublasLt
    (same release)``, ``env CUDA_VERSION`` ...) and its priority (``strategies.P_*``)."""
    from .collectors.strategies import P_DIR, P_ENV, P_FILE, P_FINGERPRINT, P_PKG, P_VJSON

    head, _, rest = source.partition(" ")
    if priority >= P_FINGERPRINT and head == "fingerprint":
        return rest.strip() or "sha256", "exact"
    if head in ("elf-symbol", "elf-rodata"):
        conf = rest.rsplit(" ", 1)[-1]
        return head, conf if conf in LEVELS else "medium"
    if head == "sibling":
        return "sibling", "medium"
    if head == "soname":
        return "soname", "low"
    if head in ("wheel", "conda"):
        return "package-metadata", "high"
    if head == "env" or priority == P_ENV:
        return "env", "low"
    if head == "directory" or priority == P_DIR:
        return "filename", "low"
    if priority >= P_VJSON:
        return "version-file", "high"
    if priority == P_PKG:
        return "version-file", "high"
    if priority == P_FILE:  # a full-version header (cudnn_version.h, nccl.h)
        return "header", "low"
    return "header", "low"


#: evidence methods reported under the fingerprint database's names
_REPORTED = {"fingerprint-sha256": "sha256", "fingerprint-build-id": "build-id",
             "fingerprint-static-marker": "static-marker"}


def _from_evidence(c: Component, rank: Iterable[str] = _RANK) -> tuple[str, str] | None:
    methods = {e.method for e in c.evidence}
    for m in rank:
        if m in methods:
            return _REPORTED.get(m, m), METHOD_CONFIDENCE[m]
    if methods:
        return sorted(methods)[0], "low"
    return None


def annotate(components: Iterable[Component]) -> None:
    """Give every component ``identification-method`` and ``identification-confidence``
    (see the module docstring); one a collector already decided keeps its own."""
    for c in components:
        props = c.properties
        own = _from_evidence(c)
        pkg = _from_evidence(c, _PACKAGE_METHODS) if c.ecosystem not in (None, "generic") else None
        if pkg is not None and pkg[0] in _PACKAGE_METHODS:
            # a package: its record decided (what decided a GPU product merged into it is its
            # product-identification, fusion.py)
            props[METHOD], props[CONFIDENCE] = pkg
            continue
        if METHOD in props and props.get(CONFIDENCE) in LEVELS:
            continue
        if own is not None:
            method, conf = own
            if c.version is None and method in ("elf-symbol", "elf-rodata"):
                conf = "low"  # a binary's bytes show the product is there, not which release
            props[METHOD], props[CONFIDENCE] = method, conf
