"""deploy/: Kubernetes manifests against the Kubernetes schemas (offline, kubernetes-validate's
bundled schemas), the DaemonSet's command run as a host scan of a snapshot pushed to a real
PostgreSQL, the systemd units through systemd-analyze, the Slurm script through bash -n."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpusbom.inventory import Store

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
K8S_VERSION = "1.30"


def _docs() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for f in sorted((DEPLOY / "kubernetes").glob("*.yaml")):
        for d in yaml.safe_load_all(f.read_text()):
            if d:
                out.append((f.name, d))
    return out


def _daemonset() -> dict[str, Any]:
    [ds] = [d for _, d in _docs() if d["kind"] == "DaemonSet"]
    return ds


def test_manifests_validate_against_kubernetes_schemas() -> None:
    import kubernetes_validate

    docs = _docs()
    assert {d["kind"] for _, d in docs} >= {"DaemonSet", "CronJob", "Secret", "Namespace",
                                            "ServiceAccount", "ConfigMap"}
    for name, d in docs:
        # strict: unknown fields are errors too
        assert kubernetes_validate.validate(d, K8S_VERSION, strict=True) == K8S_VERSION, name
    # the validator does catch mistakes (a misspelt field, a wrong type)
    bad = _daemonset()
    bad["spec"]["template"]["spec"]["nodeSelectr"] = {"x": "y"}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S_VERSION, strict=True)
    bad = _daemonset()
    bad["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]["readOnly"] = "yes"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S_VERSION, strict=True)


def test_daemonset_mounts_and_selects_gpu_nodes() -> None:
    spec = _daemonset()["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    [c] = spec["containers"]
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    vols = {v["name"]: v for v in spec["volumes"]}
    expected = (("/", "/host"), ("/proc", "/host/proc"), ("/sys", "/host/sys"),
                ("/dev", "/host/dev"),
                # node image stores (scan --images) and only the runtimes' task state dirs
                ("/var/lib/containerd", "/host/var/lib/containerd"),
                ("/var/lib/containers/storage", "/host/var/lib/containers/storage"),
                ("/run/containerd/io.containerd.runtime.v2.task",
                 "/node-run/containerd/io.containerd.runtime.v2.task"),
                ("/run/containers/storage", "/node-run/containers/storage"))
    for host_path, at in expected:
        m = mounts[at]
        assert m["readOnly"] is True
        assert vols[m["name"]]["hostPath"]["path"] == host_path
    # read-only, and nothing more: every hostPath is one of those, every mount but /tmp RO
    assert {v["hostPath"]["path"] for v in vols.values() if "hostPath" in v} == {
        h for h, _ in expected}
    assert all(m["readOnly"] for m in c["volumeMounts"] if m["mountPath"] != "/tmp")
    env = {e["name"]: e for e in c["env"]}
    assert env["DB_URL"]["valueFrom"]["secretKeyRef"] == {"name": "gpusbom-inventory",
                                                         "key": "DB_URL"}
    assert env["HOST_ROOT"]["value"] == "/host"
    assert env["GPUSBOM_NODE_RUN"]["value"] == "/node-run"
    assert '--push "$DB_URL" --images' in c["args"][0]
    assert 'gpusbom scan --root "$HOST_ROOT" ${PROBE:+--probe} --push "$DB_URL"' in c["args"][0]
    # the probe: on by default, GPUs injected by the NVIDIA runtime class, none requested
    assert env["PROBE"]["value"] == "1" and env["NVIDIA_VISIBLE_DEVICES"]["value"] == "all"
    assert spec["runtimeClassName"] == "nvidia"
    assert "nvidia.com/gpu" not in str(c.get("resources", {}))
    assert c["securityContext"]["readOnlyRootFilesystem"] is True


def test_daemonset_command_scans_a_host_snapshot_into_postgresql(pg, h200_root: Path,  # type: ignore[no-untyped-def]
                                                                   tmp_path: Path) -> None:
    """The DaemonSet container's exact script, run by /bin/sh with the container's
    environment, except: HOST_ROOT is the committed H200 snapshot (instead of the node's
    root at /host), DB_URL a real PostgreSQL database, SCAN_ONCE=1 ends the loop, and PROBE
    empty (a snapshot is not this machine: gpusbom refuses --probe on it, tested in
    tests/probe/test_probe_root.py)."""
    [c] = _daemonset()["spec"]["template"]["spec"]["containers"]
    assert c["command"] == ["/bin/sh", "-c"]
    url = pg.create_db()
    env = {e["name"]: e.get("value", "") for e in c["env"]}
    env.update({
        "HOST_ROOT": str(h200_root), "DB_URL": url, "SCAN_ONCE": "1", "HOME": str(tmp_path),
        "PROBE": "",
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "SOURCE_DATE_EPOCH": "1767225600",
    })
    p = subprocess.run(["/bin/sh", "-c", c["args"][0]], env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert url.split("@")[0].split(":")[-1] not in p.stdout + p.stderr  # no password
    with Store(url) as store:
        [host] = store.subjects("host")
        assert host.subject == "vm"
        assert [g.split(" (")[0] for g in host.gpus] == ["NVIDIA H200", "NVIDIA H200"]
        assert host.driver and "nvidia 580.159.04" in host.driver
        [scan] = store.latest_scans("host")
        assert scan.target.kind == "host" and len(scan.components) > 100
        # cuDNN from the deb and the wheel of the snapshot
        assert {r.matched_version for r in store.query("cudnn")} == {"9.14.0", "9.19.0.56"}
    # run again: the same snapshot scanned again (same timestamp) is stored once
    p = subprocess.run(["/bin/sh", "-c", c["args"][0]], env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    with Store(url) as store:
        assert len(store.scans()) == 1


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_systemd_units_verify(tmp_path: Path) -> None:
    """systemd-analyze verify checks the ExecStart binary exists: point it at this venv's
    gpusbom (the only change to the units)."""
    gpusbom = Path(sys.executable).parent / "gpusbom"
    assert gpusbom.exists()
    for f in (DEPLOY / "systemd").iterdir():
        (tmp_path / f.name).write_text(f.read_text().replace("/usr/local/bin/gpusbom",
                                                             str(gpusbom)))
    units = sorted(str(p) for p in tmp_path.iterdir())
    assert [Path(u).name for u in units] == ["gpusbom-inventory.service",
                                             "gpusbom-inventory.timer"]
    p = subprocess.run(["systemd-analyze", "verify", *units], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0 and p.stderr.strip() == "", p.stderr
    service = (tmp_path / "gpusbom-inventory.service").read_text()
    assert "scan --host --probe" in service and "--push ${GPUSBOM_INVENTORY_DB}" in service
    # and it does reject a broken unit
    (tmp_path / "broken.service").write_text("[Service]\nType=oneshot\nExecStart=relative\n")
    p = subprocess.run(["systemd-analyze", "verify", str(tmp_path / "broken.service")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode != 0 or p.stderr.strip()


def test_slurm_script() -> None:
    script = DEPLOY / "slurm" / "gpusbom-inventory.sbatch"
    subprocess.run(["bash", "-n", str(script)], check=True)
    text = script.read_text()
    directives = [ln.split(None, 1)[1] for ln in text.splitlines() if ln.startswith("#SBATCH")]
    assert "--ntasks-per-node=1" in directives and "--exclusive" in directives
    assert 'scan --host --probe --quiet --push "$GPUSBOM_INVENTORY_DB"' in text
    # without the database URL it stops before srun, naming what is missing
    p = subprocess.run(["bash", str(script)], env={"PATH": os.environ.get("PATH", "")},
                       capture_output=True, text=True, timeout=30)
    assert p.returncode != 0 and "GPUSBOM_INVENTORY_DB" in p.stderr
