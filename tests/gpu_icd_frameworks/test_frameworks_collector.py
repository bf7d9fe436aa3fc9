"""The frameworks collector.

Real wheels (pinned, cached outside the repo; only the members read are unpacked): the CPU
torch 2.13.0, tensorflow-cpu 2.21.0, onnxruntime 1.30.0 and jaxlib 0.10.2. GPU variants
whose wheels this machine cannot fetch (torch cu130 / ROCm / XPU, cupy-cuda12x, jax CUDA
plugins, a CUDA TensorFlow, onnxruntime-gpu, vLLM) are laid out by hand in the files'
published formats.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from gpuicd_util import SITE, collect, extract, triples

from gpusbom.collectors.frameworks import module_constants, tensorflow_build_info, torch_built_for

SP = "/" + SITE
TORCH = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
TF = "tensorflow_cpu-2.21.0-cp311-cp311-manylinux_2_27_x86_64.whl"
ORT = "onnxruntime-1.30.0-cp311-cp311-manylinux_2_28_x86_64.whl"
JAXLIB = "jaxlib-0.10.2-cp311-cp311-manylinux_2_27_x86_64.whl"
STACKS = ("pytorch", "tensorflow", "onnxruntime", "jax", "cupy", "vllm")


def _all(comps: list) -> set:
    out: set = set()
    for s in STACKS:
        out |= {(s, *t) for t in triples(comps, s)}
    return out


@pytest.fixture(scope="module")
def real_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    r = tmp_path_factory.mktemp("frameworks-root")
    extract(TORCH, r, lambda n: n == "torch/version.py")
    extract(TF, r, lambda n: n == "tensorflow/python/platform/build_info.py")
    extract(ORT, r, lambda n: n.startswith("onnxruntime/capi/") and n.count("/") == 2)
    extract(JAXLIB, r, lambda n: n == "jaxlib/version.py")
    return r


def test_real_cpu_wheels(real_root: Path) -> None:
    comps, unknowns = collect(real_root, ["frameworks"])
    assert unknowns == []
    assert _all(comps) == {
        ("pytorch", "torch", "2.13.0+cpu", SP),
        ("tensorflow", "tensorflow", "2.21.0", SP),
        ("onnxruntime", "onnxruntime", "1.30.0", SP),
        ("jax", "jaxlib", "0.10.2", SP),
    }
    got = {c.name: c for c in comps}
    assert {c.properties["built-for"] for c in comps} == {"cpu"}
    torch = got["torch"]
    assert torch.properties["git-version"] == "cf30153c4c131c8164ee7798e5022d810682e2cb"
    assert "torch:cuda" not in torch.properties
    assert torch.cpe == "cpe:2.3:a:linuxfoundation:pytorch:2.13.0:*:*:*:*:*:*:*"
    assert [(e.method, e.path) for e in torch.evidence] == [
        ("version-file", SP + "/torch/version.py")
    ]
    assert got["tensorflow"].properties["tensorflow:distribution"] == "tensorflow-cpu"
    assert got["onnxruntime"].properties["onnxruntime:package-name"] == "onnxruntime"
    assert "onnxruntime:providers" not in got["onnxruntime"].properties  # only "shared"


def test_real_wheels_merge_into_pypi_components(real_root: Path) -> None:
    comps, unknowns = collect(real_root, ["python", "frameworks"])
    assert unknowns == []
    got = {
        (c.stack, c.name, c.version, c.purl) for c in comps if c.stack
    }
    assert got == {
        ("pytorch", "torch", "2.13.0+cpu", "pkg:pypi/torch@2.13.0%2Bcpu"),
        ("tensorflow", "tensorflow_cpu", "2.21.0", "pkg:pypi/tensorflow-cpu@2.21.0"),
        ("onnxruntime", "onnxruntime", "1.30.0", "pkg:pypi/onnxruntime@1.30.0"),
        ("jax", "jaxlib", "0.10.2", "pkg:pypi/jaxlib@0.10.2"),
    }
    tf = next(c for c in comps if c.name == "tensorflow_cpu")
    assert tf.product_name == "tensorflow"
    assert tf.properties["built-for"] == "cpu"


def _dist(site: Path, name: str, version: str, extra: str = "") -> None:
    d = site / f"{name.replace('-', '_')}-{version}.dist-info"
    d.mkdir(parents=True)
    (d / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{extra}\n"
    )


def _write(site: Path, rel: str, text: str) -> None:
    p = site / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


TORCH_CU130 = """from typing import Optional

__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'xpu']
__version__ = '2.11.0+cu130'
debug = False
cuda: Optional[str] = '13.0'
git_version = '0123456789abcdef0123456789abcdef01234567'
hip: Optional[str] = None
xpu: Optional[str] = None
"""

TF_CUDA = """import collections

