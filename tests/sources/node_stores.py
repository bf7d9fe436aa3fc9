"""Real node image stores for tests: a private containerd (Debian's, started and stopped
here, its root, state and socket under /tmp) with images imported by ``ctr images import``
and one container really running (runc) plus one only created; and Podman stores written
by ``podman load`` (rootful; overlay and vfs drivers), private roots under /tmp.

The running container runs the image's own libc with this machine's ``sleep`` bind-mounted
read-only (the fixture images hold no long-running program; both are Debian 12).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

START_TIMEOUT = 60.0


def _run(*args: str, timeout: float = 300) -> str:
    r = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, check=False)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({r.returncode}): {r.stderr.strip()[-2000:]}")
    return r.stdout


@dataclass
class Containerd:
    root: Path  # containerd's root (what /var/lib/containerd is on a node)
    state: Path  # its state directory (/run/containerd on a node)
    address: str
    images: dict[str, str]  # archive path -> image name as stored
    # container ids: runc keeps its state per namespace under /run/containerd/runc whatever
    # containerd's state directory, so concurrent test daemons need distinct ids
    running_id: str = "c-running"
    created_id: str = "c-created"

    def ctr(self, *args: str, namespace: str = "k8s.io") -> str:
        return _run("ctr", "-a", self.address, "-n", namespace, *args)


@contextmanager
def containerd_daemon(archives: list[Path], namespace: str = "k8s.io",
                      node: Path | None = None) -> Iterator[Containerd]:
    """``node``: lay containerd out as on a node under that root (var/lib/containerd,
    run/containerd)."""
    for tool in ("containerd", "ctr", "runc"):
        assert shutil.which(tool), f"{tool} is missing (scripts/test installs containerd)"
    tmp = Path(tempfile.mkdtemp(prefix="gpusbom-ctd-", dir="/tmp"))
    root, state, sock = tmp / "root", tmp / "state", tmp / "c.sock"
    if node is not None:
        root, state = node / "var/lib/containerd", node / "run/containerd"
    cfg = tmp / "config.toml"
    cfg.write_text(
        "version = 2\n"
        f'root = "{root}"\nstate = "{state}"\n'
        'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n'
        f'[grpc]\n  address = "{sock}"\n'
    )
    log = open(tmp / "containerd.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(["containerd", "--config", str(cfg)], stdout=log,
                            stderr=subprocess.STDOUT)
    # containerd ids: letters and digits joined by single "._-" (a temp name's "_" may end it)
    tag = tmp.name[-8:].replace("_", "0")
    c = Containerd(root, state, str(sock), {}, f"c-running-{tag}", f"c-created-{tag}")
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    "containerd exited: " + (tmp / "containerd.log").read_text()[-2000:]
                )
            r = subprocess.run(["ctr", "-a", str(sock), "version"], capture_output=True,
                               check=False, timeout=10)
            if r.returncode == 0:
                break
            if time.monotonic() > deadline:
                raise RuntimeError("containerd did not answer in time")
            time.sleep(0.3)
        for a in archives:
            out = c.ctr("images", "import", "--snapshotter", "native", str(a),
                        namespace=namespace)
            # "unpacking docker.io/x/y:latest (sha256:...)...done"
            name = out.split("unpacking ", 1)[1].split(" ", 1)[0]
            c.images[str(a)] = name
        yield c
    finally:
        for ns in (namespace, "default"):
            subprocess.run(["ctr", "-a", str(sock), "-n", ns, "task", "kill", "-s", "KILL",
                            c.running_id], capture_output=True, check=False, timeout=30)
            time.sleep(0.2)
            subprocess.run(["ctr", "-a", str(sock), "-n", ns, "task", "delete", "-f",
                            c.running_id], capture_output=True, check=False, timeout=30)
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()
        subprocess.run(["umount", "-R", str(state)], capture_output=True, check=False)
        shutil.rmtree(tmp, ignore_errors=True)


def start_containers(c: Containerd, image: str, namespace: str = "k8s.io") -> None:
    """``c.running_id`` (a task really running under runc) and ``c.created_id`` (no task)."""
    c.ctr("containers", "create", "--snapshotter", "native", image, c.created_id, "/none",
          namespace=namespace)
    c.ctr("run", "-d", "--snapshotter", "native", "--mount",
          "type=bind,src=/usr/bin/sleep,dst=/gpusbom-sleep,options=rbind:ro",
          image, c.running_id, "/gpusbom-sleep", "600", namespace=namespace)


def podman_store(dest: Path, driver: str, archives: list[Path],
                 runroot: Path | None = None, create: bool = False) -> dict[str, str]:
    """``podman load`` each archive into a private store at ``dest``; archive -> image name.
    ``create``: also ``podman create`` a container of each (not started: runc cannot set
    Podman's rlimits in every sandbox)."""
    assert shutil.which("podman"), "podman is missing (scripts/test installs podman)"
    names: dict[str, str] = {}
    # podman wants a runroot of fewer than 50 characters
    run = str(runroot) if runroot else tempfile.mkdtemp(prefix="gp-run-", dir="/tmp")
    base = ["podman", "--root", str(dest), "--runroot", run, "--storage-driver", driver]
    try:
        for a in archives:
            out = _run(*base, "load", "-i", str(a))
            names[str(a)] = out.strip().splitlines()[-1].split("Loaded image: ", 1)[-1].strip()
            if create:
                _run(*base, "create", "--network", "none", names[str(a)], "/none")
    finally:
        if runroot is None:
            shutil.rmtree(run, ignore_errors=True)
    return names  # (no daemon to stop: podman is daemonless)
