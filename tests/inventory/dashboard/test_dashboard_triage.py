"""Issue #36's dashboard items in a real browser (Debian's Chromium, headless, Selenium)
against ``gpusbom inventory serve --write-token-file`` on PostgreSQL: image names, the
driver panel, findings filters / sort / search, the not-affected section, the trend chart,
SBOM download, and triage: an analysis recorded in the UI is exported as OpenVEX and
CycloneDX VEX, and the next ``gpusbom scan --vex`` of either suppresses exactly that
finding. Screenshots of the main pages go to test-artifacts/dashboard/ (docs/img has
copies)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

import dash_data
import pytest
import requests
from chromium import console_errors, no_alert
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import Select
from selenium.webdriver.support.wait import WebDriverWait

from .conftest import ARTIFACTS, WRITE_TOKEN, Server

WHEELS = "gpusbom-fixtures/nvidia-wheels:latest"  # the docker archive's own RepoTag
VULN = "CVE-2025-23272"  # affected on nvidia-nvjpeg-cu12 12.4.0.76 and nvidia-nvjpeg 13.0.2.28
COMPONENT = "pkg:pypi/nvidia-nvjpeg-cu12@12.4.0.76"


def _open(browser: Any, url: str) -> None:
    browser.get(url)
    assert not console_errors(browser), (url, console_errors(browser))
    assert no_alert(browser), url


def _shot(browser: Any, name: str, element: str | None = None) -> None:
    """A screenshot of the page, or of one element of it (scrolled into view)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    if element is None:
        browser.save_screenshot(str(ARTIFACTS / name))
        return
    el = browser.find_element(By.ID, element)
    browser.execute_script("arguments[0].scrollIntoView()", el)
    assert el.screenshot(str(ARTIFACTS / name))
    assert (ARTIFACTS / name).stat().st_size > 5_000


def _rows(browser: Any, table: str) -> list[dict[str, str]]:
    out = []
    for tr in browser.find_elements(By.CSS_SELECTOR, f"#{table} tbody tr[data-vuln]"):
        tds = tr.find_elements(By.TAG_NAME, "td")
        # textContent: also of the rows a closed details element hides
        text = [" ".join((td.get_attribute("textContent") or "").split()) for td in tds]
        out.append({"severity": text[0], "vulnerability": tr.get_attribute("data-vuln"),
                    "component": tr.get_attribute("data-component"),
                    "status": tr.get_attribute("data-status"), "status_text": text[4]})
    return out


def test_image_names(write_server: Server, browser: Any, syft_sboms: dict[str, Path]) -> None:
    ov = requests.get(write_server.base + "api/overview", timeout=30).json()
    names = {i["subject"] for i in ov["image_list"]}
    # the docker archive by its own RepoTag (not doubled), Syft's SBOM of the archive by
    # the archive's file name (Syft itself names it by its local path)
    assert WHEELS in names, names
    assert "nvidia-wheels.docker.tar" in names, names
    assert not any(n.startswith("/") or n.count("nvidia-wheels") > 1 for n in names), names
    _open(browser, write_server.base)
    text = browser.find_element(By.ID, "images").text
    assert str(syft_sboms["archive"].parent) not in text
    assert f"{WHEELS}@sha256:" in text, text  # registry/repo:tag@digest
    _shot(browser, "overview.png")


def test_driver_panel_from_host_facts(write_server: Server, browser: Any) -> None:
    ov = requests.get(write_server.base + "api/overview", timeout=30).json()
    host = {h["subject"]: h for h in ov["host_list"]}
    assert host["h200-no-link"]["driver"] == "nvidia 580.159.04", host["h200-no-link"]
    page = requests.get(write_server.base + "api/host?name=h200-no-link", timeout=30).json()
    assert "580.159.04" in {d["version"] for d in page["driver"]}
    branches = {r["value"]: r["hosts"] for r in ov["by_driver_branch"]}
    assert branches == {"580": 3, "570": 1}, branches  # no "none"
    _open(browser, write_server.base)
    row = next(tr for tr in browser.find_elements(By.CSS_SELECTOR, "#hosts tbody tr")
               if tr.text.startswith("h200-no-link"))
    assert "580.159.04" in row.text


