"""NVIDIA's redistrib manifests as a fingerprint source (#38): ``scripts/build_fingerprints.py
--redistrib URL`` and ``gpusbom.fingerprints.redistrib``.

NVIDIA's server (developer.download.nvidia.com) cannot be reached from this machine, so a
redistrib-shaped tree is built here from REAL NVIDIA libraries and served by Python's
``http.server`` on 127.0.0.1, which stands in for developer.download.nvidia.com:

- ``libcudart.so.12`` of the pinned wheel ``nvidia-cuda-runtime-cu12==12.1.105`` (by sha256;
  the wheel ``test_update`` already pins) goes into
  ``cuda_cudart/linux-x86_64/cuda_cudart-linux-x86_64-12.1.105-archive.tar.xz`` as
  ``lib/libcudart.so.12.1.105`` with the ``libcudart.so.12`` and ``libcudart.so`` symlinks
  NVIDIA's archives carry; the manifest (``redistrib_12.1.1.json``: CUDA 12.1.1 shipped cudart
  12.1.105) gives its version, size and sha256;
- ``libcudnn.so.9`` of the pinned ``nvidia-cudnn-cu12==9.1.0.70`` wheel goes into a cuDNN-style
  manifest (platform -> ``cuda12`` -> archive).

The truth is never the builder's output: the wheels' own METADATA versions, ``hashlib`` over
the real file's bytes and binutils' ``readelf`` (build-id, SONAME). What is NOT the real
thing: the archives and manifests are written here (same layout and fields as NVIDIA's, not
NVIDIA's bytes: NVIDIA's redistributable libcudart 12.1.105 may differ from the wheel's).
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import importlib.util
import io
import json
import re
import subprocess
import sys
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from email.parser import HeaderParser
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from fixtures.fetch import Pin  # noqa: E402
from gpusbom.fingerprints import redistrib  # noqa: E402
from gpusbom.fingerprints.database import URL_SOURCE_VERSION, load_path  # noqa: E402
from gpusbom.fingerprints.pypi import UpdateError, session  # noqa: E402

CUDART_121 = Pin("wheel", "nvidia-cuda-runtime-cu12", "12.1.105",
                 "nvidia_cuda_runtime_cu12-12.1.105-py3-none-manylinux1_x86_64.whl",
                 "6e258468ddf5796e25f1dc591a31029fa317d97a0a94ed93468fc86301d61e40", 823596)
CUDNN_91 = Pin("wheel", "nvidia-cudnn-cu12", "9.1.0.70",
               "nvidia_cudnn_cu12-9.1.0.70-py3-none-manylinux2014_x86_64.whl",
               "165764f44ef8c61fcdfdfdbe769d687e06374059fbb388b6c89ecb0e28793a6f", 664752741)


# ------------------------------------------------------------------------------ helpers


def _wheel_lib(pin: Pin, member: str) -> tuple[bytes, str]:
    """(the member's bytes, the wheel's METADATA Version) of a pinned wheel."""
    from fingerprints.test_old_cuda import pinned

    with zipfile.ZipFile(pinned(pin)) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        version = HeaderParser().parsestr(z.read(meta).decode()).get("Version")
        return z.read(member), str(version)


def _readelf(path: Path) -> tuple[str | None, str | None]:
    """(build-id, SONAME) by binutils."""
    notes = subprocess.run(["readelf", "-n", str(path)], capture_output=True, text=True,
                           check=True).stdout
    dyn = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True,
                         check=True).stdout
    bid = next((ln.split("Build ID:")[1].strip() for ln in notes.splitlines()
                if "Build ID:" in ln), None)
    m = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", dyn)
    return bid, (m.group(1) if m else None)


def _tar_xz(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:xz") as tf:
        for info, data in members:
            if data is not None:
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
            else:
                tf.addfile(info)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buf.getvalue())
    return buf.getvalue()


def _reg(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.mode = 0o644
    return info


def _link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info


def _entry(rel: str, data: bytes) -> dict[str, str]:
    """An archive's manifest fields, as NVIDIA writes them (size as a string)."""
    return {"relative_path": rel, "sha256": hashlib.sha256(data).hexdigest(),
            "md5": hashlib.md5(data).hexdigest(), "size": str(len(data))}  # noqa: S324


