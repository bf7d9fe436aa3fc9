"""SIF source: files made by siftool + mksquashfs read like the docker-archive of the same
root filesystem, the SIF's own metadata is recorded, and hostile SIFs give one clear line
and exit 3."""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import sif_fixtures as sf

from fixtures.build import ensure
from gpusbom.errors import InputError
from gpusbom.scan import scan
from gpusbom.sources import SifSource, resolve_source
from gpusbom.sources.sif import DESCRIPTOR, HEADER

TOOLS = ("siftool", "mksquashfs", "umoci")


@pytest.fixture(scope="session", autouse=True)
def _tools() -> None:
    for t in TOOLS:
        assert shutil.which(t), f"{t} is missing (scripts/test installs siftool squashfs-tools umoci)"


def components(ref: str) -> set[tuple[str, str | None, str | None, str]]:
    res = scan(ref, advisories=False)
    return {(c.name, c.version, c.purl, c.type) for c in res.components}


@pytest.fixture(scope="module")
def archive_components() -> set[tuple[str, str | None, str | None, str]]:
    return components(f"docker-archive:{ensure('demo').docker_archive}")


@pytest.mark.parametrize("comp", ["gzip", "zstd", "xz"])
def test_sif_parity_with_docker_archive(
    comp: str, archive_components: set[tuple[str, str | None, str | None, str]]
) -> None:
    sif = sf.demo_sif(comp)
    got = components(f"sif:{sif}")
    assert len(archive_components) >= 10
    assert got == archive_components


def test_sif_metadata_and_bare_path(tmp_path: Path) -> None:
    sif = sf.demo_sif("gzip", signed=True)
    src = resolve_source(str(sif))
    assert isinstance(src, SifSource)
    res = scan(str(sif), advisories=False)
    t = res.target
    assert t.source == "sif" and t.kind == "image" and t.platform == "linux/amd64"
    assert t.env["CUDA_VERSION"] == "12.4.1"
    assert t.env["NVIDIA_REQUIRE_CUDA"] == "cuda>=12.4 brand=tesla,driver>=470,driver<471"
    assert t.env["PATH"].startswith("/usr/local/")
    assert t.labels["org.opencontainers.image.title"] == "gpusbom-fixture-demo"
    assert t.labels["org.sylabs.sif.deffile.bootstrap"] == "docker-archive"
    assert t.labels["org.sylabs.sif.deffile.from"] == "gpusbom-fixtures/demo:latest"
    assert t.labels["org.sylabs.sif.signed"] == "true"
    sigs = [v for k, v in t.labels.items() if k.startswith("org.sylabs.sif.signature.")]
    assert sigs == [f"sha256 by {sf.FINGERPRINT}, signs object 2 (not verified)"]
    assert t.labels["org.sylabs.sif.partition"].startswith("squashfs primary-system object 2")
    unsigned = scan(f"sif:{sf.demo_sif('zstd')}", advisories=False).target
    assert unsigned.labels["org.sylabs.sif.signed"] == "false"
    # the CUDA stack is seen through the env Apptainer derived from the Docker image
    assert any(c.name == "cuda-toolkit" and c.version == "12.4.1" for c in res.components)


