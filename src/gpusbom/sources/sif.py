"""``sif:PATH`` (and a bare ``*.sif`` path): an Apptainer/Singularity image file.

Layout (sylabs/sif, spec "01", all integers little-endian, Go ``encoding/binary`` packing):

* a 128-byte global header: launch script (32), ``SIF_MAGIC\\0`` (10), version (3),
  arch (3), uuid (16), then int64 created, modified, descriptors free, descriptors total,
  descriptors offset, descriptors size, data offset, data size;
* a table of 585-byte descriptors: int32 data type, bool used, uint32 id, group id and
  link, int64 offset, size, size with padding, created, modified, uid, gid, a 128-byte
  name and 384 bytes of type-specific data (partition: int32 fs type, int32 partition
  type, 3-byte arch; signature: int32 hash type, 256-byte entity, the signing key's
  fingerprint).

The primary system partition (squashfs) is read by ``fsview.squashfs`` into one layer;
only matched files' data is read. Recorded in the target: the definition file (data
object, else ``/.singularity.d/Singularity``), labels (the JSON labels object and
``/.singularity.d/labels.json``), the environment Apptainer derived from the Docker image
(``/.singularity.d/env/10-docker2singularity.sh``: ``CUDA_VERSION``,
``NVIDIA_REQUIRE_CUDA``, ...) and the signature descriptors, as ``org.sylabs.sif.*``
labels (signatures are listed, not verified). ext3 and encrypted primary partitions and
any overlay partition are not read: the first is one clear error, the second a label.
Every offset is checked against the file; partitions that overlap each other or the
descriptor table are refused.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import shlex
import struct
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

from ..errors import ImageFormatError, SourceNotFoundError, UnsafeArchiveError
from ..fsview.layer import Member, index_members, shadow_salt
from ..fsview.squashfs import SquashfsImage, SquashfsMember
from ..fsview.types import EntryKind, LayerIndex
from ..model import LayerRef, Target
from ..safetext import loads_json
from .base import ReadContext, Source, SourceResult

HEADER = struct.Struct("<32s10s3s3s16sqqqqqqqq")
DESCRIPTOR = struct.Struct("<iBIIIqqqqqqq128s384s")
MAGIC = b"SIF_MAGIC\0"
MAX_DESCRIPTORS = 4096
MAX_METADATA_OBJECT = 1 << 20  # definition file, labels, env: read into memory up to this

DATA_DEFFILE = 0x4001
DATA_ENVVAR = 0x4002
DATA_LABELS = 0x4003
DATA_PARTITION = 0x4004
DATA_SIGNATURE = 0x4005
DATA_GENERIC_JSON = 0x4006
DATA_TYPES = {
    0x4001: "deffile", 0x4002: "envvar", 0x4003: "labels", 0x4004: "partition",
    0x4005: "signature", 0x4006: "generic-json", 0x4007: "generic", 0x4008: "crypto-message",
    0x4009: "sbom", 0x400A: "oci-root-index", 0x400B: "oci-blob",
}
FS_TYPES = {1: "squashfs", 2: "ext3", 3: "archive", 4: "raw", 5: "encrypted-squashfs"}
PART_TYPES = {1: "system", 2: "primary-system", 3: "data", 4: "overlay"}
HASH_TYPES = {1: "sha256", 2: "sha384", 3: "sha512", 4: "blake2s", 5: "blake2b"}
ARCHES = {
    "01": "386", "02": "amd64", "03": "arm", "04": "arm64", "05": "ppc64", "06": "ppc64le",
    "07": "mips", "08": "mipsle", "09": "mips64", "10": "mips64le", "11": "s390x",
    "12": "riscv64",
}
SING_DEFFILE = "/.singularity.d/Singularity"
SING_LABELS = "/.singularity.d/labels.json"
SING_ENV_DIR = "/.singularity.d/env"
LABEL = "org.sylabs.sif."
_EXPORT = re.compile(r"^\s*export\s+([A-Za-z_][A-Za-z0-9_]*)=(.*)$")


@dataclass
class Descriptor:
    datatype: int
    id: int
    group: int
    link: int
    offset: int
    size: int
    name: str
    extra: bytes

    @property
    def kind(self) -> str:
        return DATA_TYPES.get(self.datatype, f"type-{self.datatype:#x}")


def _cstr(b: bytes) -> str:
    return b.split(b"\0", 1)[0].decode("utf-8", "replace")


def is_sif(path: str) -> bool:
    """Does the file at ``path`` start with a SIF global header?"""
    try:
        with open(path, "rb") as f:
            head = f.read(48)
    except OSError:
        return False
    return head[32:42] == MAGIC


class SifFile:
    """The global header and the used descriptors of a SIF, checked against the file."""

    def __init__(self, f: BinaryIO, size: int, label: str) -> None:
        self.f = f
        self.label = label
        if size < HEADER.size:
            raise ImageFormatError(f"{label}: too short for a SIF file ({size} bytes)")
        f.seek(0)
        (_launch, magic, version, arch, uid, created, modified, _free, total, doff, dsize,
         _data_off, _data_size) = HEADER.unpack(f.read(HEADER.size))
        if magic != MAGIC:
            raise ImageFormatError(f"{label}: not a SIF file (no SIF_MAGIC)")
        self.version = _cstr(version)
        if self.version != "01":
            raise ImageFormatError(f"{label}: SIF version {self.version!r} is not supported")
        self.arch = ARCHES.get(_cstr(arch), _cstr(arch))
        self.uuid = str(uuid.UUID(bytes=uid))
        self.created = created
        self.modified = modified
        if not 0 <= total <= MAX_DESCRIPTORS:
            raise ImageFormatError(f"{label}: impossible descriptor count {total}")
        if doff < HEADER.size or dsize < 0 or doff + total * DESCRIPTOR.size > size:
            raise ImageFormatError(
                f"{label}: the descriptor table (offset {doff}, {total} descriptors) lies "
                f"outside the file ({size} bytes)"
            )
        self.table = (doff, doff + total * DESCRIPTOR.size)
        f.seek(doff)
        raw = f.read(total * DESCRIPTOR.size)
        self.descriptors: list[Descriptor] = []
        for i in range(total):
            (dtype, used, did, group, link, off, dlen, _pad, _c, _m, _u, _g, name,
             extra) = DESCRIPTOR.unpack_from(raw, i * DESCRIPTOR.size)
            if not used:
                continue
            d = Descriptor(dtype, did, group, link, off, dlen, _cstr(name), extra)
            if off < 0 or dlen < 0 or off + dlen > size:
                raise ImageFormatError(
                    f"{label}: descriptor {did} ({d.kind}) points past the end of the file "
                    f"(offset {off}, {dlen} bytes; the file has {size})"
                )
            self.descriptors.append(d)
        spans = sorted(
            (d.offset, d.offset + d.size, d.id) for d in self.descriptors if d.size > 0
        )
        for (_s1, e1, i1), (s2, _e2, i2) in itertools.pairwise(spans):
            if s2 < e1:
                raise UnsafeArchiveError(
                    f"{label}: data objects {i1} and {i2} overlap (bytes {s2}..{e1})"
                )
        for s, e, i in spans:
            if s < self.table[1] and self.table[0] < e:
                raise UnsafeArchiveError(
                    f"{label}: data object {i} overlaps the descriptor table"
                )

    def read_object(self, d: Descriptor) -> bytes:
        if d.size > MAX_METADATA_OBJECT:
            raise ImageFormatError(
                f"{self.label}: {d.kind} object {d.id} is larger than {MAX_METADATA_OBJECT} bytes"
            )
        self.f.seek(d.offset)
        return self.f.read(d.size)

    def partitions(self) -> list[tuple[Descriptor, str, str, str]]:
        """(descriptor, fs type, partition type, arch) of every partition."""
        out = []
        for d in self.descriptors:
            if d.datatype == DATA_PARTITION:
                fstype, ptype, arch = struct.unpack_from("<ii3s", d.extra)
                out.append((
                    d,
                    FS_TYPES.get(fstype, f"fs-{fstype}"),
                    PART_TYPES.get(ptype, f"type-{ptype}"),
                    ARCHES.get(_cstr(arch), _cstr(arch)),
                ))
        return out

    def primary(self) -> tuple[Descriptor, str, str, str]:
        parts = self.partitions()
        prim = [p for p in parts if p[2] == "primary-system"]
        system = [p for p in parts if p[2] == "system"]
        if prim:
            return prim[0]
        if len(system) == 1:
            return system[0]
        if not parts:
            raise ImageFormatError(f"{self.label}: the SIF has no partition")
        raise ImageFormatError(
            f"{self.label}: no primary system partition among {len(parts)} partitions"
        )

    def signatures(self) -> list[dict[str, str]]:
        out = []
        for d in self.descriptors:
            if d.datatype == DATA_SIGNATURE:
                htype, entity = struct.unpack_from("<i256s", d.extra)
                fp = entity.rstrip(b"\0")
                out.append({
                    "id": str(d.id),
                    "hash": HASH_TYPES.get(htype, str(htype)),
                    "entity": fp.hex().upper() if fp else "",
                    "signs": f"group {d.link & 0x0FFFFFFF}" if d.link & 0xF0000000 else
                    f"object {d.link}",
                })
        return out


def parse_env_script(text: str) -> dict[str, str]:
    """``export NAME=...`` lines of an Apptainer env script, read as text (never executed).

    Apptainer writes a Docker image's ``ENV`` as ``export NAME="${NAME:-"value"}"`` (the
    host may override it) and ``PATH`` as ``export PATH="value"``; the default is taken."""
    env: dict[str, str] = {}
    for line in text.splitlines():
        m = _EXPORT.match(line)
        if not m:
            continue
        name, rest = m.group(1), m.group(2).strip()
        d = re.fullmatch(r'"\$\{' + name + r':-"(.*)"\}"', rest)
        if d:
            env[name] = re.sub(r'\\([\\"$`])', r"\1", d.group(1))
            continue
        try:
            words = shlex.split(rest, comments=True, posix=True)
        except ValueError:
            continue
        value = words[0] if len(words) == 1 else ""
        d = re.fullmatch(r"\$\{" + name + r":-(.*)\}", value)
        env[name] = d.group(1) if d else value
    return env


class SifSource(Source):
    """``sif:PATH``."""

    scheme = "sif"

    def read(self, ctx: ReadContext) -> SourceResult:
        path = self.location
        label = f"sif:{path}"
        try:
            f = open(path, "rb")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            raise SourceNotFoundError(f"{label}: no such file") from None
        except IsADirectoryError:
            raise SourceNotFoundError(f"{label}: is a directory, not a SIF file") from None
        except OSError as e:
            raise SourceNotFoundError(f"{label}: cannot open: {e.strerror}") from None
        with f:
            size = os.fstat(f.fileno()).st_size
            sif = SifFile(f, size, label)
            part, fstype, ptype, arch = sif.primary()
            if fstype != "squashfs":
                raise ImageFormatError(
                    f"{label}: the {ptype} partition (object {part.id}) is {fstype}; "
                    "only squashfs partitions are read"
                )
            labels: dict[str, str] = {
                LABEL + "uuid": sif.uuid,
                LABEL + "partition": f"{fstype} {ptype} object {part.id}, {part.size} bytes",
            }
            for d, fs2, pt2, _ in sif.partitions():
                if d is not part:
                    labels[LABEL + f"partition.{d.id}"] = f"{fs2} {pt2}, not read"
            sigs = sif.signatures()
            labels[LABEL + "signed"] = "true" if sigs else "false"
            for s in sigs:
                labels[LABEL + f"signature.{s['id']}"] = (
                    f"{s['hash']} by {s['entity'] or 'unknown key'}, signs {s['signs']} "
                    "(not verified)"
                )
            env: dict[str, str] = {}
            deffile: str | None = None
            for d in sif.descriptors:
                if d.datatype == DATA_DEFFILE:
                    deffile = sif.read_object(d).decode("utf-8", "replace")
                elif d.datatype in (DATA_LABELS, DATA_GENERIC_JSON) and d.size:
                    labels.update(_json_labels(sif.read_object(d)))
                elif d.datatype == DATA_ENVVAR:
                    env.update(parse_env_script(sif.read_object(d).decode("utf-8", "replace")))
            sq = SquashfsImage(f, part.offset, part.size, f"{label}: partition {part.id}",
                               ctx.limits)
            extra: dict[str, bytes] = {}
            members = _capture_singularity_d(sq.members(), extra)
            name = f"{label}: partition {part.id}"
            ctx.progress.layer_started(0, 1, part.size, name)
            entries, whiteouts, opaque, shadow, count = index_members(
                members, index=0, name=name, matcher=ctx.matcher, spool=ctx.spool,
                limits=ctx.limits,
            )
            ctx.progress.advance(part.size)
            ctx.progress.layer_done(0)
        # what the image itself says: Apptainer writes these when it builds from Docker
        for p, data in sorted(extra.items()):
            if p.startswith(SING_ENV_DIR + "/") and p.endswith(".sh"):
                env.update(parse_env_script(data.decode("utf-8", "replace")))
        if SING_LABELS in extra:
            labels.update(_json_labels(extra[SING_LABELS]))
        if deffile is None and SING_DEFFILE in extra:
            deffile = extra[SING_DEFFILE].decode("utf-8", "replace")
        if deffile is not None:
            labels[LABEL + "deffile.sha256"] = hashlib.sha256(deffile.encode()).hexdigest()
            for key in ("Bootstrap", "From"):
                m = re.search(rf"^\s*{key}\s*:\s*(\S+)", deffile, re.MULTILINE | re.IGNORECASE)
                if m:
                    labels[LABEL + f"deffile.{key.lower()}"] = m.group(1)
        li = LayerIndex(
            ref=LayerRef(index=0, diff_id=None, media_type=f"application/vnd.sylabs.sif.{fstype}",
                         size=part.size, created_by=f"SIF partition {part.id}"),
            entries=entries,
            whiteouts=whiteouts,
            opaque_dirs=opaque,
            file_count=count,
            shadow_hashes=shadow,
            shadow_salt=shadow_salt(),
        )
        target = Target(
            kind="image",
            reference=self.reference,
            source="sif",
            name=os.path.basename(path).removesuffix(".sif") or path,
            image_id=None,
            platform=f"linux/{arch or sif.arch}" if (arch or sif.arch) else None,
            env=env,
            labels=labels,
            layers=[li.ref],
        )
        self.deffile = deffile
        return SourceResult(target=target, layers=[li])


def _json_labels(data: bytes) -> dict[str, str]:
    try:
        doc = loads_json(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return {}
    if not isinstance(doc, dict):
        return {}
    return {str(k): str(v) for k, v in doc.items() if isinstance(v, (str, int, float))}


def _capture_singularity_d(
    members: Iterable[SquashfsMember], extra: dict[str, bytes]
) -> Iterator[Member]:
    """Pass members through, keeping the small Apptainer metadata files' bytes in ``extra``."""

    def gen() -> Iterator[Member]:
        for m in members:
            name = "/" + m.name
            if (
                m.kind is EntryKind.FILE
                and name.startswith("/.singularity.d/")
                and m.size <= MAX_METADATA_OBJECT
                and (name in (SING_DEFFILE, SING_LABELS) or name.startswith(SING_ENV_DIR + "/"))
            ):
                data = m.read(m.size)
                extra[name] = data
                yield _Replay(m, data)  # type: ignore[misc]
                continue
            yield m

    return gen()


class _Replay:
    """A member whose data was already read: hands the same bytes to the indexer."""

    def __init__(self, m: object, data: bytes) -> None:
        self._m = m
        self._data = data
        self._pos = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self._m, name)

    def read(self, n: int = -1) -> bytes:
        end = len(self._data) if n < 0 else self._pos + n
        out = self._data[self._pos : end]
        self._pos += len(out)
        return out
