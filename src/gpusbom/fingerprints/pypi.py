"""NVIDIA's wheels on PyPI as a source of the fingerprint database: used by the builder
(``scripts/build_fingerprints.py``) and by ``gpusbom fingerprints update``.

- :func:`list_wheels`: one manylinux x86-64 wheel per version of a distribution (the index's
  PEP 691 JSON, the API pip uses), with its sha256, size and upload date;
- :func:`download`: a wheel streamed to disk and checked against the index's sha256;
- :func:`fingerprint_wheel`: the records of every ELF shared library in a wheel (SHA-256,
  GNU build-id, soname, size; each member read once). The version is the wheel's own (its
  file name, checked against its METADATA);
- :func:`release_rows`: the vendor release lists PyPI gives: every version of every NVIDIA
  CUDA-component distribution, and the pins of NVIDIA's ``cuda-toolkit`` metapackage, with
  ``complete_from`` (each product's pin in ``cuda-toolkit`` 12.0.0).

Nothing here is executed from a download: wheels are zip files read member by member, their
METADATA parsed as headers.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from email.parser import HeaderParser
from pathlib import Path
from typing import IO, Any

from ..catalog import names
from ..errors import InputError
from .database import Record, Release

__all__ = ["LARGE", "SMALL", "UpdateError", "download", "fingerprint_member",
           "fingerprint_wheel", "index_versions", "library_stem", "list_wheels", "product_of",
           "release_dists", "release_rows", "session", "toolkit_pins"]

#: small-to-moderate wheels (cu11, cu12 and the cu13 suffix-less names)
SMALL = [
    f"nvidia-{base}{sfx}"
    for base in ("cuda-runtime", "cuda-nvrtc", "nvjitlink", "curand", "nvjpeg", "cuda-cupti",
                 "cufft", "cusparse")
    for sfx in ("-cu11", "-cu12", "")
]
#: the large ones (cuBLAS, cuDNN, NCCL: 100-900 MB a wheel)
LARGE = [*(f"nvidia-nccl{s}" for s in ("-cu11", "-cu12", "-cu13")),
         *(f"nvidia-cublas{s}" for s in ("-cu11", "-cu12", "")),
         *(f"nvidia-cudnn{s}" for s in ("-cu11", "-cu12", "-cu13"))]
#: the wheel families (distribution suffixes) whose release lists are read from the index
FAMILIES = ("-cu11", "-cu12", "-cu13", "")
#: distributions of the catalog's CUDA wheels that are not NVIDIA's CUDA components
_NOT_LISTED = {"tensorrt-libs", "cutensor"}

_SO_RX = re.compile(r"^(?P<stem>lib[^/]+?)\.so(?:\.[0-9][0-9.]*)?$")
_PLATFORM_RX = re.compile(r"manylinux[^-]*x86_64")
_PIN_RX = re.compile(r"^(?P<dist>nvidia-[a-z0-9-]+)==(?P<ver>[0-9][0-9.]*[0-9])(?:\.\*)?$")
#: a release's version (not NVIDIA's placeholders ``0.0.1.dev5``, ``0.0.0a0``, nor dev builds)
RELEASE_VERSION_RX = re.compile(r"[1-9][0-9]*(?:\.[0-9]+){1,4}(?:rc[0-9]+)?")
_CHUNK = 1 << 20
_JSON = {"Accept": "application/vnd.pypi.simple.v1+json"}
#: the largest index page read (the biggest NVIDIA listing is ~1 MB)
_MAX_INDEX = 16 << 20


class UpdateError(InputError):
    """A download or an index listing failed (the caller decides what that means: the
    update stops, exit 3, or a wheel is skipped and named)."""


def session(agent: str = "gpusbom-fingerprints/1") -> Any:
    """An HTTPS session (``requests``) for the index and its files."""
    import requests

    s = requests.Session()
    cert = "/etc/ssl/certs/ca-certificates.crt"  # pip's configured bundle on Debian
    if os.path.exists(cert) and not os.environ.get("REQUESTS_CA_BUNDLE"):
        s.verify = cert
    s.headers["User-Agent"] = agent
    return s


def _index_json(sess: Any, index: str, name: str) -> dict[str, Any] | None:
    from ..safetext import loads_json

    url = f"{index.rstrip('/')}/{name}/"
    try:
        r = sess.get(url, headers=_JSON, timeout=60)
    except Exception as e:  # noqa: BLE001 - requests' errors, named in the message
        raise UpdateError(f"{url}: cannot connect (offline?): {type(e).__name__}") from None
    if r.status_code == 404:
        return None
    if r.status_code != 200:
        raise UpdateError(f"{url}: HTTP {r.status_code}")
    if len(r.content) > _MAX_INDEX:
        raise UpdateError(f"{url}: index page larger than {_MAX_INDEX} bytes")
    try:
        doc = loads_json(r.content, max_bytes=_MAX_INDEX, max_depth=16)
    except ValueError as e:
        raise UpdateError(f"{url}: not valid JSON: {e}") from None
    if not isinstance(doc, dict):
        raise UpdateError(f"{url}: not a JSON object")
    return doc


def list_wheels(sess: Any, index: str, dist: str, since: str) -> list[dict[str, Any]]:
    """One manylinux x86-64 wheel per version of ``dist`` uploaded on or after ``since``
    (the first by file name), each ``{dist, version, filename, url, sha256, size, uploaded,
    yanked}``, by upload date; versions uploaded before ``since`` are listed with ``skip``."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    doc = _index_json(sess, index, dist)
    if doc is None:
        return []
    by_version: dict[str, dict[str, Any]] = {}
    files = [f for f in doc.get("files", []) if isinstance(f, dict)]
    for f in sorted(files, key=lambda f: str(f.get("filename", ""))):
        fn = str(f.get("filename", ""))
        if not fn.endswith(".whl"):
            continue
        try:
            _, ver, _, tags = parse_wheel_filename(fn)
        except InvalidWheelFilename:
            continue
        if not any(_PLATFORM_RX.search(t.platform) for t in tags):
            continue
        v = str(ver)
        if v in by_version:
            continue
        up = str(f.get("upload-time") or "")[:10]
        by_version[v] = {"dist": dist, "version": v, "filename": fn, "url": f.get("url"),
                         "sha256": (f.get("hashes") or {}).get("sha256"), "size": f.get("size"),
                         "uploaded": up, "yanked": bool(f.get("yanked"))}
        if up and up < since:
            by_version[v]["skip"] = f"uploaded {up}, before {since}"
    return sorted(by_version.values(), key=lambda w: w["uploaded"])


