"""-o html for scan, gate and check: one self-contained file (inline CSS, no script, nothing
fetched) that opens in headless Chromium without network, hostile strings inert. Sizes of
the fixture reports are printed and written to test-artifacts/html-report/sizes.json."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from chromium import chromium, console_errors, no_alert  # tests/chromium.py
from selenium.webdriver.common.by import By

from fixtures.hostile import IMG, SCRIPT, SQL, write_hostile_layout
from gpusbom.cli.app import main

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("GPUSBOM_TEST_ARTIFACTS", ROOT / "test-artifacts")) / "html-report"


@pytest.fixture(scope="module")
def browser() -> Any:
    with chromium(offline=True) as d:
        yield d


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The nvidia-wheels fixture image scanned once: (html report, gpusbom JSON)."""
    from fixtures.build import ensure

    tmp = tmp_path_factory.mktemp("wheels")
    out, js = tmp / "report.html", tmp / "scan.json"
    assert main(["scan", ensure("nvidia-wheels").oci_ref, "-q", "-o", f"html={out}",
                 "-o", f"json={js}"]) == 0
    return out, js


def _record(name: str, path: Path) -> int:
    size = path.stat().st_size
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    sizes = ARTIFACTS / "sizes.json"
    doc = json.loads(sizes.read_text()) if sizes.exists() else {}
    doc[name] = size
    sizes.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    print(f"html report {name}: {size} bytes")
    return size


def _self_contained(text: str) -> None:
    low = text.lower()
    assert "<script" not in low
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:|//)""", low)
    assert "<link" not in low and "@import" not in low and "url(" not in low


def _open(browser: Any, path: Path) -> None:
    browser.get(path.as_uri())
    assert not console_errors(browser), console_errors(browser)
    assert no_alert(browser)
    # nothing was fetched: no resource besides the document itself
    assert browser.execute_script(
        "return performance.getEntriesByType('resource').length") == 0
    assert browser.execute_script(
        "return document.querySelectorAll('script, img, iframe, link, [onerror]').length") == 0


def test_scan_html(wheels: tuple[Path, Path], browser: Any) -> None:
    out, js = wheels
    text = out.read_text()
    _self_contained(text)
    doc = json.loads(js.read_text())
    _open(browser, out)
    body = browser.find_element(By.TAG_NAME, "body").text
    for c in doc["components"][:20]:
        assert c["name"] in body
    assert "CUDA" in body
    assert _record("nvidia-wheels scan", out) > 5000


def test_host_scan_html(tmp_path: Path, browser: Any) -> None:
    import sys

    sys.path.insert(0, str(ROOT / "fixtures" / "hosts"))
    from placeholders import materialize

    materialize(ROOT / "fixtures" / "hosts" / "h200", tmp_path / "h200")
    out = tmp_path / "h200.html"
    os.environ.setdefault("SOURCE_DATE_EPOCH", "1767225600")
    assert main(["scan", "--root", str(tmp_path / "h200"), "-q", "-o", f"html={out}"]) == 0
    _self_contained(out.read_text())
    _open(browser, out)
    body = browser.find_element(By.TAG_NAME, "body").text
    assert "NVIDIA H200" in body and "affected" in body  # findings with their status
    _record("H200 host scan", out)


def test_hostile_image_inert(tmp_path: Path, browser: Any) -> None:
    ref = write_hostile_layout(tmp_path)
    out = tmp_path / "hostile.html"
    assert main(["scan", ref, "-q", "-o", f"html={out}"]) == 0
    text = out.read_text()
    _self_contained(text)
    assert SCRIPT not in text and IMG not in text
    _open(browser, out)
    body = browser.find_element(By.TAG_NAME, "body").text
    for s in (SCRIPT, IMG, SQL):  # shown as text
        assert s in body, s
    _record("hostile image scan", out)


def test_check_and_gate_html(wheels: tuple[Path, Path], tmp_path: Path, browser: Any) -> None:
    scan = wheels[1]
    out = tmp_path / "check.html"
    rc = main(["check", str(scan), "--gpu", "H200", "--gpu", "B300", "--driver", "570.172.08",
               "-o", f"html={out}", "-o", f"json={tmp_path / 'check.json'}"])
    verdicts = json.loads((tmp_path / "check.json").read_text())["verdicts"]
    assert rc == 1 and {v["verdict"] for v in verdicts} == {"will-fail"}
    _self_contained(out.read_text())
    _open(browser, out)
    section = browser.find_element(By.ID, "check").text
    assert "Check verdicts" in section
    cells = browser.find_elements(By.CSS_SELECTOR, "span.badge.will-fail")
    assert len(cells) >= 2
    assert cells[0].value_of_css_property("background-color") == "rgba(251, 218, 218, 1)"
    _record("nvidia-wheels check", out)

    gout = tmp_path / "gate.html"
    rc = main(["gate", str(scan), "--policy", "strict", "-o", f"html={gout}",
               "-o", f"json={tmp_path / 'gate.json'}"])
    decision = json.loads((tmp_path / "gate.json").read_text())
    _self_contained(gout.read_text())
    _open(browser, gout)
    gate = browser.find_element(By.ID, "gate").text
    passed = decision["targets"][0]["passed"]
    assert rc == (0 if passed else 1)
    assert ("passed" if passed else "failed") in gate
    for rule in decision["targets"][0]["rules"]:
        assert rule in gate
    _record("nvidia-wheels gate", gout)


def test_html_to_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scan", write_hostile_layout(tmp_path), "-q", "-o", "html"]) == 0
    out = capsys.readouterr().out
    assert out.lstrip().startswith("<!doctype html>") and out.rstrip().endswith("</html>")
    _self_contained(out)
