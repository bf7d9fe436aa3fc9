"""deploy/kubernetes/dashboard.yaml: the Deployment and Service against the Kubernetes
schemas (kubernetes-validate, strict), and the container's exact command and environment
run against a real PostgreSQL through a SELECT-only role and a read-only session URL."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from .conftest import free_port

DEPLOY = Path(__file__).resolve().parents[3] / "deploy" / "kubernetes"


def _docs() -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in yaml.safe_load_all((DEPLOY / "dashboard.yaml").read_text())
            if d}


def test_manifests_validate() -> None:
    import kubernetes_validate

    docs = _docs()
    assert set(docs) == {"Deployment", "Service"}
    for d in docs.values():
        assert kubernetes_validate.validate(d, "1.30", strict=True) == "1.30"
    secrets = [d for d in yaml.safe_load_all((DEPLOY / "secret.example.yaml").read_text())
               if d and d["metadata"]["name"] == "gpusbom-dashboard"]
    assert len(secrets) == 1 and set(secrets[0]["stringData"]) == {"DB_URL", "token"}
    kubernetes_validate.validate(secrets[0], "1.30", strict=True)
    dep, svc = docs["Deployment"], docs["Service"]
    assert svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]
    [c] = dep["spec"]["template"]["spec"]["containers"]
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert "--auth-token-file" in c["args"] and "--db" not in c["args"]
    assert dep["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True


def test_container_command_serves_read_only(pg: Any, dash_db: str, tmp_path: Path) -> None:
    [c] = _docs()["Deployment"]["spec"]["template"]["spec"]["containers"]
    db = dash_db.rsplit("/", 1)[1]
    pg.psql("CREATE ROLE gpusbom_ro LOGIN PASSWORD 'ro-Pw'")
    pg.psql(f'GRANT CONNECT ON DATABASE "{db}" TO gpusbom_ro')
    pg.psql("GRANT USAGE ON SCHEMA public TO gpusbom_ro; "
            "GRANT SELECT ON ALL TABLES IN SCHEMA public TO gpusbom_ro", db=db)
    ro_url = (f"postgresql://gpusbom_ro:ro-Pw@127.0.0.1:{pg.port}/{db}"
              "?options=-c%20default_transaction_read_only%3Don")
    (tmp_path / "token").write_text("deploy-token\n")
    args = list(c["args"])
    port = free_port()
    args[args.index("--bind") + 1] = f"127.0.0.1:{port}"
    args[args.index("--auth-token-file") + 1] = str(tmp_path / "token")
    env = {**os.environ, "GPUSBOM_INVENTORY_DB": ro_url, "HOME": str(tmp_path),
           "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    assert c["command"] == ["gpusbom", "inventory", "serve"]
    proc = subprocess.Popen([*c["command"], *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}/"
        for _ in range(300):
            try:
                requests.get(base, timeout=2)
                break
            except requests.ConnectionError:
                time.sleep(0.2)
        auth = {"Authorization": "Bearer deploy-token"}
        for path in ("", "matrix", "host?name=vm", "api/overview", "metrics"):
            r = requests.get(base + path, headers=auth, timeout=60)
            assert r.status_code == 200, (path, r.text[:300])
            assert "ro-Pw" not in r.text
        assert requests.get(base, timeout=30).status_code == 401
    finally:
        proc.terminate()
        out = proc.communicate(timeout=10)[0].decode()
    assert "ro-Pw" not in out
    # the URL itself refuses writes (the role too)
    from gpusbom.inventory import InventoryError, Store

    from ..inv_scans import host_scan

    with Store(ro_url) as store, pytest.raises(InventoryError, match="read-only|permission"):
        store.ingest(host_scan("intruder"))
