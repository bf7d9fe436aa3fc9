"""spdx-tools' ``DocumentConverter`` (a ``Document`` as its SPDX 2.3 JSON dict), with the
packages and relationships converted through a table built once.

The library's converters ask, for every property of every object, its JSON name (a regular
expression substitution each time: ``snake_case_to_camel_case``) and its value (a chain of
``if``s over the property enum), and look each package's annotations up by a scan of the
whole document's. On a host of 868 packages and 3,500 relationships that was 0.11 of the
0.29 CPU-s of writing SPDX JSON (2-core VM). Here the names come from the library's own
converters (``json_property_name``), once; each property's value is what the library's
``_get_property_value`` returns for it (the same expressions, in a table); the order is the
property enums' order, as the library iterates them; everything else of the document
(creation info, annotations, extracted licensing info, files, snippets) is the library's
converter's. A release of spdx-tools with a property this table lacks converts with the
library's converter alone. ``tests/writers/test_spdx_convert.py`` compares both on every
fixture.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spdx_tools.spdx.datetime_conversions import datetime_to_iso_string
from spdx_tools.spdx.jsonschema.checksum_converter import algorithm_to_json_string
from spdx_tools.spdx.jsonschema.checksum_properties import ChecksumProperty
from spdx_tools.spdx.jsonschema.document_converter import DocumentConverter
from spdx_tools.spdx.jsonschema.document_properties import DocumentProperty
from spdx_tools.spdx.jsonschema.external_package_ref_properties import (
    ExternalPackageRefProperty,
)
from spdx_tools.spdx.jsonschema.package_properties import PackageProperty
from spdx_tools.spdx.jsonschema.relationship_properties import RelationshipProperty
from spdx_tools.spdx.model.actor import Actor
from spdx_tools.spdx.model.document import Document
from spdx_tools.spdx.model.package import Package

__all__ = ["convert_document"]

_LIB = DocumentConverter()  # type: ignore[no-untyped-call]
_PC = _LIB.package_converter


def _opt(fn: Callable[[Any], Any], value: Any) -> Any:
    return fn(value) if value is not None else None


def _actor(value: Any) -> Any:
    return value.to_serialized_string() if isinstance(value, Actor) else _opt(str, value)


def _names(converter: Any, enum: Any) -> list[tuple[Any, str]]:
    return [(p, converter.json_property_name(p)) for p in enum]


_CHECKSUM = _names(_PC.checksum_converter, ChecksumProperty)
_EXTREF = _names(_PC.external_package_ref_converter, ExternalPackageRefProperty)
_RELATIONSHIP = _names(_LIB.relationship_converter, RelationshipProperty)


def _checksum(c: Any) -> dict[str, Any]:
    values = {ChecksumProperty.ALGORITHM: algorithm_to_json_string(c.algorithm),
              ChecksumProperty.CHECKSUM_VALUE: c.value}
    return {name: values[p] for p, name in _CHECKSUM if values[p] is not None}


def _extref(r: Any) -> dict[str, Any]:
    values = {ExternalPackageRefProperty.COMMENT: r.comment,
              ExternalPackageRefProperty.REFERENCE_CATEGORY: r.category.name,
              ExternalPackageRefProperty.REFERENCE_LOCATOR: r.locator,
              ExternalPackageRefProperty.REFERENCE_TYPE: r.reference_type}
    return {name: values[p] for p, name in _EXTREF if values[p] is not None}


def _relationship(r: Any) -> dict[str, Any]:
    values = {RelationshipProperty.SPDX_ELEMENT_ID: r.spdx_element_id,
              RelationshipProperty.COMMENT: r.comment,
              RelationshipProperty.RELATED_SPDX_ELEMENT: str(r.related_spdx_element_id),
              RelationshipProperty.RELATIONSHIP_TYPE: r.relationship_type.name}
    return {name: values[p] for p, name in _RELATIONSHIP if values[p] is not None}


P = PackageProperty
#: each package property's value, as ``PackageConverter._get_property_value`` gives it
#: (annotations apart: they need the document)
_PACKAGE: dict[Any, Callable[[Package], Any]] = {
    P.SPDX_ID: lambda p: p.spdx_id,
    P.ATTRIBUTION_TEXTS: lambda p: p.attribution_texts or None,
    P.BUILT_DATE: lambda p: _opt(datetime_to_iso_string, p.built_date),
    P.CHECKSUMS: lambda p: [_checksum(c) for c in p.checksums] or None,
    P.COMMENT: lambda p: p.comment,
    P.COPYRIGHT_TEXT: lambda p: _opt(str, p.copyright_text),
    P.DESCRIPTION: lambda p: p.description,
    P.DOWNLOAD_LOCATION: lambda p: str(p.download_location),
    P.EXTERNAL_REFS: lambda p: [_extref(r) for r in p.external_references] or None,
    P.FILES_ANALYZED: lambda p: p.files_analyzed,
    P.HOMEPAGE: lambda p: _opt(str, p.homepage),
    P.LICENSE_COMMENTS: lambda p: p.license_comment,
    P.LICENSE_CONCLUDED: lambda p: _opt(str, p.license_concluded),
    P.LICENSE_DECLARED: lambda p: _opt(str, p.license_declared),
    P.LICENSE_INFO_FROM_FILES: lambda p: [str(e) for e in p.license_info_from_files] or None,
    P.NAME: lambda p: p.name,
    P.ORIGINATOR: lambda p: _actor(p.originator),
    P.PACKAGE_FILE_NAME: lambda p: p.file_name,
    P.PACKAGE_VERIFICATION_CODE: lambda p: _opt(_PC.package_verification_code_converter.convert,
                                                p.verification_code),
    P.PRIMARY_PACKAGE_PURPOSE: lambda p: (p.primary_package_purpose.name
                                          if p.primary_package_purpose is not None else None),
    P.RELEASE_DATE: lambda p: _opt(datetime_to_iso_string, p.release_date),
    P.SOURCE_INFO: lambda p: p.source_info,
    P.SUMMARY: lambda p: p.summary,
    P.SUPPLIER: lambda p: _actor(p.supplier),
    P.VALID_UNTIL_DATE: lambda p: _opt(datetime_to_iso_string, p.valid_until_date),
    P.VERSION_INFO: lambda p: p.version,
}
_PACKAGE_NAMES = _names(_PC, PackageProperty)
_DOCUMENT_NAMES = _names(_LIB, DocumentProperty)
#: this table knows every property of this release's converters
COMPLETE = (set(_PACKAGE) | {P.ANNOTATIONS} == set(PackageProperty)
            and {p for p, _ in _CHECKSUM} == {ChecksumProperty.ALGORITHM,
                                              ChecksumProperty.CHECKSUM_VALUE}
            and len(_EXTREF) == 4 and len(_RELATIONSHIP) == 4
            and {DocumentProperty.PACKAGES, DocumentProperty.RELATIONSHIPS}
            <= set(DocumentProperty))


def _packages(document: Document) -> list[dict[str, Any]] | None:
    notes: dict[str, list[dict[str, Any]]] = {}
    ids = {p.spdx_id for p in document.packages}
    for a in document.annotations:  # the library's order: the document's
        if a.spdx_id in ids:
            notes.setdefault(a.spdx_id, []).append(_LIB.annotation_converter.convert(a, document))
    out = []
    for pkg in document.packages:
        d: dict[str, Any] = {}
        for prop, name in _PACKAGE_NAMES:
            v = notes.get(pkg.spdx_id) if prop is P.ANNOTATIONS else _PACKAGE[prop](pkg)
            if v is not None:
                d[name] = v
        out.append(d)
    return out or None


def convert_document(document: Document) -> dict[str, Any]:
    """What ``DocumentConverter().convert(document)`` returns."""
    if not COMPLETE:
        return _LIB.convert(document)
    out: dict[str, Any] = {}
    for prop, name in _DOCUMENT_NAMES:
        if prop is DocumentProperty.PACKAGES:
            v = _packages(document)
        elif prop is DocumentProperty.RELATIONSHIPS:
            v = [_relationship(r) for r in document.relationships] or None
        else:
            v = _LIB._get_property_value(document, prop)  # noqa: SLF001 - the library's own value
        if v is not None:
            out[name] = v
    return out
