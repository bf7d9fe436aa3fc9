"""The fingerprint database: NVIDIA library files (SHA-256, ELF build-id) -> product and
exact version (issue #38).

- ``database``: the format (versioned JSON, columns + rows), its bounded and validated
  loading, the lookup by build-id and SHA-256;
- ``releases``: the vendor release lists the database carries, and the verdict on a
  version read from a binary (a release, not one, or not listed);
- ``active``: the snapshot shipped with gpusbom (``gpusbom/data/fingerprints.json``, built by
  ``scripts/build_fingerprints.py`` from NVIDIA's wheels on PyPI; its coverage report is
  ``gpusbom/data/fingerprints-coverage.txt``);
- ``redistrib``: NVIDIA's ``redistrib_*.json`` manifests and their archives as a second
  source (``--redistrib`` of the builder and of ``gpusbom fingerprints update``).

A file whose build-id or SHA-256 is in the database is identified exactly (confidence
``exact``): the ``cuda`` collector gives it the database's product and version above every
other source, keeping the others as evidence.
"""

from __future__ import annotations

from .database import (
    COLUMNS,
    FORMAT,
    FORMAT_VERSION,
    FingerprintDB,
    FingerprintError,
    Match,
    Record,
    Release,
    load_bytes,
    load_path,
)
from .releases import ReleaseCheck, ReleaseIndex

__all__ = [
    "COLUMNS",
    "FORMAT",
    "FORMAT_VERSION",
    "FingerprintDB",
    "FingerprintError",
    "Match",
    "Record",
    "Release",
    "ReleaseCheck",
    "ReleaseIndex",
    "load_bytes",
    "load_path",
]
