"""Vendor VEX: the OpenVEX / CycloneDX VEX documents attached to the scanned image in its
registry (``sources.registry.referrers``), applied like ``--vex`` files.

Each statement keeps where it came from (``VexStatement.origin``: ``vendor VEX: registry
attachment sha256:... in HOST``), so a suppressed finding says that the vendor's attached
statement, not the user, decided it. A document that is not valid VEX is one warning and
suppresses nothing; the user's ``--vex`` files are applied after the vendor's and decide
where both speak of one finding.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..errors import InputError
from .vex import VexStatement, parse_vex

if TYPE_CHECKING:
    from ..sources.registry.referrers import Attachments

__all__ = ["vendor_statements"]

log = logging.getLogger(__name__)


def vendor_statements(attached: Attachments) -> tuple[list[VexStatement], list[str]]:
    """(statements, warnings) of every VEX attachment in ``attached``."""
    out: list[VexStatement] = []
    warnings: list[str] = []
    for a in attached.of_kind("vex"):
        origin = f"vendor VEX: {a.origin(attached.registry)}"
        try:
            out.extend(parse_vex(a.document, f"attachment {a.digest}", origin=origin))
        except InputError as e:
            warnings.append(f"vendor VEX {a.digest} ignored: {str(e).splitlines()[0][:300]}")
            log.warning("gpusbom: warning: %s", warnings[-1])
    return out, warnings
