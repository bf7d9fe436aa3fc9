"""Fuzz targets: every parser of untrusted bytes in gpusbom, one function each.

A target takes the fuzzer's bytes and feeds them to one parser the way a scan does. A
parser may reject input only with the exceptions it documents (``REJECT``: gpusbom's
``InputError`` family and the ``ValueError``s the parsers name); anything else, a hang
(libFuzzer ``-timeout``) or a memory blow-up (``-rss_limit_mb``) is a finding.

``fuzz/run.py NAME`` runs one target under atheris (coverage-guided); ``scripts/fuzz``
runs them all; ``fuzz/seeds.py`` builds the seed corpus from the test fixtures.
"""

from __future__ import annotations

import io
import json
import os
import sqlite3
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

from gpusbom.errors import GpusbomError  # noqa: E402
from gpusbom.fsview.layercodec import CacheFormatError  # noqa: E402

# tempfile spools of the targets live in one directory per process
_TMP = tempfile.mkdtemp(prefix="gpusbom-fuzz-")
os.environ.setdefault("TMPDIR", _TMP)

Target = Callable[[bytes], None]
TARGETS: dict[str, Target] = {}
REJECTS: dict[str, tuple[type[BaseException], ...]] = {}


def target(name: str, *rejects: type[BaseException]) -> Callable[[Target], Target]:
    def deco(fn: Target) -> Target:
        TARGETS[name] = fn
        REJECTS[name] = (GpusbomError, *rejects)
        return fn

    return deco


def _limits() -> Any:
    from gpusbom.fsview.types import Limits

    # small bounds so that a hostile input hits them in a fuzzing run's time
    return Limits(max_header_bytes=64 << 10, max_entries_per_layer=10_000,
                  max_kept_records=20_000, max_memory_content=64 << 10,
                  max_spool_bytes=64 << 20, max_layer_uncompressed=256 << 20)


# --------------------------------------------------------------------------- archives


@target("tar")
def fuzz_tar(data: bytes) -> None:
    """Tar headers and the streaming reader (pax, GNU long names, base-256, sparse)."""
    from gpusbom.fsview.tarstream import iter_tar

    for m in iter_tar(io.BytesIO(data), limits=_limits(), name="fuzz.tar"):
        _ = (m.name, m.linkname, m.kind, m.mode, m.uid, m.gid, m.mtime)
        if m.size and m.size < 4096:
            m.read(m.size)


@target("layer")
def fuzz_layer(data: bytes) -> None:
    """A whole layer blob: decompression, tar, whiteouts, links, captured content."""
    from gpusbom.fsview.layer import read_layer
    from gpusbom.fsview.spec import PathMatcher, PathSpec
    from gpusbom.fsview.types import NullProgress, Spool

    limits = _limits()
    matcher = PathMatcher([PathSpec("/etc/os-release"), PathSpec("/var/lib/dpkg/**"),
                           PathSpec("/usr/lib/**/*.so*", max_size=4096)])
    with Spool(limits) as spool:
        read_layer(io.BytesIO(data), index=0, name="fuzz-layer", matcher=matcher, spool=spool,
                   limits=limits, progress=NullProgress(), threaded=False)


@target("layer-cache", CacheFormatError)
def fuzz_layer_cache(data: bytes) -> None:
    """The layer cache's entry reader (``fsview.layercodec``): an entry read back from the
    cache file (planted, damaged or foreign) is a ``CacheFormatError`` or a usable layer,
    whose every field has its type and which stores back to the same entry."""
    from gpusbom.fsview.layercodec import decode, encode

    li = decode(data, max_entries=10_000)
    for path, e in li.entries.items():
        _ = (path.encode("utf-8", "surrogateescape"), e.kind.value, e.size + e.mode + e.layer,
             e.uid + e.gid + e.mtime, e.linkname, e.matched, e.history)
        if e.content is not None:
            e.content.read()
        if e.analysis is not None:
            assert isinstance(e.analysis, dict)
    _ = (sorted(li.whiteouts), sorted(li.opaque_dirs), li.ref.index, list(li.shadow_hashes))
    again = encode(li)
    assert again is not None, "a decoded entry must store again"
    assert encode(decode(again, max_entries=10_000)) == again


