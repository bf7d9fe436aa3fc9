"""``-o spdx3-json``: valid against the official SPDX 3.0.1 JSON schema, the SPDX 2.3
output's content, byte-identical under SOURCE_DATE_EPOCH.

The schema is ``schemas/spdx-3.0.1.schema.json`` (see ``schemas/README.md``); the
documents are of the writer test results (image, directory, host, advisories, hashes,
probes), of fixture images scanned by the CLI and of the committed H200 host snapshot.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from fixtures.build import ensure
from gpusbom.model import ComponentType, ProbeResult, ScanResult

sys.path.insert(0, str(Path(__file__).parent))
from test_conformance import LOOSE_SHA, LOOSE_SO, RESULTS, helpers, render  # noqa: E402

SCHEMA = Path(__file__).parent / "schemas" / "spdx-3.0.1.schema.json"
ROOT = Path(__file__).resolve().parents[2]
EPOCH = "1700000000"


@cache
def _validator() -> Any:
    """jsonschema-rs: the Python jsonschema takes 20-140 s per document on this schema
    (its anyOf / unevaluatedProperties), jsonschema-rs milliseconds;
    ``test_both_validators_agree`` checks they give the same verdicts."""
    import jsonschema_rs

    schema = json.loads(SCHEMA.read_text())
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    return jsonschema_rs.Draft202012Validator(schema)


def _errors(doc: dict[str, Any]) -> list[str]:
    return sorted(e.message[-300:] for e in _validator().iter_errors(doc))


def _probe_result() -> ScanResult:
    r = helpers.make_result()
    dev = next(c for c in r.components if c.type is ComponentType.DEVICE) if any(
        c.type is ComponentType.DEVICE for c in r.components) else r.components[0]
    r.probes = [ProbeResult(backend="cuda", outcome="pass", device="NVIDIA H200", device_id="0",
                            kernel="saxpy", seconds=0.4, facts={"compute-capability": "9.0"},
                            device_ref=dev.bom_ref),
                ProbeResult(backend="hip", outcome="skipped", reason="no HIP runtime")]
    return r


KINDS = {**RESULTS, "probes": _probe_result}


def _graph(doc: dict[str, Any], typ: str) -> list[dict[str, Any]]:
    return [e for e in doc["@graph"] if e["type"] == typ]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_spdx3_validates_against_the_official_schema(kind: str) -> None:
    doc = json.loads(render("spdx3-json", KINDS[kind]()))
    assert doc["@context"] == "https://spdx.org/rdf/3.0.1/spdx-context.jsonld"
    assert _errors(doc) == []
    (sd,) = _graph(doc, "SpdxDocument")
    (sbom,) = _graph(doc, "software_Sbom")
    assert sd["rootElement"] == [sbom["spdxId"]]
    (ci,) = _graph(doc, "CreationInfo")
    assert ci["specVersion"] == "3.0.1" and ci["createdBy"] and ci["createdUsing"]


def test_the_schema_can_fail() -> None:
    """The test above can fail: the schema rejects a package without creation info, a
    made-up purpose and an unknown property."""
    doc = json.loads(render("spdx3-json", helpers.make_result()))
    pkg = _graph(doc, "software_Package")[1]
    del pkg["creationInfo"]
    assert _errors(doc)
    doc = json.loads(render("spdx3-json", helpers.make_result()))
    _graph(doc, "software_Package")[1]["software_primaryPurpose"] = "gpu"
    assert _errors(doc)
    doc = json.loads(render("spdx3-json", helpers.make_result()))
    _graph(doc, "software_Package")[1]["packageVersion"] = "1"
    assert _errors(doc)


def test_both_validators_agree() -> None:
    """The reference Python jsonschema gives the verdicts jsonschema-rs gives, on a small
    valid document and the same one broken."""
    py = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))
    doc = json.loads(render("spdx3-json", KINDS["host"]()))
    assert list(py.iter_errors(doc)) == [] and _errors(doc) == []
    del _graph(doc, "software_Package")[0]["creationInfo"]
    assert next(py.iter_errors(doc), None) is not None and _errors(doc)


def test_spdx3_reads_back_with_the_model_bindings() -> None:
    """spdx-python-model's deserializer (the 3.0.1 SHACL bindings) loads the document."""
    import spdx_python_model

    doc = json.loads(render("spdx3-json", _probe_result()))
    _model, objset = spdx_python_model.load_data(doc)
    names = sorted(o.name for o in objset.foreach_type("software_Package"))
    assert names == sorted(p["name"] for p in _graph(doc, "software_Package"))
    assert len(list(objset.foreach_type("Annotation"))) == 2


