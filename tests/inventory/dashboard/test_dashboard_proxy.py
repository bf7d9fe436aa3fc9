"""Behind a reverse proxy that maps a path prefix (/fleet/ -> /): a minimal forwarding
proxy on localhost (what nginx's `location /fleet/ { proxy_pass http://dash/; }` does), and
the browser follows the dashboard's links through it."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

import pytest
import requests
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.wait import WebDriverWait

from .conftest import Server, free_port

PREFIX = "/fleet/"


@pytest.fixture
def proxy(server: Server) -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if not self.path.startswith(PREFIX):
                self.send_error(404, "outside the prefix")
                return
            r = requests.get(server.base + self.path[len(PREFIX):], timeout=60)
            self.send_response(r.status_code)
            for k in ("content-type", "content-security-policy"):
                if k in r.headers:
                    self.send_header(k, r.headers[k])
            self.send_header("content-length", str(len(r.content)))
            self.end_headers()
            self.wfile.write(r.content)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}{PREFIX}"
    finally:
        httpd.shutdown()


def test_links_work_under_a_path_prefix(proxy: str, browser: Any) -> None:
    browser.get(proxy)
    assert browser.find_element(By.ID, "hosts")
    # the stylesheet came through the prefix (a missing one would be a console error)
    assert not [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    for nav, path in (("nav-matrix", "matrix"), ("nav-search", "search"),
                      ("nav-advisories", "advisories"), ("nav-overview", "")):
        browser.find_element(By.ID, nav).click()
        WebDriverWait(browser, 30).until(
            lambda d, want=PREFIX + path: urlparse(d.current_url).path == want)
        assert not [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    browser.find_element(By.CSS_SELECTOR, "#hosts a.host").click()
    WebDriverWait(browser, 30).until(
        expected_conditions.presence_of_element_located((By.ID, "gpus")))
    assert urlparse(browser.current_url).path == PREFIX + "host"
    background = browser.find_element(By.TAG_NAME, "header").value_of_css_property(
        "background-color")
    assert background == "rgba(31, 78, 121, 1)"  # style.css through the prefix
