"""NVIDIA's redistributable manifests (``redistrib_*.json``) as a source of the fingerprint
database, beside NVIDIA's wheels on PyPI (``gpusbom.fingerprints.pypi``); used by the
builder (``scripts/build_fingerprints.py --redistrib URL``).

A manifest (``https://developer.download.nvidia.com/compute/cuda/redist/redistrib_12.4.1.json``,
``.../cudnn/redist/redistrib_9.1.0.json``, NCCL's, cuTENSOR's ...) is a JSON object::

    {"release_date": "2024-04-09", "release_label": "12.4.1", "release_product": "cuda",
     "cuda_cudart": {"name": "CUDA Runtime (cudart)", "license": "CUDA Toolkit",
                     "license_path": "cuda_cudart/LICENSE.txt", "version": "12.4.127",
                     "linux-x86_64": {"relative_path": "cuda_cudart/linux-x86_64/
                                      cuda_cudart-linux-x86_64-12.4.127-archive.tar.xz",
                                      "sha256": "...", "md5": "...", "size": "1006400"},
                     "linux-sbsa": {...}, ...}, ...}

cuDNN-style manifests add a level per CUDA variant under the platform
(``"linux-x86_64": {"cuda11": {relative_path, ...}, "cuda12": {...}}``).

- :func:`read_manifest`: the manifest's bytes from a URL, a file or (every
  ``redistrib_*.json`` of) a directory, bounded (:data:`MAX_MANIFEST`);
- :func:`parse_manifest`: the manifest validated: only the fields named above are read, a
  component whose key gpusbom's catalog does not map to a product, or whose version,
  path or checksum is malformed, is skipped with a note; only ``linux-x86_64`` archives;
- :func:`fetch_archive`: an archive (its ``relative_path`` under the manifest's directory;
  no ``..``, no absolute path) downloaded or copied, bounded by the manifest's size, and
  checked against the manifest's sha256 before anything reads it;
- :func:`fingerprint_archive`: the ``.tar.xz`` read as a stream: only regular members named
  ``lib*.so*`` are read (links, devices, absolute or ``..`` names are skipped and noted;
  link-time stubs under ``stubs/`` are not the library and are skipped too; nothing is
  written out but one scratch file at a time), each fingerprinted by the PyPI
  path's code (:func:`gpusbom.fingerprints.pypi.fingerprint_member`: SHA-256, size, GNU
  build-id, soname), with the component's manifest ``version`` as the exact version and the
  manifest's URL (``#component``) as the source.

Nothing from a manifest or an archive is executed, and nothing is unpickled.
"""

from __future__ import annotations

import contextlib
import lzma
import re
import tarfile
import urllib.parse
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from ..catalog import names
from .database import URL_SOURCE_RX, Record, Release
from .pypi import (
    RELEASE_VERSION_RX,
    UpdateError,
    fingerprint_member,
    http_chunks,
    library_stem,
    product_of,
    save_checked,
)

__all__ = ["MAX_ARCHIVE", "MAX_MANIFEST", "Archive", "Manifest", "fetch_archive",
           "fingerprint_archive", "manifest_refs", "parse_manifest", "read_manifest",
           "release_rows"]

#: the largest manifest read (NVIDIA's CUDA manifests are ~30-60 KB)
MAX_MANIFEST = 4 << 20
#: the largest archive downloaded (cuDNN 9's x86-64 archive is ~ 900 MB)
MAX_ARCHIVE = 8 << 30
#: the largest library read out of an archive, and all of them together
MAX_MEMBER = 4 << 30
MAX_MEMBERS_TOTAL = 32 << 30
#: the most bytes one archive may unpack to, every member counted (cuDNN 9: ~ 2 GB)
MAX_UNPACKED = 64 << 30
#: the most tar members looked at in one archive
MAX_MEMBERS = 200_000
PLATFORM = "linux-x86_64"
_TOP_FIELDS = ("release_date", "release_label", "release_product")
_ARCHIVE_FIELDS = ("relative_path", "sha256", "md5", "size")
_VARIANT_RX = re.compile(r"cuda[0-9]{1,3}")
_KEY_RX = re.compile(r"[a-z][a-z0-9_]{0,63}")
_PATH_RX = re.compile(r"[A-Za-z0-9._+-]+(?:/[A-Za-z0-9._+-]+){0,8}\.tar\.xz")
_SHA_RX = re.compile(r"[0-9a-f]{64}")
_LABEL_RX = re.compile(r"[A-Za-z0-9._+-]{1,64}")
#: component keys whose product is not their name less ``lib``/``cuda_`` (``cuda_cudart``:
#: the catalog's wheel is ``cuda-runtime``)
_KEY_ALIASES = {"cuda_cudart": "cuda-runtime", "libcusparse_lt": "cusparselt",
                "libcudnn": "cudnn"}
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Archive:
    """One linux-x86_64 archive a manifest lists."""

    component: str  # the manifest's key: cuda_cudart, cudnn
    variant: str | None  # cuDNN-style: cuda11, cuda12
    product: str  # the catalog's product for the component: cudart, cudnn
    version: str  # the component's version in the manifest: the exact version
    relative_path: str
    sha256: str
    size: int | None

    @property
    def label(self) -> str:
        return self.component + (f".{self.variant}" if self.variant else "")