def test_findings_filters_sort_search(write_server: Server, browser: Any) -> None:
    base = write_server.base + f"image?name={quote(WHEELS)}"
    _open(browser, base)
    every = _rows(browser, "findings")
    # since the toolkit-part rules, this image's high CVEs (CVE-2025-33228/9/30, in
    # nsight-systems and the compilers) are not-affected; medium and low remain open
    assert {r["severity"] for r in every} >= {"medium", "low"}, every[:5]
    assert "high" not in {r["severity"] for r in every}, every[:5]
    # a component column: the same CVE on two components is two rows, told apart
    nvjpeg = [r for r in every if r["vulnerability"] == VULN and r["status"] == "affected"]
    assert {r["component"] for r in nvjpeg} == {"nvidia-nvjpeg-cu12", "nvidia-nvjpeg"}
    # not-affected rows are collapsed in a details element
    details = browser.find_element(By.ID, "not-affected")
    assert details.get_attribute("open") is None
    hidden = browser.find_elements(By.CSS_SELECTOR, "#suppressed tbody tr")
    assert hidden and not any(tr.is_displayed() for tr in hidden)
    assert all(r["status"] == "not-affected" for r in _rows(browser, "suppressed"))
    details.find_element(By.TAG_NAME, "summary").click()
    assert hidden[0].is_displayed()
    # filter by severity (the form, submitted by the browser)
    form = browser.find_element(By.ID, "findings-filter")
    Select(form.find_element(By.NAME, "severity")).select_by_value("low")
    Select(form.find_element(By.NAME, "sort")).select_by_value("component")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    WebDriverWait(browser, 30).until(expected_conditions.url_contains("severity=low"))
    high = _rows(browser, "findings")
    assert high and {r["severity"] for r in high} == {"low"}
    assert len(high) == sum(1 for r in every if r["severity"] == "low")
    assert len(high) < len(every)
    comps = [r["component"] for r in high]
    assert comps == sorted(comps), comps
    # search by CVE, by advisory, by component
    form = browser.find_element(By.ID, "findings-filter")
    Select(form.find_element(By.NAME, "severity")).select_by_value("")
    box = form.find_element(By.NAME, "q")
    box.clear()
    box.send_keys(VULN.lower())
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    WebDriverWait(browser, 30).until(expected_conditions.url_contains("q=cve"))
    found = _rows(browser, "findings")
    assert found and {r["vulnerability"] for r in found} == {VULN}, found
    _shot(browser, "image-findings.png", "findings-section")
    for q, field in (("nvidia-nvjpeg-cu12", "component"), ("NVIDIA-5755", None)):
        _open(browser, base + f"&q={quote(q)}")
        got = _rows(browser, "findings") + _rows(browser, "suppressed")
        assert got, q
        if field:
            assert {r[field] for r in got} == {q}, got
    assert not console_errors(browser)


def test_trend_of_findings(write_server: Server, browser: Any) -> None:
    data = requests.get(write_server.base + "api/host?name=vm", timeout=30).json()
    points = data["trend"]["points"]
    assert [p["ts"][:10] for p in points] == ["2025-12-01", "2026-01-01"]
    assert all(p["total"] > 0 for p in points)
    _open(browser, write_server.base + "host?name=vm")
    bars = browser.find_elements(By.CSS_SELECTOR, "#trend svg rect.bar")
    # one stacked bar per scan: a rectangle per severity present in it
    assert len(bars) == sum(len(p["counts"]) for p in points)
    assert browser.find_element(By.ID, "trend").is_displayed()
    rows = browser.find_elements(By.CSS_SELECTOR, "#trend-table tbody tr")
    assert [r.find_elements(By.TAG_NAME, "td")[2].text for r in rows] == [
        str(p["total"]) for p in reversed(points)]
    _shot(browser, "host-trend.png", "trend-section")


