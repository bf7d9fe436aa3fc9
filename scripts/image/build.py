"""Build gpusbom's OCI image: ``scripts/build-image`` runs this (docs/deploy.md).

Inputs, all pinned in this directory:

* ``debian.lock``: every Debian package of the root filesystem (name, version, arch) as
  ``mmdebstrap --variant=minbase --include=<INCLUDE>`` installs it from the machine's apt
  sources. The build fails when the mirror would install anything else (``--update-lock``
  rewrites the lock after a Debian point release).
* ``requirements.lock``: gpusbom's Python dependencies, ``name==version --hash=sha256:...``
  (wheels only, verified by pip), installed with the gpusbom wheel built from this tree.

Two layers: the mmdebstrap tarball as it is (mmdebstrap is bit-for-bit reproducible under
``SOURCE_DATE_EPOCH``), and the Python packages under /usr/local/lib/python3.11/dist-packages
tarred here (sorted, uid/gid 0, mtime clamped to ``SOURCE_DATE_EPOCH``, no .pyc). Layers
are gzip'd with mtime 0 and the OCI layout is written here; nothing runs inside the image.
The image's SBOM (``gpusbom scan`` of the layout, this tree's code) is attached to the
layout as an OCI referrer of the image manifest (an in-toto Statement with the CycloneDX
predicate) and written beside it.

Caches (``--cache``, default ~/.cache/gpusbom/image): the root filesystem keyed by
``debian.lock``, the wheels by their hashes, the image by the hash of every input.
"""

from __future__ import annotations

import argparse
import fcntl
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SUITE = "bookworm"
INCLUDE = ("python3", "ca-certificates")
PY_SITE = "usr/local/lib/python3.11/dist-packages"
DEFAULT_EPOCH = 1735689600  # 2025-01-01: the image's clock unless SOURCE_DATE_EPOCH says
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
DIGEST_RE = re.compile(r"@sha256:[0-9a-f]{64}")
CHUNK = 1 << 20


def log(msg: str) -> None:
    print(f"build-image: {msg}", file=sys.stderr, flush=True)


def sha256_file(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, **kw)  # type: ignore[call-overload]  # noqa: S603
    if proc.returncode != 0:
        sys.exit(f"build-image: {' '.join(cmd[:3])} ... failed ({proc.returncode}):\n"
                 f"{proc.stderr[-3000:]}")
    return proc  # type: ignore[no-any-return]


def apt_sources() -> Path:
    """The machine's apt sources, handed to mmdebstrap (no mirror is named here)."""
    for p in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")):
        if SUITE in p.read_text(errors="replace"):
            return p
    p = Path("/etc/apt/sources.list")
    if p.is_file() and SUITE in p.read_text(errors="replace"):
        return p
    sys.exit(f"build-image: no apt source for Debian {SUITE} on this machine")


# ------------------------------------------------------------------ Debian root filesystem

def dpkg_packages(rootfs_tar: Path) -> list[str]:
    with tarfile.open(rootfs_tar) as tf:
        member = tf.extractfile("./var/lib/dpkg/status")
        assert member is not None
        text = member.read().decode()
    out = []
    for stanza in text.split("\n\n"):
        f = dict(re.findall(r"^([A-Za-z-]+): (.*)$", stanza, re.M))
        if f.get("Package") and "installed" in f.get("Status", ""):
            out.append(f"{f['Package']} {f['Version']} {f['Architecture']}")
    return sorted(out)


def read_lock(name: str) -> list[str]:
    p = HERE / name
    if not p.exists():
        return []
    return [ln for ln in p.read_text().splitlines() if ln and not ln.startswith("#")]


def write_lock(name: str, header: str, lines: list[str]) -> None:
    (HERE / name).write_text(header + "".join(f"{ln}\n" for ln in lines))
    log(f"wrote scripts/image/{name} ({len(lines)} entries)")