def _cudart_tree(root: Path, lib: bytes, version: str, *, sha256: str | None = None) -> Path:
    """A redistrib_12.1.1.json tree under ``root`` holding the cudart archive."""
    top = f"cuda_cudart-linux-x86_64-{version}-archive"
    rel = f"cuda_cudart/linux-x86_64/{top}.tar.xz"
    data = _tar_xz(root / rel, [
        (_reg(f"{top}/LICENSE"), b"stand-in licence text written by the test\n"),
        (_reg(f"{top}/lib/libcudart.so.{version}"), lib),
        (_link(f"{top}/lib/libcudart.so.12", f"libcudart.so.{version}"), None),
        (_link(f"{top}/lib/libcudart.so", "libcudart.so.12"), None),
    ])
    entry = _entry(rel, data)
    if sha256 is not None:
        entry["sha256"] = sha256
    doc = {"release_date": "2023-04-18", "release_label": "12.1.1", "release_product": "cuda",
           "cuda_cudart": {"name": "CUDA Runtime (cudart)", "license": "CUDA Toolkit",
                           "license_path": "cuda_cudart/LICENSE.txt", "version": version,
                           "linux-x86_64": entry},
           "cuda_documentation": {"name": "CUDA Documentation", "license": "CUDA Toolkit",
                                  "version": version, "linux-x86_64": entry}}
    man = root / "redistrib_12.1.1.json"
    man.write_text(json.dumps(doc, indent=4))
    return man


class _Server:
    """``http.server`` on 127.0.0.1 serving a directory: stands in for
    developer.download.nvidia.com, which this machine cannot reach."""

    def __init__(self, root: Path) -> None:
        class H(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *a: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(H, directory=str(root)))
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, _Server]]:
    root = tmp_path / "redist"
    root.mkdir()
    srv = _Server(root)
    yield root, srv
    srv.server.shutdown()


def _builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_fingerprints_under_test",
                                                  ROOT / "scripts" / "build_fingerprints.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _build(tmp_path: Path, *refs: str) -> Path:
    """The builder run with --no-pypi (nothing from PyPI: only the manifests) into tmp."""
    out = tmp_path / "out"
    args = ["--no-pypi", "--cache", str(tmp_path / "cache"), "--out", str(out)]
    for r in refs:
        args += ["--redistrib", r]
    assert _builder().main(args) == 0
    return out


# ------------------------------------------------------------------------------ tests


def test_builder_fingerprints_a_served_redistrib_archive(
        served: tuple[Path, _Server], tmp_path: Path) -> None:
    root, srv = served
    lib, version = _wheel_lib(CUDART_121, "nvidia/cuda_runtime/lib/libcudart.so.12")
    assert version == "12.1.105"  # the wheel's own METADATA
    real = tmp_path / "libcudart.so.12"
    real.write_bytes(lib)
    bid, soname = _readelf(real)
    assert bid and soname == "libcudart.so.12"
    _cudart_tree(root, lib, version)
    url = f"{srv.base}/redistrib_12.1.1.json"

    out = _build(tmp_path, url)

    doc = json.loads((out / "fingerprints.json").read_text())
    assert doc["format_version"] == URL_SOURCE_VERSION  # a URL source: format 3
    db = load_path(out / "fingerprints.json")  # the validated loader accepts it
    assert [(r.product, r.version, r.file, r.soname, r.build_id, r.sha256, r.size, r.source)
            for r in db.records] == [
        ("cudart", version, f"libcudart.so.{version}", soname, bid,
         hashlib.sha256(lib).hexdigest(), len(lib), f"{url}#cuda_cudart")]
    m = db.lookup(build_id=bid)
    assert m is not None and (m.product, m.version, m.method) == ("cudart", version, "build-id")
    rel_src = f"nvidia-redistrib:127.0.0.1_{srv.server.server_address[1]}/redistrib_12.1.1.json"
    assert ("cudart", version, rel_src) in {(r.product, r.version, r.source)
                                           for r in db.releases}
    report = (out / "fingerprints-coverage.txt").read_text()
    assert re.search(rf"^{re.escape(url)} cuda_cudart +{re.escape(version)} +ok \(1\)$",
                     report, re.M), report
    # the symlinks of the archive were not followed nor recorded, and said so
    assert "'cuda_cudart-linux-x86_64-12.1.105-archive/lib/libcudart.so.12': a link" in report
    assert "cuda_documentation: no product of gpusbom's catalog; skipped" in report
    assert re.search(r"^cudart +1 +1 +12\.1\.105 \.\. 12\.1\.105$", report, re.M)

    # a second run reuses the cached result (done.jsonl) and writes the same rows
    again = load_path(_build(tmp_path, url) / "fingerprints.json")
    assert again.records == db.records
    # --report-only downloads nothing: with the server gone, the kept manifest and the
    # cached result give the same rows
    srv.server.shutdown()
    srv.server.server_close()
    out = tmp_path / "out"
    assert _builder().main(["--no-pypi", "--report-only", "--cache", str(tmp_path / "cache"),
                            "--out", str(out), "--redistrib", url]) == 0
    assert load_path(out / "fingerprints.json").records == db.records