@dataclass
class Manifest:
    url: str  # http(s):// or file:// (a local manifest's absolute path)
    release_label: str | None
    release_product: str | None
    release_date: str | None
    archives: list[Archive] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was skipped, and why

    def source(self, archive: Archive) -> str:
        """A record's source: the manifest's URL, the component (and variant) as fragment."""
        return f"{self.url}#{archive.label}"


def _component_product(key: str) -> str | None:
    """The catalog's product of a manifest component key (``libcublas`` -> ``cublas``,
    ``cuda_nvrtc`` -> ``nvrtc``, ``cudnn`` -> ``cudnn``), through the names the PyPI path's
    wheels have (``gpusbom.catalog.names.cuda_wheels``)."""
    base = _KEY_ALIASES.get(key)
    if base is None:
        if key.startswith("cuda_"):
            base = "cuda-" + key[5:].replace("_", "-")
        elif key.startswith("lib"):
            base = key[3:].replace("_", "-")
        else:
            base = key.replace("_", "-")
    wheels = names.cuda_wheels()
    return wheels.get(base) or wheels.get(base.removeprefix("cuda-"))


def manifest_refs(ref: str) -> list[str]:
    """The manifests ``ref`` names: a URL, a file, or every ``redistrib_*.json`` of a
    directory (sorted)."""
    if re.match(r"https?://", ref):
        return [ref]
    p = Path(ref)
    if p.is_dir():
        found = sorted(str(f) for f in p.glob("redistrib_*.json") if f.is_file())
        if not found:
            raise UpdateError(f"{ref}: no redistrib_*.json in this directory")
        return found
    return [ref]


