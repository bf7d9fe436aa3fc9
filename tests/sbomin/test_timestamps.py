"""An input SBOM's timestamp that does not parse is said (an unknown), not silently replaced
by the wall clock: outputs carry the time of this reading, SOURCE_DATE_EPOCH when set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def test_unparsable_document_timestamp(tmp_path: Path) -> None:
    sbom = tmp_path / "in.cdx.json"
    sbom.write_text(json.dumps({
        "bomFormat": "CycloneDX", "specVersion": "1.5", "version": 1,
        "metadata": {"timestamp": "yesterday afternoon"},
        "components": [{"type": "library", "name": "packaging", "version": "24.1",
                        "purl": "pkg:pypi/packaging@24.1"}],
    }))
    out, cdx = tmp_path / "out.json", tmp_path / "out.cdx.json"
    proc = subprocess.run(
        [sys.executable, "-m", "gpusbom", "scan", "--sbom", str(sbom), "-q",
         "-o", f"json={out}", "-o", f"cyclonedx-json={cdx}"],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "SOURCE_DATE_EPOCH": "1700000000"})
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["timestamp"] is None
    assert {"collector": "sbom", "path": None,
            "reason": "document timestamp 'yesterday afternoon' is not ISO 8601; not kept"
            } in doc["unknowns"]
    assert json.loads(cdx.read_text())["metadata"]["timestamp"] == "2023-11-14T22:13:20+00:00"
