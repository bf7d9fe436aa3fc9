"""Attestations: in-toto Statements v1 about an image, pushed as OCI referrers.

``statement`` (Statement, subject, DSSE envelope, Bundle), ``predicates`` (SBOMs, probe
test results, gate/check verification summaries), ``oci`` (push as OCI 1.1 referrers,
with the referrers tag schema for registries without the referrers API; discover),
``sign`` (delegation to cosign or sigstore-python when the user has them). See
docs/attestations.md.
"""

from __future__ import annotations

from .predicates import (
    CYCLONEDX,
    SPDX,
    TEST_RESULT,
    VSA,
    check_statements,
    gate_statements,
    probe_statement,
    sbom_statements,
    scan_statements,
)
from .statement import PAYLOAD_TYPE, STATEMENT_TYPE, Statement, Subject, bundle_lines, subject_of

__all__ = [
    "CYCLONEDX",
    "PAYLOAD_TYPE",
    "SPDX",
    "STATEMENT_TYPE",
    "TEST_RESULT",
    "VSA",
    "Statement",
    "Subject",
    "bundle_lines",
    "check_statements",
    "gate_statements",
    "probe_statement",
    "sbom_statements",
    "scan_statements",
    "subject_of",
]
