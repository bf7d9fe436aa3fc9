"""Package-declared file digests (dpkg ``md5sums``, wheel ``RECORD``) on the evidence of the
files they describe, checked against the fixture images' real bytes and carried by every
SBOM writer."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from gpusbom.collectors._digests import parse_md5sums_digests, parse_record_digests
from gpusbom.model import Evidence, ScanResult
from gpusbom.scan import scan
from gpusbom.writers import WriterOptions, get_writer


def test_parse_md5sums() -> None:
    text = ("d41d8cd98f00b204e9800998ecf8427e  usr/lib/libx.so.1\n"
            "0123456789ABCDEF0123456789abcdef *usr/bin/tool with space\n"
            "not a line\n"
            "zz1d8cd98f00b204e9800998ecf8427e  usr/lib/bad\n")
    assert list(parse_md5sums_digests(text)) == [
        ("/usr/lib/libx.so.1", "md5:d41d8cd98f00b204e9800998ecf8427e"),
        ("/usr/bin/tool with space", "md5:0123456789abcdef0123456789abcdef"),
    ]


def test_parse_record() -> None:
    # sha256 of b"" in urlsafe base64 without padding, as pip writes it
    empty = "47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"
    text = (f"pkg/__init__.py,sha256={empty},0\n"
            "pkg-1.0.dist-info/RECORD,,\n"
            f'"pkg/a,b.py",sha256={empty},0\n'
            f"../../../bin/tool,sha256={empty},0\n"
            "pkg/bad.py,sha256=!!!,3\n")
    got = list(parse_record_digests(text, "/usr/lib/python3/site-packages"))
    e = "sha256:" + hashlib.sha256(b"").hexdigest()
    assert got == [("/usr/lib/python3/site-packages/pkg/__init__.py", e),
                   ("/usr/lib/python3/site-packages/pkg/a,b.py", e),
                   ("/usr/bin/tool", e)]


def _blob(oci_dir: Path, digest: str) -> Path:
    alg, _, hexd = digest.partition(":")
    return oci_dir / "blobs" / alg / hexd


def _digests_from_layers(oci_dir: Path, paths: set[str]) -> dict[str, dict[str, str]]:
    """path -> {md5, sha256} of the file's bytes, computed here from the layer tars
    (tarfile; the last layer holding the path wins): independent of gpusbom's reader."""
    index = json.loads((oci_dir / "index.json").read_text())
    manifest = json.loads(_blob(oci_dir, index["manifests"][0]["digest"]).read_text())
    want = {p.lstrip("/"): p for p in paths} | {"./" + p.lstrip("/"): p for p in paths}
    out: dict[str, dict[str, str]] = {}
    for layer in manifest["layers"]:
        with tarfile.open(_blob(oci_dir, layer["digest"]), "r:*") as tar:
            for m in tar:
                if m.name in want and m.isfile():
                    f = tar.extractfile(m)
                    assert f is not None
                    md5, sha = hashlib.md5(usedforsecurity=False), hashlib.sha256()
                    while chunk := f.read(1 << 20):
                        md5.update(chunk)
                        sha.update(chunk)
                    out[want[m.name]] = {"md5": md5.hexdigest(), "sha256": sha.hexdigest()}
    return out


@pytest.fixture(scope="module", params=["nvidia-wheels", "rocm", "demo"])
def scanned(request: pytest.FixtureRequest) -> tuple[str, Path, ScanResult]:
    from fixtures.build import ensure

    oci_dir = Path(ensure(request.param).oci_dir)
    return request.param, oci_dir, scan(f"oci:{oci_dir}", cache=False)


#: image -> (the algorithms its manifests use, fewest files with a declared digest)
EXPECTED = {"nvidia-wheels": ({"sha256"}, 20), "rocm": ({"md5"}, 8), "demo": ({"md5", "sha256"}, 2)}


def _declared(result: ScanResult) -> list[tuple[str, Evidence]]:
    return [(c.name, e) for c in result.components for e in c.evidence if e.declared_digest]


def test_declared_digests_are_the_files(scanned: tuple[str, Path, ScanResult]) -> None:
    image, oci_dir, result = scanned
    algs, fewest = EXPECTED[image]
    declared = _declared(result)
    assert len(declared) >= fewest, (image, len(declared))
    real = _digests_from_layers(oci_dir, {e.path for _, e in declared if e.path})
    for name, e in declared:
        assert e.path is not None
        alg, _, hexd = (e.declared_digest or "").partition(":")
        assert alg in algs, (name, e)
        # an evidence path may be a link in the image: compare the files that are files
        if e.path in real:
            assert hexd == real[e.path][alg], (name, e.path)
        # a GPU binary's computed digest agrees with the one its package declared
        if e.sha256 and alg == "sha256":
            assert e.sha256 == hexd, (name, e.path)
    assert sum(1 for _, e in declared if e.path in real) >= fewest
    assert {e.declared_digest.split(":")[0] for _, e in declared if e.declared_digest} == algs
    # only package files: the package database itself (dpkg status) has no declared digest
    assert not any(e.path == "/var/lib/dpkg/status" for _, e in declared)


def _render(fmt: str, result: ScanResult, **opts: Any) -> str:
    buf = io.StringIO()
    get_writer(fmt).write(result, buf, WriterOptions(**opts))
    return buf.getvalue()


def test_writers_carry_declared_digests(scanned: tuple[str, Path, ScanResult]) -> None:
    image, _, result = scanned
    name, ev = _declared(result)[0]
    comp = next(c for c in result.components if c.name == name and ev in c.evidence)
    cdx = {c["bom-ref"]: c for c in json.loads(_render("cyclonedx-json", result))["components"]}
    c = cdx[comp.bom_ref]
    assert any(f"declared={ev.declared_digest}" in o.get("additionalContext", "")
               for o in c["evidence"]["occurrences"] if o["location"] == ev.path)
    assert {"name": "gpusbom:declared-digest", "value": f"{ev.path}={ev.declared_digest}"} in c[
        "properties"]
    # a file's digest is not the package's: no component hash, no SPDX package checksum
    assert "hashes" not in c
    spdx = json.loads(_render("spdx-json", result))
    pkg = next(p for p in spdx["packages"] if p["name"] == name and comp.bom_ref in p["comment"])
    assert "checksums" not in pkg and f"declared={ev.declared_digest}" in pkg["comment"]


def test_switched_off(monkeypatch: pytest.MonkeyPatch) -> None:
    from fixtures.build import ensure

    monkeypatch.setenv("GPUSBOM_NO_DECLARED_DIGESTS", "1")
    result = scan(f"oci:{ensure('rocm').oci_dir}", cache=False)
    assert _declared(result) == []
