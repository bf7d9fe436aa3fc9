"""CUDA, NVIDIA driver, Container Toolkit and Triton Inference Server collectors.

Real inputs: CUDA 13.0's headers, libcudart, nvcc and ptxas as NVIDIA ships them on PyPI
(nvidia-cuda-runtime 13.0.96 and nvidia-cuda-nvcc 13.0.88, pinned by sha256, unpacked once
into a cache outside the repository in /usr/local/cuda-13.0's layout), other real NVIDIA
wheels and the demo fixture image. Trees are built in tmp_path from copies/hard links of those files and
scanned with FsView.from_directory; nothing is committed.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import zipfile
from pathlib import Path

from pinned_wheels import CACHE, LINUX_311, pinned_wheel  # tests/pinned_wheels.py

from gpusbom.collectors import all_collectors
from gpusbom.collectors._gpu import (
    install_location,
    parse_defines,
    parse_require_cuda,
    parse_soname,
)
from gpusbom.collectors.cuda import header_versions, wheel_product
from gpusbom.fsview.types import Limits, Spool
from gpusbom.fsview.view import FsView
from gpusbom.model import Component, Target
from gpusbom.scan import build_matcher, run_collectors
from gpusbom.stack import summarize

#: CUDA 13.0 (bin, include, lib64) unpacked from the pinned wheels; built by need_cuda13()
CUDA13 = CACHE / "cuda-13.0.96-nvcc-13.0.88"
SP = "usr/local/lib/python3.11/site-packages"
OURS = ("cuda", "nvidia-driver", "nvidia-container-toolkit", "triton-server")

WHEELS = {  # filename -> (requirement, sha256)
    "nvidia_cuda_runtime_cu12-12.4.127-py3-none-manylinux2014_x86_64.whl": (
        "nvidia-cuda-runtime-cu12==12.4.127",
        "64403288fa2136ee8e467cdc9c9427e0434110899d07c779f25b5c068934faa5",
    ),
    "nvidia_cuda_runtime-13.0.96-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl": (
        "nvidia-cuda-runtime==13.0.96",
        "7f82250d7782aa23b6cfe765ecc7db554bd3c2870c43f3d1821f1d18aebf0548",
    ),
    "nvidia_cuda_nvcc-13.0.88-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl": (
        "nvidia-cuda-nvcc==13.0.88",
        "56fe502eb77625a12f25172caa3cdddb4e4c8ba2c8c17dba44b164761b380f03",
    ),
    "nvidia_nvjpeg_cu12-12.4.0.76-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl": (
        "nvidia-nvjpeg-cu12==12.4.0.76",
        "3888f10b32fbd58e80166c48e01073732d752fa5f167b7cb5b9615f1c6375a20",
    ),
}


def real_wheel(filename: str) -> Path:
    """The pinned wheel from the test cache (downloaded with pip when missing)."""
    req, sha = WHEELS[filename]
    return pinned_wheel(filename, req, sha, dest=CACHE / "wheels", pip_args=LINUX_311)


def install(root: Path, filename: str) -> None:
    """Unpack a wheel into root's site-packages (what pip does for these pure-layout wheels)."""
    with zipfile.ZipFile(real_wheel(filename)) as z:
        z.extractall(root / SP)


#: what the tests take from each wheel: member prefix -> directory under CUDA13
CUDA13_PARTS = {
    "nvidia_cuda_runtime-13.0.96-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl": {
        "nvidia/cu13/include/": "include/", "nvidia/cu13/lib/libcudart.so.13": "lib64/"},
    "nvidia_cuda_nvcc-13.0.88-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl": {
        "nvidia/cu13/bin/nvcc": "bin/", "nvidia/cu13/bin/ptxas": "bin/"},
}