def test_sbom_download(write_server: Server) -> None:
    for fmt, key in (("cyclonedx", "bomFormat"), ("spdx", "spdxVersion")):
        r = requests.get(write_server.base + "sbom", params={
            "kind": "image", "name": WHEELS, "format": fmt}, timeout=60)
        assert r.status_code == 200, r.text[:300]
        assert "attachment" in r.headers["content-disposition"]
        doc = r.json()
        assert key in doc
        text = json.dumps(doc)
        assert "nvidia-nvjpeg-cu12" in text
    r = requests.get(write_server.base + "sbom", params={
        "kind": "host", "name": "vm", "format": "cyclonedx"}, timeout=60)
    assert r.status_code == 200 and "580.159.04" in r.text
    assert requests.get(write_server.base + "sbom", params={
        "kind": "image", "name": "no/such:thing", "format": "spdx"}, timeout=30).status_code == 404


def _login(browser: Any, server: Server, name: str) -> None:
    _open(browser, server.base + "login")
    form = browser.find_element(By.ID, "login-form")
    form.find_element(By.NAME, "author").send_keys(name)
    form.find_element(By.NAME, "token").send_keys(WRITE_TOKEN)
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    # the login page of a browser already signed in (an earlier test on this worker) shows
    # "signed-in" before the POST is answered: wait for the page to change and name us
    WebDriverWait(browser, 30).until(expected_conditions.staleness_of(form))
    WebDriverWait(browser, 30).until(
        expected_conditions.text_to_be_present_in_element((By.ID, "signed-in"), name))