def _decompress(data: bytes) -> None:
    from gpusbom.fsview.decompress import open_decompressed

    with open_decompressed(io.BytesIO(data), "fuzz-blob", limits=_limits(),
                           raw_digest="sha256", out_digest="sha256") as s:
        while s.read(1 << 16):
            pass


@target("gzip")
def fuzz_gzip(data: bytes) -> None:
    """gzip framing (members, headers, trailers), always sniffed as gzip."""
    _decompress(b"\x1f\x8b" + data)


@target("zstd")
def fuzz_zstd(data: bytes) -> None:
    """zstd framing (frames, skippable frames, frame walker), always sniffed as zstd."""
    _decompress(b"\x28\xb5\x2f\xfd" + data)


# --------------------------------------------------------------------------- package DBs


def _text(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


@target("dpkg", ValueError)
def fuzz_dpkg(data: bytes) -> None:
    """dpkg status (bytes and streamed), status.d, .list and md5sums files."""
    from gpusbom.collectors.dpkg import (
        parse_dep5_licenses,
        parse_dpkg_list,
        parse_dpkg_md5sums,
        parse_dpkg_status,
    )

    parse_dpkg_status(data)
    parse_dpkg_status(io.BytesIO(data), require_installed=False)
    parse_dpkg_list(data)
    parse_dpkg_md5sums(data)
    parse_dep5_licenses(_text(data))


@target("rpm-header", ValueError)
def fuzz_rpm_header(data: bytes) -> None:
    """One rpm header blob (what each rpmdb row holds)."""
    from gpusbom.collectors.rpm import _package_from_header, parse_rpm_header

    _package_from_header(parse_rpm_header(data, files=True))


@target("rpmdb-sqlite", ValueError, sqlite3.Error)
def fuzz_rpmdb_sqlite(data: bytes) -> None:
    """A whole sqlite rpmdb file (sqlite's own errors are clean rejects)."""
    from gpusbom.collectors.rpm import read_rpmdb_bytes

    read_rpmdb_bytes(data, files=True)


@target("rpmdb-bdb", ValueError)
def fuzz_rpmdb_bdb(data: bytes) -> None:
    """A Berkeley DB hash rpmdb (``/var/lib/rpm/Packages``)."""
    from gpusbom.collectors.rpm_bdb import read_bdb_headers

    read_bdb_headers(io.BytesIO(data), len(data))


@target("apk", ValueError)
def fuzz_apk(data: bytes) -> None:
    """apk ``lib/apk/db/installed``."""
    from gpusbom.collectors.apk import parse_apk_installed, resolve_depends

    pkgs, _ = parse_apk_installed(data)
    resolve_depends(pkgs)


@target("wheel-metadata", ValueError)
def fuzz_wheel(data: bytes) -> None:
    """Python core metadata (METADATA / PKG-INFO), RECORD and installed-files.txt."""
    from gpusbom.collectors.python import parse_core_metadata, parse_installed_files, parse_record

    text = _text(data)
    parse_core_metadata(text)
    list(parse_record(text, "/usr/lib/python3/site-packages"))
    list(parse_installed_files(text, "/usr/lib/python3/site-packages/x.egg-info"))


@target("conda-meta", ValueError)
def fuzz_conda(data: bytes) -> None:
    from gpusbom.collectors.conda import parse_conda_meta

    parse_conda_meta(data)


@target("os-release", ValueError)
def fuzz_os_release(data: bytes) -> None:
    from gpusbom.collectors.osrelease import parse_os_release

    parse_os_release(_text(data))


# --------------------------------------------------------------------------- binaries


@target("elf-gpu", ValueError)
def fuzz_binary(data: bytes) -> None:
    """ELF section tables, CUDA fatbins and HIP offload bundles (file and stream paths)."""
    from gpusbom.binary import scan_binary
    from gpusbom.binary.stream import GpuCodeScanner

    scan_binary(io.BytesIO(data), name="fuzz.so")
    sc = GpuCodeScanner()
    for i in range(0, len(data), 4093):
        sc.feed(data[i : i + 4093])
    sc.close()


# --------------------------------------------------------------------------- images


class _Store:
    """An in-memory image layout (the BlobStore interface the OCI/Docker planners read)."""

    label = "fuzz-image"
    parallel_safe = False
    fork_safe = False

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files

    def exists(self, path: str) -> bool:
        return path in self.files

    def read_small(self, path: str, what: str) -> bytes:
        from gpusbom.errors import ImageFormatError

        if path not in self.files:
            raise ImageFormatError(f"{self.label}: {what} missing")
        return self.files[path]

    def read_layer(self, *a: Any, **k: Any) -> Any:
        raise AssertionError("not reached by planning")

    def close(self) -> None:
        pass


def _blob(data: bytes) -> tuple[str, str]:
    import hashlib

    h = hashlib.sha256(data).hexdigest()
    return f"sha256:{h}", f"blobs/sha256/{h}"


@target("image-json", ValueError)
def fuzz_image_json(data: bytes) -> None:
    """OCI index/manifest/config and Docker manifest.json through the real planners.

    The first byte picks which document the rest of the input is; the others are valid and
    name it by digest, so the planner gets past digest checks to the fuzzed JSON."""
    from gpusbom.fsview.spec import PathMatcher
    from gpusbom.fsview.types import Spool
    from gpusbom.sources.base import ReadContext
    from gpusbom.sources.image import parse_config, plan_docker, plan_oci

    if not data:
        return
    mode, doc = data[0] % 4, data[1:]
    limits = _limits()
    with Spool(limits) as spool:
        ctx = ReadContext(matcher=PathMatcher([]), spool=spool, limits=limits,
                          platform="linux/amd64")
        if mode == 0:
            plan_oci(_Store({"index.json": doc, "oci-layout": b'{"imageLayoutVersion":"1.0.0"}'}),
                     ctx, None)
        elif mode == 1:
            digest, path = _blob(doc)
            index = {"schemaVersion": 2, "manifests": [{
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": digest, "size": len(doc)}]}
            plan_oci(_Store({"index.json": json.dumps(index).encode(), path: doc}), ctx, None)
        elif mode == 2:
            parse_config(doc, _blob(doc)[0], "fuzz config")
        else:
            plan_docker(_Store({"manifest.json": doc}), ctx)


# --------------------------------------------------------------------------- advisories


def _json_doc(data: bytes) -> Any:
    from gpusbom.safetext import loads_json

    return loads_json(data)


@target("csaf", ValueError)
def fuzz_csaf(data: bytes) -> None:
    from gpusbom.advisories.importers.csaf import import_csaf

    doc = _json_doc(data)
    if isinstance(doc, dict):
        import_csaf(doc)


@target("cve5", ValueError)
def fuzz_cve5(data: bytes) -> None:
    from gpusbom.advisories.importers.cve5 import import_cve5

    doc = _json_doc(data)
    if isinstance(doc, dict):
        import_cve5(doc)


@target("osv", ValueError)
def fuzz_osv(data: bytes) -> None:
    from gpusbom.advisories.importers.osv import import_osv

    doc = _json_doc(data)
    if isinstance(doc, dict):
        import_osv(doc)


@target("vex", ValueError)
def fuzz_vex(data: bytes) -> None:
    from gpusbom.advisories.vex import read_vex

    with tempfile.NamedTemporaryFile(suffix=".json", dir=_TMP) as f:
        f.write(data)
        f.flush()
        read_vex(f.name)


# --------------------------------------------------------------------------- SBOM input, policy


@target("sbom-in")
def fuzz_sbom(data: bytes) -> None:
    """CycloneDX JSON/XML, SPDX JSON/tag-value and gpusbom JSON as ``scan --sbom`` reads them."""
    from gpusbom.sbomin._detect import parse

    parse(data, "fuzz.sbom")


@target("policy-yaml")
def fuzz_policy(data: bytes) -> None:
    from gpusbom.policy.loader import load_policy_text

    load_policy_text(_text(data), "fuzz-policy.yaml")


# --------------------------------------------------------------------------- registry HTTP


class _Adapter:
    """A requests transport adapter that answers every request from the fuzz input (no
    socket is opened): responses are separated by ``\\n--\\n``, each ``STATUS`` line,
    header lines, a blank line and the body."""

    def __init__(self, responses: list[bytes]) -> None:
        self.responses = responses
        self.i = 0

    def send(self, request: Any, **kw: Any) -> Any:
        from requests.adapters import HTTPAdapter
        from urllib3 import HTTPResponse

        raw = self.responses[self.i % len(self.responses)] if self.responses else b""
        self.i += 1
        if self.i > 200:  # a few retries and token fetches per request are expected
            raise AssertionError("more than 200 requests for two reads: a retry loop")
        head, _, body = raw.partition(b"\n\n")
        lines = head.split(b"\n")
        try:
            status = int(lines[0][:3])
        except ValueError:
            status = 200
        headers = {}
        for ln in lines[1:]:
            k, sep, v = ln.partition(b":")
            if sep and k.strip():
                headers[k.strip().decode("latin-1")] = v.strip().decode("latin-1")
        resp = HTTPResponse(body=io.BytesIO(body), headers=headers, status=status,
                            preload_content=False, decode_content=False)
        return HTTPAdapter().build_response(request, resp)

    def close(self) -> None:
        pass


_REGISTRY_CFG = tempfile.mkdtemp(prefix="gpusbom-fuzz-docker-")


@target("registry-http")
def fuzz_registry(data: bytes) -> None:
    """Registry answers: status codes, WWW-Authenticate challenges, token responses, error
    bodies, manifests and tag lists, through the real client and requests."""
    import time as _time
    import types

    from gpusbom.sources import registry as reg
    from gpusbom.sources.registry import client as regclient

    # retries back off with sleeps: this module's clock only, restored afterwards
    saved = regclient.time
    regclient.time = types.SimpleNamespace(  # type: ignore[assignment]
        sleep=lambda s: None, monotonic=_time.monotonic, time=_time.time)
    try:
        _registry_reads(reg, data)
    finally:
        regclient.time = saved


def _registry_reads(reg: Any, data: bytes) -> None:
    opts = reg.RegistryOptions(docker_config=_REGISTRY_CFG)
    client = reg.RegistryClient(reg.ImageRef.parse("registry.fuzz.test/team/app:1"), opts)
    adapter = _Adapter(data.split(b"\n--\n")[:8])
    client._session.mount("https://", adapter)  # type: ignore[arg-type]
    client._session.mount("http://", adapter)  # type: ignore[arg-type]
    try:
        client.get_manifest("1")
        client.get_blob_small("sha256:" + "0" * 64, "config")
    finally:
        client.close()


PARSER_MODULES = (
    "gpusbom.fsview.tarstream", "gpusbom.fsview.layer", "gpusbom.fsview.decompress",
    "gpusbom.fsview.spec", "gpusbom.fsview.layercodec", "gpusbom.collectors.dpkg", "gpusbom.collectors.rpm",
    "gpusbom.collectors.rpm_bdb", "gpusbom.collectors.apk", "gpusbom.collectors.python",
    "gpusbom.collectors.conda", "gpusbom.collectors.osrelease", "gpusbom.binary",
    "gpusbom.binary.elf", "gpusbom.binary.fatbin", "gpusbom.binary.hipbundle",
    "gpusbom.binary.stream", "gpusbom.sources.image", "gpusbom.sources.image.oci",
    "gpusbom.sources.image.plan",
    "gpusbom.sources.registry", "gpusbom.sources.registry.client",
    "gpusbom.advisories.importers.csaf", "gpusbom.advisories.importers.cve5",
    "gpusbom.advisories.importers.osv", "gpusbom.advisories.vex", "gpusbom.sbomin",
    "gpusbom.sbomin._detect", "gpusbom.sbomin._cyclonedx", "gpusbom.sbomin._spdx",
    "gpusbom.sbomin._cdxxml", "gpusbom.sbomin._native", "gpusbom.policy.loader",
    "gpusbom.safetext",
)


def preload() -> None:
    """Import every parser module (``fuzz/run.py`` calls this inside atheris's import
    instrumentation: only modules imported there report coverage)."""
    import importlib

    for m in PARSER_MODULES:
        importlib.import_module(m)


def reject_ok(name: str, exc: BaseException) -> bool:
    """Is ``exc`` a clean, documented rejection by target ``name``?"""
    if isinstance(exc, RecursionError):
        return False
    return isinstance(exc, REJECTS[name])


def call(name: str, data: bytes) -> None:
    """Run target ``name`` on ``data``; re-raise anything that is not a clean rejection."""
    try:
        TARGETS[name](data)
    except Exception as exc:
        if not reject_ok(name, exc):
            raise


__all__ = ["TARGETS", "call", "reject_ok"]
