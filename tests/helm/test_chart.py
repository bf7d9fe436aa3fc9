"""deploy/helm/gpusbom: rendered with the chart's template subset (tests/helm/gotmpl.py;
Helm is not installable from the reachable registries) and validated against the
Kubernetes 1.30 schemas with kubernetes-validate, in its main configurations."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from gotmpl import Unsupported, render

CHART = Path(__file__).resolve().parents[2] / "deploy/helm/gpusbom"
K8S = "1.30"
DIGEST = "sha256:" + "ab" * 32
RELEASE = {"Name": "inv", "Namespace": "gpusbom", "Service": "Helm"}


def values(**over: Any) -> dict[str, Any]:
    v: dict[str, Any] = yaml.safe_load((CHART / "values.yaml").read_text())
    v = copy.deepcopy(v)
    v["image"].update(repository="registry.test/gpusbom", digest=DIGEST)
    for path, value in over.items():
        cur = v
        *head, last = path.split("__")
        for k in head:
            cur = cur[k]
        cur[last] = value
    return v


def objects(vals: dict[str, Any]) -> list[dict[str, Any]]:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    out = []
    for t in sorted((CHART / "templates").glob("*.yaml")):
        text = render(t.read_text(), vals, RELEASE, chart)
        out += [d for d in yaml.safe_load_all(text) if d]
    for d in out:
        assert kubernetes_validate.validate(d, K8S, strict=True) == K8S, d["kind"]
    return out


def by_kind(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in objs}


def test_chart_metadata() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2" and chart["name"] == "gpusbom"
    assert re.fullmatch(r"\d+\.\d+\.\d+", chart["version"])
    pyproject = (CHART.parents[2] / "pyproject.toml").read_text()
    assert f'version = "{chart["appVersion"]}"' in pyproject  # the chart tracks the release


def test_default_install_server_and_scans() -> None:
    objs = by_kind(objects(values(database__url="postgresql+psycopg://u:p@db:5432/gpusbom")))
    assert set(objs) == {"ServiceAccount", "Secret", "Deployment", "Service", "ConfigMap",
                         "CronJob"}
    (server,) = objs["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert server["image"] == f"registry.test/gpusbom@{DIGEST}"
    assert server["command"] == ["gpusbom", "inventory", "serve"]
    assert server["env"][0]["valueFrom"]["secretKeyRef"] == {"name": "inv-inventory",
                                                             "key": "DB_URL"}
    assert server["resources"] == {"requests": {"cpu": "100m", "memory": "256Mi"},
                                   "limits": {"memory": "1Gi"}}
    assert objs["Secret"]["stringData"]["DB_URL"].startswith("postgresql+psycopg://")
    cron = objs["CronJob"]["spec"]
    assert cron["schedule"] == "17 3 * * *"
    (scan,) = cron["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    assert scan["image"] == server["image"]
    assert "--push \"$DB_URL\"" in scan["args"][0]
    assert objs["ConfigMap"]["data"]["images.txt"].split() == [
        "registry.example.internal/ml/pytorch:25.01"]
    assert objs["Service"]["spec"]["ports"][0]["port"] == 80


def test_existing_secrets_and_read_only_dashboard_role() -> None:
    objs = by_kind(objects(values(database__existingSecret="pg-writer",
                                  database__readOnlyExistingSecret="pg-reader",
                                  scans__images=["a/b:1", "c/d@" + DIGEST],
                                  scans__registryAuthSecret="regcred")))
    assert "Secret" not in objs  # no URL in values: nothing secret is rendered
    ref = objs["Deployment"]["spec"]["template"]["spec"]["containers"][0]["env"][0]
    assert ref["valueFrom"]["secretKeyRef"]["name"] == "pg-reader"
    job = objs["CronJob"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert job["containers"][0]["env"][0]["valueFrom"]["secretKeyRef"]["name"] == "pg-writer"
    assert objs["ConfigMap"]["data"]["images.txt"].split() == ["a/b:1", "c/d@" + DIGEST]
    auth = next(v for v in job["volumes"] if v["name"] == "registry-auth")
    assert auth["secret"]["secretName"] == "regcred"


def test_parts_can_be_switched_off() -> None:
    assert set(by_kind(objects(values(server__enabled=False, database__existingSecret="x")))) \
        == {"ServiceAccount", "ConfigMap", "CronJob"}
    assert set(by_kind(objects(values(scans__enabled=False, serviceAccount__create=False,
                                      database__existingSecret="x")))) == {"Deployment",
                                                                           "Service"}


def test_a_bad_value_fails_validation_and_the_renderer_refuses_unknown_syntax() -> None:
    with pytest.raises(kubernetes_validate.ValidationError):
        objects(values(server__replicas="two", database__existingSecret="x"))
    with pytest.raises(Unsupported):
        render("{{ include \"x\" . }}", {}, RELEASE, {})
    notes = render((CHART / "templates/NOTES.txt").read_text(), values(), RELEASE,
                   yaml.safe_load((CHART / "Chart.yaml").read_text()))
    assert f"registry.test/gpusbom@{DIGEST}" in notes and "svc/inv-server 8080:80" in notes
