"""The images a node holds: every image in its containerd store (all namespaces) and its
containers-storage stores (Podman, CRI-O), read from disk under the node root (``/``, or a
node's ``/`` mounted at ``/host`` in the DaemonSet), with which ones have running containers.

``gpusbom scan --root /host --images --push DB`` scans each image after the host scan and
stores it in the inventory labelled with the node (``gpusbom.node``), the store, and whether a
container of it runs (``gpusbom.node.running``), so ``inventory query ... --label
gpusbom.node=node-17`` (or the label column) answers per node.

How "running" is read, from disk only (no CRI socket, no daemon call):

* containerd: a container record (``v1/<ns>/containers/<id>``, with its image name) runs
  while the runtime v2 shim's bundle directory
  ``RUN/containerd/io.containerd.runtime.v2.task/<ns>/<id>`` exists (created when the
  task starts, removed when it is deleted); this is how the kubelet's containers appear too;
* containers-storage: a container (``<driver>-containers/containers.json``, with its image
  id) runs while its runtime state ``RUN/containers/storage/<driver>-containers/<id>/
  userdata/pidfile`` exists and, when the node's ``/proc`` is visible under ROOT, names a
  live process. (Not exercised with a running Podman container in the test suite: its
  sandbox does not let runc set Podman's rlimits; created containers are.)

RUN is the node's ``/run``: ``ROOT/run``, or ``$GPUSBOM_NODE_RUN`` where only the runtime
state directories are mounted (the DaemonSet).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from . import settings
from .errors import GpusbomError

if TYPE_CHECKING:
    from .advisories.db import AdvisoryDB


@dataclass
class NodeImage:
    store: str  # "containerd" | "containers-storage"
    ref: str  # what gpusbom scan takes
    name: str
    namespace: str | None = None
    running: bool = False
    containers: list[str] = field(default_factory=list)


def node_run(root: str) -> str:
    """The node's ``/run``: ``$GPUSBOM_NODE_RUN`` (the DaemonSet mounts only the two runtime
    state directories there), else ``ROOT/run``."""
    return settings.raw("node_run") or os.path.join(root, "run")


def _containerd_images(root: str) -> list[NodeImage]:
    from .sources.containerd import containers, list_images

    croot = os.path.join(root, "var/lib/containerd")
    if not os.path.isfile(os.path.join(croot, "io.containerd.metadata.v1.bolt/meta.db")):
        return []
    state = os.path.join(node_run(root), "containerd")
    by_key: dict[tuple[str, str], NodeImage] = {}
    for im in list_images(croot):
        ref = f"containerd:{im.name}?namespace={im.namespace}&dir={croot}"
        by_key[(im.namespace, im.name)] = NodeImage("containerd", ref, im.name, im.namespace)
    for c in containers(croot, state):
        ni = by_key.get((c.namespace, c.image))
        if ni is not None:
            ni.containers.append(c.id)
            ni.running = ni.running or c.running
    return list(by_key.values())


def _pid_alive(root: str, pidfile: str) -> bool:
    try:
        with open(pidfile, encoding="ascii") as f:
            pid = f.read(32).strip()
    except (OSError, UnicodeDecodeError):
        return False
    if not pid.isdigit():
        return False
    proc = os.path.join(root, "proc")
    if not os.path.isdir(os.path.join(proc, "self")):
        return True  # the node's /proc is not visible: the state file is all there is
    return os.path.isdir(os.path.join(proc, pid))


def _storage_images(root: str) -> list[NodeImage]:
    from .sources.containers_storage import list_images, read_store_json

    sroot = os.path.join(root, "var/lib/containers/storage")
    if not os.path.isdir(sroot):
        return []
    out: dict[str, NodeImage] = {}
    for im in list_images(sroot):
        name = im.names[0] if im.names else im.id
        ref = f"containers-storage:{name if im.names else im.id}?dir={sroot}&driver={im.driver}"
        out[f"{im.driver}/{im.id}"] = NodeImage("containers-storage", ref, name)
    run = os.path.join(node_run(root), "containers/storage")
    for drv in ("overlay", "vfs"):
        doc = read_store_json(os.path.join(sroot, f"{drv}-containers", "containers.json"),
                         "containers-storage")
        for c in doc if isinstance(doc, list) else []:
            if not isinstance(c, dict) or not isinstance(c.get("id"), str):
                continue
            ni = out.get(f"{drv}/{c.get('image')}")
            if ni is None:
                continue
            cid = c["id"]
            ni.containers.append(cid)
            if "/" not in cid and cid not in (".", ".."):
                pidfile = os.path.join(run, f"{drv}-containers", cid, "userdata", "pidfile")
                ni.running = ni.running or _pid_alive(root, pidfile)
    return list(out.values())


def node_images(root: str) -> list[NodeImage]:
    """Every image in the node's containerd and containers-storage stores under ``root``."""
    return _containerd_images(root) + _storage_images(root)


def scan_node_images(root: str, node: str, *, push: str | None, quiet: bool = False,
                     advisory_db: AdvisoryDB | None = None) -> tuple[int, list[str]]:
    """Scan every image of the node (and push it, labelled with the node, when ``push``);
    returns (images scanned, failures). A failing image does not stop the others."""
    from .pipeline import ScanRequest, scan

    store = None
    if push:
        from .inventory.store import Store

        store = Store(push)
    failures: list[str] = []
    done = 0
    try:
        for ni in node_images(root):
            try:
                result = scan(ScanRequest(reference=ni.ref, advisory_db=advisory_db))
            except GpusbomError as e:
                failures.append(f"{ni.store} {ni.name}: {e}")
                continue
            labels = {
                "gpusbom.node": node,
                "gpusbom.node.store": ni.store,
                "gpusbom.node.running": "true" if ni.running else "false",
            }
            if ni.namespace:
                labels["gpusbom.node.namespace"] = ni.namespace
            if store is not None:
                store.ingest(result, labels=labels)
            done += 1
            if not quiet:
                state = "running" if ni.running else "not running"
                print(f"gpusbom: node image {ni.store} {ni.name} ({state}): "
                      f"{len(result.components)} components", file=sys.stderr)
    finally:
        if store is not None:
            store.close()
    return done, failures