def need_cuda13() -> None:
    """Unpack CUDA13 from the pinned wheels once (atomically: xdist workers share it)."""
    if (CUDA13 / ".complete").is_file():
        return
    staging = Path(tempfile.mkdtemp(prefix=".cuda13-", dir=CACHE))
    try:
        for filename, parts in CUDA13_PARTS.items():
            with zipfile.ZipFile(real_wheel(filename)) as z:
                for m in z.infolist():
                    for prefix, dest in parts.items():
                        if m.filename.startswith(prefix) and not m.is_dir():
                            rel = m.filename[len(prefix.rpartition("/")[0]) + 1:]
                            out = staging / dest / rel
                            out.parent.mkdir(parents=True, exist_ok=True)
                            out.write_bytes(z.read(m))
        (staging / ".complete").write_text("\n".join(CUDA13_PARTS) + "\n")
        try:
            staging.rename(CUDA13)
        except OSError:  # another worker finished first
            if not (CUDA13 / ".complete").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    assert (CUDA13 / "include" / "cuda.h").is_file() and (CUDA13 / "bin" / "nvcc").is_file()


def place(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def standin(tmp: Path) -> Path:
    """An ELF file that is no release of anything: the CUDA 13 libcudart with its build-id
    bytes reversed (the real bytes are in the fingerprint database, which would rightly
    call every copy cudart 13.0.96, whatever its name)."""
    need_cuda13()
    data = (CUDA13 / "lib64" / "libcudart.so.13").read_bytes()
    from gpusbom.binary.buildid import build_id_from_head

    bid = bytes.fromhex(str(build_id_from_head(data[: 64 << 10])))
    assert data.count(bid) == 1
    out = tmp.parent / f"{tmp.name}-standin.so"  # outside the scanned tree
    out.write_bytes(data.replace(bid, bid[::-1]))
    return out


def link(dst: Path, target: str) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, dst)


def scan_tree(
    root: Path,
    env: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    ids: tuple[str, ...] = OURS + ("python",),
) -> list[Component]:
    reg = all_collectors()
    classes = [reg[i] for i in ids]
    limits = Limits()
    with Spool(limits) as spool:
        fs = FsView.from_directory(root, build_matcher(classes), spool, limits)
        target = Target(kind="directory", reference=str(root), env=env or {}, labels=labels or {})
        comps, unknowns = run_collectors(fs, target, classes)
    assert not unknowns, unknowns
    return comps


def gpu(comps: list[Component]) -> set[tuple[str, str | None, str | None]]:
    """(name, version, location) of the components a stack collector recognised."""
    return {
        (c.name, c.version, c.properties.get("location"))
        for c in comps
        if c.stack
    }


def by_name(comps: list[Component], name: str) -> Component:
    [c] = [c for c in comps if c.name == name]
    return c


# ------------------------------------------------------------------------------ parsing


def test_real_cuda13_headers() -> None:
    need_cuda13()
    cuda_h = (CUDA13 / "include" / "cuda.h").read_text(errors="replace")
    rt_h = (CUDA13 / "include" / "cuda_runtime_api.h").read_text(errors="replace")
    assert parse_defines(cuda_h)["CUDA_VERSION"] == "13000"
    assert header_versions("cuda.h", cuda_h) == {"cuda-toolkit": "13.0"}
    assert header_versions("cuda_runtime_api.h", rt_h) == {"cudart": "13.0"}


def test_header_parsers_cudnn_nccl_tensorrt() -> None:
    # Layouts as NVIDIA ships them (no real copies on this machine: see the report)
    cudnn = "#define CUDNN_MAJOR 9\n#define CUDNN_MINOR 14\n#define CUDNN_PATCHLEVEL 0\n"
    nccl = (
        "#define NCCL_MAJOR 2\n#define NCCL_MINOR 28\n#define NCCL_PATCH 3\n"
        '#define NCCL_SUFFIX ""\n#define NCCL_VERSION_CODE 22803\n'
    )
    trt = (
        "#define TRT_MAJOR_ENTERPRISE 10\n#define TRT_MINOR_ENTERPRISE 14\n"
        "#define TRT_PATCH_ENTERPRISE 1\n#define TRT_BUILD_ENTERPRISE 48\n"
        "#define NV_TENSORRT_MAJOR TRT_MAJOR_ENTERPRISE //!< major\n"
        "#define NV_TENSORRT_MINOR TRT_MINOR_ENTERPRISE\n"
        "#define NV_TENSORRT_PATCH TRT_PATCH_ENTERPRISE\n"
        "#define NV_TENSORRT_BUILD TRT_BUILD_ENTERPRISE\n"
    )
    assert header_versions("cudnn_version.h", cudnn) == {"cudnn": "9.14.0"}
    assert header_versions("cudnn_version_v9.h", cudnn) == {"cudnn": "9.14.0"}
    assert header_versions("nccl.h", nccl) == {"nccl": "2.28.3"}
    assert header_versions("NvInferVersion.h", trt) == {"tensorrt": "10.14.1.48"}
    old_trt = (
        "#define NV_TENSORRT_MAJOR 8\n#define NV_TENSORRT_MINOR 6\n#define NV_TENSORRT_PATCH 1\n"
    )
    assert header_versions("NvInferVersion.h", old_trt) == {"tensorrt": "8.6.1"}