def _scan_vex(vex: Path, out: Path) -> dict[tuple[str, str], str]:
    from fixtures.build import ensure

    cmd = [sys.executable, "-m", "gpusbom", "scan",
           f"docker-archive:{ensure('nvidia-wheels').docker_archive}", "-q",
           "-o", f"json={out}"]
    if vex.name:
        cmd += ["--vex", str(vex)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads(out.read_text())
    comps = {c["bom_ref"]: c for c in doc["components"]}
    return {(f["advisory"]["vulnerability"], comps[f["components"][0]]["purl"] or ""):
            f["advisory"]["status"] for f in doc["findings"] if f.get("advisory")}


def test_triage_recorded_in_ui_suppresses_in_next_scan(write_server: Server, browser: Any,
                                                       wheels_subject: str,
                                                       tmp_path: Path) -> None:
    _login(browser, write_server, "Ada Triage")
    _open(browser, write_server.base + f"image?name={quote(WHEELS)}&q={VULN}")
    row = next(tr for tr in browser.find_elements(By.CSS_SELECTOR, "#findings tbody tr")
               if tr.get_attribute("data-component") == "nvidia-nvjpeg-cu12")
    row.find_element(By.CSS_SELECTOR, "a.triage-link").click()
    form = WebDriverWait(browser, 30).until(
        expected_conditions.presence_of_element_located((By.ID, "triage-form")))
    assert form.find_element(By.NAME, "component").get_attribute("value") == COMPONENT
    Select(form.find_element(By.NAME, "state")).select_by_value("not_affected")
    Select(form.find_element(By.NAME, "justification")).select_by_value(
        "vulnerable_code_not_in_execute_path")
    form.find_element(By.NAME, "comment").send_keys("nvJPEG is never called by this service")
    form.find_element(By.NAME, "expires").send_keys("2099-12-31")
    _shot(browser, "triage.png", "triage-form")
    form.find_element(By.CSS_SELECTOR, "button[value=record]").click()
    # back on the image page: the finding moved to the collapsed not-affected section,
    # the same CVE on the other nvjpeg component stays open
    WebDriverWait(browser, 30).until(
        expected_conditions.presence_of_element_located((By.ID, "findings")))
    assert not console_errors(browser)
    open_rows = {(r["vulnerability"], r["component"]): r for r in _rows(browser, "findings")}
    closed = {(r["vulnerability"], r["component"]): r for r in _rows(browser, "suppressed")}
    assert closed[(VULN, "nvidia-nvjpeg-cu12")]["status"] == "not_affected"
    assert (VULN, "nvidia-nvjpeg") in open_rows
    # every project with that component: the same image stored from its OCI layout too
    other = requests.get(write_server.base + "api/image", params={
        "name": wheels_subject, "q": VULN}, timeout=30).json()["findings"]
    assert any(r["key"] == COMPONENT for r in other["suppressed"]), other
    assert not any(r["key"] == COMPONENT for r in other["open"])
    stored = requests.get(write_server.base + "api/triage", timeout=30).json()["analyses"]
    mine = next(a for a in stored if a["component"] == COMPONENT)
    assert (mine["vulnerability"], mine["author"], mine["expires"]) == (
        VULN, "Ada Triage", "2099-12-31T00:00:00Z")
    # exported, fed to the next scan: exactly that finding is not affected
    before = _scan_vex(Path(""), tmp_path / "plain.json")
    assert before[(VULN, COMPONENT)] == "affected"
    for fmt in ("openvex", "cyclonedx"):
        r = requests.get(write_server.base + "vex", params={"format": fmt}, timeout=30)
        assert r.status_code == 200
        vex = tmp_path / f"triage.{fmt}.json"
        vex.write_bytes(r.content)
        after = _scan_vex(vex, tmp_path / f"scan-{fmt}.json")
        assert after[(VULN, COMPONENT)] == "not-affected", fmt
        assert after[(VULN, "pkg:pypi/nvidia-nvjpeg@13.0.2.28")] == "affected", fmt
        changed = {k for k in before if before[k] != after.get(k)}
        assert changed == {(VULN, COMPONENT)}, (fmt, changed)


def test_hostile_analysis_inert(write_server: Server, browser: Any) -> None:
    """A hostile comment and author, recorded through the form, render as text."""
    _login(browser, write_server, dash_data.SCRIPT)
    comp = "pkg:pypi/nvidia-nvjpeg-cu12@12.4.0.76"
    _open(browser, write_server.base + f"triage?component={quote(comp)}&vulnerability="
          f"CVE-2025-23274&next={quote('image?name=' + quote(WHEELS))}")
    try:
        form = WebDriverWait(browser, 30).until(
            expected_conditions.presence_of_element_located((By.ID, "triage-form")))
    except Exception as e:  # the page as served, to tell a lost session from a missing row
        raise AssertionError(browser.find_element(By.TAG_NAME, "body").text[:2000]) from e
    Select(form.find_element(By.NAME, "state")).select_by_value("accepted")
    form.find_element(By.NAME, "comment").send_keys(dash_data.IMG + dash_data.SQL)
    form.find_element(By.CSS_SELECTOR, "button[value=record]").click()
    WebDriverWait(browser, 30).until(
        expected_conditions.presence_of_element_located((By.ID, "findings")))
    for path in ("triage", f"image?name={quote(WHEELS)}&q=CVE-2025-23274",
                 f"image?name={quote(dash_data.HOSTILE_SUBJECT)}"):
        _open(browser, write_server.base + path)
        made = browser.execute_script(
            "return document.querySelectorAll('script, img, iframe, [onerror], [onload]')"
            ".length")
        assert made == 0, path
        if "HOSTILE" not in path and "evil" not in path:
            assert dash_data.IMG in browser.find_element(By.TAG_NAME, "body").text, path
    assert dash_data.SCRIPT in browser.find_element(By.ID, "signed-in").text
    assert no_alert(browser)


def test_read_only_by_default(server: Server) -> None:
    """The dashboard without --write-token-file: every write refused, nothing stored."""
    for path in ("triage", "login"):
        r = requests.post(server.base + path, data={"component": COMPONENT,
                          "vulnerability": VULN, "state": "not_affected", "token": "x"},
                          headers={"Origin": server.base.rstrip("/")}, timeout=30,
                          allow_redirects=False)
        assert r.status_code == 403, (path, r.status_code)
    assert "read-only" in requests.get(server.base + "login", timeout=30).text
    assert requests.get(server.base + "api/triage", timeout=30).json()["analyses"] == []


def _session(server: Server) -> tuple[requests.Session, str]:
    s = requests.Session()
    origin = server.base.rstrip("/")
    r = s.post(server.base + "login", data={"author": "csrf-test", "token": WRITE_TOKEN},
               headers={"Origin": origin}, timeout=30, allow_redirects=False)
    assert r.status_code == 303, r.text
    page = s.get(server.base + f"triage?component=x&vulnerability={VULN}", timeout=30).text
    import re

    csrf = re.search(r'name="csrf" value="([0-9a-f]{64})"', page)
    assert csrf, page[:2000]
    return s, csrf.group(1)


@pytest.mark.parametrize("case", ["no-session", "no-csrf", "wrong-csrf", "wrong-origin",
                                  "no-origin", "wrong-header-token", "login-wrong-token",
                                  "login-cross-origin"])
def test_csrf_writes_refused(write_server: Server, case: str) -> None:
    s, csrf = _session(write_server)
    origin = write_server.base.rstrip("/")
    fields = {"component": "pkg:pypi/csrf-probe@1.0", "vulnerability": "CVE-2099-0001",
              "state": "not_affected", "justification": "component_not_present",
              "comment": "forged", "csrf": csrf}
    headers = {"Origin": origin}
    url = write_server.base + "triage"
    client: Any = s
    if case == "no-session":
        client = requests
    elif case == "no-csrf":
        fields.pop("csrf")
    elif case == "wrong-csrf":
        fields["csrf"] = "0" * 64
    elif case == "wrong-origin":
        headers = {"Origin": "http://evil.example"}
    elif case == "no-origin":
        headers = {}
    elif case == "wrong-header-token":
        client, headers = requests, {"X-Gpusbom-Write-Token": "nope"}
    elif case == "login-wrong-token":
        client, url = requests, write_server.base + "login"
        fields = {"author": "x", "token": WRITE_TOKEN + "x"}
    elif case == "login-cross-origin":
        client, url, headers = requests, write_server.base + "login", {
            "Origin": "http://evil.example"}
        fields = {"author": "x", "token": WRITE_TOKEN}
    r = client.post(url, data=fields, headers=headers, timeout=30, allow_redirects=False)
    assert r.status_code == 403, (case, r.status_code, r.text)
    assert "set-cookie" not in {k.lower() for k in r.headers}
    stored = requests.get(write_server.base + "api/triage", timeout=30).json()["analyses"]
    assert not any(a["component"] == "pkg:pypi/csrf-probe@1.0" for a in stored)
    # the same request, done right, is accepted (so the refusals above are the checks)
    if case == "wrong-origin":
        fields["next"] = "https://evil.example/"
        r = s.post(url, data=fields, headers={"Origin": origin}, timeout=30,
                   allow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "./"  # no open redirect
        r = s.post(url, data={**fields, "action": "delete"}, headers={"Origin": origin},
                   timeout=30, allow_redirects=False)
        assert r.status_code == 303
    if case == "wrong-header-token":
        r = requests.post(url, json={k: v for k, v in fields.items() if k != "csrf"},
                          headers={"X-Gpusbom-Write-Token": WRITE_TOKEN}, timeout=30,
                          allow_redirects=False)
        assert r.status_code == 303
        requests.post(url, json={**fields, "action": "delete"}, headers={
            "X-Gpusbom-Write-Token": WRITE_TOKEN}, timeout=30, allow_redirects=False)


def test_bad_analysis_is_one_clear_error(write_server: Server) -> None:
    s, csrf = _session(write_server)
    origin = write_server.base.rstrip("/")
    for fields, want in (({"state": "maybe"}, "state 'maybe'"),
                         ({"state": "not_affected"}, "needs a justification"),
                         ({"state": "accepted", "expires": "soon"}, "expires 'soon'")):
        r = s.post(write_server.base + "triage", data={
            "component": COMPONENT, "vulnerability": "CVE-2099-0002", "comment": "c",
            "csrf": csrf, **fields}, headers={"Origin": origin}, timeout=30,
            allow_redirects=False)
        assert r.status_code == 400 and want in r.text, (fields, r.text)
