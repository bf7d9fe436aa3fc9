"""ROCm tarball layouts (``/opt/rocm-X.Y.Z``, no package database): every component's
version, from the component itself where it carries one, else from its install's release.

Built at test time from pinned real artifacts (fetched into the fixture cache, never
committed):

* Debian 12's ROCm 5.2.3 packages (libhsa-runtime64-1 5.2.3-3, librocm-smi64-1 5.2.3-2,
  libamd-comgr2 5.2.3-2, libhsakmt1 5.2.3+dfsg-1, libamdhip64-5 5.2.3-8): their files hold
  ABI versions only (libhsa-runtime64.so.1.5.0, librocm_smi64.so.1.0, libamd_comgr.so.2.4.0)
  and a "Debian clang" compiler ident, so they get the install's release (5.2.3, what the
  packages' own versions say), method ``rocm-install``; HIP its own HIP_VERSION constant.
* AMD-built ROCm libraries, as pytorch-triton-rocm 2.1.0 bundles them: the HSA runtime's
  ``.comment`` says the AMD compiler of ROCm 5.4.2 built it (read from the library,
  ``elf-rodata``); HIP 5.4.22803 from its getter, which the same wheel's ``hip_version.h``
  confirms.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

from gpusbom.catalog.classifiers import ROWS

ROOT = Path(__file__).resolve().parents[2]

#: (name, version, pool path, sha256, size) of Debian 12 packages, as apt-cache show says
DEBS = (
    ("libhsa-runtime64-1", "5.2.3-3", "pool/main/r/rocr-runtime/libhsa-runtime64-1_5.2.3-3_amd64.deb",
     "9b633756945b16124376b274dbc681e4022c2b9704b8bdfa04637b09c7bfad93", 439400),
    ("librocm-smi64-1", "5.2.3-2", "pool/main/r/rocm-smi-lib/librocm-smi64-1_5.2.3-2_amd64.deb",
     "bf78b7308dbd4ec0186139a2cbc65cdeb3bb59233f774ec8d778115807a68fed", 459208),
    ("libamd-comgr2", "5.2.3-2",
     "pool/main/r/rocm-compilersupport/libamd-comgr2_5.2.3-2_amd64.deb",
     "196d9e70442e78ec49dd18752acc886f500de8c9a646f6d81cb1348a7ea5c19a", 12873212),
    ("libhsakmt1", "5.2.3+dfsg-1",
     "pool/main/r/roct-thunk-interface/libhsakmt1_5.2.3+dfsg-1_amd64.deb",
     "8e57a5762878b520d1e81a424b63fb592ce78167a9f7259e8ae91178a02e2e58", 54204),
    ("libamdhip64-5", "5.2.3-8", "pool/main/r/rocm-hipamd/libamdhip64-5_5.2.3-8_amd64.deb",
     "e89c3757b6ca16b7a03374a0a42402ab19e9e7000251d47379838be965330ebd", 4865232),
)  # fmt: skip


def _fetch_deb(name: str, version: str, path: str, sha: str, size: int) -> Path:
    sys.path.insert(0, str(ROOT))
    from fixtures.fetch import Pin, fetch

    return fetch(Pin("deb", name, version, path, sha, size, "amd64"))


def _scan(root: Path, out: Path) -> list[dict[str, object]]:
    from gpusbom.cli.app import main

    rc = main(["scan", "--root", str(root), "--analyze-binaries", "-q", "-o", f"json={out}"])
    assert rc == 0
    comps: list[dict[str, object]] = json.loads(out.read_text())["components"]
    return comps


def _one(comps: list[dict[str, object]], name: str) -> dict[str, object]:
    [c] = [c for c in comps if c["name"] == name]
    return c


def test_debian_built_rocm_tarball(tmp_path: Path) -> None:
    lib = tmp_path / "root/opt/rocm-5.2.3/lib"
    lib.mkdir(parents=True)
    upstream = set()
    for name, version, path, sha, size in DEBS:
        deb = _fetch_deb(name, version, path, sha, size)
        x = tmp_path / "x" / name
        x.mkdir(parents=True)
        subprocess.run(["dpkg-deb", "-x", str(deb), str(x)], check=True)
        upstream.add(re.sub(r"[-+].*$", "", version))
        for so in x.rglob("*.so*"):
            dest = lib / so.name
            if so.is_symlink():
                dest.symlink_to(so.readlink())
            else:
                dest.write_bytes(so.read_bytes())
    assert upstream == {"5.2.3"}  # the ground truth: every package says ROCm 5.2.3
    info = tmp_path / "root/opt/rocm-5.2.3/.info"
    info.mkdir()
    (info / "version").write_text("5.2.3-109\n")
    comps = _scan(tmp_path / "root", tmp_path / "out.json")
    for product, file_version in (("hsa-runtime", "1.5.0"), ("rocm-smi-lib", "1.0"),
                                  ("comgr", "2.4.0"), ("hsakmt", "1.0.6")):
        c = _one(comps, product)
        props = c["properties"]
        assert isinstance(props, dict)
        assert c["version"] == "5.2.3", product
        assert props["file-version"] == file_version
        assert props["rocm-release"] == "5.2.3"
        assert props["version-method"] == "rocm-install"
        assert props["version-confidence"] == "low"
        assert props["rocm-release-source"] == "/opt/rocm-5.2.3 .info/version"
    hip = _one(comps, "hip-runtime")
    assert hip["version"] == "5.2.21153"
    assert hip["properties"]["hip:rocm-release"] == "5.2.3"  # type: ignore[index]


def test_amd_built_libraries_say_their_release(tmp_path: Path) -> None:
    row = next(r for r in ROWS if r.id == "rocm-compiler-rodata")
    sys.path.insert(0, str(ROOT))
    from fixtures.fetch import Pin, fetch

    s = row.source
    whl = fetch(Pin("wheel", s.name, s.version, s.file, s.sha256, s.size))
    lib = tmp_path / "root/opt/rocm-5.4.2/lib"
    lib.mkdir(parents=True)
    with zipfile.ZipFile(whl) as z:
        (lib / "libhsa-runtime64.so.1").write_bytes(z.read(s.member))
        (lib / "libamdhip64.so").write_bytes(z.read("triton/third_party/rocm/lib/libamdhip64.so"))
        hip_h = z.read("triton/third_party/rocm/include/hip/hip_version.h").decode()
    truth = dict(re.findall(r"#define HIP_VERSION_(MAJOR|MINOR|PATCH) (\d+)", hip_h))
    comps = _scan(tmp_path / "root", tmp_path / "out.json")
    hsa = _one(comps, "hsa-runtime")
    props = hsa["properties"]
    assert isinstance(props, dict)
    assert hsa["version"] == "5.4.2"
    assert props["version-method"] == "elf-rodata" and props["version-confidence"] == "medium"
    assert "disagreement" not in props  # the directory name says 5.4.2 too
    assert any(e["method"] == "elf-rodata" and "rocm-compiler-rodata: 5.4.2" in e["detail"]
               for e in hsa["evidence"])  # type: ignore[union-attr]
    hip = _one(comps, "hip-runtime")
    assert hip["version"] == f"{truth['MAJOR']}.{truth['MINOR']}.{truth['PATCH']}" == "5.4.22803"