build_info = collections.OrderedDict([('cpu_compiler', '/usr/lib/llvm-18/bin/clang'), \
('cuda_compute_capabilities', ['sm_60', 'sm_70', 'sm_80', 'sm_89', 'compute_90']), \
('cuda_version', '12.5.1'), ('cudnn_version', '9'), ('is_cuda_build', True), \
('is_rocm_build', False), ('is_tensorrt_build', False)])
"""


def test_gpu_variants_laid_out_by_hand(tmp_path: Path) -> None:
    roots = {}
    # two sites: a cu130 torch in one, a ROCm torch in another (separate copies stay separate)
    a = tmp_path / SITE
    b = tmp_path / "opt/venv/lib/python3.11/site-packages"
    _dist(a, "torch", "2.11.0+cu130")
    _write(a, "torch/version.py", TORCH_CU130)
    _dist(b, "torch", "2.5.1+rocm6.2")
    _write(
        b,
        "torch/version.py",
        "__version__ = '2.5.1+rocm6.2'\ndebug = False\n"
        "cuda = None\ngit_version = 'a'\nhip = '6.2.41133-dd7f95766'\n",
    )
    _dist(a, "cupy-cuda12x", "13.6.0")
    _write(a, "cupy/_version.py", "__version__ = '13.6.0'\n")
    _dist(a, "jax-cuda12-plugin", "0.7.2")
    _write(a, "jax_cuda12_plugin/version.py", '_version = "0.7.2"\n')
    _dist(a, "jax-cuda12-pjrt", "0.7.2")
    _write(a, "jax_plugins/xla_cuda12/__init__.py", "")
    _dist(a, "tensorflow", "2.20.0")
    _write(a, "tensorflow/python/platform/build_info.py", TF_CUDA)
    _dist(a, "onnxruntime-gpu", "1.23.2")
    _write(
        a,
        "onnxruntime/capi/build_and_package_info.py",
        "package_name = 'onnxruntime-gpu'\n__version__ = '1.23.2'\ncuda_version = '12.9'\n"
        "cudnn_version = '9.12'\n",
    )
    _write(a, "onnxruntime/capi/libonnxruntime_providers_cuda.so", "")
    _write(a, "onnxruntime/capi/libonnxruntime_providers_shared.so", "")
    _dist(
        a, "vllm", "0.11.0", 'Requires-Dist: torch==2.8.0\nRequires-Dist: pytest; extra == "test"'
    )
    _write(a, "vllm/_version.py", "__version__ = version = '0.11.0'\n")
    _write(a, "vllm/_C.abi3.so", "")
    _write(a, "vllm/_moe_C.abi3.so", "")
    comps, unknowns = collect(tmp_path, ["frameworks"])
    assert unknowns == []
    bp = "/opt/venv/lib/python3.11/site-packages"
    assert {
        (c.name, c.version, c.properties["location"], c.properties["built-for"]) for c in comps
    } == {
        ("torch", "2.11.0+cu130", SP, "cuda 13.0"),
        ("torch", "2.5.1+rocm6.2", bp, "rocm 6.2"),
        ("cupy", "13.6.0", SP, "cuda 12"),
        ("jax-cuda12-plugin", "0.7.2", SP, "cuda 12"),
        ("jax-cuda12-pjrt", "0.7.2", SP, "cuda 12"),
        ("tensorflow", "2.20.0", SP, "cuda 12.5.1"),
        ("onnxruntime", "1.23.2", SP, "cuda 12.9"),
        ("vllm", "0.11.0", SP, "cuda"),
    }
    got = {(c.name, c.properties["location"]): c for c in comps}
    t = got[("torch", SP)]
    assert t.properties["torch:cuda"] == "13.0" and t.stack == "pytorch"
    assert got[("torch", bp)].properties["torch:hip"] == "6.2.41133-dd7f95766"
    tf = got[("tensorflow", SP)]
    assert tf.properties["tensorflow:cudnn"] == "9"
    assert tf.properties["tensorflow:cuda-compute-capabilities"].startswith("sm_60, sm_70")
    ort = got[("onnxruntime", SP)]
    assert ort.properties["onnxruntime:providers"] == "cuda"
    assert ort.properties["onnxruntime:cudnn"] == "9.12"
    v = got[("vllm", SP)]
    assert v.properties["vllm:requires-torch"] == "torch==2.8.0"
    assert v.cpe == "cpe:2.3:a:vllm:vllm:0.11.0:*:*:*:*:*:*:*"
    assert got[("jax-cuda12-plugin", SP)].properties["package-dir"] == SP + "/jax_cuda12_plugin"
    del roots


def test_parsers() -> None:
    c = module_constants(TORCH_CU130)
    assert c["cuda"] == "13.0" and c["hip"] is None and c["debug"] is False
    assert torch_built_for(c, c["__version__"]) == "cuda 13.0"
    assert torch_built_for({"xpu": "20250101"}, "2.8.0+xpu") == "xpu"
    assert torch_built_for({"rocm": "6.4.1", "hip": "6.4.43482"}, None) == "rocm 6.4"
    assert torch_built_for({}, "2.4.0+cu121") == "cuda 12.1"
    assert torch_built_for({}, "2.4.0") == "cpu"
    assert module_constants("import os\nx = os.getcwd()\ny = 'ok'\n") == {"y": "ok"}
    assert module_constants("def (:\n") == {}
    info = tensorflow_build_info(TF_CUDA)
    assert info["cuda_version"] == "12.5.1" and info["is_cuda_build"] is True
    old = tensorflow_build_info("is_cuda_build = True\ncuda_version = '10.1'\n")
    assert old == {"is_cuda_build": True, "cuda_version": "10.1"}


def test_add_on_projects_are_not_framework_builds(tmp_path: Path) -> None:
    """tensorflow-recommenders / onnxruntime-extensions-like projects carry no build info:
    they are not reported as TensorFlow / ONNX Runtime builds."""
    site = tmp_path / SITE
    _dist(site, "tensorflow-recommenders", "0.7.3")
    _dist(site, "onnxruntime-genai-cuda", "0.9.0")
    _dist(site, "tensorflow-io-gcs-filesystem", "0.37.1")
    comps, unknowns = collect(tmp_path, ["frameworks"])
    assert (comps, unknowns) == ([], [])
