"""CycloneDX JSON's fast path (``writers._cyclonedx_fast``) writes the bytes the library
path writes (``_cyclonedx_impl.render(fast=False)``: cyclonedx-python-lib builds and encodes
the whole ``Bom``), on every golden case's scan result, on the writers' own results and on
edge cases; where it cannot, it steps aside and the library writes the document."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from cyclonedx.schema import OutputFormat, SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

from gpusbom.model import Component, ComponentType, Evidence, ProbeResult, Relationship, ScanResult
from gpusbom.writers import _cyclonedx_fast
from gpusbom.writers._cyclonedx_impl import render

_here = Path(__file__).parent
_spec = importlib.util.spec_from_file_location("gpusbom_tests_writers_helpers", _here / "helpers.py")
assert _spec and _spec.loader
helpers = sys.modules.get(_spec.name) or importlib.util.module_from_spec(_spec)
if _spec.name not in sys.modules:
    sys.modules[_spec.name] = helpers
    _spec.loader.exec_module(helpers)

SPECS = [SchemaVersion.V1_6, SchemaVersion.V1_7]


def _both(result: ScanResult, spec: SchemaVersion) -> tuple[str | None, str]:
    return (_cyclonedx_fast.render_json(result, spec),
            render(result, OutputFormat.JSON, spec, fast=False))


GOLDEN_RESULTS = helpers.golden_results()


def test_the_golden_cases_are_there() -> None:
    names = {n for n, _ in GOLDEN_RESULTS}
    assert {"host-h200", "host-cpu-only", "scan-nvidia-wheels"} <= names
    assert sum(len(r.components) for _, r in GOLDEN_RESULTS) > 1000


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.to_version())
@pytest.mark.parametrize(("name", "result"), GOLDEN_RESULTS, ids=[n for n, _ in GOLDEN_RESULTS])
def test_golden_results_same_bytes(name: str, result: ScanResult, spec: SchemaVersion) -> None:
    fast, lib = _both(result, spec)
    assert fast is not None, f"{name}: the fast path stepped aside"
    assert fast == lib


def _probed() -> ScanResult:
    r = helpers.make_result()
    dev = r.components[0]
    r.probes = [ProbeResult(backend="cuda", outcome="pass", device="NVIDIA H200", device_id="0",
                            kernel="saxpy", seconds=0.4, facts={"compute-capability": "9.0"},
                            device_ref=dev.bom_ref),
                ProbeResult(backend="hip", outcome="skipped", reason="no HIP runtime")]
    return r


def _edges() -> ScanResult:
    """What the fixtures lack: an unparsable purl, an invalid CPE, a licence expression and
    an unknown licence, a supplier with an e-mail address, an empty description, a version
    of None, names that sort only by version or ref, duplicate evidence, a dependency cycle,
    a dangling and an unmapped relationship."""
    r = helpers.make_result()
    ev = Evidence(collector="dpkg", method="package-db", path="/var/lib/dpkg/status")
    taken = {c.bom_ref for c in r.components}
    extra = [
        Component(name="odd", version="1", type=ComponentType.LIBRARY, purl="not a purl",
                  cpe="cpe:nonsense", licenses=["MIT", "Apache-2.0"], description="",
                  supplier="Jane Doe <jane@example.org>", evidence=[ev, ev]),
        Component(name="odd", version=None, type=ComponentType.LIBRARY,
                  licenses=["Some Odd Licence"], evidence=[ev]),
        Component(name="odd", version="1", type=ComponentType.APPLICATION, evidence=[]),
        Component(name="multi\nline", version="2\r\nx", type=ComponentType.FILE,
                  evidence=[Evidence(collector="elf", method="elf-symbol", path="/lib/x.so",
                                     sha256="ab" * 32, detail="a; b")]),
    ]
    for c in extra:
        c.assign_ref(taken)
    r.components += extra
    a, b = extra[0].bom_ref, extra[1].bom_ref
    r.relationships += [Relationship(a, "depends-on", b), Relationship(b, "depends-on", a),
                        Relationship(a, "depends-on", "pkg:gone"),
                        Relationship(a, "describes", b)]
    return r


CASES = {"writers": helpers.make_result, "directory": helpers.make_directory_result,
         "probes": _probed, "edges": _edges}


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.to_version())
@pytest.mark.parametrize("case", list(CASES))
def test_made_results_same_bytes(case: str, spec: SchemaVersion) -> None:
    fast, lib = _both(CASES[case](), spec)
    assert fast is not None, f"{case}: the fast path stepped aside"
    assert fast == lib
    assert JsonStrictValidator(spec).validate_str(fast) is None


def test_edges_are_in_the_document() -> None:
    doc = json.loads(_cyclonedx_fast.render_json(_edges(), SchemaVersion.V1_6) or "{}")
    odd = [c for c in doc["components"] if c["name"] == "odd"]
    assert [c.get("version") for c in odd] == ["1", "1", None]  # application < library
    props = {(p["name"], p["value"]) for p in odd[1]["properties"]}
    assert ("gpusbom:purl:unparsable", "not a purl") in props
    assert odd[1]["supplier"] == {"contact": [{"email": "jane@example.org"}], "name": "Jane Doe"}
    # the duplicate evidence is one method, one occurrence, each property once
    assert len(odd[1]["evidence"]["identity"][0]["methods"]) == 1
    assert len(odd[1]["evidence"]["occurrences"]) == 1
    names = [p["name"] for p in odd[1]["properties"]]
    assert names == sorted(names)


def test_duplicate_refs_go_to_the_library() -> None:
    """The library renames a duplicate bom-ref (its discriminator, random names): the fast
    path does not guess, it leaves such a document to the library."""
    r = helpers.make_result()
    r.components[1].bom_ref = r.components[0].bom_ref
    assert _cyclonedx_fast.render_json(r, SchemaVersion.V1_6) is None
    r = helpers.make_result()
    assert _cyclonedx_fast.render_json(r, SchemaVersion.V1_5) is None  # 1.5: the library's


def test_other_library_release_goes_to_the_library(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_cyclonedx_fast, "_PROVEN", False)
    assert _cyclonedx_fast.render_json(helpers.make_result(), SchemaVersion.V1_6) is None
