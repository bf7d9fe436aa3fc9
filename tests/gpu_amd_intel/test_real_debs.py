"""ROCm, Level Zero and Intel GPU collectors on real Debian 12 packages.

The packages (amd_intel_util.DEB_PINS) are fetched by sha256 with the fixture fetcher and
unpacked into a root filesystem with a dpkg database (status + info/*.list) written the
way fixtures/debpkg.py writes it, then scanned from the directory like `gpusbom scan dir:`.
Every version asserted here was read off the real packages (file names, headers, dpkg).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from amd_intel_util import build_root, by_product, debs, merged_into, observe_dir, triples

from gpusbom.stack import summarize

LIB = "/usr/lib/x86_64-linux-gnu"
ROCM_DEBS = [
    "libamdhip64-5", "librocrand1", "libhiprand1", "rocminfo", "rocm-smi", "librocm-smi64-1",
    "libhipsparse0", "librocprim-dev", "libhsa-runtime64-1",
]  # fmt: skip
INTEL_DEBS = ["libze1", "intel-opencl-icd", "libigc1", "libigdgmm12"]


@pytest.fixture(scope="module")
def rocm_scan(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    root = build_root(tmp_path_factory.mktemp("rocm") / "root", debs(ROCM_DEBS))
    return observe_dir(root)


@pytest.fixture(scope="module")
def intel_scan(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    root = build_root(tmp_path_factory.mktemp("intel") / "root", debs(INTEL_DEBS))
    return observe_dir(root)


def test_debian_rocm_packages_exact_observations(rocm_scan) -> None:  # type: ignore[no-untyped-def]
    mine, _, unknowns = rocm_scan
    assert unknowns == []
    assert triples(mine) == {
        # HIP's file name is HIP's own version (patch = build number), not the ROCm release
        ("hip-runtime", "5.2.21153", f"{LIB}/libamdhip64.so.5.2.21153"),
        # the other file names carry ABI versions: the version is the owning package's
        ("hsa-runtime", "5.2.3", f"{LIB}/libhsa-runtime64.so.1.5.0"),
        ("rocrand", "5.3.3", f"{LIB}/librocrand.so.1.1"),
        ("hiprand", "5.3.3", f"{LIB}/libhiprand.so.1.1"),
        ("hipsparse", "5.3.3", f"{LIB}/libhipsparse.so.0.1"),  # 5.3.3+dfsg-2~deb12u1
        ("rocm-smi-lib", "5.2.3", "/usr/lib/librocm_smi64.so.1.0"),
        # rocPRIM's own version from its header (the package is the ROCm 5.3.3 source)
        ("rocprim", "2.10.9", "/usr/include/rocprim/rocprim_version.hpp"),
        ("rocminfo", "5.2.3", "/usr/bin/rocminfo"),
        ("rocm-smi", "5.2.3", "/usr/bin/rocm-smi"),
    }
    hip = by_product(mine, "hip-runtime")[0]
    assert hip.properties["file-version"] == "5.2.21153"
    assert hip.purl == "pkg:generic/amd/hip-runtime@5.2.21153"
    assert hip.supplier == "Advanced Micro Devices, Inc."
    rocrand = by_product(mine, "rocrand")[0]
    assert rocrand.properties["file-version"] == "1.1"
    assert "owning package librocrand1 5.3.3-4" in (rocrand.evidence[0].detail or "")


def test_lone_distro_hip_is_not_a_rocm_install(rocm_scan) -> None:  # type: ignore[no-untyped-def]
    mine, fused, _ = rocm_scan
    assert not by_product(mine, "rocm-core")
    assert all("release" not in c.properties for c in mine)
    assert {c.properties["install"] for c in mine} == {"distro-package"}
    rocm = next(s for s in summarize(fused) if s.stack == "rocm")
    assert rocm.present and rocm.release is None
    assert rocm.text().startswith("ROCm (")  # no release after "ROCm"


def test_debian_rocm_observations_fuse_into_their_packages(rocm_scan) -> None:  # type: ignore[no-untyped-def]
    _, fused, _ = rocm_scan
    got = merged_into(fused, f"{LIB}/libamdhip64.so.5.2.21153")
    assert [(g["name"], g["version"], g["ecosystem"]) for g in got] == [
        ("libamdhip64-5", "5.2.3-8", "deb")
    ]
    props = got[0]["properties"]
    assert props["stack"] == "rocm" and props["product"] == "hip-runtime"
    assert props["product-version"] == "5.2.21153"
    assert props["install"] == "distro-package"
    for path, pkg in [
        (f"{LIB}/librocrand.so.1.1", "librocrand1"),
        ("/usr/bin/rocminfo", "rocminfo"),
        ("/usr/bin/rocm-smi", "rocm-smi"),
        ("/usr/include/rocprim/rocprim_version.hpp", "librocprim-dev"),
    ]:
        assert [g["name"] for g in merged_into(fused, path)] == [pkg], path
    # nothing of ours stayed stand-alone: every file has a package
    assert not [
        c for c in fused if c.ecosystem == "generic" and c.stack == "rocm"
    ]


def test_debian_intel_packages_exact_observations(intel_scan) -> None:  # type: ignore[no-untyped-def]
    mine, _, unknowns = intel_scan
    assert unknowns == []
    assert triples(mine) == {
        # Debian's libze1 1.8.12 ships libze_loader.so.1.8.0: the package version wins
        ("level-zero-loader", "1.8.12", f"{LIB}/libze_loader.so.1.8.0"),
        # BUILD 24595 = the third number of compute-runtime 22.43.24595.41
        ("level-zero-gpu-driver", "1.3.24595", f"{LIB}/libze_intel_gpu.so.1.3.24595"),
        ("intel-compute-runtime", "22.43.24595.41", f"{LIB}/intel-opencl/libigdrcl.so"),
        ("ocloc", "22.43.24595.41", "/usr/bin/ocloc"),
        ("igc", "1.0.12504.6", f"{LIB}/libigc.so.1.0.1"),
        ("gmmlib", "22.3.3", f"{LIB}/libigdgmm.so.12.3.0"),
    }
    loader = by_product(mine, "level-zero-loader")[0]
    assert loader.stack == "level-zero"
    assert loader.properties["file-version"] == "1.8.0"
    gpu = by_product(mine, "level-zero-gpu-driver")[0]
    assert gpu.stack == "intel-gpu"
    assert gpu.properties["compute-runtime-build"] == "24595"
    neo = by_product(mine, "intel-compute-runtime")[0]
    assert [(e.path, e.detail) for e in neo.evidence][1] == (
        "/etc/OpenCL/vendors/intel.icd",
        f"OpenCL ICD names {LIB}/intel-opencl/libigdrcl.so",
    )
    assert by_product(mine, "igc")[0].properties["file-version"] == "1.0.1"
    assert by_product(mine, "gmmlib")[0].properties["file-version"] == "12.3.0"


def test_debian_intel_observations_fuse_into_their_packages(intel_scan) -> None:  # type: ignore[no-untyped-def]
    _, fused, _ = intel_scan
    for path, pkg in [
        (f"{LIB}/libze_loader.so.1.8.0", "libze1"),
        (f"{LIB}/libze_intel_gpu.so.1.3.24595", "intel-opencl-icd"),
        (f"{LIB}/intel-opencl/libigdrcl.so", "intel-opencl-icd"),
        ("/etc/OpenCL/vendors/intel.icd", "intel-opencl-icd"),
        (f"{LIB}/libigc.so.1.0.1", "libigc1"),
        (f"{LIB}/libigdgmm.so.12.3.0", "libigdgmm12"),
    ]:
        assert [g["name"] for g in merged_into(fused, path)] == [pkg], path
    stacks = {s.stack: s for s in summarize(fused)}
    assert stacks["level-zero"].present
    assert [p.versions for p in stacks["level-zero"].parts] == [["1.8.12"]]
    assert stacks["intel-gpu"].present


def test_real_rocm_install_beside_a_distro_hip(tmp_path: Path) -> None:
    """A ROCm install gives the release; the distro HIP next to it still has none.

    The /opt/rocm-6.2.0 files are HAND-WRITTEN in the format ROCm ships (no AMD archive is
    reachable here). Formats verified in ROCm/rocm-core (CMakeLists.txt writes
    `.info/version` as "MAJOR.MINOR.PATCH\\n" and installs rocm_version.h from
    rocm_version.h.in with `#define ROCM_VERSION_MAJOR @VERSION_MAJOR@` ...; the library
    VERSION is SO_MAJOR.SO_MINOR.ROCM_LIBPATCH_VERSION, i.e. librocm-core.so.1.0.60200).
    The library files are empty: only their names are read.
    """
    header = (
        b"#ifndef _ROCM_VERSION_H_\n#define _ROCM_VERSION_H_\n"
        b"#define ROCM_VERSION_MAJOR   6\n#define ROCM_VERSION_MINOR   2\n"
        b"#define ROCM_VERSION_PATCH   0\n"
        b'#define ROCM_BUILD_INFO\t     "6.2.0.60200-66~22.04"\n#endif\n'
    )
    r = "/opt/rocm-6.2.0"
    root = build_root(
        tmp_path / "root",
        debs(["libamdhip64-5"]),
        extra_files={
            f"{r}/.info/version": b"6.2.0\n",
            f"{r}/include/rocm-core/rocm_version.h": header,
            f"{r}/lib/librocm-core.so.1.0.60200": b"",
            f"{r}/lib/libamdhip64.so.6.2.41133": b"",
            f"{r}/lib/librocblas.so.4.2.60200": b"",
        },
        extra_links={
            "/opt/rocm": "rocm-6.2.0",
            f"{r}/lib/libamdhip64.so.6": "libamdhip64.so.6.2.41133",
            f"{r}/lib/librocm-core.so.1": "librocm-core.so.1.0.60200",
        },
    )
    mine, fused, unknowns = observe_dir(root)
    assert unknowns == []
    assert triples(mine) == {
        ("rocm-core", "6.2.0", f"{r}/.info/version"),
        ("hip-runtime", "6.2.41133", f"{r}/lib/libamdhip64.so.6.2.41133"),
        # unowned: the ROCm release its file name ends in (libpatch 60200), said so
        ("rocblas", "6.2.0", f"{r}/lib/librocblas.so.4.2.60200"),
        ("hip-runtime", "5.2.21153", f"{LIB}/libamdhip64.so.5.2.21153"),
    }
    core = by_product(mine, "rocm-core")[0]
    assert core.properties["release"] == "6.2.0"
    assert core.properties["linked-from"] == "/opt/rocm"
    assert "disagreement" not in core.properties
    assert [e.path for e in core.evidence] == [
        f"{r}/.info/version",
        f"{r}/include/rocm-core/rocm_version.h",
        r,
        f"{r}/lib/librocm-core.so.1.0.60200",
    ]
    rocblas = by_product(mine, "rocblas")[0].properties
    assert rocblas["version-method"] == "file-name-libpatch"
    assert rocblas["version-scheme"] == "rocm-release" and rocblas["own-version"] == "4.2"
    hips = {c.properties["location"]: c for c in by_product(mine, "hip-runtime")}
    assert hips[f"{r}/lib"].properties["install"] == "rocm"
    assert hips[LIB].properties["install"] == "distro-package"
    assert all("release" not in c.properties for c in hips.values())
    rocm = next(s for s in summarize(fused) if s.stack == "rocm")
    assert rocm.release == "6.2.0"
    hip_part = next(p for p in rocm.parts if p.product == "hip-runtime")
    assert hip_part.versions == ["5.2.21153", "6.2.41133"]  # two copies, both kept


def test_rocm_release_sources_disagree(tmp_path: Path) -> None:
    """Hand-written (format as above): the version file says 6.2.1, the directory 6.2.0."""
    r = "/opt/rocm-6.2.0"
    root = build_root(tmp_path / "root", [], extra_files={f"{r}/.info/version": b"6.2.1\n"})
    mine, _, _ = observe_dir(root)
    (core,) = by_product(mine, "rocm-core")
    assert core.version == "6.2.1"
    assert core.properties["release"] == "6.2.1"
    assert core.properties["disagreement"] == (
        "ROCm 6.2.1 (.info/version), but directory name says 6.2.0"
    )


def test_versioned_directory_alone_names_the_release(tmp_path: Path) -> None:
    r = "/opt/rocm-5.7.1"
    root = build_root(tmp_path / "root", [], extra_files={f"{r}/lib/libMIOpen.so.1.0.50701": b""})
    mine, _, _ = observe_dir(root)
    assert triples(mine) == {
        ("rocm-core", "5.7.1", r),
        # the ROCm release its file name ends in (libpatch 50701), said so
        ("miopen", "5.7.1", f"{r}/lib/libMIOpen.so.1.0.50701"),
    }
    (miopen,) = by_product(mine, "miopen")
    assert miopen.properties["install"] == "rocm"
    assert miopen.properties["file-version"] == "1.0.50701"
    assert miopen.properties["version-method"] == "file-name-libpatch"
    assert miopen.properties["own-version"] == "1.0"


def test_unrelated_opt_directories_are_not_rocm(tmp_path: Path) -> None:
    root = build_root(
        tmp_path / "root", [], extra_files={"/opt/rocmish/README": b"x", "/opt/rocm/README": b"x"}
    )
    mine, _, _ = observe_dir(root)
    assert mine == []
