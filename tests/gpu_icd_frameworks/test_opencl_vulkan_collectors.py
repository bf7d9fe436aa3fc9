"""OpenCL and Vulkan ICD collectors on real files.

This machine's Debian packages provide the data: pocl-opencl-icd + libpocl2 + ocl-icd
(``/etc/OpenCL/vendors/pocl.icd`` -> ``libpocl.so.2.10.0``, PoCL 3.1), mesa-vulkan-drivers
(lavapipe / RADV manifests and libraries, Mesa 22.3.6) and libvulkan1 (1.3.239). The files
are copied into temporary roots (``FsView.from_directory``); tests skip when a package is
not installed. The demo fixture image is scanned end to end.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from gpuicd_util import by_stack, collect, triples

from gpusbom.collectors.opencl import package_version, soname_version
from gpusbom.collectors.vulkan import parse_manifest
from gpusbom.model import Component, own_product_version

HOST_LIB = Path("/usr/lib/x86_64-linux-gnu")
LIB = "/usr/lib/x86_64-linux-gnu"
POCL = HOST_LIB / "libpocl.so.2.10.0"
LVP = HOST_LIB / "libvulkan_lvp.so"
RADV = HOST_LIB / "libvulkan_radeon.so"
VKLOADER = HOST_LIB / "libvulkan.so.1.3.239"
OCLLOADER = HOST_LIB / "libOpenCL.so.1.0.0"
HOST_ICD = Path("/usr/share/vulkan/icd.d")


def _need(*paths: Path) -> None:
    for p in paths:
        if not p.exists():
            pytest.skip(f"{p} not installed (apt-get install pocl-opencl-icd mesa-vulkan-drivers)")


def _copy(src: Path, root: Path, dest: str) -> Path:
    out = root / dest.lstrip("/")
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src, out)
    return out


def _link(root: Path, path: str, target: str) -> None:
    p = root / path.lstrip("/")
    p.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, p)


# --------------------------------------------------------------------------- OpenCL


@pytest.fixture
def pocl_root(tmp_path: Path) -> Path:
    _need(POCL, OCLLOADER, Path("/etc/OpenCL/vendors/pocl.icd"))
    _copy(Path("/etc/OpenCL/vendors/pocl.icd"), tmp_path, "/etc/OpenCL/vendors/pocl.icd")
    _copy(POCL, tmp_path, f"{LIB}/libpocl.so.2.10.0")
    _link(tmp_path, f"{LIB}/libpocl.so.2", "libpocl.so.2.10.0")
    _copy(OCLLOADER, tmp_path, f"{LIB}/libOpenCL.so.1.0.0")
    _link(tmp_path, f"{LIB}/libOpenCL.so.1", "libOpenCL.so.1.0.0")
    return tmp_path


def test_real_pocl_icd(pocl_root: Path) -> None:
    assert (pocl_root / "etc/OpenCL/vendors/pocl.icd").read_text().strip() == "libpocl.so.2.10.0"
    comps, unknowns = collect(pocl_root, ["opencl"])
    assert unknowns == []
    assert triples(comps, "opencl") == {
        ("pocl", "3.1", f"{LIB}/libpocl.so.2.10.0"),
        # no package db: ocl-icd's own version string (host's ocl-icd-libopencl1 2.3.1-1)
        ("opencl-icd-loader", "2.3.1", f"{LIB}/libOpenCL.so.1.0.0"),
    }
    pocl = next(c for c in comps if c.name == "pocl")
    assert pocl.purl == "pkg:generic/pocl/pocl@3.1"
    assert pocl.cpe == "cpe:2.3:a:pocl:pocl:3.1:*:*:*:*:*:*:*"
    assert pocl.properties["soname-version"] == "2.10.0"
    assert pocl.properties["version-source"] == "embedded"
    assert pocl.properties["icd"] == "/etc/OpenCL/vendors/pocl.icd"
    assert [(e.method, e.path, e.detail) for e in pocl.evidence] == [
        ("filename", "/etc/OpenCL/vendors/pocl.icd", "ICD pocl.icd: libpocl.so.2.10.0"),
        ("elf", f"{LIB}/libpocl.so.2.10.0", "PoCL 3.1"),
        ("soname", f"{LIB}/libpocl.so.2.10.0", "libpocl.so.2.10.0"),
    ]


def test_icd_with_absolute_path_and_ld_so_conf(tmp_path: Path) -> None:
    """An absolute library path, and a bare name found through /etc/ld.so.conf.d."""
    _need(POCL)
    _copy(POCL, tmp_path, "/opt/pocl/lib/libpocl.so.2.10.0")
    (tmp_path / "etc/OpenCL/vendors").mkdir(parents=True)
    (tmp_path / "etc/OpenCL/vendors/abs.icd").write_text("/opt/pocl/lib/libpocl.so.2.10.0\n")
    (tmp_path / "etc/OpenCL/vendors/bare.icd").write_text("libpocl.so.2.10.0\n")
    (tmp_path / "etc/ld.so.conf.d").mkdir(parents=True)
    (tmp_path / "etc/ld.so.conf").write_text("include /etc/ld.so.conf.d/*.conf\n")
    (tmp_path / "etc/ld.so.conf.d/pocl.conf").write_text("# pocl\n/opt/pocl/lib\n")
    comps, unknowns = collect(tmp_path, ["opencl"])
    assert unknowns == []
    # one library, two ICD files naming it: same (name, version, location) -> one component
    (c,) = by_stack(comps, "opencl")
    assert (c.name, c.version, c.properties["library"]) == (
        "pocl",
        "3.1",
        "/opt/pocl/lib/libpocl.so.2.10.0",
    )
    icds = {e.path for e in c.evidence if e.method == "filename"}
    assert icds == {"/etc/OpenCL/vendors/abs.icd", "/etc/OpenCL/vendors/bare.icd"}


def test_missing_library_and_env_overrides(pocl_root: Path) -> None:
    vend = pocl_root / "opt/vendors"
    vend.mkdir(parents=True)
    (vend / "nvidia.icd").write_text("libnvidia-opencl.so.1\n")
    _need(POCL)
    _copy(POCL, pocl_root, "/opt/extra/libpocl.so.2.10.0")
    env = {"OCL_ICD_VENDORS": "/opt/vendors", "OCL_ICD_FILENAMES": "/opt/extra/libpocl.so.2.10.0"}
    comps, unknowns = collect(pocl_root, ["opencl"], env=env)
    assert unknowns == []
    assert triples(comps, "opencl") == {
        ("nvidia-opencl", None, "/opt/vendors/nvidia.icd"),  # library absent: no version
        ("pocl", "3.1", f"{LIB}/libpocl.so.2.10.0"),
        ("pocl", "3.1", "/opt/extra/libpocl.so.2.10.0"),  # another copy stays separate
        ("opencl-icd-loader", "2.3.1", f"{LIB}/libOpenCL.so.1.0.0"),
    }
    by = {(c.name, c.properties.get("library")): c for c in comps}
    nv = by[("nvidia-opencl", None)]
    assert nv.properties["icd-library-missing"] == "true"
    assert nv.properties["icd-source"] == "OCL_ICD_VENDORS"
    assert ("env", None, "OCL_ICD_VENDORS=/opt/vendors") in {
        (e.method, e.path, e.detail) for e in nv.evidence
    }
    sys_pocl = by[("pocl", f"{LIB}/libpocl.so.2.10.0")]
    assert sys_pocl.properties["overridden-by"] == "OCL_ICD_VENDORS=/opt/vendors"
    env_pocl = by[("pocl", "/opt/extra/libpocl.so.2.10.0")]
    assert env_pocl.properties["icd-source"] == "OCL_ICD_FILENAMES"


def test_nvidia_icd_version_from_file_name(tmp_path: Path) -> None:
    """libnvidia-opencl.so.1 -> libnvidia-opencl.so.580.95.05: the driver version (the file
    here is an empty stand-in; only its name and link are read)."""
    (tmp_path / "etc/OpenCL/vendors").mkdir(parents=True)
    (tmp_path / "etc/OpenCL/vendors/nvidia.icd").write_text("libnvidia-opencl.so.1")
    p = tmp_path / LIB.lstrip("/") / "libnvidia-opencl.so.580.95.05"
    p.parent.mkdir(parents=True)
    p.write_bytes(b"")
    _link(tmp_path, f"{LIB}/libnvidia-opencl.so.1", "libnvidia-opencl.so.580.95.05")
    comps, _ = collect(tmp_path, ["opencl"])
    assert triples(comps, "opencl") == {
        ("nvidia-opencl", "580.95.05", f"{LIB}/libnvidia-opencl.so.580.95.05")
    }
    assert comps[0].purl == "pkg:generic/nvidia/nvidia-opencl@580.95.05"


def test_unreadable_icd_is_an_unknown(tmp_path: Path) -> None:
    (tmp_path / "etc/OpenCL/vendors").mkdir(parents=True)
    (tmp_path / "etc/OpenCL/vendors/empty.icd").write_text("\n")
    comps, unknowns = collect(tmp_path, ["opencl"])
    assert comps == []
    assert [(u.reason, u.path) for u in unknowns] == [
        ("empty OpenCL ICD file", "/etc/OpenCL/vendors/empty.icd")
    ]


# --------------------------------------------------------------------------- Vulkan


@pytest.fixture
def mesa_root(tmp_path: Path) -> Path:
    _need(LVP, RADV, VKLOADER, HOST_ICD / "lvp_icd.x86_64.json")
    for m in ("lvp_icd.x86_64.json", "radeon_icd.x86_64.json", "intel_icd.x86_64.json"):
        _copy(HOST_ICD / m, tmp_path, f"/usr/share/vulkan/icd.d/{m}")
    _copy(LVP, tmp_path, f"{LIB}/libvulkan_lvp.so")
    _copy(RADV, tmp_path, f"{LIB}/libvulkan_radeon.so")
    _copy(VKLOADER, tmp_path, f"{LIB}/libvulkan.so.1.3.239")
    _link(tmp_path, f"{LIB}/libvulkan.so.1", "libvulkan.so.1.3.239")
    return tmp_path


def test_real_mesa_vulkan_drivers(mesa_root: Path) -> None:
    """Mesa's drivers are one product (one Mesa release) at one location: lavapipe and RADV
    become one ``mesa`` component naming both drivers; the ANV manifest whose library is
    absent stays apart (no version)."""
    comps, unknowns = collect(mesa_root, ["vulkan"])
    assert unknowns == []
    assert triples(comps, "vulkan") == {
        ("mesa", "22.3.6", f"{LIB}/libvulkan_lvp.so, {LIB}/libvulkan_radeon.so"),
        ("mesa", None, "/usr/share/vulkan/icd.d/intel_icd.x86_64.json"),
        ("vulkan-loader", "1.3.239", f"{LIB}/libvulkan.so.1.3.239"),
    }
    by = {(c.name, c.version): c for c in comps}
    mesa = by[("mesa", "22.3.6")]
    assert mesa.properties["vulkan:driver"] == "lavapipe, radv"
    assert mesa.properties["vulkan:api-version"] == "1.1.230, 1.3.230"
    assert mesa.cpe == "cpe:2.3:a:mesa3d:mesa:22.3.6:*:*:*:*:*:*:*"
    assert mesa.purl == "pkg:generic/mesa/mesa@22.3.6"
    assert ("elf", f"{LIB}/libvulkan_lvp.so", "Mesa 22.3.6") in {
        (e.method, e.path, e.detail) for e in mesa.evidence
    }
    anv = by[("mesa", None)]
    assert anv.properties["icd-library-missing"] == "true"
    assert anv.properties["vulkan:driver"] == "anv"
    assert by[("vulkan-loader", "1.3.239")].purl == "pkg:generic/khronos/vulkan-loader@1.3.239"


def test_manifest_paths_relative_bare_and_env(mesa_root: Path) -> None:
    """library_path relative to the manifest, bare (linker search), and VK_DRIVER_FILES."""
    shutil.rmtree(mesa_root / "usr/share/vulkan/icd.d")
    d = mesa_root / "etc/vulkan/icd.d"
    d.mkdir(parents=True)
    rel = os.path.relpath(mesa_root / LIB.lstrip("/") / "libvulkan_lvp.so", d)
    (d / "rel.json").write_text(
        json.dumps(
            {"file_format_version": "1.0.0", "ICD": {"library_path": rel, "api_version": "1.1.230"}}
        )
    )
    (d / "bare.json").write_text(
        json.dumps({"file_format_version": "1.0.1", "ICD": {"library_path": "libvulkan_radeon.so"}})
    )
    e = mesa_root / "opt/vk"
    e.mkdir(parents=True)
    shutil.copy2(HOST_ICD / "lvp_icd.x86_64.json", e / "lvp_icd.json")
    comps, unknowns = collect(
        mesa_root, ["vulkan"], env={"VK_DRIVER_FILES": "/opt/vk/lvp_icd.json"}
    )
    assert unknowns == []
    assert triples(comps, "vulkan") == {
        ("mesa", "22.3.6", f"{LIB}/libvulkan_lvp.so, {LIB}/libvulkan_radeon.so"),
        ("vulkan-loader", "1.3.239", f"{LIB}/libvulkan.so.1.3.239"),
    }
    mesa = next(c for c in comps if c.name == "mesa")
    manifests = {e.path for e in mesa.evidence if e.method == "version-file"}
    assert manifests == {
        "/etc/vulkan/icd.d/rel.json",
        "/etc/vulkan/icd.d/bare.json",
        "/opt/vk/lvp_icd.json",
    }
    assert mesa.properties["icd-source"] == "VK_DRIVER_FILES"
    assert mesa.properties["overridden-by"] == "VK_DRIVER_FILES=/opt/vk/lvp_icd.json"


def test_bad_manifest_is_an_unknown(tmp_path: Path) -> None:
    d = tmp_path / "usr/share/vulkan/icd.d"
    d.mkdir(parents=True)
    (d / "bad.json").write_text('{"file_format_version": "1.0.0"}')
    comps, unknowns = collect(tmp_path, ["vulkan"])
    assert comps == []
    assert len(unknowns) == 1 and unknowns[0].path == "/usr/share/vulkan/icd.d/bad.json"


def test_helpers() -> None:
    assert soname_version("/x/libvulkan.so.1.3.239") == "1.3.239"
    assert soname_version("/x/libvulkan_lvp.so") is None
    deb = Component(name="x", version="1:3.1-3+deb12u1", ecosystem="deb")
    assert package_version(deb) == "3.1"
    assert package_version(Component(name="y", version="2.3.1", ecosystem="pypi")) == "2.3.1"
    assert parse_manifest('{"ICD": {"library_path": "a.so", "api_version": "1.3.0"}}') == (
        "a.so",
        "1.3.0",
        None,
    )
    with pytest.raises(ValueError):
        parse_manifest("[]")


# --------------------------------------------------------------------------- demo image


def test_demo_image() -> None:
    """The demo fixture: pocl.icd without libpocl2 (pocl-opencl-icd only), the ocl-icd loader
    and the Vulkan loader, each merged into the Debian package that owns its files."""
    from fixtures.build import ensure
    from gpusbom.scan import scan

    res = scan(ensure("demo").oci_ref)
    got = set()
    for c in res.components:
        if c.stack not in ("opencl", "vulkan"):
            continue
        paths = sorted(e.path for e in c.evidence if e.collector in ("opencl", "vulkan"))
        got.add(
            (
                c.name,
                c.version,
                c.product_name,
                own_product_version(c),
                tuple(paths),
            )
        )
    assert got == {
        ("pocl-opencl-icd", "3.1-3+deb12u1", "pocl", "3.1", ("/etc/OpenCL/vendors/pocl.icd",)),
        (
            "ocl-icd-libopencl1",
            "2.3.1-1",
            "opencl-icd-loader",
            "2.3.1",
            # its file name, and ocl-icd's own version string in it (both evidence)
            (f"{LIB}/libOpenCL.so.1.0.0", f"{LIB}/libOpenCL.so.1.0.0"),
        ),
        ("libvulkan1", "1.3.239.0-1", "vulkan-loader", "1.3.239", (f"{LIB}/libvulkan.so.1.3.239",)),
    }
    pocl = next(c for c in res.components if c.name == "pocl-opencl-icd")
    assert pocl.properties["icd-library-missing"] == "true"
    text = {s.stack: s.text() for s in res.stacks}
    assert text["opencl"] == "OpenCL (ICD loader 2.3.1, PoCL 3.1)"
    assert text["vulkan"] == "Vulkan (loader 1.3.239)"