def build_rootfs(cache: Path, epoch: int, update: bool) -> Path:
    lock = read_lock("debian.lock")
    key = hashlib.sha256(json.dumps([SUITE, INCLUDE, lock, epoch]).encode()).hexdigest()[:16]
    out = cache / f"rootfs-{key}.tar"
    if out.exists() and not update:
        return out
    pins = {ln.split()[0]: ln.split()[1] for ln in lock}
    include = ",".join(f"{p}={pins[p]}" if p in pins else p for p in INCLUDE)
    tmp = out.with_name(out.stem + ".partial.tar")
    log(f"mmdebstrap {SUITE} minbase + {include}")
    run(["mmdebstrap", "--variant=minbase", f"--include={include}", "--quiet", SUITE, str(tmp),
         str(apt_sources())], env={**os.environ, "SOURCE_DATE_EPOCH": str(epoch)})
    got = dpkg_packages(tmp)
    if update:
        write_lock("debian.lock", "# name version arch of every package in gpusbom's image "
                   "(scripts/build-image --update-lock)\n", got)
    elif got != lock:
        extra = sorted(set(got) - set(lock))[:5]
        missing = sorted(set(lock) - set(got))[:5]
        tmp.unlink()
        sys.exit(f"build-image: the Debian mirror no longer gives scripts/image/debian.lock "
                 f"(new: {extra}; gone: {missing}); review and run --update-lock")
    tmp.rename(out)
    return out


# ------------------------------------------------------------------ Python packages

def wheel_lock_path(root: Path) -> Path:
    """The lock every in-tree ``pip wheel`` of this checkout takes (this script and
    tests/packaging): setuptools builds in the tree's ``build/`` and ``*.egg-info``, and two
    builds at once fail with 'File exists' or pack each other's files."""
    key = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"gpusbom-wheel-build-{key}.lock"


def build_wheel(work: Path, epoch: int) -> Path:
    dest = work / "dist"
    with open(wheel_lock_path(ROOT), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dest),
             str(ROOT)], env={**os.environ, "SOURCE_DATE_EPOCH": str(epoch)})
    (whl,) = dest.glob("gpusbom-*.whl")
    return whl


def update_requirements(whl: Path, work: Path) -> None:
    d = work / "resolve"
    run([sys.executable, "-m", "pip", "download", "-q", "--only-binary", ":all:", "--dest",
         str(d), str(whl)])
    lines = []
    for f in sorted(d.glob("*.whl")):
        if f.name.startswith("gpusbom-"):
            continue
        name, version = f.name.split("-")[:2]
        lines.append(f"{name.lower().replace('_', '-')}=={version} "
                     f"--hash={sha256_file(f).replace(':', '=', 1).replace('=', ':', 0)}")
    write_lock("requirements.lock", "# gpusbom's Python dependencies in its image, wheels "
               "with their sha256 (scripts/build-image --update-lock)\n",
               [ln.replace("--hash=sha256=", "--hash=sha256:") for ln in lines])


def fetch_wheels(cache: Path) -> Path:
    lock = read_lock("requirements.lock")
    key = hashlib.sha256("\n".join(lock).encode()).hexdigest()[:16]
    d = cache / f"wheels-{key}"
    if not (d / ".complete").exists():
        log(f"pip download {len(lock)} pinned wheels")
        run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary",
             ":all:", "--require-hashes", "-r", str(HERE / "requirements.lock"),
             "--dest", str(d)])
        (d / ".complete").write_text("")
    return d


