"""A synthetic multi-layer OCI layout for the scan benchmarks, built by script and cached.

``build_layout(work, sizes=..., donors=..., seed=...)`` writes an OCI image layout of
``len(sizes) + 1`` gzip layers: a small base layer (this machine's os-release and dpkg
status) and one layer per entry of ``sizes`` (uncompressed bytes wanted). The layers are
made of real files first: the top-level entries of the ``donors`` directories (by default
the running Python's site-packages and the CUDA tree: on a GPU host, torch, the ``nvidia``
wheels' libraries, jaxlib, cupy... at their own paths, so that the collectors and the
binary analysis see what they see in a real image), handed to the layers largest first
(each to the layer with the most room left); what a layer still lacks is filled with
seeded pseudo-random files under ``/opt/synth/layer-NN/``, whose bytes are slices of the
donors' own bytes (so they deflate and inflate like real content) with a seeded 16-byte
stamp every 64 KiB (no two files alike). The same sizes, donors and seed give the same
blobs, byte for byte (fixed mtimes, owners and order).

Tars are written here (PAX headers, directories before their files, symlinks kept) and
gzipped with ISA-L at level 1, one process per layer, on all cores. The layout is cached
under ``work/<key>`` (the key hashes the sizes, the seed, the donors' file lists and sizes,
and this module's version): a second call returns at once.
"""

from __future__ import annotations

import hashlib
import io
import json
import multiprocessing
import os
import random
import stat
import tarfile
import time
from pathlib import Path

from isal import isal_zlib

VERSION = 2  # bump when the blobs this module writes change
MTIME = 1_700_000_000
FILL_BLOCK = 64 << 10
POOL_BYTES = 32 << 20


# ------------------------------------------------------------------------------ planning


def _walk(root: str) -> list[tuple[str, int, bool]]:
    """(path, size, is_symlink) of every file and symlink under ``root``, sorted."""
    out: list[tuple[str, int, bool]] = []
    for dirpath, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files) + [d for d in dirs if os.path.islink(os.path.join(dirpath, d))]:
            p = os.path.join(dirpath, name)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode):
                out.append((p, 0, True))
            elif stat.S_ISREG(st.st_mode):
                out.append((p, st.st_size, False))
    return out


def _entry_files(entry: str) -> tuple[str, list[tuple[str, int, bool]]]:
    if os.path.isdir(entry) and not os.path.islink(entry):
        return entry, _walk(entry)
    try:
        st = os.lstat(entry)
    except OSError:
        return entry, []
    return entry, [(entry, 0 if stat.S_ISLNK(st.st_mode) else st.st_size, stat.S_ISLNK(st.st_mode))]


def donor_groups(donors: list[str], cpus: int) -> list[tuple[str, list[tuple[str, int, bool]]]]:
    """The donors' top-level entries, each with its files, largest first."""
    entries = []
    for d in donors:
        if os.path.isdir(d):
            entries += [os.path.join(d, n) for n in sorted(os.listdir(d))]
    with multiprocessing.Pool(max(1, min(cpus, 16))) as pool:
        groups = pool.map(_entry_files, entries, chunksize=4)
    groups = [(e, fs) for e, fs in groups if fs and not e.endswith("__pycache__")]
    return sorted(groups, key=lambda g: (-sum(s for _, s, _ in g[1]), g[0]))


def plan(sizes: list[int], groups: list[tuple[str, list[tuple[str, int, bool]]]],
         seed: int) -> list[dict[str, object]]:
    """Each layer's donor files and the filler it still needs (bytes)."""
    room = list(sizes)
    files: list[list[tuple[str, int, bool]]] = [[] for _ in sizes]
    for _entry, fs in groups:
        size = sum(s for _, s, _ in fs)
        i = max(range(len(room)), key=lambda k: (room[k], -k))
        if size > room[i]:
            continue  # too large for any layer's room: left out
        files[i].extend(fs)
        room[i] -= size
    rng = random.Random(seed)
    out = []
    for i, want in enumerate(sizes):
        fill: list[int] = []
        left = room[i]
        while left > 4096:
            # a spread of file sizes: many small, some of hundreds of MB
            n = int(min(left, max(4096, rng.lognormvariate(14.5, 2.0))))
            if left - n < 4096:
                n = left
            fill.append(n)
            left -= n
        out.append({"files": files[i], "fill": fill, "want": want})
    return out


# ------------------------------------------------------------------------------ writing


class _Gz:
    """Writes a gzip blob (ISA-L level 1) to ``path``, hashing both sides."""

    def __init__(self, path: str) -> None:
        self.f = open(path, "wb")  # noqa: SIM115 - closed in close()
        self.c = isal_zlib.compressobj(1, isal_zlib.DEFLATED, 31)
        self.diff = hashlib.sha256()
        self.dig = hashlib.sha256()
        self.raw = 0

    def write(self, b: bytes | memoryview) -> None:
        self.raw += len(b)
        self.diff.update(b)
        z = self.c.compress(b)
        if z:
            self.dig.update(z)
            self.f.write(z)

    def close(self) -> tuple[str, str, int]:
        z = self.c.flush()
        self.dig.update(z)
        self.f.write(z)
        self.f.close()
        return "sha256:" + self.dig.hexdigest(), "sha256:" + self.diff.hexdigest(), self.raw


