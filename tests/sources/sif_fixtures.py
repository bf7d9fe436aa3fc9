"""SIF files made by the reference tooling from the ``demo`` fixture image.

The demo image's OCI layout is unpacked into a root filesystem by ``umoci raw unpack``,
Apptainer's metadata directory is added the way ``apptainer build`` writes it for a Docker
source (``/.singularity.d/Singularity``, ``labels.json``, ``env/10-docker2singularity.sh``
built from the image config: Apptainer itself is not packaged in Debian, so these three
small text files are written here in its format), the tree is packed by ``mksquashfs``
(squashfs-tools) and the SIF is assembled by Debian's ``siftool`` (sylabs/sif): a
definition-file object and the squashfs as the primary system partition, optionally a
signature descriptor. Built once per compression into the fixture cache (file-locked).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from fixtures.build import ensure
from fixtures.fetch import cache_root

FINGERPRINT = "433FE984155206BD962725E20E8713472A879943"


def _run(*args: str) -> None:
    r = subprocess.run(list(args), check=False, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed: {r.stderr.strip()[-2000:]}")


def oci_config(oci_dir: Path) -> dict[str, object]:
    index = json.loads((oci_dir / "index.json").read_text())
    digest = index["manifests"][0]["digest"].split(":", 1)[1]
    manifest = json.loads((oci_dir / "blobs" / "sha256" / digest).read_text())
    cfg = manifest["config"]["digest"].split(":", 1)[1]
    doc: dict[str, object] = json.loads((oci_dir / "blobs" / "sha256" / cfg).read_text())
    return doc


def env_script(env: list[str]) -> str:
    """``10-docker2singularity.sh`` as Apptainer writes it: PATH as is, others defaulted."""
    lines = ["#!/bin/sh"]
    for item in env:
        k, _, v = item.partition("=")
        esc = v.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$").replace("`", "\\`")
        lines.append(f'export {k}="{esc}"' if k == "PATH" else f'export {k}="${{{k}:-"{esc}"}}"')
    return "\n".join(lines) + "\n"


def unpack_rootfs(name: str, dest: Path) -> dict[str, object]:
    """Unpack fixture ``name`` into ``dest`` with umoci; returns its image config."""
    paths = ensure(name)
    with tempfile.TemporaryDirectory(prefix="gpusbom-umoci-") as tmp:
        layout = Path(tmp) / "oci"
        shutil.copytree(paths.oci_dir, layout)  # umoci takes a lock file inside the layout
        _run("umoci", "raw", "unpack", "--image", f"{layout}:{name}", str(dest))
    return oci_config(paths.oci_dir)


def add_singularity_d(rootfs: Path, config: dict[str, object], source: str) -> str:
    cfg = config.get("config") or {}
    assert isinstance(cfg, dict)
    sd = rootfs / ".singularity.d"
    (sd / "env").mkdir(parents=True, exist_ok=True)
    deffile = f"bootstrap: docker-archive\nfrom: {source}\n"
    (sd / "Singularity").write_text(deffile)
    (sd / "labels.json").write_text(json.dumps(cfg.get("Labels") or {}, indent=1))
    (sd / "env" / "10-docker2singularity.sh").write_text(env_script(list(cfg.get("Env") or [])))
    return deffile


def make_sif(
    rootfs: Path, out: Path, comp: str, *, deffile: str | None = None, signed: bool = False
) -> Path:
    work = out.parent / (out.name + ".work")
    work.mkdir(parents=True, exist_ok=True)
    sq = work / "rootfs.sqfs"
    _run("mksquashfs", str(rootfs), str(sq), "-comp", comp, "-noappend", "-all-root",
         "-quiet", "-no-progress")
    tmp = work / "out.sif"
    tmp.unlink(missing_ok=True)
    _run("siftool", "new", str(tmp))
    if deffile is not None:
        (work / "Singularity").write_text(deffile)
        _run("siftool", "add", str(tmp), str(work / "Singularity"), "--datatype", "1")
    _run("siftool", "add", str(tmp), str(sq), "--datatype", "4", "--parttype", "2",
         "--partfs", "1", "--partarch", "2")
    if signed:
        # siftool writes the descriptor; the body is a placeholder (gpusbom lists
        # signature descriptors and their key fingerprints, it does not verify them)
        (work / "sig.asc").write_text("-----BEGIN PGP SIGNED MESSAGE-----\nplaceholder\n")
        _run("siftool", "add", str(tmp), str(work / "sig.asc"), "--datatype", "5",
             "--signentity", FINGERPRINT, "--signhash", "1", "--link", "2")
    os.replace(tmp, out)
    shutil.rmtree(work, ignore_errors=True)
    return out


def demo_sif(comp: str, signed: bool = False) -> Path:
    """The demo fixture as a SIF with a ``comp`` squashfs, built once into the cache."""
    paths = ensure("demo")
    key = hashlib.sha256(
        Path(__file__).read_bytes() + paths.docker_archive.read_bytes()[:1 << 20]
        + str(paths.docker_archive.stat().st_size).encode()
    ).hexdigest()[:12]
    root = cache_root() / f"sif-{key}"
    root.mkdir(parents=True, exist_ok=True)
    out = root / f"demo-{comp}{'-signed' if signed else ''}.sif"
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if out.exists():
            return out
        rootfs = root / "rootfs"
        if not (root / "rootfs.done").exists():
            shutil.rmtree(rootfs, ignore_errors=True)
            config = unpack_rootfs("demo", rootfs)
            add_singularity_d(rootfs, config, paths.tag)
            (root / "rootfs.done").write_text(paths.tag)
        deffile = (rootfs / ".singularity.d" / "Singularity").read_text()
        return make_sif(rootfs, out, comp, deffile=deffile, signed=signed)
