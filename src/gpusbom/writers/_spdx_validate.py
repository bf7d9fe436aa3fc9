"""spdx-tools' full-document validation, in time linear in the document.

``validate_full_spdx_document`` (spdx-tools 0.8) checks each relationship's and annotation's
SPDX ids against a list of every id of the document, built again for each check, and each
package's contained files by a scan of every relationship: quadratic. On an image of 800
packages and 3,400 relationships that was 90 % of writing SPDX (10.5 of 11.8 CPU-s under
a profiler, ~3.5 s on a 2-core VM). Here the same validators of spdx-tools check each
element (creation info, packages, licence expressions, ids' syntax, actors), and the checks
across the document (ids present, no duplicate, the ``DESCRIBES`` relationship, no files in a
package whose files were not analysed) use an index built once. The messages are the
library's own, in its order; only a document that needs the library's slower path (files,
snippets, references to other documents) goes through ``validate_full_spdx_document``.
"""

from __future__ import annotations

from typing import Any

from spdx_tools.spdx.model.document import Document
from spdx_tools.spdx.model.relationship import RelationshipType
from spdx_tools.spdx.validation.actor_validator import validate_actor
from spdx_tools.spdx.validation.creation_info_validator import validate_creation_info
from spdx_tools.spdx.validation.document_validator import validate_full_spdx_document
from spdx_tools.spdx.validation.extracted_licensing_info_validator import (
    validate_extracted_licensing_infos,
)
from spdx_tools.spdx.validation.license_expression_validator import (
    validate_license_expression,
    validate_license_expressions,
)
from spdx_tools.spdx.validation.package_validator import validate_package
from spdx_tools.spdx.validation.spdx_id_validators import validate_spdx_id
from spdx_tools.spdx.validation.validation_message import (
    SpdxElementType,
    ValidationContext,
    ValidationMessage,
)


def _simple(doc: Document) -> bool:
    """No element the indexed checks leave to the library: files, snippets, ids that
    name another document."""
    if doc.files or doc.snippets or doc.creation_info.external_document_refs:
        return False
    ids = [r.spdx_element_id for r in doc.relationships]
    ids += [r.related_spdx_element_id for r in doc.relationships
            if isinstance(r.related_spdx_element_id, str)]
    ids += [a.spdx_id for a in doc.annotations]
    return not any(":" in i for i in ids)


def validate_document(doc: Document) -> list[Any]:
    """What ``validate_full_spdx_document(doc)`` returns (its messages, in its order)."""
    version = doc.creation_info.spdx_version
    if version not in ("SPDX-2.2", "SPDX-2.3") or not _simple(doc):
        return list(validate_full_spdx_document(doc))
    doc_id = doc.creation_info.spdx_id
    all_ids = [doc_id, *(p.spdx_id for p in doc.packages)]
    present = set(all_ids)
    msgs: list[Any] = list(validate_creation_info(doc.creation_info, version))
    # a package whose files were not analysed contains no file: none is in the document
    # (``_simple``), so no relationship can name one
    for p in doc.packages:
        ctx = ValidationContext(spdx_id=p.spdx_id, parent_id=doc_id,
                                element_type=SpdxElementType.PACKAGE, full_element=p)
        msgs += [ValidationMessage(m, ctx) for m in validate_spdx_id(p.spdx_id, doc)]
        msgs += validate_license_expression(p.license_concluded, doc, p.spdx_id)
        if p.license_info_from_files:
            if not p.files_analyzed:
                msgs.append(ValidationMessage(
                    f"license_info_from_files must be None if files_analyzed is False, but is: "
                    f"{p.license_info_from_files}", ctx))
            else:
                msgs += validate_license_expressions(p.license_info_from_files, doc, p.spdx_id)
        msgs += validate_license_expression(p.license_declared, doc, p.spdx_id)
        msgs += validate_package(p, version, ctx)

    def ids(spdx_id: str, ctx: ValidationContext) -> list[Any]:
        out = [ValidationMessage(m, ctx) for m in validate_spdx_id(spdx_id, doc)]
        if spdx_id not in present:
            out.append(ValidationMessage(
                f'did not find the referenced spdx_id "{spdx_id}" in the SPDX document', ctx))
        return out

    for a in doc.annotations:
        ctx = ValidationContext(element_type=SpdxElementType.ANNOTATION, full_element=a)
        msgs += validate_actor(a.annotator, "annotation")
        msgs += ids(a.spdx_id, ctx)
    for r in doc.relationships:
        ctx = ValidationContext(element_type=SpdxElementType.RELATIONSHIP, full_element=r)
        msgs += ids(r.spdx_element_id, ctx)
        related = r.related_spdx_element_id
        if isinstance(related, str):  # not NONE / NOASSERTION
            msgs += ids(related, ctx)
        if version == "SPDX-2.2" and r.relationship_type in (
                RelationshipType.SPECIFICATION_FOR, RelationshipType.REQUIREMENT_DESCRIPTION_FOR):
            msgs.append(ValidationMessage(f"{r.relationship_type} is not supported in SPDX-2.2",
                                          ctx))
    msgs += validate_extracted_licensing_infos(doc.extracted_licensing_info)
    describes = any(
        (r.relationship_type == RelationshipType.DESCRIBES and r.spdx_element_id == doc_id)
        or (r.relationship_type == RelationshipType.DESCRIBED_BY
            and r.related_spdx_element_id == doc_id)
        for r in doc.relationships)
    if len(doc.packages) != 1 and not describes:
        msgs.append(ValidationMessage(
            f'there must be at least one relationship "{doc_id} DESCRIBES ..." or "... '
            f'DESCRIBED_BY {doc_id}" when there is not only a single package present',
            ValidationContext(spdx_id=doc_id, element_type=SpdxElementType.DOCUMENT)))
    seen: set[str] = set()
    dups = {i for i in all_ids if i in seen or seen.add(i)}  # type: ignore[func-returns-value]
    if dups:
        msgs.append(ValidationMessage(
            f"every spdx_id must be unique within the document, but found the following "
            f"duplicates: {sorted(dups)}",
            ValidationContext(spdx_id=doc_id, element_type=SpdxElementType.DOCUMENT)))
    return msgs