def stage_python(work: Path, whl: Path, wheels: Path) -> Path:
    stage = work / "stage"
    site = stage / PY_SITE
    files = sorted(str(p) for p in wheels.glob("*.whl")) + [str(whl)]
    run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--no-compile",
         "--disable-pip-version-check", "--target", str(site), *files])
    shutil.rmtree(site / "bin", ignore_errors=True)  # console scripts with this host's shebang
    for di in site.glob("*.dist-info"):
        # the local wheel paths (this machine's) would make the layer differ between machines
        (di / "direct_url.json").unlink(missing_ok=True)
        rec = di / "RECORD"
        if rec.exists():
            # and the console scripts removed above: their hashes cover a shebang naming the
            # Python that ran this build, so the layer depended on the checkout's path
            rec.write_text("".join(ln + "\n" for ln in rec.read_text().splitlines()
                                   if not ln.split(",", 1)[0].endswith("direct_url.json")
                                   and not ln.startswith("../../bin/")))
    bindir = stage / "usr/local/bin"
    bindir.mkdir(parents=True)
    (bindir / "gpusbom").write_text("#!/usr/bin/python3\nimport sys\nfrom gpusbom.cli import run"
                                    "\nsys.exit(run())\n")
    (bindir / "gpusbom").chmod(0o755)
    return stage


def tar_tree(stage: Path, out: Path, epoch: int) -> None:
    """A deterministic tar of ``stage``: sorted, root-owned, mtimes clamped."""
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tf:
        for dirpath, dirnames, filenames in os.walk(stage):
            dirnames.sort()
            for name in sorted(dirnames) + sorted(filenames):
                p = Path(dirpath) / name
                rel = p.relative_to(stage).as_posix()
                ti = tf.gettarinfo(str(p), arcname=rel)
                ti.uid = ti.gid = 0
                ti.uname = ti.gname = "root"
                ti.mtime = min(int(ti.mtime), epoch)
                ti.pax_headers = {}
                if ti.isreg():
                    ti.mode = 0o755 if ti.mode & 0o111 else 0o644
                    with open(p, "rb") as f:
                        tf.addfile(ti, f)
                else:
                    if ti.isdir():
                        ti.mode = 0o755
                    tf.addfile(ti)


# ------------------------------------------------------------------ OCI layout

def gzip_blob(src: Path, blobs: Path) -> dict[str, object]:
    tmp = blobs / ".tmp"
    with open(src, "rb") as fi, open(tmp, "wb") as raw, \
            gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="", compresslevel=6) as gz:
        while chunk := fi.read(CHUNK):
            gz.write(chunk)
    digest = sha256_file(tmp)
    tmp.rename(blobs / digest.split(":")[1])
    return {"mediaType": OCI_LAYER, "digest": digest, "size": (blobs / digest[7:]).stat().st_size}


def put_blob(blobs: Path, data: bytes) -> str:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    (blobs / digest[7:]).write_bytes(data)
    return digest


def dumps(doc: object) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def write_layout(layout: Path, layers: list[Path], epoch: int, version: str) -> str:
    blobs = layout / "blobs/sha256"
    blobs.mkdir(parents=True)
    descs = [gzip_blob(t, blobs) for t in layers]
    created = __import__("datetime").datetime.fromtimestamp(
        epoch, __import__("datetime").timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    diff_ids = [sha256_file(t) for t in layers]
    labels = {"org.opencontainers.image.title": "gpusbom",
              "org.opencontainers.image.version": version,
              "org.opencontainers.image.licenses": "Apache-2.0",
              "org.opencontainers.image.created": created,
              "org.opencontainers.image.base.name": f"debian:{SUITE} (mmdebstrap minbase)"}
    config = {"architecture": "amd64", "os": "linux", "created": created,
              "config": {"Entrypoint": ["/usr/local/bin/gpusbom"], "Cmd": ["--help"],
                         "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                                 "PYTHONDONTWRITEBYTECODE=1", "LANG=C.UTF-8"],
                         "WorkingDir": "/", "Labels": labels},
              "rootfs": {"type": "layers", "diff_ids": diff_ids},
              "history": [{"created": created, "created_by": f"mmdebstrap --variant=minbase "
                           f"--include={','.join(INCLUDE)} {SUITE} (scripts/image/debian.lock)"},
                          {"created": created, "created_by": "pip install --target "
                           f"/{PY_SITE} gpusbom {version} (scripts/image/requirements.lock)"}]}
    cbytes = dumps(config)
    manifest = {"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                "config": {"mediaType": OCI_CONFIG, "digest": put_blob(blobs, cbytes),
                           "size": len(cbytes)},
                "layers": descs, "annotations": {"org.opencontainers.image.created": created}}
    mbytes = dumps(manifest)
    mdigest = put_blob(blobs, mbytes)
    index = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [
        {"mediaType": OCI_MANIFEST, "digest": mdigest, "size": len(mbytes),
         "annotations": {"org.opencontainers.image.ref.name": version}}]}
    (layout / "index.json").write_bytes(dumps(index))
    (layout / "oci-layout").write_bytes(dumps({"imageLayoutVersion": "1.0.0"}))
    return mdigest


