"""The dashboard in a real browser (Debian's Chromium, headless, driven by Selenium):
every page loads with no console error, every link between pages works, the matrix shows
the expected verdict colours, the search form works, hostile strings are inert.
Screenshots of the overview, the matrix and a host page go to test-artifacts/dashboard/."""

from __future__ import annotations

from typing import Any
from urllib.parse import urldefrag, urlparse

import dash_data
import requests
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.wait import WebDriverWait

from .conftest import ARTIFACTS, Server
from .pages import page_paths

#: computed background colours of the verdict classes (style.css)
COLOURS = {"runs": "rgba(223, 243, 225, 1)", "runs-with-jit": "rgba(253, 240, 210, 1)",
           "will-fail": "rgba(251, 218, 218, 1)"}


def _console_errors(browser: Any) -> list[Any]:
    return [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]


def _open(browser: Any, url: str) -> None:
    browser.get(url)
    errors = _console_errors(browser)
    assert not errors, (url, errors)
    try:
        alert = browser.switch_to.alert
        raise AssertionError(f"{url}: an alert fired: {alert.text!r}")
    except NoAlertPresentException:
        pass


def test_pages_links_and_console(server: Server, browser: Any, wheels_subject: str) -> None:
    seen: set[str] = set()
    queue = [server.base + p for p in page_paths(wheels_subject)]
    checked = 0
    while queue and checked < 120:
        url = urldefrag(queue.pop(0))[0]
        if url in seen:
            continue
        seen.add(url)
        checked += 1
        if "/api/" in url or url.endswith((".css", ".svg", "metrics")):
            assert requests.get(url, timeout=30).status_code == 200, url
            continue
        _open(browser, url)
        assert browser.find_elements(By.ID, "error") == [], (url, browser.page_source[:1500])
        assert browser.find_element(By.CSS_SELECTOR, "nav a#nav-matrix")
        for a in browser.find_elements(By.CSS_SELECTOR, "a[href]"):
            href = a.get_property("href")
            if urlparse(href).netloc == urlparse(server.base).netloc:
                queue.append(href)
    # the links reach every kind of page (and the hosts, images, advisories stored)
    kinds = {urlparse(u).path.strip("/").split("/")[0] for u in seen}
    assert kinds >= {"", "search", "matrix", "advisories", "advisory", "cell", "host",
                     "image", "api"}, kinds
    assert any("host?name=h200-old-driver" in u for u in seen)


def test_matrix_colours_and_cells(server: Server, browser: Any, wheels_subject: str) -> None:
    cols = requests.get(server.base + "api/matrix", timeout=30).json()["columns"]
    host_of = [c["host_sample"][0] for c in cols]
    _open(browser, server.base + "matrix")
    rows = browser.find_elements(By.CSS_SELECTOR, "#matrix tbody tr")
    row = next(r for r in rows
               if r.find_element(By.CSS_SELECTOR, "th a").text == wheels_subject)
    cells = row.find_elements(By.CSS_SELECTOR, "td.cell")
    got = {}
    for host, cell in zip(host_of, cells):
        verdict = cell.get_attribute("data-verdict")
        assert cell.value_of_css_property("background-color") == COLOURS[verdict], verdict
        got[host] = verdict
    assert got == {h: v for (_i, h), v in dash_data.EXPECTED.items()}
    browser.save_screenshot(str(_artifact("matrix.png")))
    # a cell links to its reasons
    fail = cells[host_of.index("h200-old-driver")]
    fail.find_element(By.TAG_NAME, "a").click()
    verdict = WebDriverWait(browser, 30).until(
        expected_conditions.presence_of_element_located((By.ID, "cell-verdict")))
    assert "will-fail" in verdict.text
    reasons = browser.find_element(By.ID, "reasons").text
    assert "570.172.08" in reasons, reasons
    assert not _console_errors(browser)


def test_screenshots_and_search_form(server: Server, browser: Any) -> None:
    _open(browser, server.base)
    assert browser.find_element(By.ID, "hosts").text.count("NVIDIA H200") >= 2
    browser.save_screenshot(str(_artifact("overview.png")))
    # each screenshot this test checks is taken here: under xdist the test that also saves
    # matrix.png may run later or on the other worker (CI once found no file)
    _open(browser, server.base + "matrix")
    browser.save_screenshot(str(_artifact("matrix.png")))
    _open(browser, server.base + "host?name=vm")
    assert "580.95.05" in browser.find_element(By.ID, "drift").text
    assert browser.find_element(By.ID, "gpus").text.count("NVIDIA H200") == 2
    browser.save_screenshot(str(_artifact("host.png")))
    _open(browser, server.base + "search")
    form = browser.find_element(By.ID, "search-form")
    form.find_element(By.NAME, "component").send_keys("cudnn")
    form.find_element(By.NAME, "version").send_keys("<9.15")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    count = WebDriverWait(browser, 30).until(
        expected_conditions.presence_of_element_located((By.ID, "result-count")))
    assert not _console_errors(browser)
    assert "on 3 host(s)/image(s)" in count.text
    for name in ("overview.png", "matrix.png", "host.png"):
        assert _artifact(name).stat().st_size > 10_000, name


def test_hostile_strings_inert(server: Server, browser: Any, wheels_subject: str) -> None:
    from urllib.parse import quote

    for path in ("", "matrix", f"image?name={quote(dash_data.HOSTILE_SUBJECT)}",
                 "host?name=vm", f"search?component={quote('evil-' + dash_data.SCRIPT + dash_data.IMG)}",
                 f"search?component={quote(dash_data.SQL)}&host={quote(dash_data.IMG)}"):
        _open(browser, server.base + path)
        made = browser.execute_script(
            "return document.querySelectorAll('script, img, iframe, [onerror], [onload]')"
            ".length")
        assert made == 0, path
        text = browser.find_element(By.TAG_NAME, "body").text
        if "search" not in path:
            assert dash_data.SCRIPT in text, path  # shown as text
    _open(browser, server.base + f"image?name={quote(dash_data.HOSTILE_SUBJECT)}")
    labels = browser.find_element(By.ID, "labels").text
    assert dash_data.IMG in labels and dash_data.SQL in labels


def _artifact(name: str) -> Any:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS / name