def _check_url(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.username \
            or parts.password or parts.query or parts.fragment:
        raise UpdateError(f"{url}: not a plain http(s) URL of a manifest")
    return url


def read_manifest(sess: Any, ref: str) -> tuple[str, bytes]:
    """(the manifest's URL, its bytes) for a URL or a local file; bounded by
    :data:`MAX_MANIFEST` (a larger one is refused before it is parsed)."""
    if re.match(r"https?://", ref):
        url = _check_url(ref)
        try:
            with sess.get(url, stream=True, timeout=120) as r:
                if r.status_code != 200:
                    raise UpdateError(f"{url}: HTTP {r.status_code}")
                buf = bytearray()
                for chunk in r.iter_content(1 << 16):
                    buf += chunk
                    if len(buf) > MAX_MANIFEST:
                        raise UpdateError(f"{url}: manifest larger than {MAX_MANIFEST} bytes; "
                                          "refused")
        except UpdateError:
            raise
        except Exception as e:  # noqa: BLE001 - requests' errors, named in the message
            raise UpdateError(f"{url}: cannot fetch the manifest: {type(e).__name__}: {e}"
                              ) from None
        return url, bytes(buf)
    p = Path(ref).resolve()
    try:
        with open(p, "rb") as f:
            data = f.read(MAX_MANIFEST + 1)
    except OSError as e:
        raise UpdateError(f"{ref}: cannot read: {e.strerror or e}") from None
    if len(data) > MAX_MANIFEST:
        raise UpdateError(f"{ref}: manifest larger than {MAX_MANIFEST} bytes; refused")
    return p.as_uri(), data


def _archive(key: str, variant: str | None, product: str, version: str, raw: Any,
             notes: list[str]) -> Archive | None:
    where = f"{key}" + (f" {variant}" if variant else "") + f" {PLATFORM}"
    if not isinstance(raw, dict):
        notes.append(f"{where}: not an object; skipped")
        return None
    path, sha, size = raw.get("relative_path"), raw.get("sha256"), raw.get("size")
    if not isinstance(path, str) or not _PATH_RX.fullmatch(path) \
            or any(part in ("..", ".") for part in path.split("/")):
        notes.append(f"{where}: relative_path {str(path)[:80]!r} is not a relative .tar.xz "
                     "path; skipped")
        return None
    if not isinstance(sha, str) or not _SHA_RX.fullmatch(sha.lower()):
        notes.append(f"{where}: no sha256; skipped (an archive is never read unchecked)")
        return None
    n: int | None = None
    if size is not None:  # NVIDIA writes it as a string of digits
        if isinstance(size, bool) or not re.fullmatch(r"[0-9]{1,13}", str(size)):
            notes.append(f"{where}: size {str(size)[:20]!r} is not a byte count; skipped")
            return None
        n = int(size)
    return Archive(key, variant, product, version, path, sha.lower(), n)


def parse_manifest(data: bytes, url: str) -> Manifest:
    """The manifest's linux-x86_64 archives, validated (see the module docstring); raises
    :class:`UpdateError` when it is not a manifest at all."""
    from ..safetext import loads_json

    if len(data) > MAX_MANIFEST:
        raise UpdateError(f"{url}: manifest larger than {MAX_MANIFEST} bytes; refused")
    if not URL_SOURCE_RX.fullmatch(f"{url}#x"):
        raise UpdateError(f"{url}: not a URL the database can name as a source (a path of "
                          "letters, digits and ._~%+-, ending in .json; no user or query)")
    try:
        doc = loads_json(data, max_bytes=MAX_MANIFEST, max_depth=8)
    except ValueError as e:
        raise UpdateError(f"{url}: not valid JSON: {e}") from None
    if not isinstance(doc, dict):
        raise UpdateError(f"{url}: not a JSON object")
    top = {k: doc.get(k) for k in _TOP_FIELDS}
    for k, v in top.items():
        if v is not None and (not isinstance(v, str) or not _LABEL_RX.fullmatch(v)):
            raise UpdateError(f"{url}: {k} {str(v)[:40]!r} is not a short label")
    if top["release_label"] is None and top["release_product"] is None:
        raise UpdateError(f"{url}: no release_label nor release_product: not a redistrib "
                          "manifest")
    m = Manifest(url, top["release_label"], top["release_product"], top["release_date"])
    for key in sorted(doc):
        if key in _TOP_FIELDS:
            continue
        comp = doc[key]
        if not isinstance(key, str) or not _KEY_RX.fullmatch(key) or not isinstance(comp, dict):
            m.notes.append(f"{str(key)[:64]!r}: not a component; skipped")
            continue
        product = _component_product(key)
        if product is None:
            m.notes.append(f"{key}: no product of gpusbom's catalog; skipped")
            continue
        version = comp.get("version")
        if not isinstance(version, str) or not RELEASE_VERSION_RX.fullmatch(version):
            m.notes.append(f"{key}: version {str(version)[:40]!r} is not a release version; "
                           "skipped")
            continue
        plat = comp.get(PLATFORM)
        if plat is None:
            m.notes.append(f"{key} {version}: no {PLATFORM} archive")
            continue
        if isinstance(plat, dict) and "relative_path" not in plat:  # cuDNN-style variants
            variants = [v for v in sorted(plat) if _VARIANT_RX.fullmatch(str(v))]
            for other in sorted(set(plat) - set(variants)):
                m.notes.append(f"{key} {PLATFORM}: {str(other)[:32]!r} is not a CUDA variant; "
                               "skipped")
            for var in variants:
                a = _archive(key, var, product, version, plat[var], m.notes)
                if a is not None:
                    m.archives.append(a)
            if not variants:
                m.notes.append(f"{key} {PLATFORM}: no archive; skipped")
            continue
        a = _archive(key, None, product, version, plat, m.notes)
        if a is not None:
            m.archives.append(a)
    return m


def fetch_archive(sess: Any, manifest: Manifest, archive: Archive, dest: Path, *,
                  limit: int = MAX_ARCHIVE) -> Path:
    """The archive, under the manifest's directory, copied into ``dest``; bounded (by the
    manifest's size when it gives one, else ``limit``) and checked against the manifest's
    sha256: an archive that does not match is deleted and refused."""
    bound = min(limit, archive.size) if archive.size is not None else limit
    name = PurePosixPath(archive.relative_path).name
    base = urllib.parse.urlsplit(manifest.url)
    where = urllib.parse.urljoin(manifest.url, archive.relative_path)
    chunks: AbstractContextManager[Iterable[bytes]]
    if base.scheme == "file":
        root = Path(urllib.parse.unquote(base.path)).parent
        src = (root / archive.relative_path).resolve()
        if not src.is_relative_to(root.resolve()):
            raise UpdateError(f"{where}: outside the manifest's directory; refused")
        chunks = _file_chunks(src)
    else:
        chunks = http_chunks(sess, where)
    path, n = save_checked(chunks, dest / name, bound=bound, want=archive.sha256, where=where,
                           whose="manifest's")
    if archive.size is not None and n != archive.size:
        path.unlink()
        raise UpdateError(f"{name}: {n} bytes, the manifest says {archive.size}; refused")
    return path


@contextlib.contextmanager
def _file_chunks(src: Path) -> Iterator[Iterable[bytes]]:
    with open(src, "rb") as f:
        yield iter(lambda: f.read(_CHUNK), b"")


def _member_problem(member: tarfile.TarInfo) -> str | None:
    name = member.name
    parts = PurePosixPath(name).parts
    if name.startswith("/") or "\\" in name or ".." in parts:
        return "absolute or '..' name"
    if member.issym() or member.islnk():
        return f"a link (to {member.linkname[:80]!r}): not followed"
    if not member.isreg():
        return "not a regular file"
    return None


def fingerprint_archive(path: Path, manifest: Manifest, archive: Archive, scratch: Path
                        ) -> tuple[list[Record], list[str]]:
    """The records of the ``lib*.so*`` regular members of a checked archive, and notes on
    the members refused (links, absolute or ``..`` names)."""
    source = manifest.source(archive)
    records: list[Record] = []
    notes: list[str] = []
    total = unpacked = 0
    try:
        with tarfile.open(path, mode="r|xz") as tf:  # a stream: members in order, once
            for i, member in enumerate(tf):
                if i >= MAX_MEMBERS:
                    raise UpdateError(f"{path.name}: more than {MAX_MEMBERS} members; refused")
                unpacked += max(member.size, 0)  # skipped members are decompressed too
                if unpacked > MAX_UNPACKED:
                    raise UpdateError(f"{path.name}: more than {MAX_UNPACKED} bytes unpacked; "
                                      "refused")
                base = PurePosixPath(member.name).name
                stem = library_stem(base)
                if stem is None:
                    continue
                problem = _member_problem(member)
                if problem is None and "stubs" in PurePosixPath(member.name).parts[:-1]:
                    problem = "a link-time stub, not the library"
                if problem is None and (len(base) > 255 or not base.isprintable()):
                    problem = "not a printable file name"
                if problem is not None:
                    notes.append(f"{member.name[:120]!r}: {problem}; skipped")
                    continue
                if member.size == 0:
                    continue
                total += member.size
                if member.size > MAX_MEMBER or total > MAX_MEMBERS_TOTAL:
                    raise UpdateError(f"{path.name}: {member.name[:120]!r} makes the libraries "
                                      "too large; refused")
                src = tf.extractfile(member)
                if src is None:
                    continue
                with src:
                    rec = fingerprint_member(src, base, product_of(stem, archive.product),
                                             archive.version, source, scratch,
                                             limit=MAX_MEMBER)
                if rec is not None:
                    records.append(rec)
    except (tarfile.TarError, lzma.LZMAError, EOFError, OSError) as e:
        raise UpdateError(f"{path.name}: not a readable .tar.xz: {type(e).__name__}: {e}"
                          ) from None
    return records, notes


def release_rows(manifest: Manifest) -> list[Release]:
    """The release of every mapped component a manifest lists (NVIDIA's own list), with
    the manifest's host and path as the list's source."""
    parts = urllib.parse.urlsplit(manifest.url)
    where = (parts.netloc + parts.path) if parts.scheme != "file" else "local" + parts.path
    src = "nvidia-redistrib:" + re.sub(r"[^A-Za-z0-9._+=/~-]", "_", where)[-200:]
    return sorted({Release(a.product, a.version, src) for a in manifest.archives},
                  key=lambda r: (r.product, r.version))