def attach_sbom(layout: Path, out: Path, version: str, epoch: int) -> tuple[Path, str]:
    """Scan the layout with this tree's gpusbom; attach the CycloneDX statement as a
    referrer of the image manifest (OCI layouts list referrers in index.json)."""
    sbom, bundle = out / "gpusbom.cdx.json", out / "gpusbom.intoto.jsonl"
    env = {**os.environ, "SOURCE_DATE_EPOCH": str(epoch), "PYTHONPATH": str(ROOT / "src")}
    run([sys.executable, "-m", "gpusbom", "scan", f"oci:{layout}:{version}", "-q",
         "-o", f"cyclonedx-json={sbom}", "-o", f"in-toto={bundle}"], env=env)
    import base64

    line = next(ln for ln in bundle.read_text().splitlines()
                if b"cyclonedx.org/bom" in base64.b64decode(json.loads(ln)["payload"]))
    statement = base64.b64decode(json.loads(line)["payload"])
    blobs = layout / "blobs/sha256"
    index = json.loads((layout / "index.json").read_text())
    subject = dict(index["manifests"][0])
    subject.pop("annotations", None)
    empty = put_blob(blobs, b"{}")
    art = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": "application/vnd.in-toto+json",
           "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": empty, "size": 2},
           "layers": [{"mediaType": "application/vnd.in-toto+json", "digest": put_blob(blobs, statement),
                       "size": len(statement),
                       "annotations": {"in-toto.io/predicate-type": "https://cyclonedx.org/bom"}}],
           "subject": subject,
           "annotations": {"in-toto.io/predicate-type": "https://cyclonedx.org/bom"}}
    abytes = dumps(art)
    adigest = put_blob(blobs, abytes)
    index["manifests"].append({"mediaType": OCI_MANIFEST, "digest": adigest, "size": len(abytes),
                               "artifactType": art["artifactType"],
                               "annotations": art["annotations"]})
    (layout / "index.json").write_bytes(dumps(index))
    return sbom, adigest


# ------------------------------------------------------------------ deploy manifests

