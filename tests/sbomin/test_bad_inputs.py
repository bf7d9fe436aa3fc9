"""Bad SBOM inputs through the CLI: exit 3, one stderr line naming the file, no output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpusbom.sbomin import MAX_SBOM_BYTES

CDX = {"bomFormat": "CycloneDX", "specVersion": "1.6", "version": 1}
LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]>
<bom xmlns="http://cyclonedx.org/schema/bom/1.6"><components><component type="library">
<name>&lol2;</name></component></components></bom>
"""

CASES: dict[str, tuple[str | bytes | None, str]] = {
    # name: (content, or None for "no file"; expected words in the message)
    "missing": (None, "not found"),
    "empty": ("", "empty"),
    "whitespace": ("  \n\t\n", "empty"),
    "text": ("hello, this is not an SBOM\n", "not an SBOM"),
    "binary": (b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe", "not UTF-8"),
    "malformed-json": ('{"bomFormat": "CycloneDX", "specVersion": ', "malformed JSON"),
    "json-list": ("[1, 2, 3]", "not an object"),
    "json-unknown": ('{"hello": "world"}', "not an SBOM"),
    "cdx-spec": (json.dumps({**CDX, "specVersion": "9.9"}), "specVersion '9.9'"),
    "cdx-components-type": (json.dumps({**CDX, "components": "torch"}), "not a list"),
    "cdx-name-type": (json.dumps({**CDX, "components": [{"type": "library", "name": {}}]}),
                      "components[0].name"),
    "cdx-properties-type": (json.dumps({**CDX, "components": [
        {"type": "library", "name": "x", "properties": {"a": "b"}}]}), "properties"),
    "spdx-2.1": (json.dumps({"spdxVersion": "SPDX-2.1", "SPDXID": "SPDXRef-DOCUMENT"}),
                 "SPDX-2.1"),
    "spdx-3": (json.dumps({"@context": "https://spdx.org/rdf/3.0.1/spdx-context.jsonld",
                           "@graph": []}), "SPDX 3"),
    "spdx-json-broken": (json.dumps({"spdxVersion": "SPDX-2.3", "SPDXID": "SPDXRef-DOCUMENT",
                                     "packages": [{"name": 3}]}), "malformed SPDX"),
    "spdx-tv-broken": ("SPDXVersion: SPDX-2.3\nDataLicense: CC0-1.0\nPackageName: x\n",
                       "malformed SPDX"),
    "spdx-tv-version": ("SPDXVersion: SPDX-1.2\nDataLicense: CC0-1.0\n", "SPDX-1.2"),
    "native-schema": (json.dumps({"schema": "gpusbom/scan/99", "target": {}}), "gpusbom/scan/99"),
    "native-types": (json.dumps({"schema": "gpusbom/scan/1",
                                 "target": {"kind": "image", "reference": "x"},
                                 "components": [{"name": 5, "version": "1"}]}),
                     "components[0].name"),
    "native-no-target": (json.dumps({"schema": "gpusbom/scan/1"}), "target"),
    "xml-entities": (LAUGHS, "entity"),
    "xml-malformed": ('<bom xmlns="http://cyclonedx.org/schema/bom/1.6"><components>', "malformed XML"),
    "xml-other": ("<html><body>hi</body></html>", "not a CycloneDX bom"),
    "xml-cdx-version": ('<bom xmlns="http://cyclonedx.org/schema/bom/0.9"/>', "XML 0.9 is not supported"),
}


def _run(args: list[str], stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "gpusbom", *args], capture_output=True,
                          check=False, timeout=120, input=stdin, env={**os.environ, "NO_COLOR": "1"})


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input(case: str, tmp_path: Path) -> None:
    content, words = CASES[case]
    path = tmp_path / f"{case}.sbom"
    if content is not None:
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    out = tmp_path / "out.cdx.json"
    proc = _run(["scan", "--sbom", str(path), "-q", "-o", f"cyclonedx-json={out}"])
    err = proc.stderr.decode()
    assert proc.returncode == 3, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert str(path) in lines[0] and words in lines[0], lines[0]
    assert not out.exists()
    assert list(tmp_path.iterdir()) == ([path] if content is not None else [])


def test_too_large(tmp_path: Path) -> None:
    path = tmp_path / "huge.json"
    with open(path, "wb") as f:  # sparse: no disk used
        f.truncate(MAX_SBOM_BYTES + 1)
    out = tmp_path / "out.json"
    proc = _run(["scan", "--sbom", str(path), "-q", "-o", f"json={out}"])
    err = proc.stderr.decode().strip()
    assert proc.returncode == 3 and len(err.splitlines()) == 1
    assert str(path) in err and "512 MiB limit" in err
    assert not out.exists()


def test_directory(tmp_path: Path) -> None:
    proc = _run(["scan", "--sbom", str(tmp_path), "-q"])
    assert proc.returncode == 3
    assert str(tmp_path) in proc.stderr.decode() and "directory" in proc.stderr.decode()


def test_stdin_empty_and_good(tmp_path: Path) -> None:
    proc = _run(["scan", "--sbom", "-", "-q"], stdin=b"")
    assert proc.returncode == 3 and "<stdin>: empty" in proc.stderr.decode()
    doc = {**CDX, "components": [{"type": "library", "name": "torch", "version": "2.5.1",
                                  "purl": "pkg:pypi/torch@2.5.1", "bom-ref": "t"}]}
    out = tmp_path / "o.json"
    proc = _run(["scan", "--sbom", "-", "-q", "-o", f"json={out}"], stdin=json.dumps(doc).encode())
    assert proc.returncode == 0, proc.stderr.decode()
    res = json.loads(out.read_text())
    assert res["target"]["reference"] == "sbom:-"
    assert {f["id"] for f in res["findings"]} == {"CVE-2025-32434"}