def test_sha256_mismatch_is_refused_and_nothing_recorded(
        served: tuple[Path, _Server], tmp_path: Path) -> None:
    root, srv = served
    lib, version = _wheel_lib(CUDART_121, "nvidia/cuda_runtime/lib/libcudart.so.12")
    wrong = hashlib.sha256(b"not the archive").hexdigest()
    _cudart_tree(root, lib, version, sha256=wrong)
    url = f"{srv.base}/redistrib_12.1.1.json"
    out = _build(tmp_path, url)
    db = load_path(out / "fingerprints.json")
    assert db.records == ()
    assert db.lookup(sha256=hashlib.sha256(lib).hexdigest()) is None
    report = (out / "fingerprints-coverage.txt").read_text()
    assert re.search(rf"cuda_cudart +{re.escape(version)} +failed: .*sha256 [0-9a-f]{{64}} is "
                     rf"not the manifest's {wrong}; refused", report), report

    # the API: the download is deleted, nothing is left to read
    man = redistrib.parse_manifest((root / "redistrib_12.1.1.json").read_bytes(), url)
    dest = tmp_path / "dl"
    dest.mkdir()
    with pytest.raises(UpdateError, match="is not the manifest's"):
        redistrib.fetch_archive(session(), man, man.archives[0], dest)
    assert list(dest.iterdir()) == []


def test_hostile_members_are_skipped(tmp_path: Path) -> None:
    """``../`` and absolute names, symlinks (to /etc/passwd, to the real library) and hard
    links are never read nor written; nor are a link-time stub (``lib/stubs/libcuda.so``:
    NVIDIA's archives carry them; not cudart) or a name the database cannot hold; the
    regular library still is."""
    lib, version = _wheel_lib(CUDART_121, "nvidia/cuda_runtime/lib/libcudart.so.12")
    root = tmp_path / "redist"
    top = f"cuda_cudart-linux-x86_64-{version}-archive"
    rel = f"cuda_cudart/linux-x86_64/{top}.tar.xz"
    data = _tar_xz(root / rel, [
        (_reg(f"../{top}/lib/libescape.so.12"), lib),
        (_reg(f"{top}/lib/../../libdotdot.so.12"), lib),
        (_reg("/tmp/libabsolute.so.12"), lib),
        (_link(f"{top}/lib/libpasswd.so.1", "/etc/passwd"), None),
        (_link(f"{top}/lib/libup.so.1", "../../../../etc/shadow"), None),
        (_link(f"{top}/lib/libhard.so.1", f"{top}/LICENSE", tarfile.LNKTYPE), None),
        (_reg(f"{top}/lib/stubs/libcuda.so"), lib),
        (_reg(f"{top}/lib/libnew\nline.so.1"), lib),
        (_reg(f"{top}/lib/libcudart.so.{version}"), lib),
    ])
    man_path = root / "redistrib_12.1.1.json"
    man_path.write_text(json.dumps({
        "release_label": "12.1.1", "release_product": "cuda",
        "cuda_cudart": {"name": "CUDA Runtime (cudart)", "version": version,
                        "linux-x86_64": _entry(rel, data)}}))
    man = redistrib.parse_manifest(man_path.read_bytes(), man_path.resolve().as_uri())
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    path = redistrib.fetch_archive(None, man, man.archives[0], scratch)
    recs, notes = redistrib.fingerprint_archive(path, man, man.archives[0], scratch)
    assert [(r.file, r.sha256) for r in recs] == [
        (f"libcudart.so.{version}", hashlib.sha256(lib).hexdigest())]
    assert recs[0].source == f"{man_path.resolve().as_uri()}#cuda_cudart"
    joined = "\n".join(notes)
    for name, why in ((f"../{top}/lib/libescape.so.12", "absolute or '..' name"),
                      (f"{top}/lib/../../libdotdot.so.12", "absolute or '..' name"),
                      ("/tmp/libabsolute.so.12", "absolute or '..' name"),
                      (f"{top}/lib/libpasswd.so.1", "a link (to '/etc/passwd')"),
                      (f"{top}/lib/libup.so.1", "a link"),
                      (f"{top}/lib/libhard.so.1", "a link"),
                      (f"{top}/lib/stubs/libcuda.so", "a link-time stub"),
                      (f"{top}/lib/libnew\nline.so.1", "not a printable file name")):
        assert f"{name!r}: {why}" in joined, joined
    assert len(notes) == 8
    # nothing was extracted: the scratch directory holds the archive only, no file escaped
    assert sorted(p.name for p in scratch.iterdir()) == [path.name]
    assert not (tmp_path / top).exists() and not Path("/tmp/libabsolute.so.12").exists()