def render_deploy(out: Path, repository: str, digest: str) -> list[Path]:
    """deploy/kubernetes with every ``image: gpusbom@sha256:...`` set to this image."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for src in sorted((ROOT / "deploy/kubernetes").glob("*.yaml")):
        text = re.sub(r"(image:\s*)gpusbom@sha256:[0-9a-f]{64}",
                      lambda m: f"{m.group(1)}{repository}@{digest}", src.read_text())
        (out / src.name).write_text(text)
        written.append(out / src.name)
    return written


# ------------------------------------------------------------------ main

def version() -> str:
    m = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert m
    return m.group(1)


def build(cache: Path, epoch: int, update: bool, use_image_cache: bool) -> dict[str, str]:
    """One build at a time per cache directory: two builds sharing a cache (two test workers,
    two shells) would write the same root filesystem, wheel directory and final layout."""
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build(cache, epoch, update, use_image_cache)


def _build(cache: Path, epoch: int, update: bool, use_image_cache: bool) -> dict[str, str]:
    ver = version()
    with tempfile.TemporaryDirectory(prefix="gpusbom-image-", dir=cache) as tmpd:
        work = Path(tmpd)
        whl = build_wheel(work, epoch)
        if update:
            update_requirements(whl, work)
        rootfs = build_rootfs(cache, epoch, update)
        wheels = fetch_wheels(cache)
        key = hashlib.sha256(json.dumps([
            sha256_file(rootfs), sha256_file(whl), read_lock("requirements.lock"), epoch,
            sha256_file(Path(__file__))]).encode()).hexdigest()[:16]
        final = cache / f"image-{key}"
        if use_image_cache and (final / "result.json").exists():
            log(f"cached: {final}")
            return json.loads((final / "result.json").read_text())  # type: ignore[no-any-return]
        log("installing the Python packages")
        stage = stage_python(work, whl, wheels)
        py_tar = work / "python.tar"
        tar_tree(stage, py_tar, epoch)
        out = work / "out"
        layout = out / "layout"
        log("writing the OCI layout")
        digest = write_layout(layout, [rootfs, py_tar], epoch, ver)
        log("scanning it (its own SBOM)")
        sbom, referrer = attach_sbom(layout, out, ver, epoch)
        result = {"digest": digest, "tag": ver, "layout": str(final / "layout"),
                  "reference": f"oci:{final / 'layout'}:{ver}", "sbom": str(final / sbom.name),
                  "sbom_referrer": referrer, "key": key}
        (out / "result.json").write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
        if final.exists():
            shutil.rmtree(final)
        out.rename(final)
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/build-image", description=__doc__.split("\n")[0])
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache/gpusbom/image")
    ap.add_argument("--update-lock", action="store_true",
                    help="re-resolve and rewrite debian.lock and requirements.lock")
    ap.add_argument("--no-cache", action="store_true", help="rebuild the image (not the "
                    "root filesystem or the wheels) even when a cached one has the same inputs")
    ap.add_argument("--check-reproducible", action="store_true",
                    help="build twice from scratch (root filesystem too); fail unless the "
                    "digests are equal")
    ap.add_argument("--deploy-out", type=Path, help="write deploy/kubernetes here with the "
                    "image referenced by digest")
    ap.add_argument("--repository", default="gpusbom",
                    help="repository the image is published to (for --deploy-out)")
    ap.add_argument("--push", metavar="REF", help="also copy it to a registry (skopeo; "
                    "REF like HOST/REPO:TAG) with its SBOM attached there (gpusbom attest)")
    ap.add_argument("--insecure-registry", action="store_true", help="with --push: plain HTTP")
    args = ap.parse_args(argv)
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH") or DEFAULT_EPOCH)
    if args.check_reproducible:
        digests = []
        for i in (1, 2):
            with tempfile.TemporaryDirectory(prefix=f"gpusbom-repro{i}-") as d:
                digests.append(build(Path(d), epoch, False, False)["digest"])
        log(f"build 1: {digests[0]}\nbuild-image: build 2: {digests[1]}")
        if digests[0] != digests[1]:
            return 1
    result = build(args.cache, epoch, args.update_lock, not args.no_cache)
    if args.deploy_out:
        render_deploy(args.deploy_out, args.repository, result["digest"])
    if args.push:
        tls = ["--dest-tls-verify=false"] if args.insecure_registry else []
        run(["skopeo", "--insecure-policy", "copy", "--quiet", "--preserve-digests", *tls,
             result["reference"], f"docker://{args.push}"])
        insecure = ["--insecure-registry", args.push.split("/", 1)[0]] \
            if args.insecure_registry else []
        run([sys.executable, "-m", "gpusbom", "attest", f"registry:{args.push}", "--push", "-q",
             *insecure], env={**os.environ, "SOURCE_DATE_EPOCH": str(epoch),
                              "PYTHONPATH": str(ROOT / "src")})
    print(json.dumps(result, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
