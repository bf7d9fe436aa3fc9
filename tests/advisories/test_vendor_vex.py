"""Vendor VEX from registry attachments (``advisories.vendor_vex``) as the analyses apply it:
the justification names the attachment, CycloneDX maps its justification, an invalid
document is a warning that suppresses nothing. (Against a real registry:
tests/registry/test_attachments.py.)"""

from __future__ import annotations

import json

from tests.advisories.test_vex import _openvex, _result, _status

from gpusbom.advisories.vendor_vex import vendor_statements
from gpusbom.advisories.vex import apply_vex, cyclonedx_justification
from gpusbom.sources.registry.referrers import Attachment, Attachments, Referrer

DIGEST = "sha256:" + "cd" * 32


def attached(doc: object) -> Attachments:
    ref = Referrer(digest=DIGEST, media_type="application/vnd.oci.image.manifest.v1+json",
                   artifact_type="application/openvex+json", size=None,
                   subject="sha256:" + "ab" * 32)
    a = Attachment("vex", "openvex", json.dumps(doc).encode(), ref, "sha256:" + "ef" * 32)
    return Attachments(items=[a], registry="nvcr.io")


TORCH = {"vulnerability": {"name": "CVE-2025-32434"},
         "products": [{"@id": "pkg:pypi/torch@2.5.1"}], "status": "not_affected",
         "justification": "component_not_present"}


def test_vendor_statement_names_the_attachment() -> None:
    r = _result()
    stmts, warnings = vendor_statements(attached(_openvex(TORCH)))
    assert warnings == [] and len(stmts) == 1
    apply_vex(r, [], stmts)
    status, just = _status(r, "CVE-2025-32434", "torch")
    assert status == "not-affected"
    assert just == f"component_not_present (vendor VEX: registry attachment {DIGEST} in nvcr.io)"
    assert cyclonedx_justification(just or "")[0] == "code_not_present"


def test_invalid_vendor_vex_is_a_warning_and_suppresses_nothing() -> None:
    r = _result()
    stmts, warnings = vendor_statements(attached(_openvex(dict(TORCH, status="maybe"))))
    assert stmts == [] and len(warnings) == 1
    assert DIGEST in warnings[0] and "'maybe'" in warnings[0]
    apply_vex(r, [], stmts)
    assert _status(r, "CVE-2025-32434", "torch")[0] == "affected"