def test_manifest_paths_outside_its_directory_are_skipped(tmp_path: Path) -> None:
    doc: dict[str, object] = {"release_label": "12.1.1", "release_product": "cuda"}
    for key, rel in (("cuda_cudart", "../cuda_cudart/x.tar.xz"),
                     ("libcublas", "/etc/passwd.tar.xz"),
                     ("libcufft", "https://elsewhere.example/x.tar.xz"),
                     ("libcurand", "libcurand/./x.tar.xz")):
        doc[key] = {"name": key, "version": "12.1.105",
                    "linux-x86_64": {"relative_path": rel, "sha256": "ab" * 32, "size": "1"}}
    man = redistrib.parse_manifest(json.dumps(doc).encode(),
                                   (tmp_path / "redistrib_x.json").as_uri())
    assert man.archives == []
    assert len([n for n in man.notes if "is not a relative .tar.xz path" in n]) == 4


def test_oversize_manifest_is_refused(served: tuple[Path, _Server], tmp_path: Path) -> None:
    root, srv = served
    big = json.dumps({"release_label": "12.1.1", "release_product": "cuda",
                      "pad": "x" * redistrib.MAX_MANIFEST}).encode()
    assert len(big) > redistrib.MAX_MANIFEST
    (root / "redistrib_big.json").write_bytes(big)
    url = f"{srv.base}/redistrib_big.json"
    with pytest.raises(UpdateError, match="manifest larger than"):
        redistrib.read_manifest(session(), url)
    with pytest.raises(UpdateError, match="manifest larger than"):
        redistrib.read_manifest(None, str(root / "redistrib_big.json"))
    with pytest.raises(UpdateError, match="manifest larger than"):
        redistrib.parse_manifest(big, url)
    out = _build(tmp_path, url)
    assert load_path(out / "fingerprints.json").records == ()
    assert f"{url} - " in (out / "fingerprints-coverage.txt").read_text()
    assert "refused: " in (out / "fingerprints-coverage.txt").read_text()


def _cudnn_manifest(variants: dict[str, object], version: str) -> bytes:
    return json.dumps({
        "release_date": "2024-04-16", "release_label": "9.1.0", "release_product": "cudnn",
        "cudnn": {"name": "NVIDIA CUDA Deep Neural Network library", "license": "cudnn",
                  "license_path": "cudnn/LICENSE.txt", "version": version,
                  "cuda_variant": ["11", "12"],  # cuDNN's manifests list them; not read
                  "linux-x86_64": variants,
                  "linux-sbsa": variants}}).encode()


def test_cudnn_style_nested_manifest_parses() -> None:
    """Platform -> CUDA variant -> archive (cuDNN's layout). The archives' sha256 here are of
    stand-in bytes: only parsing is checked."""
    cu11, cu12 = b"stand-in cuda11 archive", b"stand-in cuda12 archive"
    variants: dict[str, object] = {
        "cuda11": _entry("cudnn/linux-x86_64/cudnn-linux-x86_64-9.1.0.70_cuda11-archive.tar.xz",
                         cu11),
        "cuda12": _entry("cudnn/linux-x86_64/cudnn-linux-x86_64-9.1.0.70_cuda12-archive.tar.xz",
                         cu12),
        "note": "not a variant"}
    man = redistrib.parse_manifest(_cudnn_manifest(variants, "9.1.0.70"),
                                   "https://developer.download.nvidia.com/compute/cudnn/redist/"
                                   "redistrib_9.1.0.json")
    assert (man.release_product, man.release_label) == ("cudnn", "9.1.0")
    assert [(a.label, a.product, a.version, a.sha256, a.size) for a in man.archives] == [
        ("cudnn.cuda11", "cudnn", "9.1.0.70", hashlib.sha256(cu11).hexdigest(), len(cu11)),
        ("cudnn.cuda12", "cudnn", "9.1.0.70", hashlib.sha256(cu12).hexdigest(), len(cu12))]
    assert any("'note' is not a CUDA variant" in n for n in man.notes)
    assert man.source(man.archives[1]).endswith("redistrib_9.1.0.json#cudnn.cuda12")