def test_sonames_and_locations() -> None:
    assert parse_soname("libcudart.so.12.4.127").version == "12.4.127"
    assert parse_soname("/x/libcudart.so.12").version is None  # an ABI major, not a version
    assert parse_soname("libcudart.so").suffix is None
    assert parse_soname("libnvrtc-builtins.so.12.4.127").stem == "libnvrtc-builtins"
    assert (
        install_location("/usr/local/cuda-12.4/targets/x86_64-linux/lib/libcudart.so.12.4.127")
        == "/usr/local/cuda-12.4"
    )
    assert install_location("/usr/lib/x86_64-linux-gnu/libcudnn.so.9.14.0") == "/usr"
    assert install_location("/usr/include/x86_64-linux-gnu/cudnn_version_v9.h") == "/usr"
    assert install_location(f"/{SP}/nvidia/cu13/lib/libcudart.so.13") == f"/{SP}/nvidia/cu13"
    assert install_location(f"/{SP}/nvidia/cudnn/lib/libcudnn.so.9") == f"/{SP}/nvidia/cudnn"
    assert wheel_product("nvidia-cuda-runtime-cu12") == "cudart"
    assert wheel_product("nvidia_cuda_runtime") == "cudart"
    assert wheel_product("nvidia-cudnn-cu13") == "cudnn"
    assert wheel_product("tensorrt-cu12-libs") == "tensorrt"
    assert wheel_product("nvidia-nvtx-cu12") is None


def test_require_cuda_expression() -> None:
    rq = parse_require_cuda(
        "cuda>=13.0 brand=unknown,driver>=535,driver<536 brand=grid,driver>=535,driver<536 "
        "brand=tesla,driver>=570,driver<571 brand=nvidia,driver>=470,driver<471"
    )
    assert rq.cuda == "13.0"
    assert rq.branches_text == "470, 535, 570"
    assert rq.clauses[1] == ("brand=unknown", "driver>=535", "driver<536")
    assert parse_require_cuda("cuda>=12.4").branches == ()


# ------------------------------------------------------------------------- a toolkit tree


def cuda_tree(root: Path, *, version_json: str | None = None) -> None:
    """/usr/local/cuda-13.0 as the deb-based images lay it out, from the real files here."""
    need_cuda13()
    tk = root / "usr/local/cuda-13.0"
    tgt = tk / "targets/x86_64-linux"
    for h in ("cuda.h", "cuda_runtime_api.h"):
        place(CUDA13 / "include" / h, tgt / "include" / h)
    # the deb names the real file by its full version; the ABI names are links
    place(CUDA13 / "lib64" / "libcudart.so.13", tgt / "lib/libcudart.so.13.0.96")
    link(tgt / "lib/libcudart.so.13", "libcudart.so.13.0.96")
    link(tgt / "lib/libcudart.so", "libcudart.so.13")
    # a link stub is not a driver
    place(CUDA13 / "lib64" / "libcudart.so.13", tgt / "lib/stubs/libcuda.so")
    link(tk / "lib64", "targets/x86_64-linux/lib")
    link(tk / "include", "targets/x86_64-linux/include")
    place(CUDA13 / "bin" / "nvcc", tk / "bin/nvcc")
    link(root / "usr/local/cuda", "cuda-13.0")
    if version_json is not None:
        (tk / "version.json").write_text(version_json)


