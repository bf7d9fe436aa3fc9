"""CycloneDX JSON's fast path (``writers._cyclonedx_fast``) writes the bytes the library
path writes (``_cyclonedx_impl.render`` without ``fast``: cyclonedx-python-lib builds and encodes
the whole ``Bom``), on every golden case's scan result, on the writers' own results and on
edge cases; where it cannot, it steps aside and the library writes the document."""

from __future__ import annotations

import importlib.util
import json
import random
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
            render(result, OutputFormat.JSON, spec))


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


def _random_result(rnd: random.Random) -> ScanResult:
    """The writers' result with six components of random fields: odd suppliers, empty and
    multi-line values, purls with qualifiers, subpaths and bad ones, CPEs of both kinds and
    bad ones, licence names, ids, expressions and duplicates, evidence of any method with
    or without path, detail, layer and digests, and random relationships."""
    choice = rnd.choice
    r = helpers.make_result()
    taken = {c.bom_ref for c in r.components}
    for _ in range(6):
        evs = [Evidence(collector=choice(["dpkg", "elf", "host"]),
                        method=choice(["package-db", "elf", "filename", "probe", "weird",
                                       "fingerprint-sha256", "device"]),
                        path=choice([None, "/a", "/b/c"]), detail=choice([None, "", "x; y"]),
                        layer=choice([None, "sha256:" + "1" * 64]), sha256=choice([None, "ab" * 32]),
                        declared_digest=choice([None, "md5:abc"]))
               for _ in range(rnd.randint(0, 4))]
        c = Component(
            name=choice(["n", "N", "n\nx", "a b"]), version=choice([None, "", "1.0", "1\n2", "0"]),
            type=choice(list(ComponentType)),
            purl=choice([None, "", "pkg:pypi/Foo_Bar@1.0", "garbage", "pkg:generic/x@1#sub/path",
                         "pkg:deb/debian/libc6@2.36?arch=amd64&distro=debian-12",
                         "pkg:npm/%40scope/name@1.0"]),
            cpe=choice([None, "", "cpe:2.3:a:x:y:1:*:*:*:*:*:*:*", "cpe:/a:x:y:1", "bad"]),
            supplier=choice([None, "", " ", "Jane <j@x.org>", "<j@x.org>", "x (y) <a@b>"]),
            description=choice([None, "", "d", "multi\nline"]),
            licenses=choice([[], ["MIT"], ["mit"], ["GPL-2.0+"], ["MIT OR Apache-2.0"],
                             ["Some Licence"], ["MIT", "MIT"], ["LicenseRef-x"]]),
            properties=dict(choice([{}, {"identification-method": "sha256",
                                         "identification-confidence": "high"},
                                    {"identification-confidence": "weird"}, {"k": ""}])),
            evidence=evs)
        c.assign_ref(taken)
        r.components.append(c)
    for _ in range(4):
        a, b = choice(r.components), choice(r.components)
        r.relationships.append(Relationship(a.bom_ref, choice(["depends-on", "contains", "x"]),
                                            b.bom_ref))
    return r


@pytest.mark.parametrize("seed", range(8))
def test_random_results_same_bytes(seed: int) -> None:
    rnd = random.Random(seed)
    for _ in range(5):
        r = _random_result(rnd)
        for spec in SPECS:
            fast, lib = _both(r, spec)
            assert fast is not None
            assert fast == lib


def test_the_writer_takes_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from gpusbom.writers import WriterOptions, get_writer

    calls: list[str] = []
    real = _cyclonedx_fast.render_json

    def counting(result: ScanResult, spec: SchemaVersion) -> str | None:
        text = real(result, spec)
        calls.append("fast" if text is not None else "library")
        return text

    monkeypatch.setattr(_cyclonedx_fast, "render_json", counting)
    r = helpers.make_result()
    for version in ("1.6", "1.7", "1.5"):
        buf = io.StringIO()
        get_writer("cyclonedx-json").write(r, buf, WriterOptions(cyclonedx_version=version))
        assert buf.getvalue() == render(r, OutputFormat.JSON, SchemaVersion.from_version(version))
    assert calls == ["fast", "fast", "library"]