def test_cudnn_style_manifest_end_to_end(served: tuple[Path, _Server], tmp_path: Path) -> None:
    """The real libcudnn.so.9 of cuDNN 9.1.0.70 in a cuda12 variant archive, served."""
    root, srv = served
    lib, version = _wheel_lib(CUDNN_91, "nvidia/cudnn/lib/libcudnn.so.9")
    assert version == "9.1.0.70"
    real = tmp_path / "libcudnn.so.9"
    real.write_bytes(lib)
    bid, soname = _readelf(real)
    top = f"cudnn-linux-x86_64-{version}_cuda12-archive"
    rel = f"cudnn/linux-x86_64/{top}.tar.xz"
    # NVIDIA's cuDNN archives name the file by three numbers (lib/libcudnn.so.9.1.0)
    short = ".".join(version.split(".")[:3])
    data = _tar_xz(root / rel, [(_reg(f"{top}/lib/libcudnn.so.{short}"), lib),
                                (_link(f"{top}/lib/libcudnn.so.9", f"libcudnn.so.{short}"),
                                 None)])
    (root / "redistrib_9.1.0.json").write_bytes(
        _cudnn_manifest({"cuda12": _entry(rel, data)}, version))
    url = f"{srv.base}/redistrib_9.1.0.json"
    db = load_path(_build(tmp_path, url) / "fingerprints.json")
    assert [(r.product, r.version, r.file, r.soname, r.build_id, r.sha256, r.source)
            for r in db.records] == [
        ("cudnn", version, f"libcudnn.so.{short}", soname, bid, hashlib.sha256(lib).hexdigest(),
         f"{url}#cudnn.cuda12")]


def test_a_local_directory_of_manifests(tmp_path: Path) -> None:
    """``--redistrib DIR``: every redistrib_*.json there, read from disk (file:// source)."""
    lib, version = _wheel_lib(CUDART_121, "nvidia/cuda_runtime/lib/libcudart.so.12")
    root = tmp_path / "mirror"
    man = _cudart_tree(root, lib, version)
    db = load_path(_build(tmp_path, str(root)) / "fingerprints.json")
    assert [(r.product, r.version, r.sha256, r.source) for r in db.records] == [
        ("cudart", version, hashlib.sha256(lib).hexdigest(),
         f"{man.resolve().as_uri()}#cuda_cudart")]


def test_url_sources_need_format_version_3() -> None:
    """A URL source is written as format version 3 (a reader of 1 and 2 says "a newer gpusbom
    wrote it"); a version 2 document with one is refused; a PyPI-only database stays 2."""
    from gpusbom.fingerprints.database import (
        COLUMNS,
        FORMAT,
        FORMAT_VERSION,
        FingerprintDB,
        FingerprintError,
        Record,
        load_bytes,
    )

    url_row = ["cudart", "12.1.105", "libcudart.so.12.1.105", "libcudart.so.12", "ab" * 20,
               "cd" * 32, 1, "https://developer.download.nvidia.com/compute/cuda/redist/"
               "redistrib_12.1.1.json#cuda_cudart"]

    def doc(version: int, row: list[object]) -> bytes:
        return json.dumps({"format": FORMAT, "format_version": version, "columns": list(COLUMNS),
                           "rows": [row]}).encode()

    assert len(load_bytes(doc(3, url_row), name="v3")) == 1
    with pytest.raises(FingerprintError, match="bad source"):
        load_bytes(doc(2, url_row), name="v2")
    for bad in ("https://user@host/redistrib.json#c", "https://host/a/../redistrib.json#c",
                "https://host/redistrib.json?x=1#c", "https://host/redistrib.json"):
        with pytest.raises(FingerprintError, match="bad source"):
            load_bytes(doc(3, [*url_row[:7], bad]), name="v3")
    pypi_rec = Record("cudart", "12.1.105", "libcudart.so.12", None, None, "cd" * 32, 1,
                      "pypi:nvidia-cuda-runtime-cu12==12.1.105")
    assert FingerprintDB([pypi_rec]).to_document()["format_version"] == FORMAT_VERSION == 2
    url_rec = Record(*url_row)  # type: ignore[arg-type]
    assert FingerprintDB([pypi_rec, url_rec]).to_document()["format_version"] == 3