def test_toolkit_tree_with_image_env(tmp_path: Path) -> None:
    cuda_tree(tmp_path)
    env = {
        "CUDA_VERSION": "13.0.2",
        "NV_CUDA_CUDART_VERSION": "13.0.96-1",
        "NVIDIA_REQUIRE_CUDA": "cuda>=13.0 brand=unknown,driver>=535,driver<536 brand=tesla,driver>=570,driver<571",
    }
    comps = scan_tree(tmp_path, env)
    tk = "/usr/local/cuda-13.0"
    assert gpu(comps) == {
        ("cuda-toolkit", "13.0.2", tk),
        ("cudart", "13.0.96", tk),
        ("nvcc", None, tk),
    }
    toolkit = by_name(comps, "cuda-toolkit")
    assert toolkit.properties["release"] == "13.0.2"
    assert toolkit.properties["driver-branches"] == "535, 570"
    assert toolkit.properties["require-cuda"] == "13.0"
    assert "disagreement" not in toolkit.properties
    assert toolkit.purl == "pkg:generic/nvidia/cuda-toolkit@13.0.2"
    assert toolkit.cpe == "cpe:2.3:a:nvidia:cuda_toolkit:13.0.2:*:*:*:*:*:*:*"
    assert toolkit.supplier == "NVIDIA Corporation"
    cudart = by_name(comps, "cudart")
    assert [(e.method, e.path) for e in cudart.evidence] == [
        ("soname", f"{tk}/targets/x86_64-linux/lib/libcudart.so.13.0.96"),
        # the library's own cudaRuntimeGetVersion constant (CUDART_VERSION 13000)
        ("elf-symbol", f"{tk}/targets/x86_64-linux/lib/libcudart.so.13.0.96"),
        ("header", f"{tk}/targets/x86_64-linux/include/cuda_runtime_api.h"),
        # the fingerprint database: these bytes are the wheel's libcudart.so.13 (#38)
        ("fingerprint-sha256", f"{tk}/targets/x86_64-linux/lib/libcudart.so.13.0.96"),
    ]
    assert cudart.properties["identification-method"] == "sha256"
    assert cudart.properties["fingerprint-source"] == "pypi:nvidia-cuda-runtime==13.0.96"
    assert "= 13000" in (cudart.evidence[1].detail or "")
    assert "disagreement" not in cudart.properties
    [summary] = [s for s in summarize(comps) if s.stack == "cuda"]
    assert summary.text() == "CUDA 13.0.2 (toolkit 13.0.2, cudart 13.0.96, nvcc unknown)"
    # the stub libcuda.so under lib/stubs is no driver
    assert not [c for c in comps if c.stack == "nvidia-driver"]


def test_env_disagrees_with_installed_cudart(tmp_path: Path) -> None:
    cuda_tree(tmp_path)
    comps = scan_tree(tmp_path, {"CUDA_VERSION": "12.4.1", "NV_CUDA_CUDART_VERSION": "12.4.127-1"})
    toolkit = by_name(comps, "cuda-toolkit")
    assert toolkit.version == "12.4.1"  # what the image declares; the files disagree, and say so
    d = toolkit.properties["disagreement"]
    assert "CUDA_VERSION=12.4.1 but cudart 13.0.96" in d
    assert "NV_CUDA_CUDART_VERSION=12.4.127-1 but cudart 13.0.96" in d
    assert "cuda.h says 13.0" in d


def test_version_json_gives_release_and_component_versions(tmp_path: Path) -> None:
    # version.json as the runfile/.deb toolkits write it (none on this machine: see the report)
    vj = (
        '{"cuda": {"name": "CUDA SDK", "version": "13.0.2"},'
        ' "cuda_cudart": {"name": "CUDA Runtime (cudart)", "version": "13.0.96"},'
        ' "cuda_nvcc": {"name": "CUDA NVCC", "version": "13.0.88"},'
        ' "libcublas": {"name": "CUDA cuBLAS", "version": "13.1.0.3"}}'
    )
    cuda_tree(tmp_path, version_json=vj)
    comps = scan_tree(tmp_path)
    tk = "/usr/local/cuda-13.0"
    # cuBLAS is listed but not installed: not reported
    assert gpu(comps) == {
        ("cuda-toolkit", "13.0.2", tk),
        ("cudart", "13.0.96", tk),
        ("nvcc", "13.0.88", tk),
    }
    assert by_name(comps, "cuda-toolkit").properties["release"] == "13.0.2"


# --------------------------------------------------------------------------------- guards