def download(sess: Any, wheel: dict[str, Any], dest: Path, *, limit: int = 4 << 30) -> Path:
    """The wheel streamed into ``dest`` and checked against the index's sha256 (a wheel the
    index gives no sha256 for is refused)."""
    want = wheel.get("sha256")
    if not want:
        raise UpdateError(f"{wheel['filename']}: the index gives no sha256")
    name = Path(str(wheel["filename"])).name
    return save_checked(http_chunks(sess, str(wheel["url"])), dest / name, bound=limit,
                        want=str(want), where=str(wheel["url"]), whose="index's")[0]


@contextlib.contextmanager
def http_chunks(sess: Any, url: str) -> Iterator[Iterable[bytes]]:
    """The body of ``url``, streamed in chunks (an HTTP status other than 200 is refused)."""
    with sess.get(url, stream=True, timeout=600) as r:
        if r.status_code != 200:
            raise UpdateError(f"{url}: HTTP {r.status_code}")
        yield r.iter_content(_CHUNK)


def save_checked(chunks: AbstractContextManager[Iterable[bytes]], path: Path, *, bound: int,
                 want: str, where: str, whose: str) -> tuple[Path, int]:
    """``chunks`` written to ``path``, at most ``bound`` bytes, and checked against the sha256
    ``want`` (``whose``: where it was given); (path, size). A download that fails, is too
    large or does not match is deleted and refused (``UpdateError``)."""
    h = hashlib.sha256()
    n = 0
    try:
        with open(path, "wb") as out, chunks as body:
            for chunk in body:
                n += len(chunk)
                if n > bound:
                    raise UpdateError(f"{where}: larger than {bound} bytes; refused")
                h.update(chunk)
                out.write(chunk)
    except UpdateError:
        path.unlink(missing_ok=True)
        raise
    except Exception as e:  # noqa: BLE001 - requests' and OS errors, named in the message
        path.unlink(missing_ok=True)
        raise UpdateError(f"{where}: download failed: {type(e).__name__}: {e}") from None
    if h.hexdigest() != want:
        path.unlink()
        raise UpdateError(f"{path.name}: sha256 {h.hexdigest()} is not the {whose} {want}; "
                          "refused")
    return path, n


