"""Odd inputs still give valid documents in every format."""

from __future__ import annotations

import io
import json
from pathlib import Path
import warnings

import pytest
from cyclonedx.schema import OutputFormat, SchemaVersion
from cyclonedx.validation import make_schemabased_validator
from spdx_tools.spdx.parser.jsonlikedict.json_like_dict_parser import JsonLikeDictParser
from spdx_tools.spdx.parser.tagvalue.parser import Parser as TagValueParser
from spdx_tools.spdx.validation.document_validator import validate_full_spdx_document

from gpusbom.model import (
    Component,
    ComponentType,
    Evidence,
    Relationship,
    ScanResult,
    Target,
    ToolInfo,
    Unknown,
)
from gpusbom.writers import WriterOptions, all_writers, get_writer


def odd_result() -> ScanResult:
    comps = [
        Component(
            name="weird name (x) ünï", version="", type=ComponentType.FIRMWARE,
            supplier="ACME (Europe) Ltd.", description="line1\nline2 </text> <text>",
            licenses=["GPL-2.0+", "MIT"], cpe="cpe:/a:acme:fw:1.0",
            purl="pkg:generic/weird%20name@1?x=y", properties={"k": "v\nw"},
            evidence=[Evidence("c", "probe")],
        ),
        Component(
            name="dup", version="1", purl="pkg:npm/%40scope/dup@1", cpe="cpe:2.3:bogus",
            licenses=["LicenseRef-Foo AND MIT", "Foo & Bar"],
            evidence=[Evidence("c", "no-such-method", "/a b/c", None, "d")],
        ),
        Component(name="dup", version="1", type=ComponentType.PLATFORM,
                  licenses=["(unbalanced OR"]),
        Component(name="multi\nline", version="1\n2", type=ComponentType.DEVICE,
                  supplier="Name <not-an-email>"),
    ]
    taken: set[str] = set()
    for c in comps:
        c.assign_ref(taken)
    return ScanResult(
        target=Target(kind="host", reference="host:local", source="host",
                      os_release={"ID": "ubuntu", "VERSION_ID": "22.04"}),
        components=comps,
        relationships=[
            Relationship("target:host:local", "depends-on", comps[0].bom_ref),
            Relationship(comps[1].bom_ref, "generates", comps[2].bom_ref),
            Relationship(comps[1].bom_ref, "depends-on", "ghost"),
        ],
        unknowns=[Unknown("x", "why")],
        tool=ToolInfo(version="0.1.0"),
        timestamp=None,
    )


def render(fmt: str, result: ScanResult, version: str = "1.6") -> str:
    buf = io.StringIO()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        get_writer(fmt).write(result, buf, WriterOptions(cyclonedx_version=version))
    return buf.getvalue()


@pytest.mark.parametrize("fmt", sorted(all_writers()))
def test_odd_result_is_valid(fmt: str) -> None:
    result = odd_result()
    if fmt == "in-toto":  # a host has no digest to be an attestation's subject
        from gpusbom.errors import UsageError

        with pytest.raises(UsageError, match="needs an image"):
            render(fmt, result)
    elif fmt in ("openvex", "cyclonedx-vex"):
        doc = json.loads(render(fmt, result))
        assert "@context" in doc if fmt == "openvex" else doc["bomFormat"] == "CycloneDX"
    elif fmt.startswith("cyclonedx"):
        of = OutputFormat.JSON if fmt.endswith("json") else OutputFormat.XML
        for version, sv in (("1.6", SchemaVersion.V1_6), ("1.5", SchemaVersion.V1_5)):
            text = render(fmt, result, version)
            errors = make_schemabased_validator(of, sv).validate_str(text)
            assert errors is None, str(errors)
    elif fmt == "spdx-json":
        doc = JsonLikeDictParser().parse(json.loads(render(fmt, result)))
        assert validate_full_spdx_document(doc) == []
    elif fmt == "spdx-tag-value":
        doc = TagValueParser().parse(render(fmt, result))
        assert validate_full_spdx_document(doc) == []
        (p,) = [p for p in doc.packages if p.name.startswith("weird")]
        assert p.description.startswith("line1\nline2")
        assert p.supplier.name == "ACME [Europe] Ltd."
    elif fmt == "spdx3-json":  # the official SPDX 3.0.1 JSON schema
        import jsonschema_rs

        schema = json.loads((Path(__file__).parent / "schemas" / "spdx-3.0.1.schema.json").read_text())
        doc = json.loads(render(fmt, result))
        assert [e.message[-300:] for e in jsonschema_rs.Draft202012Validator(schema).iter_errors(doc)] == []
        names = {e.get("name") for e in doc["@graph"] if e["type"] == "software_Package"}
        assert any(n and n.startswith("weird") for n in names)
    else:
        assert render(fmt, result).strip()


def test_odd_result_cyclonedx_details() -> None:
    bom = json.loads(render("cyclonedx-json", odd_result()))
    assert bom["metadata"]["component"]["type"] == "operating-system"
    comps = {c["bom-ref"]: c for c in bom["components"]}
    dup = next(c for c in comps.values() if c["name"] == "dup" and c["type"] == "library")
    assert "cpe" not in dup
    props = {p["name"]: p["value"] for p in dup["properties"]}
    assert props["gpusbom:cpe:invalid"] == "cpe:2.3:bogus"
    meta = {p["name"]: p["value"] for p in bom["metadata"]["properties"]}
    assert meta["gpusbom:unknown:1"] == "x: why"
    assert any(k.startswith("gpusbom:dangling-relationship:") for k in meta)
    assert any(k == "gpusbom:relationship" for k in meta)  # unknown type kept, not lost


def test_missing_timestamp_uses_now() -> None:
    bom = json.loads(render("cyclonedx-json", odd_result()))
    assert bom["metadata"]["timestamp"][:4].isdigit()