def test_triton_bundled_tools_are_not_a_toolkit(tmp_path: Path) -> None:
    need_cuda13()
    nv = tmp_path / SP / "triton/backends/nvidia"
    place(CUDA13 / "bin" / "ptxas", nv / "bin/ptxas")
    place(CUDA13 / "include" / "cuda.h", nv / "include/cuda.h")
    place(CUDA13 / "lib64" / "libcudart.so.13", nv / "lib/cupti/libcupti.so.13.0.85")
    comps = scan_tree(tmp_path, ids=OURS)
    assert gpu(comps) == set()


def test_unversioned_links_and_stubs_are_not_versions(tmp_path: Path) -> None:
    need_cuda13()
    lib = tmp_path / "usr/lib/x86_64-linux-gnu"
    link(lib / "libcudnn.so", "libcudnn.so.9")  # dangling ABI links: no version
    link(lib / "libcudnn.so.9", "libcudnn.so.9.14.0")
    link(lib / "libcuda.so", "libcuda.so.1")
    place(
        CUDA13 / "lib64" / "libcudart.so.13",
        tmp_path / "usr/local/cuda-13.0/lib64/stubs/libcuda.so",
    )
    place(
        CUDA13 / "lib64" / "libcudart.so.13",
        tmp_path / "usr/local/cuda-13.0/lib64/stubs/libcuda.so.1",
    )
    assert gpu(scan_tree(tmp_path, ids=OURS)) == set()


def test_driver_libs_and_forward_compat(tmp_path: Path) -> None:
    real = standin(tmp_path)  # stand-in content: detection reads names only
    compat = tmp_path / "usr/local/cuda-13.0/compat"
    place(real, compat / "libcuda.so.580.95.05")
    link(compat / "libcuda.so.1", "libcuda.so.580.95.05")
    place(real, compat / "libnvidia-ptxjitcompiler.so.580.95.05")
    lib = tmp_path / "usr/lib/x86_64-linux-gnu"
    place(real, lib / "libnvidia-ml.so.570.124.06")
    link(lib / "libnvidia-ml.so.1", "libnvidia-ml.so.570.124.06")
    env = {
        "NVIDIA_REQUIRE_CUDA": "cuda>=13.0 brand=tesla,driver>=535,driver<536 brand=tesla,driver>=570,driver<571"
    }
    comps = scan_tree(tmp_path, env, ids=OURS)
    assert gpu(comps) == {
        ("cuda-compat", "580.95.05", "/usr/local/cuda-13.0/compat"),
        ("libnvidia-ml", "570.124.06", "/usr/lib/x86_64-linux-gnu"),
    }
    c = by_name(comps, "cuda-compat")
    assert c.stack == "nvidia-driver"
    assert c.properties["driver-branches"] == "535, 570"
    assert c.properties["require-cuda"] == "13.0"
    assert c.purl == "pkg:generic/nvidia/cuda-compat@580.95.05"
    assert sorted(e.path for e in c.evidence if e.path) == [
        "/usr/local/cuda-13.0/compat/libcuda.so.580.95.05",
        "/usr/local/cuda-13.0/compat/libnvidia-ptxjitcompiler.so.580.95.05",
    ]
    [s] = [s for s in summarize(comps) if s.stack == "nvidia-driver"]
    assert s.text() == "NVIDIA driver (driver compat 580.95.05, NVML 570.124.06)"


# ------------------------------------------------------------------- container toolkit, triton


def test_container_toolkit_binaries(tmp_path: Path) -> None:
    real = standin(tmp_path)  # stand-in content: detection reads names only
    place(real, tmp_path / "usr/bin/nvidia-ctk")
    place(real, tmp_path / "usr/bin/nvidia-container-cli")
    place(real, tmp_path / "usr/lib/x86_64-linux-gnu/libnvidia-container.so.1.17.8")
    link(
        tmp_path / "usr/lib/x86_64-linux-gnu/libnvidia-container.so.1",
        "libnvidia-container.so.1.17.8",
    )
    (tmp_path / "etc/nvidia-container-runtime").mkdir(parents=True)
    (tmp_path / "etc/nvidia-container-runtime/config.toml").write_text("[nvidia-container-cli]\n")
    comps = scan_tree(tmp_path, ids=OURS)
    assert gpu(comps) == {
        ("nvidia-container-toolkit", None, None),
        ("libnvidia-container", "1.17.8", None),
    }
    ctk = by_name(comps, "nvidia-container-toolkit")
    assert sorted(e.path for e in ctk.evidence) == [
        "/etc/nvidia-container-runtime/config.toml",
        "/usr/bin/nvidia-ctk",
    ]
    assert ctk.stack == "nvidia-container-toolkit"