def _soname(path: Path) -> str | None:
    from elftools.common.exceptions import ELFError
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile

    try:
        with open(path, "rb") as f:
            elf = ELFFile(f)
            for sec in elf.iter_sections():
                if isinstance(sec, DynamicSection):
                    for tag in sec.iter_tags():
                        if tag.entry.d_tag == "DT_SONAME":
                            return str(tag.soname)  # type: ignore[attr-defined]
    except (ELFError, ValueError, OSError):
        return None
    except Exception as e:  # noqa: BLE001 - construct's errors on a truncated ELF
        if type(e).__module__.split(".")[0] in ("construct", "elftools"):
            return None
        raise
    return None


def product_of(stem: str, wheel_product: str) -> str:
    """The product of a library: its stem's (the ``cuda`` collector's), else the package's."""
    own = names.libraries("cuda").get(stem)
    if own is not None:
        return own
    if stem.startswith("libcudnn"):
        return "cudnn"
    return wheel_product


def _metadata_version(zf: zipfile.ZipFile) -> str | None:
    metas = [n for n in zf.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
    if len(metas) != 1:
        return None
    with zf.open(metas[0]) as f:
        head = f.read(1 << 16).decode("utf-8", "replace")
    return HeaderParser().parsestr(head).get("Version")


def library_stem(name: str) -> str | None:
    """The library stem of a shared library's file name (``libcudart`` of
    ``libcudart.so.12.4.127``); None for anything else."""
    m = _SO_RX.match(name)
    return m.group("stem") if m else None


def fingerprint_member(src: IO[bytes], base: str, product: str, version: str, source: str,
                       scratch: Path, *, limit: int = 8 << 30) -> Record | None:
    """The record of one library read from ``src`` (a wheel's or an archive's member, read
    once): SHA-256, size, GNU build-id and ``DT_SONAME``; None when it is not ELF (a linker
    script). The bytes go to a scratch file in ``scratch`` (deleted) for pyelftools; more
    than ``limit`` bytes raise :class:`UpdateError`."""
    from ..binary.buildid import BuildIdReader

    h = hashlib.sha256()
    bid_reader = BuildIdReader()  # what a scan's stream scanner reads, the same way
    magic = b""
    size = 0
    with tempfile.NamedTemporaryFile(dir=scratch, prefix=".member-", delete=False) as dst:
        tmp = Path(dst.name)
        try:
            for chunk in iter(lambda: src.read(_CHUNK), b""):
                size += len(chunk)
                if size > limit:
                    raise UpdateError(f"{base}: larger than {limit} bytes")
                h.update(chunk)
                bid_reader.feed(chunk)
                magic = (magic + chunk[:4])[:4]
                dst.write(chunk)
        except BaseException:
            dst.close()
            tmp.unlink()
            raise
    try:
        if magic != b"\x7fELF":
            return None  # a linker script or other non-ELF .so
        bid = bid_reader.close()
        soname = _soname(tmp)
    finally:
        tmp.unlink()
    return Record(product=product, version=version, file=base, soname=soname, build_id=bid,
                  sha256=h.hexdigest(), size=size, source=source)


def fingerprint_wheel(path: Path, wheel: dict[str, Any], scratch: Path) -> list[Record]:
    """The records of the ELF shared libraries in one wheel (each member read once)."""
    from packaging.version import Version

    wheel_product = names.cuda_wheel(wheel["dist"])
    if wheel_product is None:
        raise UpdateError(f"{wheel['dist']}: not a wheel gpusbom's catalog knows")
    source = f"pypi:{wheel['dist']}=={wheel['version']}"
    out: list[Record] = []
    with zipfile.ZipFile(path) as zf:
        meta_v = _metadata_version(zf)
        if meta_v is None or Version(meta_v) != Version(wheel["version"]):
            raise UpdateError(f"{wheel['filename']}: METADATA Version {meta_v!r} is not the "
                              f"file name's {wheel['version']!r}")
        version = str(Version(meta_v))
        for info in zf.infolist():
            base = info.filename.rsplit("/", 1)[-1]
            m = _SO_RX.match(base)
            if info.is_dir() or m is None or info.file_size == 0:
                continue
            with zf.open(info) as src:
                rec = fingerprint_member(src, base, product_of(m.group("stem"), wheel_product),
                                         version, source, scratch)
            if rec is not None:
                out.append(rec)
    return out


# -- vendor release lists ---------------------------------------------------------------------


def release_dists() -> list[str]:
    """Every NVIDIA CUDA-component distribution of the catalog, in every wheel family."""
    return [f"nvidia-{base}{sfx}" for base in sorted(names.cuda_wheels())
            if base not in _NOT_LISTED for sfx in FAMILIES]


def index_versions(sess: Any, index: str, dist: str) -> list[str]:
    """The versions the index lists for ``dist`` (all of them, whatever their age), less the
    placeholders NVIDIA uploads (``0.0.1.dev5``, ``0.0.0a0``) and dev builds."""
    doc = _index_json(sess, index, dist)
    if doc is None:
        return []
    return sorted(str(v) for v in doc.get("versions", []) if RELEASE_VERSION_RX.fullmatch(str(v)))


def toolkit_pins(sess: Any, index: str, cache: Path) -> dict[str, dict[str, str]]:
    """NVIDIA's ``cuda-toolkit`` metapackage: CUDA release -> {product: pinned component
    version}, read from each release's wheel METADATA (``Requires-Dist:
    nvidia-cublas-cu12==12.4.5.8.*; ... extra == "cublas"``); the small wheels are cached in
    ``cache`` (checked against the index's sha256)."""
    from packaging.requirements import InvalidRequirement, Requirement

    doc = _index_json(sess, index, "cuda-toolkit") or {}
    out: dict[str, dict[str, str]] = {}
    for f in doc.get("files", []):
        fn = str(f.get("filename", ""))
        if not fn.endswith(".whl") or "/" in fn:
            continue
        ver = fn.split("-")[1]
        if not RELEASE_VERSION_RX.fullmatch(ver):
            continue
        path = cache / fn
        want = (f.get("hashes") or {}).get("sha256")
        if not path.exists() or hashlib.sha256(path.read_bytes()).hexdigest() != want:
            download(sess, {"filename": fn, "url": f.get("url"), "sha256": want}, cache,
                     limit=1 << 20)
        pins: dict[str, str] = {}
        with zipfile.ZipFile(path) as zf:
            meta = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
            if len(meta) != 1:
                continue
            text = zf.read(meta[0])[: 1 << 20].decode("utf-8", "replace")
        for value in HeaderParser().parsestr(text).get_all("Requires-Dist") or []:
            try:
                req = Requirement(value)
            except InvalidRequirement:
                continue
            m = _PIN_RX.match(f"{req.name}{req.specifier}")
            product = names.cuda_wheel(req.name)
            if m is None or product is None:
                continue
            pins.setdefault(product, m.group("ver"))
        if pins:
            out[ver] = pins
    return out


def release_rows(sess: Any, index: str, cache: Path,
                 progress: Callable[[str], None] | None = None
                 ) -> tuple[list[Release], dict[str, str]]:
    """The release lists PyPI gives (index listings of every distribution of
    :func:`release_dists`, ``cuda-toolkit`` pins) and ``complete_from``."""
    say = progress or (lambda _m: None)
    rows: list[Release] = []
    for dist in release_dists():
        product = names.cuda_wheel(dist)
        if product is None:
            continue
        say(f"index {dist}")
        rows += [Release(product, v, f"pypi-index:{dist}")
                 for v in index_versions(sess, index, dist)]
    say("cuda-toolkit pins")
    pins = toolkit_pins(sess, index, cache)
    for tk, per in pins.items():
        rows.append(Release("cuda-toolkit", tk, "pypi-index:cuda-toolkit"))
        rows += [Release(product, v, f"pypi:cuda-toolkit=={tk}") for product, v in per.items()]
    complete = dict(pins.get("12.0.0", {}))
    return rows, complete


def with_cublaslt(rows: Iterable[Release], complete: dict[str, str]) -> list[Release]:
    """cuBLASLt ships in the cuBLAS packages with cuBLAS's release (the catalog's
    ``shares_release_with``): its lists are cuBLAS's."""
    rows = list(rows)
    rows += [Release("cublaslt", r.version, r.source) for r in rows if r.product == "cublas"]
    if "cublas" in complete:
        complete["cublaslt"] = complete["cublas"]
    return rows