# --------------------------------------------------------------------------- hostile SIFs


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small rootfs as an uncompressed-metadata squashfs (easy to patch) inside a SIF."""
    d = tmp_path_factory.mktemp("tinysif")
    root = d / "rootfs"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "os-release").write_text("ID=debian\nVERSION_ID=12\n")
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / "sub" / "deeper" / "f.txt").write_text("x")
    sq = d / "tiny.sqfs"
    subprocess.run(["mksquashfs", str(root), str(sq), "-noI", "-noD", "-noF", "-noX",
                    "-noappend", "-all-root", "-quiet", "-no-progress"], check=True)
    sif = d / "tiny.sif"
    subprocess.run(["siftool", "new", str(sif)], check=True)
    subprocess.run(["siftool", "add", str(sif), str(sq), "--datatype", "4", "--parttype", "2",
                    "--partfs", "1", "--partarch", "2"], check=True, capture_output=True)
    return sif


def _descriptors(data: bytes) -> list[tuple[int, tuple[object, ...]]]:
    h = HEADER.unpack_from(data, 0)
    total, doff = h[8], h[9]
    out = []
    for i in range(total):
        pos = doff + i * DESCRIPTOR.size
        d = DESCRIPTOR.unpack_from(data, pos)
        if d[1]:
            out.append((pos, d))
    return out


def _cli(ref: str, tmp: Path) -> tuple[int, str]:
    out = tmp / "out.json"
    r = subprocess.run(
        [sys.executable, "-m", "gpusbom", "scan", "-q", ref, "-o", f"json={out}"],
        capture_output=True, text=True, check=False,
    )
    assert not out.exists(), "no partial output file"
    return r.returncode, r.stderr.strip()


def _patch_partition(tiny: Path, dst: Path, field_offset: int, value: int) -> Path:
    data = bytearray(tiny.read_bytes())
    pos, _ = next(p for p in _descriptors(bytes(data)) if p[1][0] == 0x4004)
    struct.pack_into("<q", data, pos + field_offset, value)
    dst.write_bytes(bytes(data))
    return dst


def test_tiny_sif_reads(tiny: Path, tmp_path: Path) -> None:
    res = scan(f"sif:{tiny}", advisories=False)
    assert res.target.os_release.get("ID") == "debian"


def test_descriptor_offset_past_end(tiny: Path, tmp_path: Path) -> None:
    bad = _patch_partition(tiny, tmp_path / "past.sif", 17, 1 << 40)  # Offset field
    rc, err = _cli(str(bad), tmp_path)
    assert rc == 3
    assert err.count("\n") == 0 and "points past the end of the file" in err and "past.sif" in err


def test_overlapping_partitions(tiny: Path, tmp_path: Path) -> None:
    two = tmp_path / "two.sif"
    shutil.copyfile(tiny, two)
    sq = tmp_path / "data.bin"
    sq.write_bytes(b"\0" * 8192)
    subprocess.run(["siftool", "add", str(two), str(sq), "--datatype", "4", "--parttype", "3",
                    "--partfs", "4", "--partarch", "2"], check=True, capture_output=True)
    data = bytearray(two.read_bytes())
    parts = [p for p in _descriptors(bytes(data)) if p[1][0] == 0x4004]
    first_off = parts[0][1][5]
    struct.pack_into("<q", data, parts[1][0] + 17, int(first_off) + 100)  # type: ignore[call-overload]
    two.write_bytes(bytes(data))
    rc, err = _cli(f"sif:{two}", tmp_path)
    assert rc == 3 and err.count("\n") == 0 and "overlap" in err


def test_squashfs_directory_loop(tiny: Path, tmp_path: Path) -> None:
    data = bytearray(tiny.read_bytes())
    _, part = next(p for p in _descriptors(bytes(data)) if p[1][0] == 0x4004)
    base = int(part[5])  # type: ignore[call-overload]
    sb = struct.unpack_from("<IIIIIHHHHHHQQQQQQQQ", data, base)
    root_ref, dir_start = sb[11], sb[16]
    # the entry of "deeper" in /sub's listing: make it point at the root directory's inode
    name_at = data.index(b"deeper", base + dir_start)
    struct.pack_into("<H", data, name_at - 8, root_ref & 0xFFFF)
    assert root_ref >> 16 == 0
    loop = tmp_path / "loop.sif"
    loop.write_bytes(bytes(data))
    rc, err = _cli(f"sif:{loop}", tmp_path)
    assert rc == 3 and err.count("\n") == 0 and "directory loop" in err, err


def test_ext3_primary_and_overlay_partitions(tiny: Path, tmp_path: Path) -> None:
    ext = tmp_path / "ext3.sif"
    subprocess.run(["siftool", "new", str(ext)], check=True)
    img = tmp_path / "ext3.img"
    img.write_bytes(b"\0" * 65536)
    subprocess.run(["siftool", "add", str(ext), str(img), "--datatype", "4", "--parttype", "2",
                    "--partfs", "2", "--partarch", "2"], check=True, capture_output=True)
    rc, err = _cli(f"sif:{ext}", tmp_path)
    assert rc == 3 and err.count("\n") == 0
    assert "is ext3; only squashfs partitions are read" in err
    over = tmp_path / "overlay.sif"
    shutil.copyfile(tiny, over)
    subprocess.run(["siftool", "add", str(over), str(img), "--datatype", "4", "--parttype", "4",
                    "--partfs", "2", "--partarch", "2"], check=True, capture_output=True)
    t = scan(f"sif:{over}", advisories=False).target
    assert [v for k, v in t.labels.items() if k.startswith("org.sylabs.sif.partition.")] == [
        "ext3 overlay, not read"
    ]


def test_not_squashfs_and_unsupported_compression(tiny: Path, tmp_path: Path) -> None:
    junk = tmp_path / "junk.sif"
    subprocess.run(["siftool", "new", str(junk)], check=True)
    blob = tmp_path / "junk.bin"
    blob.write_bytes(b"garbage!" * 1000)
    subprocess.run(["siftool", "add", str(junk), str(blob), "--datatype", "4", "--parttype", "2",
                    "--partfs", "1", "--partarch", "2"], check=True, capture_output=True)
    rc, err = _cli(f"sif:{junk}", tmp_path)
    assert rc == 3 and err.count("\n") == 0 and "not a squashfs filesystem" in err
    root = tmp_path / "r"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "os-release").write_text("ID=debian\n")
    lz4 = sf.make_sif(root, tmp_path / "lz4.sif", "lz4")
    rc, err = _cli(f"sif:{lz4}", tmp_path)
    assert rc == 3 and err.count("\n") == 0 and "compression lz4 is not supported" in err


def test_not_a_sif(tmp_path: Path) -> None:
    p = tmp_path / "x.sif"
    p.write_bytes(b"#!/usr/bin/env run-singularity\n" + b"\0" * 200)
    with pytest.raises(InputError, match="not a SIF file"):
        resolve_source(f"sif:{p}").read(None)  # type: ignore[arg-type]


def test_mutated_sifs_never_crash(tiny: Path, tmp_path: Path) -> None:
    """Seeded random byte changes in the header, descriptors and the (uncompressed-metadata)
    squashfs: every outcome is a scan or an input error (exit 3), never anything else."""
    import random

    data = tiny.read_bytes()
    rng = random.Random(18)
    outcomes = {"ok": 0, "input-error": 0}
    p = tmp_path / "m.sif"
    for _ in range(300):
        d = bytearray(data)
        for _ in range(rng.randint(1, 6)):
            pos = rng.randrange(len(d)) if rng.random() < 0.3 else rng.randrange(
                max(0, len(d) - 8192), len(d))
            d[pos] = rng.randrange(256)
        p.write_bytes(bytes(d))
        try:
            scan(f"sif:{p}", advisories=False)
            outcomes["ok"] += 1
        except InputError:
            outcomes["input-error"] += 1
    assert outcomes["input-error"] > 5 and sum(outcomes.values()) == 300, outcomes