def test_triton_inference_server(tmp_path: Path) -> None:
    root = tmp_path / "opt/tritonserver"
    (root / "backends/python").mkdir(parents=True)
    (root / "backends/onnxruntime").mkdir(parents=True)
    (root / "TRITON_VERSION").write_text("2.52.0\n")
    env = {"TRITON_SERVER_VERSION": "2.52.0", "NVIDIA_TRITON_SERVER_VERSION": "24.11"}
    comps = scan_tree(tmp_path, env, {"com.nvidia.tritonserver.version": "2.52.0"}, ids=OURS)
    assert gpu(comps) == {("triton-inference-server", "2.52.0", "/opt/tritonserver")}
    c = comps[0]
    assert c.properties["container-release"] == "24.11"
    assert c.properties["backends"] == "onnxruntime, python"
    assert c.properties["release"] == "2.52.0"
    assert c.cpe == "cpe:2.3:a:nvidia:triton_inference_server:2.52.0:*:*:*:*:*:*:*"
    # env only (no /opt/tritonserver): still reported, without a location
    comps = scan_tree(
        tmp_path / "opt/tritonserver/backends",
        {"NVIDIA_TRITON_SERVER_VERSION": "24.11", "TRITON_SERVER_VERSION": "2.52.0"},
        ids=OURS,
    )
    assert gpu(comps) == {("triton-inference-server", "2.52.0", None)}


# ------------------------------------------------------------------------------- wheels


def test_real_cuda_wheels_cu12_and_cu13(tmp_path: Path) -> None:
    for w in WHEELS:
        if "nvcc" not in w:  # the compiler wheel is an input of CUDA13, not of this test
            install(tmp_path, w)
    comps = scan_tree(tmp_path)
    sp = "/" + SP
    got = {
        (c.name, c.version, c.product_name, c.evidence[0].path)
        for c in comps
        if c.stack
    }
    # the observations merged into the wheels' own pypi components (python claims RECORD files)
    assert got == {
        (
            "nvidia-cuda-runtime-cu12",
            "12.4.127",
            "cudart",
            f"{sp}/nvidia_cuda_runtime_cu12-12.4.127.dist-info/METADATA",
        ),
        (
            "nvidia-cuda-runtime",
            "13.0.96",
            "cudart",
            f"{sp}/nvidia_cuda_runtime-13.0.96.dist-info/METADATA",
        ),
        (
            "nvidia-nvjpeg-cu12",
            "12.4.0.76",
            "nvjpeg",
            f"{sp}/nvidia_nvjpeg_cu12-12.4.0.76.dist-info/METADATA",
        ),
    }
    for c in comps:
        if c.stack:
            assert c.purl and c.purl.startswith("pkg:pypi/"), c.purl
            assert any(e.method == "soname" for e in c.evidence), c.name
    jpeg = by_name(comps, "nvidia-nvjpeg-cu12")
    assert {e.path for e in jpeg.evidence if e.method == "soname"} == {
        f"{sp}/nvidia/nvjpeg/lib/libnvjpeg.so.12"
    }
    # without the python cataloger the same observations stand alone, one per location
    alone = scan_tree(tmp_path, ids=OURS)
    assert gpu(alone) == {
        ("cudart", "12.4.127", f"{sp}/nvidia/cuda_runtime"),
        ("cudart", "13.0.96", f"{sp}/nvidia/cu13"),
        ("nvjpeg", "12.4.0.76", f"{sp}/nvidia/nvjpeg"),
    }
    assert (
        by_name([c for c in alone if c.version == "13.0.96"], "cudart").purl
        == "pkg:generic/nvidia/cudart@13.0.96"
    )


# ------------------------------------------------------------------------------ demo image


