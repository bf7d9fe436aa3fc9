"""``gpusbom scan --root NODE --images --push DB``: a node root laid out as on a Kubernetes
or Podman node (containerd under var/lib/containerd and run/containerd, written by a real
containerd with a container running under runc; a Podman store under
var/lib/containers/storage written by ``podman load``/``podman create``) is scanned, and
every image lands in the inventory labelled with the node and whether it runs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from node_stores import containerd_daemon, podman_store, start_containers

from fixtures.build import ensure
from gpusbom.inventory.store import Store
from gpusbom.node_images import node_images

REPO = Path(__file__).resolve().parents[2]


def test_scan_root_images_pushes_every_node_image(tmp_path: Path) -> None:
    top = Path(tempfile.mkdtemp(prefix="gp-node-", dir="/tmp"))  # short: podman's runroot
    node = top / "n"
    try:
        # the committed H200 host snapshot (GPUs, driver) as the node's root, host name node-17
        sys.path.insert(0, str(REPO / "fixtures" / "hosts"))
        from placeholders import materialize

        materialize(REPO / "fixtures" / "hosts" / "h200", node)
        (node / "proc/sys/kernel").mkdir(parents=True, exist_ok=True)
        (node / "proc/sys/kernel/hostname").write_text("node-17\n")
        demo, multi = ensure("demo").docker_archive, ensure("multilayer").docker_archive
        podman = podman_store(node / "var/lib/containers/storage", "overlay", [multi],
                              runroot=node / "run/containers/storage", create=True)
        p_image = podman[str(multi)]
        with containerd_daemon([demo], node=node) as c:
            c_image = c.images[str(demo)]
            start_containers(c, c.images[str(demo)])
            found = {(n.store, n.name): n for n in node_images(str(node))}
            assert set(found) == {("containerd", c.images[str(demo)]),
                                  ("containers-storage", podman[str(multi)])}
            ctd = found[("containerd", c.images[str(demo)])]
            assert ctd.running and sorted(ctd.containers) == sorted([c.created_id, c.running_id])
            pod = found[("containers-storage", podman[str(multi)])]
            assert not pod.running and len(pod.containers) == 1  # created, never started
            # root=: a node's / mounted elsewhere, the stores found at their usual places
            from gpusbom.scan import scan

            t1 = scan(f"containerd:{c_image}?root={node}", advisories=False).target
            t2 = scan(f"containers-storage:{p_image}?root={node}", advisories=False).target
            assert t1.source == "containerd" and t1.manifest_digest
            assert t2.source == "containers-storage" and t2.image_id
            db = f"sqlite:///{tmp_path / 'inv.db'}"
            r = subprocess.run(
                [sys.executable, "-m", "gpusbom", "scan", "--root", str(node), "--images",
                 "--push", db, "-o", f"json={tmp_path / 'host.json'}"],
                capture_output=True, text=True, check=False, timeout=600,
            )
            assert r.returncode == 0, r.stderr
        host = json.loads((tmp_path / "host.json").read_text())
        assert host["target"]["name"] == "node-17"
        with Store(db) as store:
            scans = {s.subject: s for s in store.scans(kind="image")}
            assert len(scans) == 2
            labels = {s.labels["gpusbom.node.store"]: s.labels for s in scans.values()}
            assert labels["containerd"]["gpusbom.node"] == "node-17"
            assert labels["containerd"]["gpusbom.node.running"] == "true"
            assert labels["containerd"]["gpusbom.node.namespace"] == "k8s.io"
            assert labels["containers-storage"]["gpusbom.node.running"] == "false"
        # "which nodes hold an image with this component": per node through the label
        q = subprocess.run(
            [sys.executable, "-m", "gpusbom", "inventory", "query", "base-files", "--kind", "image",
             "--label", "gpusbom.node=node-17", "--format", "json", "--db", db],
            capture_output=True, text=True, check=False,
        )
        assert q.returncode == 0, q.stderr
        rows = json.loads(q.stdout)
        rows = rows["rows"] if isinstance(rows, dict) else rows
        assert rows and {r["kind"] for r in rows} == {"image"}
        assert {r["labels"]["gpusbom.node"] for r in rows} == {"node-17"}
        assert {r["labels"]["gpusbom.node.store"] for r in rows} == {"containerd",
                                                                      "containers-storage"}
        # "which images on which nodes will fail": each node's images against that node
        cmp = subprocess.run(
            [sys.executable, "-m", "gpusbom", "inventory", "compat", "--on-node", "--format",
             "json", "--db", db], capture_output=True, text=True, check=False,
        )
        assert cmp.returncode == 0, cmp.stderr
        pairs = json.loads(cmp.stdout)
        pairs = pairs["rows"] if isinstance(pairs, dict) else pairs
        # both images checked against the node's two H200s, and only against node-17
        assert {(p["image"], p["host"]) for p in pairs} == {(c_image, "node-17"),
                                                           (p_image, "node-17")}
        with Store(db) as store:
            subjects = {s.subject for s in store.scans(kind="image")}
        assert subjects == {c_image, p_image}
    finally:
        subprocess.run(["umount", "-R", str(node / "run")], capture_output=True, check=False)
        shutil.rmtree(top, ignore_errors=True)
