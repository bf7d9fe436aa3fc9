"""Headless Debian Chromium driven by Selenium, for the dashboard and HTML report tests.

Flags: no sandbox (root in CI), no GPU, no background networking, component updates, sync
or first-run pages, a fresh profile; ``offline=True`` also resolves every host name to
nothing and sends any request to a dead proxy, so a page that tried to fetch something
would fail (and log it). Selenium Manager is kept offline: the driver is Debian's
chromedriver (apt-get install chromium chromium-driver; scripts/test does).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest


@contextmanager
def chromium(*, offline: bool = False) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ["SE_OFFLINE"] = "true"
    binary = shutil.which("chromium")
    driver = shutil.which("chromedriver")
    if not binary or not driver:
        pytest.fail("chromium and chromium-driver are needed (scripts/test installs them: "
                    "apt-get install chromium chromium-driver)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = binary
    profile = tempfile.mkdtemp(prefix="gpusbom-chromium-")
    flags = ["--headless=new", "--no-sandbox", "--disable-gpu",
             "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
             f"--user-data-dir={profile}", "--window-size=1280,900"]
    if offline:
        flags += ["--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9",
                  "--proxy-bypass-list=<-loopback>"]
    for flag in flags:
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(options=opts, service=Service(executable_path=driver))
    d.set_page_load_timeout(30)
    try:
        yield d
    finally:
        d.quit()
        shutil.rmtree(profile, ignore_errors=True)


def console_errors(d: Any) -> list[Any]:
    return [e for e in d.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]


def no_alert(d: Any) -> bool:
    from selenium.common.exceptions import NoAlertPresentException

    try:
        d.switch_to.alert  # noqa: B018 - raises when there is none
    except NoAlertPresentException:
        return True
    return False