def test_demo_image() -> None:
    from fixtures.build import ensure
    from gpusbom.scan import scan

    demo = ensure("demo")
    r = scan(demo.oci_ref)
    sp = "/usr/local/lib/python3.11/site-packages"
    got = {
        (c.name, c.version, c.evidence[0].path if c.evidence else None)
        for c in r.components
        if c.stack == "cuda"
    }
    assert got == {
        ("cuda-toolkit", "12.4.1", None),
        (
            "nvidia-cuda-runtime-cu12",
            "12.4.127",
            f"{sp}/nvidia_cuda_runtime_cu12-12.4.127.dist-info/METADATA",
        ),
        ("nvidia-cuda-runtime", "13.0.96", f"{sp}/nvidia_cuda_runtime-13.0.96.dist-info/METADATA"),
    }
    tk = next(c for c in r.components if c.name == "cuda-toolkit")
    assert tk.properties["release"] == "12.4.1"
    assert tk.properties["driver-branches"] == "470"
    assert tk.properties["env-declared"] == "cudart 12.4.127"
    assert "disagreement" not in tk.properties  # the cu12 wheel's cudart is 12.4
    assert not [
        c
        for c in r.components
        if c.stack
        in ("nvidia-driver", "nvidia-container-toolkit", "triton-inference-server")
    ]
    [cuda] = [s for s in r.stacks if s.stack == "cuda"]
    assert cuda.text() == "CUDA 12.4.1 (toolkit 12.4.1, cudart 12.4.127 + 13.0.96)"


def test_nvidia_wheels_image() -> None:
    """cu12 + cu13 wheels, a second cudart in /opt/venv, the env of nvidia/cuda:12.4.1."""
    from fixtures.build import ensure
    from gpusbom.scan import scan

    r = scan(ensure("nvidia-wheels").oci_ref)
    sp = "/usr/local/lib/python3.11/site-packages"
    venv = "/opt/venv/lib/python3.11/site-packages"
    got = {
        (c.name, c.version, c.evidence[0].path if c.evidence else None)
        for c in r.components
        if c.stack == "cuda"
    }
    assert got == {
        ("cuda-toolkit", "12.4.1", None),
        ("nvidia-cuda-runtime", "13.0.96", f"{sp}/nvidia_cuda_runtime-13.0.96.dist-info/METADATA"),
        (
            "nvidia-cuda-runtime-cu12",
            "12.1.105",
            f"{venv}/nvidia_cuda_runtime_cu12-12.1.105.dist-info/METADATA",
        ),
        (
            "nvidia-cuda-runtime-cu12",
            "12.4.127",
            f"{sp}/nvidia_cuda_runtime_cu12-12.4.127.dist-info/METADATA",
        ),
        (
            "nvidia-curand-cu12",
            "10.3.5.147",
            f"{sp}/nvidia_curand_cu12-10.3.5.147.dist-info/METADATA",
        ),
        ("nvidia-nccl-cu12", "2.19.3", f"{sp}/nvidia_nccl_cu12-2.19.3.dist-info/METADATA"),
        ("nvidia-nvjpeg", "13.0.2.28", f"{sp}/nvidia_nvjpeg-13.0.2.28.dist-info/METADATA"),
        (
            "nvidia-nvjpeg-cu12",
            "12.4.0.76",
            f"{sp}/nvidia_nvjpeg_cu12-12.4.0.76.dist-info/METADATA",
        ),
    }
    [cuda] = [s for s in r.stacks if s.stack == "cuda"]
    assert cuda.text() == (
        "CUDA 12.4.1 (toolkit 12.4.1, cudart 12.1.105 + 12.4.127 + 13.0.96, cuRAND 10.3.5.147, "
        "NCCL 2.19.3, nvJPEG 12.4.0.76 + 13.0.2.28)"
    )
    tk = next(c for c in r.components if c.name == "cuda-toolkit")
    assert tk.properties["driver-branches"] == "470, 535"
    # the env names the libnccl2 deb of the official image; the image holds the 2.19.3 wheel
    assert tk.properties["disagreement"] == "NV_LIBNCCL_PACKAGE_VERSION=2.21.5-1 but nccl 2.19.3"
    # the real nccl.h of the wheel agrees with its metadata
    nccl = next(c for c in r.components if c.name == "nvidia-nccl-cu12")
    assert (f"{sp}/nvidia/nccl/include/nccl.h", "nccl.h: 2.19.3") in {
        (e.path, e.detail) for e in nccl.evidence if e.method == "header"
    }