def test_cli_update_with_redistrib(served: tuple[Path, _Server], tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    """``gpusbom fingerprints update --redistrib URL``: the archive the database lacks is
    fingerprinted into the user copy (scans use it); a second update adds nothing. The package
    index is test_update's loopback PEP 691 index (PyPI's stand-in) holding only the
    cuda-toolkit metapackage written there."""
    from fingerprints.test_update import _Index, _toolkit_wheel
    from gpusbom.cli.app import main
    from gpusbom.fingerprints import active

    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    monkeypatch.setenv("GPUSBOM_CACHE_DIR", str(cache))
    active.clear()
    root, srv = served
    lib, version = _wheel_lib(CUDART_121, "nvidia/cuda_runtime/lib/libcudart.so.12")
    _cudart_tree(root, lib, version)
    url = f"{srv.base}/redistrib_12.1.1.json"
    idx = _Index({"cuda-toolkit": ("cuda_toolkit-12.0.0-py2.py3-none-any.whl", "12.0.0",
                                   _toolkit_wheel())})
    try:
        args = ["fingerprints", "update", "-q", "--index", idx.url,
                "--dist", "nvidia-cuda-runtime-cu12", "--redistrib", url]
        assert main(args) == 0
        out = capsys.readouterr().out
        assert f"fingerprinted: 1 new wheel(s) or archive(s): {url}#cuda_cudart {version} (1)" \
            in out, out
        user = cache / "fingerprints" / "fingerprints.json"
        assert json.loads(user.read_text())["format_version"] == URL_SOURCE_VERSION
        active.clear()
        db = active.load_active()
        assert db.source == str(user)
        m = db.lookup(sha256=hashlib.sha256(lib).hexdigest())
        assert m is not None and (m.product, m.version, m.record.source) == (
            "cudart", version, f"{url}#cuda_cudart")
        assert main(args) == 0
        assert "fingerprinted: 0 new wheel(s)\n" in capsys.readouterr().out
    finally:
        idx.server.shutdown()
        active.clear()


def test_archive_larger_than_the_manifest_says_or_not_xz(tmp_path: Path) -> None:
    """An archive longer than the manifest's ``size`` is cut off and refused (never read);
    one whose checksum matches but is no .tar.xz is an error, not a crash."""
    lib, version = _wheel_lib(CUDART_121, "nvidia/cuda_runtime/lib/libcudart.so.12")
    root = tmp_path / "redist"
    man_path = _cudart_tree(root, lib, version)
    doc = json.loads(man_path.read_text())
    real_size = int(doc["cuda_cudart"]["linux-x86_64"]["size"])
    doc["cuda_cudart"]["linux-x86_64"]["size"] = str(real_size - 1)
    man_path.write_text(json.dumps(doc))
    man = redistrib.parse_manifest(man_path.read_bytes(), man_path.resolve().as_uri())
    dest = tmp_path / "dl"
    dest.mkdir()
    with pytest.raises(UpdateError, match=f"larger than {real_size - 1} bytes; refused"):
        redistrib.fetch_archive(None, man, man.archives[0], dest)
    assert list(dest.iterdir()) == []

    rel = "cuda_cudart/linux-x86_64/not-xz.tar.xz"
    junk = b"this is not an xz stream" * 10
    (root / rel).write_bytes(junk)
    doc["cuda_cudart"]["linux-x86_64"] = _entry(rel, junk)
    man_path.write_text(json.dumps(doc))
    man = redistrib.parse_manifest(man_path.read_bytes(), man_path.resolve().as_uri())
    path = redistrib.fetch_archive(None, man, man.archives[0], dest)
    with pytest.raises(UpdateError, match="not a readable .tar.xz"):
        redistrib.fingerprint_archive(path, man, man.archives[0], dest)
