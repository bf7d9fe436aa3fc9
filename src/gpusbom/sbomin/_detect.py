"""Which SBOM format the bytes hold, decided from the content; dispatch to its reader."""

from __future__ import annotations

import json
import re
from typing import Any

from ..errors import InputError
from ..model import ScanResult
from ..safetext import loads_json
from ._read import display_name, read_input

#: CycloneDX versions read (JSON exists from 1.2; XML from 1.0)
CDX_JSON_VERSIONS = ("1.2", "1.3", "1.4", "1.5", "1.6", "1.7")
CDX_XML_VERSIONS = ("1.0", "1.1", *CDX_JSON_VERSIONS)
SPDX_VERSIONS = ("SPDX-2.2", "SPDX-2.3")
_CDX_NS = re.compile(r"^\{http://cyclonedx\.org/schema/bom/(\d+\.\d+)\}bom$")
_TV_VERSION = re.compile(r"^\s*SPDXVersion\s*:\s*(\S+)\s*$", re.MULTILINE)


def _text(data: bytes, name: str) -> str:
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    elif data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            raise InputError(f"{name}: not valid UTF-16 text") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{name}: not UTF-8 text (byte {exc.start}): not an SBOM gpusbom reads"
        ) from None


def _json(text: str, name: str) -> Any:
    try:
        return loads_json(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{name}: malformed JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    except RecursionError:
        raise InputError(f"{name}: malformed JSON: nested too deeply") from None


def sniff(path: str) -> str | None:
    """The SBOM format a file holds, judged from its content: ``gpusbom``, ``cyclonedx`` or
    ``spdx``; None when it holds something else (an image archive, other JSON, ...), so a
    caller that takes images or SBOMs (gate, check) can tell them apart. Raises InputError
    when the file cannot be read or starts as JSON but is malformed."""
    from ._read import MAX_SBOM_BYTES

    try:
        with open(path, "rb") as f:
            head = f.read(1 << 16)
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from None
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
    if text.startswith("{"):
        # SBOM keys may come anywhere (sorted SPDX JSON puts spdxVersion last): read it all
        doc = _json(_text(read_input(path, max_bytes=MAX_SBOM_BYTES), path), path)
        if not isinstance(doc, dict):
            return None
        if str(doc.get("schema", "")).startswith("gpusbom/scan/"):
            return "gpusbom"
        if doc.get("bomFormat") == "CycloneDX":
            return "cyclonedx"
        if "spdxVersion" in doc:
            return "spdx"
        return None
    if text.startswith("<") and "cyclonedx" in text[:4096].lower():
        return "cyclonedx"
    if _TV_VERSION.search(text[:4096]):
        return "spdx"
    return None


def parse(data: bytes, path: str) -> ScanResult:
    name = display_name(path)
    if not data.strip():
        raise InputError(f"{name}: empty file: not an SBOM")
    text = _text(data, name)
    head = text.lstrip()
    if head.startswith(("{", "[")):
        return _from_json(_json(head, name), path)
    if head.startswith("<"):
        return _from_xml(text, path)
    m = _TV_VERSION.search(text)
    if m:
        version = m.group(1)
        if version not in SPDX_VERSIONS:
            raise InputError(f"{name}: SPDX tag-value {version} is not supported "
                             f"(gpusbom reads {', '.join(SPDX_VERSIONS)})")
        from ._spdx import from_tag_value

        return from_tag_value(text, path)
    raise InputError(f"{name}: not an SBOM gpusbom reads (neither JSON, XML nor SPDX "
                     "tag-value: expected CycloneDX, SPDX 2.2/2.3 or gpusbom JSON)")


def _from_json(doc: Any, path: str) -> ScanResult:
    name = display_name(path)
    if not isinstance(doc, dict):
        raise InputError(f"{name}: not an SBOM gpusbom reads: the JSON top level is a "
                         f"{type(doc).__name__}, not an object")
    schema = doc.get("schema")
    if isinstance(schema, str) and schema.startswith("gpusbom/scan/"):
        from ._native import from_native

        return from_native(doc, path)
    if doc.get("bomFormat") == "CycloneDX" or (
        "specVersion" in doc and "bomFormat" in doc
    ):
        if doc.get("bomFormat") != "CycloneDX":
            raise InputError(f"{name}: bomFormat is {doc.get('bomFormat')!r}, not 'CycloneDX'")
        spec = doc.get("specVersion")
        if not isinstance(spec, str) or spec not in CDX_JSON_VERSIONS:
            raise InputError(f"{name}: CycloneDX specVersion {spec!r} is not supported "
                             f"(gpusbom reads {', '.join(CDX_JSON_VERSIONS)})")
        from ._cyclonedx import from_cyclonedx

        return from_cyclonedx(doc, path, spec)
    if "spdxVersion" in doc:
        version = doc.get("spdxVersion")
        if version not in SPDX_VERSIONS:
            raise InputError(f"{name}: spdxVersion {version!r} is not supported "
                             f"(gpusbom reads {', '.join(SPDX_VERSIONS)})")
        from ._spdx import from_json_dict

        return from_json_dict(doc, path)
    ctx = doc.get("@context")
    if ctx is not None and "spdx" in json.dumps(ctx).lower():
        raise InputError(f"{name}: SPDX 3 (JSON-LD) is not supported yet: export SPDX 2.3 "
                         "or CycloneDX")
    if isinstance(schema, str):
        raise InputError(f"{name}: unknown JSON schema {schema!r}: not an SBOM gpusbom reads")
    raise InputError(f"{name}: not an SBOM gpusbom reads: JSON without bomFormat "
                     "(CycloneDX), spdxVersion (SPDX) or schema (gpusbom)")


def _from_xml(text: str, path: str) -> ScanResult:
    from defusedxml import DefusedXmlException
    from defusedxml.ElementTree import ParseError, fromstring

    name = display_name(path)
    try:
        # defusedxml: no entity expansion (billion laughs), no external entities, no DTDs
        # that reference anything: refused with an exception instead
        root = fromstring(text.encode("utf-8"), forbid_dtd=False)
    except DefusedXmlException as exc:
        raise InputError(f"{name}: XML refused: {type(exc).__name__} "
                         "(entity declarations are not allowed)") from None
    except ParseError as exc:
        raise InputError(f"{name}: malformed XML: {exc}") from None
    except RecursionError:
        raise InputError(f"{name}: malformed XML: nested too deeply") from None
    m = _CDX_NS.match(root.tag)
    if m:
        version = m.group(1)
        if version not in CDX_XML_VERSIONS:
            raise InputError(f"{name}: CycloneDX XML {version} is not supported "
                             f"(gpusbom reads {', '.join(CDX_XML_VERSIONS)})")
        from ._cdxxml import xml_to_dict
        from ._cyclonedx import from_cyclonedx

        return from_cyclonedx(xml_to_dict(root, name), path, version)
    if root.tag.endswith("}bom") and "cyclonedx" in root.tag:
        raise InputError(f"{name}: unknown CycloneDX XML namespace {root.tag.split('}')[0][1:]}")
    if root.tag.endswith("RDF") and "spdx" in text[:4096].lower():
        raise InputError(f"{name}: SPDX RDF/XML is not supported: use SPDX JSON or tag-value")
    raise InputError(f"{name}: not an SBOM gpusbom reads: XML root element {root.tag!r} is "
                     "not a CycloneDX bom")
