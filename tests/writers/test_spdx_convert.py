"""SPDX JSON's converter (``writers._spdx_convert``) gives what spdx-tools'
``DocumentConverter`` gives, key order included, on every golden case's document, on the
writers' own results (probes: annotations on packages and on the document) and on a
document with what gpusbom never writes (a file, a snippet-free file relationship, dates,
an originator, a verification code); and the SPDX JSON written is the same bytes either
way."""

from __future__ import annotations

import datetime as dt
import importlib.util
import io
import json
import sys
from pathlib import Path

import pytest
from spdx_tools.spdx.jsonschema.document_converter import DocumentConverter
from spdx_tools.spdx.model.actor import Actor, ActorType
from spdx_tools.spdx.model.checksum import Checksum, ChecksumAlgorithm
from spdx_tools.spdx.model.file import File
from spdx_tools.spdx.model.package import ExternalPackageRef, ExternalPackageRefCategory, PackageVerificationCode
from spdx_tools.spdx.model.relationship import Relationship, RelationshipType

from gpusbom.model import ProbeResult, ScanResult
from gpusbom.writers import _spdx_convert, _spdx_impl
from gpusbom.writers._jsonfast import dumps_indented

_here = Path(__file__).parent
_spec = importlib.util.spec_from_file_location("gpusbom_tests_writers_helpers", _here / "helpers.py")
assert _spec and _spec.loader
helpers = sys.modules.get(_spec.name) or importlib.util.module_from_spec(_spec)
if _spec.name not in sys.modules:
    sys.modules[_spec.name] = helpers
    _spec.loader.exec_module(helpers)

GOLDEN_RESULTS = helpers.golden_results()


def _probed() -> ScanResult:
    r = helpers.make_result()
    r.probes = [ProbeResult(backend="cuda", outcome="pass", device="NVIDIA H200", device_id="0",
                            kernel="saxpy", seconds=0.4, facts={"compute-capability": "9.0"},
                            device_ref=r.components[0].bom_ref),
                ProbeResult(backend="opencl", outcome="fail", device="NVIDIA H200",
                            device_id="0:0", reason="result differs",
                            device_ref=r.components[0].bom_ref),
                ProbeResult(backend="hip", outcome="skipped", reason="no HIP runtime")]
    return r


CASES = [*GOLDEN_RESULTS, ("writers", helpers.make_result()),
         ("directory", helpers.make_directory_result()), ("probes", _probed())]


def _same(doc: object) -> tuple[str, str]:
    """Both converters' dicts, written with their key order."""
    lib = DocumentConverter().convert(doc)  # type: ignore[no-untyped-call]
    ours = _spdx_convert.convert_document(doc)  # type: ignore[arg-type]
    return json.dumps(ours), json.dumps(lib)


def test_the_table_knows_this_release() -> None:
    assert _spdx_convert.COMPLETE


@pytest.mark.parametrize(("name", "result"), CASES, ids=[n for n, _ in CASES])
def test_same_dict_and_order(name: str, result: ScanResult) -> None:
    doc = _spdx_impl._drop_duplicates(_spdx_impl._validated(result))
    ours, lib = _same(doc)
    assert ours == lib
    if name == "probes":  # the package annotations and the document's are there
        d = json.loads(ours)
        assert any("annotations" in p for p in d["packages"]) and d["annotations"]


@pytest.mark.parametrize(("name", "result"), CASES[:3], ids=[n for n, _ in CASES[:3]])
def test_same_bytes_written(name: str, result: ScanResult) -> None:
    buf = io.StringIO()
    _spdx_impl.render_json(result, buf)
    doc = DocumentConverter().convert(  # type: ignore[no-untyped-call]
        _spdx_impl._drop_duplicates(_spdx_impl._validated(result)))
    _spdx_impl._json_categories(doc)
    assert buf.getvalue() == dumps_indented(doc, indent=4) + "\n"


def test_what_gpusbom_never_writes() -> None:
    """Fields the table converts that gpusbom leaves empty, and a file (the library's)."""
    doc = _spdx_impl.build_document(helpers.make_result())
    pkg = doc.packages[1]
    when = dt.datetime(2026, 1, 2, 3, 4, 5)
    pkg.built_date = pkg.release_date = pkg.valid_until_date = when
    pkg.originator = Actor(ActorType.PERSON, "Jane Doe", "jane@example.org")
    pkg.homepage = "https://example.org"
    pkg.attribution_texts = ["attributed"]
    pkg.source_info = "built from source"
    pkg.summary = "a summary"
    pkg.files_analyzed = True
    pkg.verification_code = PackageVerificationCode("a" * 40, ["./excluded"])
    pkg.checksums = [Checksum(ChecksumAlgorithm.BLAKE2B_256, "b" * 64),
                     Checksum(ChecksumAlgorithm.SHA1, "c" * 40)]
    pkg.external_references.append(ExternalPackageRef(
        ExternalPackageRefCategory.OTHER, "website", "https://example.org", "a comment"))
    doc.files = [File("./lib/x.so", "SPDXRef-File-x", [Checksum(ChecksumAlgorithm.SHA1, "d" * 40)])]
    doc.relationships.append(Relationship(pkg.spdx_id, RelationshipType.CONTAINS, "SPDXRef-File-x",
                                          comment="its file"))
    ours, lib = _same(doc)
    assert ours == lib
    d = json.loads(ours)
    p = next(x for x in d["packages"] if x["SPDXID"] == pkg.spdx_id)
    assert p["builtDate"] == "2026-01-02T03:04:05Z" and p["originator"].startswith("Person: Jane")
    assert [c["algorithm"] for c in p["checksums"]] == ["BLAKE2b-256", "SHA1"]
    assert d["files"][0]["SPDXID"] == "SPDXRef-File-x"
    assert d["relationships"][-1]["comment"] == "its file"
