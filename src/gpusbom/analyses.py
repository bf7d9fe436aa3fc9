"""The analyses stage, the same for every target (image, directory, host root, SBOM): what is
known about the components found, added to the ``ScanResult`` after it is built.

Today: advisory matching (``advisories.matcher``) with the database's description. VEX
(``advisories.vex.apply_vex``), compatibility (``compat``) and policy (``policy``) run on the
result afterwards, where the command asks for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .advisories.db import AdvisoryDB
    from .model import ScanResult


def match_advisories(result: ScanResult, db: AdvisoryDB | None = None) -> None:
    """Replace ``result``'s advisory findings by a fresh match of its components against
    ``db`` (the active database when None); other findings (host consistency, an input
    SBOM's own) are kept, first. ``result.advisory_db`` describes the database used."""
    from .advisories.db import describe, load_active
    from .advisories.matcher import match

    db = db or load_active()
    kept = [f for f in result.findings if f.kind != "advisory"]
    # what the scan saw decides which "not affected" proofs hold (an SBOM proves no absence)
    kind = result.target.kind if result.target.kind in ("image", "directory", "host") else None
    result.findings = kept + match(result.components, db, target_kind=kind)
    result.advisory_db = describe(db, result.timestamp)