def test_one_file_component_hash_and_advisory_reference() -> None:
    doc = json.loads(render("spdx3-json", RESULTS["hashed"]()))
    by_name = {p["name"]: p for p in _graph(doc, "software_Package")}
    assert by_name["libkernels"]["verifiedUsing"] == [
        {"type": "Hash", "algorithm": "sha256", "hashValue": LOOSE_SHA,
         "comment": f"SHA-256 of {LOOSE_SO}"}]
    assert "verifiedUsing" not in by_name["librocrand1"]
    doc = json.loads(render("spdx3-json", RESULTS["advisories"]()))
    refs = [r for p in _graph(doc, "software_Package") for r in p.get("externalRef", [])]
    assert refs and all(r["externalRefType"] == "securityAdvisory" for r in refs)


def test_spdx_tools_08_cannot_read_spdx3(tmp_path: Path) -> None:
    """pyspdxtools (spdx-tools 0.8) parses SPDX 2.x only; its ``spdx3`` module writes a
    pre-3.0 draft and reads nothing. This says so with its own error, and fails when a
    release reads SPDX 3."""
    from spdx_tools.spdx.parser.error import SPDXParsingError
    from spdx_tools.spdx.parser.parse_anything import parse_file

    path = tmp_path / "doc.spdx3.json"
    path.write_text(render("spdx3-json", helpers.make_result()))
    with pytest.raises(SPDXParsingError) as err:
        parse_file(str(path))
    assert "CreationInfo does not exist." in str(err.value.get_messages())


# --------------------------------------------------------------- same content as SPDX 2.3


