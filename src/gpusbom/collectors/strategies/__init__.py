"""Generic strategies of the stack collectors, one per module, each generic over the
catalog's rows (``catalog.detection``): no module here names a product.

- ``sonames``: versioned library files the rows' ``sonames`` name;
- ``classified``: versions classifier rows read from binaries (and static copies);
- ``headers``: version macros of the rows' ``headers``;
- ``packages``: package records (wheels' METADATA/RECORD, conda-meta records);
- ``version_files``: the release's roots and their version files;
- ``env``: image env vars that declare the release and the products' versions;
- ``fingerprints``: files the fingerprint database knows by SHA-256 or build-id;
- ``releases``: the candidate versions checked against the database's vendor release
  lists (one that is not a release of its product is dropped, kept as evidence).

Each adds to the ``Observations`` of one scan (``collectors._gpu``), whose version choice
weighs them by the priorities below (highest wins).
"""

from __future__ import annotations

import re

from ...catalog import names

__all__ = ["P_DIR", "P_ENV", "P_FILE", "P_FINGERPRINT", "P_HEADER", "P_PKG", "P_VJSON",
           "renamed_stem",
           "soname_product"]

#: version priorities: a release root's version.json, package metadata, a versioned file
#: (soname, full-version header, classifier), image env, a major.minor header, a directory name;
#: above them all, a file the fingerprint database knows (``fingerprints``)
P_FINGERPRINT, P_VJSON, P_PKG, P_FILE, P_ENV, P_HEADER, P_DIR = 6, 5, 4, 3, 2, 1, 0

#: auditwheel's renamed copies: ``libcudart-9335f6a2.so.10.2`` (hash before ``.so``)
_RENAMED_RX = re.compile(r"^(?P<stem>lib[A-Za-z0-9_+.]+?)-(?P<hash>[0-9a-f]{8})$")


def renamed_stem(stem: str) -> tuple[str, str] | None:
    """(original stem, hash) of an auditwheel-renamed library stem, else None."""
    m = _RENAMED_RX.match(stem)
    return (m.group("stem"), m.group("hash")) if m else None


def soname_product(stack: str, stem: str) -> str | None:
    """The product of ``stack`` a library stem names (the catalog's library names)."""
    return names.library_product(stack, stem)