def _header(name: str, kind: bytes, size: int = 0, mode: int = 0o644, link: str = "") -> bytes:
    ti = tarfile.TarInfo(name)
    ti.type, ti.size, ti.mode, ti.mtime, ti.linkname = kind, size, mode, MTIME, link
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = "root"
    return ti.tobuf(format=tarfile.PAX_FORMAT)


def _pad(out: _Gz, n: int) -> None:
    if n % 512:
        out.write(b"\0" * (512 - n % 512))


def _dirs(out: _Gz, path: str, seen: set[str]) -> None:
    parts = path.strip("/").split("/")[:-1]
    for k in range(1, len(parts) + 1):
        d = "/".join(parts[:k])
        if d not in seen:
            seen.add(d)
            out.write(_header(d + "/", tarfile.DIRTYPE, mode=0o755))


def _pool_bytes(donor_files: list[str], seed: int) -> bytes:
    """``POOL_BYTES`` of donor content (seeded picks), the filler's raw material."""
    rng = random.Random(seed)
    pieces, have = [], 0
    cands = [p for p in donor_files if os.path.getsize(p) >= FILL_BLOCK] if donor_files else []
    for _ in range(4096):
        if have >= POOL_BYTES or not cands:
            break
        p = rng.choice(cands)
        size = os.path.getsize(p)
        off = rng.randrange(0, max(1, size - (1 << 20)))
        with open(p, "rb") as f:
            f.seek(off)
            b = f.read(min(1 << 20, POOL_BYTES - have))
        pieces.append(b)
        have += len(b)
    if have < POOL_BYTES:  # no donors: text-like bytes (deflate about 3:1)
        words = [bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz_") for _ in range(rng.randint(2, 12)))
                 for _ in range(2000)]
        while have < POOL_BYTES:
            b = b" ".join(rng.choice(words) for _ in range(4096)) + b"\n"
            b += rng.randbytes(len(b) // 8)
            pieces.append(b)
            have += len(b)
    return b"".join(pieces)[:POOL_BYTES]


def _fill(out: _Gz, n: int, pool: bytes, rng: random.Random) -> None:
    left = n
    while left > 0:
        k = min(FILL_BLOCK, left)
        off = rng.randrange(0, len(pool) - FILL_BLOCK)
        stamp = rng.randbytes(16)
        block = stamp + pool[off + 16 : off + k] if k > 16 else stamp[:k]
        out.write(block)
        left -= k


def _write_layer(job: tuple[int, dict[str, object], str, int, list[str]]) -> dict[str, object]:
    i, lp, blobs, seed, pool_from = job
    t0 = time.perf_counter()
    tmp = os.path.join(blobs, f"tmp-{i}")
    out = _Gz(tmp)
    seen: set[str] = set()
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    for path, _size, link in lp["files"]:  # type: ignore[attr-defined]
        name = path.lstrip("/")
        _dirs(out, name, seen)
        if link:
            out.write(_header(name, tarfile.SYMTYPE, mode=0o777, link=os.readlink(path)))
            continue
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            out.write(_header(name, tarfile.REGTYPE, st.st_size, st.st_mode & 0o7777))
            left = st.st_size
            while left > 0:
                n = os.readv(fd, [view[: min(len(buf), left)]])
                if n <= 0:  # shrank while read: pad with zeros (the header said its size)
                    out.write(b"\0" * left)
                    break
                out.write(view[:n])
                left -= n
            _pad(out, st.st_size)
        finally:
            os.close(fd)
    rng = random.Random(seed * 1000 + i)
    fill = lp["fill"]
    if fill:
        pool = _pool_bytes(pool_from, seed * 1000 + i)
        for k, n in enumerate(fill):  # type: ignore[arg-type]
            name = f"opt/synth/layer-{i:02d}/data-{k:05d}.bin"
            _dirs(out, name, seen)
            out.write(_header(name, tarfile.REGTYPE, n))
            _fill(out, n, pool, rng)
            _pad(out, n)
    out.write(b"\0" * 1024)
    digest, diff_id, raw = out.close()
    os.replace(tmp, os.path.join(blobs, digest[7:]))
    return {"index": i, "digest": digest, "diff_id": diff_id, "raw": raw,
            "size": os.path.getsize(os.path.join(blobs, digest[7:])),
            "donor_files": len(lp["files"]), "filler_files": len(fill),  # type: ignore[arg-type]
            "filler_bytes": sum(fill), "build_s": round(time.perf_counter() - t0, 2)}  # type: ignore[arg-type]


def _base_layer(blobs: str) -> dict[str, object]:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for p in ("/etc/os-release", "/usr/lib/os-release", "/var/lib/dpkg/status"):
            if os.path.isfile(p) and not os.path.islink(p):
                tf.add(p, arcname=p.lstrip("/"))
    raw = buf.getvalue()
    c = isal_zlib.compressobj(1, isal_zlib.DEFLATED, 31)
    z = c.compress(raw) + c.flush()
    d = hashlib.sha256(z).hexdigest()
    Path(blobs, d).write_bytes(z)
    return {"index": -1, "digest": "sha256:" + d, "diff_id": "sha256:" + hashlib.sha256(raw).hexdigest(),
            "raw": len(raw), "size": len(z)}


def write_layout(root: Path, layers: list[tuple[str, str, int]]) -> None:
    """index.json, oci-layout, the config and the manifest of ``layers`` ((digest, diff_id,
    size) each, bottom first)."""
    blobs = root / "blobs" / "sha256"
    cfg = json.dumps({
        "architecture": "amd64", "os": "linux", "config": {"Env": ["PATH=/usr/bin"]},
        "rootfs": {"type": "layers", "diff_ids": [x[1] for x in layers]},
    }, sort_keys=True).encode()
    (blobs / hashlib.sha256(cfg).hexdigest()).write_bytes(cfg)
    man = json.dumps({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": "sha256:" + hashlib.sha256(cfg).hexdigest(), "size": len(cfg)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": d, "size": s}
                   for d, _, s in layers],
    }, sort_keys=True).encode()
    (blobs / hashlib.sha256(man).hexdigest()).write_bytes(man)
    index = {"schemaVersion": 2, "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "digest": "sha256:" + hashlib.sha256(man).hexdigest(), "size": len(man)}]}
    (root / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    (root / "index.json").write_text(json.dumps(index))


def layer_sizes(layers: int, total: float, largest: float) -> list[int]:
    """``layers`` sizes (bytes) adding up to ``total``: the first ``largest``, the rest
    falling off geometrically (each 0.8 of the one before), as in images of a big venv."""
    if layers == 1:
        return [int(total)]
    rest = max(0.0, total - largest)
    w = [0.8**k for k in range(layers - 1)]
    return [int(largest)] + [int(rest * x / sum(w)) for x in w]


def build_layout(work: Path, *, sizes: list[int], donors: list[str], seed: int = 37,
                 cpus: int | None = None, log=print) -> tuple[Path, list[str], dict[str, object]]:  # type: ignore[no-untyped-def]
    """The layout (cached under ``work``): (its root, layer blob paths bottom first, facts)."""
    cpus = cpus or len(os.sched_getaffinity(0))
    t0 = time.perf_counter()
    groups = donor_groups(donors, cpus)
    ident = hashlib.sha256(json.dumps([VERSION, sizes, seed, [
        (e, len(fs), sum(s for _, s, _ in fs)) for e, fs in groups]]).encode()).hexdigest()[:16]
    root = work / f"synth-{ident}"
    blobs = root / "blobs" / "sha256"
    facts_path = root / "facts.json"
    if facts_path.exists():
        facts = json.loads(facts_path.read_text())
        return root, [str(blobs / d[7:]) for d in facts["digests"]], facts
    import shutil

    shutil.rmtree(root, ignore_errors=True)
    blobs.mkdir(parents=True)
    lp = plan(sizes, groups, seed)
    all_files = [p for g in lp for p, s, link in g["files"] if not link and s]  # type: ignore[attr-defined]
    pool_from = all_files[:: max(1, len(all_files) // 2000)]
    log(f"planned {len(sizes)} layers from {len(groups)} donor entries in "
        f"{time.perf_counter() - t0:.1f} s")
    base = _base_layer(str(blobs))
    jobs = [(i, p, str(blobs), seed, pool_from) for i, p in enumerate(lp)]
    order = sorted(jobs, key=lambda j: -j[1]["want"])  # type: ignore[operator]
    with multiprocessing.Pool(max(1, min(cpus, len(jobs)))) as pool:
        got = sorted(pool.map(_write_layer, order, chunksize=1), key=lambda r: r["index"])  # type: ignore[arg-type,return-value]
    layers = [base, *got]
    write_layout(root, [(x["digest"], x["diff_id"], x["size"]) for x in layers])  # type: ignore[misc]
    facts = {
        "key": ident, "seed": seed, "donors": donors, "build_s": round(time.perf_counter() - t0, 1),
        "layers": len(layers),
        "digests": [x["digest"] for x in layers],
        "uncompressed_bytes": sum(int(x["raw"]) for x in layers),  # type: ignore[call-overload]
        "compressed_bytes": sum(int(x["size"]) for x in layers),  # type: ignore[call-overload]
        "per_layer": layers,
    }
    facts_path.write_text(json.dumps(facts, indent=1))
    log(f"built {len(layers)} layers: {facts['uncompressed_bytes'] / 1e9:.2f} GB, "  # type: ignore[operator]
        f"{facts['compressed_bytes'] / 1e9:.2f} GB gzip in {facts['build_s']} s")  # type: ignore[operator]
    return root, [str(blobs / x["digest"][7:]) for x in layers], facts  # type: ignore[index]
