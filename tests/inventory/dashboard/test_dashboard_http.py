"""Every dashboard route over HTTP against ``gpusbom inventory serve`` on PostgreSQL:
status, JSON API, OpenAPI, /metrics, security headers, read-only, hostile strings escaped,
injection searches inert, and the access token on every route."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

import dash_data
import markupsafe
import pytest
import requests

from .conftest import Server
from .pages import OTHER, api_paths, page_paths


def test_every_page_and_api_route(server: Server, wheels_subject: str) -> None:
    for path in page_paths(wheels_subject):
        r = requests.get(server.base + path, timeout=30)
        assert r.status_code == 200, (path, r.text[:500])
        assert r.headers["content-type"].startswith("text/html")
        assert "<script" not in r.text.lower(), path
        assert 'class="error"' not in r.text, (path, r.text[:2000])
    for path in api_paths(wheels_subject):
        r = requests.get(server.base + path, timeout=30)
        assert r.status_code == 200, (path, r.text[:500])
        assert isinstance(r.json(), dict) and not r.json().get("error"), path
    for path in OTHER:
        assert requests.get(server.base + path, timeout=30).status_code == 200, path


def test_api_content(server: Server, wheels_subject: str) -> None:
    ov = requests.get(server.base + "api/overview", timeout=30).json()
    assert ov["hosts"] == 3 and ov["images"] == 2
    assert {r["value"]: r["hosts"] for r in ov["by_gpu_model"]} == {"NVIDIA H200": 2,
                                                                     "NVIDIA B300": 1}
    assert {r["value"]: r["hosts"] for r in ov["by_driver_branch"]} == {"580": 2, "570": 1}
    assert {r["value"]: r["hosts"] for r in ov["by_probe"]} == {"pass": 1, "not probed": 2}
    assert ov["advisory_db"]["source"] and ov["advisory_db"]["advisories"] > 0
    m = requests.get(server.base + "api/matrix", timeout=30).json()
    hosts_of = {c["key"]: c["host_sample"] for c in m["columns"]}
    row = next(r for r in m["rows"] if r["image"] == wheels_subject)
    got = {(hosts_of[c["gpu"]][0]): c["verdict"] for c in row["cells"]}
    assert got == {h: v for (_i, h), v in dash_data.EXPECTED.items()}
    host = requests.get(server.base + "api/host?name=vm", timeout=30).json()
    assert [g["model"] for g in host["gpus"]] == ["NVIDIA H200", "NVIDIA H200"]
    assert [p["outcome"] for p in host["probes"]] == ["pass", "fail"]
    changes = host["drift"][0]["changes"]
    assert any(c["section"] == "driver" and c["before"] == "580.95.05"
               and c["after"] == "580.159.04" for c in changes), changes
    assert [i["subject"] for i in host["images"]] == [dash_data.HOSTILE_SUBJECT]
    adv = requests.get(server.base + "api/advisory?id=NVIDIA-5821", timeout=30).json()
    assert {r["subject"] for r in adv["rows"] if r["status"] == "affected"} >= {"vm"}
    assert any(r["fixed_version"] for r in adv["rows"] if r["subject"] == "vm")
    s = requests.get(server.base + "api/search", params={"component": "cudnn",
                                                         "version": "<9.15"}, timeout=30).json()
    assert {r["subject"] for r in s["rows"]} == {"vm", "h200-old-driver", "b300-node"}
    img = requests.get(server.base + "api/image", params={"name": wheels_subject},
                       timeout=30).json()
    assert any("sm_90" in (c["sass"] or "") for c in img["gpu_code"])
    assert sorted(c["verdict"] for c in img["coverage"]) == sorted(dash_data.EXPECTED.values())
    assert img["layers"]


def test_openapi_and_metrics(server: Server) -> None:
    doc = requests.get(server.base + "api/openapi.json", timeout=30).json()
    assert doc["openapi"].startswith("3.")
    assert set(doc["paths"]) == {f"/api/{n}" for n in ("overview", "search", "advisories",
                                                       "advisory", "matrix", "cell", "host",
                                                       "image", "triage")}
    assert all(set(v) == {"get"} for v in doc["paths"].values())
    assert "component" in {p["name"] for p in doc["paths"]["/api/search"]["get"]["parameters"]}
    from prometheus_client.parser import text_string_to_metric_families

    text = requests.get(server.base + "metrics", timeout=30).text
    names = {f.name for f in text_string_to_metric_families(text)}
    assert "gpusbom_inventory_gpu_info" in names


def test_headers_read_only_and_errors(server: Server, dash_db: str) -> None:
    r = requests.get(server.base, timeout=30)
    csp = r.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src" not in csp and "unsafe" not in csp
    assert r.headers["x-content-type-options"] == "nosniff"
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        for path in ("", "api/search", "api/overview", "metrics"):
            assert requests.request(method, server.base + path, timeout=30).status_code == 405
    assert requests.get(server.base + "host?name=nope", timeout=30).status_code == 404
    assert requests.get(server.base + "api/image?name=nope", timeout=30).json() == {
        "error": "no image 'nope' in the inventory"}
    assert requests.get(server.base + "api/advisory?id=NOPE-1", timeout=30).status_code == 404
    # the database password is never shown
    from inv_pgserver import PgServer

    for path in ("", "matrix", "api/overview", "host?name=nope"):
        assert PgServer.password not in requests.get(server.base + path, timeout=30).text


def test_hostile_strings_escaped(server: Server) -> None:
    subj = quote(dash_data.HOSTILE_SUBJECT)
    for path in ("", "matrix", f"image?name={subj}", "host?name=vm",
                 f"search?component={quote('evil-' + dash_data.SCRIPT + dash_data.IMG)}"):
        text = requests.get(server.base + path, timeout=30).text
        low = text.lower()
        assert "<script" not in low and "<img" not in low, path
        assert dash_data.SCRIPT not in text and dash_data.IMG not in text, path
        assert str(markupsafe.escape(dash_data.SCRIPT)) in text, path  # shown, as text


INJECTIONS = ["' OR '1'='1", "'; DROP TABLE scans; --", "%", "_", ("*' UNION SELECT id FROM "
              "scans --"), "\\", "\" OR 1=1 --", "cudnn' --", "0x27", "%27%20OR%201=1",
              dash_data.SCRIPT, dash_data.IMG]


@pytest.mark.parametrize("field", ["component", "host", "image", "label"])
def test_injection_searches_return_nothing(server: Server, field: str) -> None:
    for inj in INJECTIONS:
        params: dict[str, Any] = {field: inj}
        if field == "label":
            params = {"label": f"{inj}={inj}"}
        r = requests.get(server.base + "api/search", params=params, timeout=30)
        assert r.status_code == 200, (field, inj, r.text)
        body = r.json()
        assert body["rows"] == [] and body["error"] is None, (field, inj, body)
        page = requests.get(server.base + "search", params=params, timeout=30)
        assert page.status_code == 200 and "<script" not in page.text.lower()
    # a hostile version range is a clear error, not a server error
    r = requests.get(server.base + "api/search", params={"component": "cudnn",
                                                         "version": "'; DROP TABLE scans; --"})
    assert r.status_code == 200 and r.json()["rows"] == [] and r.json()["error"]
    # and the tables are all still there
    assert requests.get(server.base + "api/overview", timeout=30).json()["hosts"] == 3


def test_auth_token(dash_db: str, tmp_path: Path, wheels_subject: str) -> None:
    token = "t0ken-" + "x" * 32
    (tmp_path / "token").write_text(token + "\n")
    s = Server(dash_db, "--auth-token-file", str(tmp_path / "token"))
    try:
        routes = [*page_paths(wheels_subject), *api_paths(wheels_subject), *OTHER]
        for path in routes:
            url = s.base + path
            r = requests.get(url, timeout=30)
            assert r.status_code == 401 and "Basic" in r.headers["www-authenticate"], path
            assert token not in r.text
            for bad in ("Bearer wrong", f"Bearer {token}x", f"Bearer {token[:-1]}", "Basic !!",
                        "Basic " + _b64(f"u:{token}x"), token):
                assert requests.get(url, headers={"Authorization": bad},
                                    timeout=30).status_code == 401, (path, bad)
            assert requests.get(url, headers={"Authorization": f"Bearer {token}"},
                                timeout=30).status_code == 200, path
            assert requests.get(url, auth=("anyone", token), timeout=30).status_code == 200
        assert len(routes) >= 20
    finally:
        s.stop()


def _b64(text: str) -> str:
    import base64

    return base64.b64encode(text.encode()).decode()