def _content23(doc: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
    out = {}
    for p in doc["packages"]:
        refs = {(r["referenceType"], r["referenceLocator"]) for r in p.get("externalRefs", [])
                if r["referenceType"] in ("purl", "cpe23Type", "cpe22Type")}
        lic = p.get("licenseDeclared")
        lic = None if lic in (None, "NOASSERTION") else lic
        supplier = p.get("supplier", "NOASSERTION")
        out[p["SPDXID"]] = (p["name"], p.get("versionInfo"), frozenset(refs),
                            lic, p.get("licenseComments"),
                            None if supplier == "NOASSERTION"
                            else supplier.removeprefix("Organization: ").split(" (")[0],
                            frozenset((c["algorithm"].lower(), c["checksumValue"])
                                      for c in p.get("checksums", [])),
                            p.get("comment"))
    return out


_ID_TYPES = {"packageUrl": "purl", "cpe23": "cpe23Type", "cpe22": "cpe22Type"}


def _content3(doc: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
    by_id = {e.get("spdxId"): e for e in doc["@graph"]}
    declared = {}
    for r in _graph(doc, "Relationship"):
        if r["relationshipType"] == "hasDeclaredLicense":
            (lic,) = r["to"]
            declared[r["from"]] = (by_id[lic]["simplelicensing_licenseExpression"], r["comment"])
    out = {}
    # 2.3 has no file-level package: a device-code file is a package of purpose FILE
    # there and a software_File here
    for p in [*_graph(doc, "software_Package"), *_graph(doc, "software_File")]:
        sid = p["spdxId"].split("#", 1)[1]
        refs = {(_ID_TYPES[i["externalIdentifierType"]], i["identifier"])
                for i in p.get("externalIdentifier", [])}
        supplier = by_id[p["suppliedBy"]]["name"] if "suppliedBy" in p else None
        if supplier:  # 2.3 (tag-value) keeps parentheses out of the name
            supplier = supplier.replace("(", "[").replace(")", "]")
        lines = (p.get("comment") or "").split("\n")
        # 2.3's licence comment: on the licence relationship, else a comment line
        lic, note = declared.get(p["spdxId"], (None, None))
        if note is None:
            note = next((x for x in lines if x.startswith("declared: ")), None)
            lines = [x for x in lines if x != note]
        comment = "\n".join(lines) or None
        out[sid] = (p["name"], p.get("software_packageVersion"), frozenset(refs),
                    lic, note, supplier,
                    frozenset((h["algorithm"], h["hashValue"]) for h in p.get("verifiedUsing", [])),
                    comment)
    return out


def _same_content(spdx23: dict[str, Any], spdx3: dict[str, Any]) -> None:
    a, b = _content23(spdx23), _content3(spdx3)
    assert sorted(a) == sorted(b)
    for sid in a:
        assert a[sid] == b[sid], sid
    rels23 = {(r["spdxElementId"], r["relationshipType"].lower().replace("_", ""),
               r["relatedSpdxElement"]) for r in spdx23["relationships"]
              if r["relationshipType"] != "DESCRIBES"}
    rels3 = {(r["from"].split("#")[1], r["relationshipType"].lower(), t.split("#")[1])
             for r in _graph(spdx3, "Relationship") if r["relationshipType"] != "hasDeclaredLicense"
             for t in r["to"]}
    assert rels23 == rels3
    (sd,) = _graph(spdx3, "SpdxDocument")
    assert sd["name"] == spdx23["name"] and sd["comment"] == spdx23["comment"]
    (sbom,) = _graph(spdx3, "software_Sbom")
    assert [x.split("#")[1] for x in sbom["rootElement"]] == [
        r["relatedSpdxElement"] for r in spdx23["relationships"]
        if r["relationshipType"] == "DESCRIBES"]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_same_content_as_spdx23(kind: str) -> None:
    r = KINDS[kind]()
    _same_content(json.loads(render("spdx-json", r)), json.loads(render("spdx3-json", r)))


# ------------------------------------------------------- fixture images and the H200 host


def _scan(target: list[str], out: Path) -> tuple[bytes, bytes]:
    env = {**os.environ, "SOURCE_DATE_EPOCH": EPOCH}
    p = subprocess.run([sys.executable, "-m", "gpusbom", "scan", *target, "-q", "--offline",
                        "-o", f"spdx-json={out}.spdx.json", "-o", f"spdx3-json={out}.spdx3.json"],
                       capture_output=True, text=True, timeout=600, env=env, check=False)
    assert p.returncode == 0, p.stderr[-2000:]
    return Path(f"{out}.spdx.json").read_bytes(), Path(f"{out}.spdx3.json").read_bytes()


@pytest.mark.parametrize("target", ["demo", "nvidia-wheels", "host-h200"])
def test_real_scans_validate_match_spdx23_and_repeat_byte_for_byte(target: str,
                                                                   tmp_path: Path) -> None:
    if target == "host-h200":
        sys.path.insert(0, str(ROOT / "fixtures" / "hosts"))
        from placeholders import materialize

        materialize(ROOT / "fixtures" / "hosts" / "h200", tmp_path / "h200")
        args = ["--root", str(tmp_path / "h200")]
    else:
        args = [f"oci-archive:{ensure(target).oci_archive}"]
    spdx23, spdx3 = _scan(args, tmp_path / "a")
    doc = json.loads(spdx3)
    assert _errors(doc) == []
    _same_content(json.loads(spdx23), doc)
    assert len(_graph(doc, "software_Package")) > 10
    assert _scan(args, tmp_path / "b")[1] == spdx3
