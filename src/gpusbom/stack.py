"""The GPU stack summary: what a scan holds of CUDA, ROCm, oneAPI, ... at a glance.

Built from fused components: every component a stack collector recognised
carries ``properties["stack"]`` (e.g. ``cuda``) and ``properties["product"]``
(e.g. ``cudnn``); the product's own version is ``properties["product-version"]``
when it differs from the package version. A component with
``properties["release"]`` names the stack's release (the CUDA toolkit release
13.0.2, the ROCm release 6.2.0). Disagreements collectors noticed are in
``properties["disagreement"]``.
"""

from __future__ import annotations

from packaging.version import InvalidVersion, Version

from .model import Component, Product, StackPart, StackSummary

#: stacks always listed, present or not, in this order; others follow when present
MAJOR_STACKS = ("cuda", "rocm", "oneapi")

STACK_NAMES = {
    "cuda": "CUDA",
    "nvidia-driver": "NVIDIA driver",
    "nvidia-container-toolkit": "NVIDIA Container Toolkit",
    "triton-inference-server": "Triton Inference Server",
    "rocm": "ROCm",
    "oneapi": "oneAPI",
    "level-zero": "Level Zero",
    "intel-gpu": "Intel GPU runtime",
    "opencl": "OpenCL",
    "vulkan": "Vulkan",
    "triton": "Triton",
    "pytorch": "PyTorch",
    "jax": "JAX",
    "cupy": "CuPy",
    "tensorflow": "TensorFlow",
    "onnxruntime": "ONNX Runtime",
    "vllm": "vLLM",
}

PRODUCT_NAMES = {
    "cudart": "cudart",
    "cudnn": "cuDNN",
    "nccl": "NCCL",
    "cublas": "cuBLAS",
    "cublaslt": "cuBLASLt",
    "cufft": "cuFFT",
    "curand": "cuRAND",
    "cusolver": "cuSOLVER",
    "cusparse": "cuSPARSE",
    "cusparselt": "cuSPARSELt",
    "cutensor": "cuTENSOR",
    "tensorrt": "TensorRT",
    "nvshmem": "NVSHMEM",
    "nvjitlink": "nvJitLink",
    "nvrtc": "NVRTC",
    "nvjpeg": "nvJPEG",
    "cupti": "CUPTI",
    "cuda-compat": "driver compat",
    "cuda-toolkit": "toolkit",
    "nvcc": "nvcc",
    "npp": "NPP",
    "libcuda": "libcuda",
    "libnvidia-ml": "NVML",
    "libnvidia-ptxjitcompiler": "PTX JIT",
    "nvidia-container-toolkit": "toolkit",
    "libnvidia-container": "libnvidia-container",
    "triton-inference-server": "server",
    "hip-runtime": "HIP",
    "rocblas": "rocBLAS",
    "hipblas": "hipBLAS",
    "miopen": "MIOpen",
    "rccl": "RCCL",
    "level-zero-loader": "loader",
    # ROCm (AMD)
    "rocm-core": "rocm-core",
    "hiprtc": "HIPRTC",
    "hsa-runtime": "HSA runtime",
    "hsakmt": "HSA thunk",
    "comgr": "comgr",
    "hipblaslt": "hipBLASLt",
    "rocfft": "rocFFT",
    "hipfft": "hipFFT",
    "rocrand": "rocRAND",
    "hiprand": "hipRAND",
    "rocsparse": "rocSPARSE",
    "hipsparse": "hipSPARSE",
    "hipsparselt": "hipSPARSELt",
    "rocsolver": "rocSOLVER",
    "hipsolver": "hipSOLVER",
    "rocalution": "rocALUTION",
    "migraphx": "MIGraphX",
    "rocm-smi-lib": "ROCm SMI lib",
    "amd-smi-lib": "AMD SMI lib",
    "roctracer": "ROCTracer",
    "rocprofiler": "ROCProfiler",
    "rocprim": "rocPRIM",
    "hipcub": "hipCUB",
    "rocminfo": "rocminfo",
    "rocm-smi": "rocm-smi",
    # Intel: oneAPI, Level Zero, GPU runtime
    "oneapi": "toolkit",
    "dpcpp-compiler": "DPC++ compiler",
    "mkl": "oneMKL",
    "tbb": "oneTBB",
    "onednn": "oneDNN",
    "oneccl": "oneCCL",
    "intel-mpi": "Intel MPI",
    "onedpl": "oneDPL",
    "onedal": "oneDAL",
    "ipp": "IPP",
    "sycl-runtime": "SYCL runtime",
    "dpcpp-runtime": "DPC++ runtime",
    "compiler-runtime": "compiler runtime",
    "unified-runtime": "Unified Runtime",
    "intel-opencl-cpu-runtime": "OpenCL CPU runtime",
    "intel-openmp": "OpenMP runtime",
    "level-zero-gpu-driver": "Level Zero GPU driver",
    "level-zero-gpu-driver-legacy": "Level Zero GPU driver (legacy)",
    "intel-compute-runtime": "compute runtime",
    "ocloc": "ocloc",
    "igc": "IGC",
    "gmmlib": "gmmlib",
    # OpenCL / Vulkan ICDs and loaders (collectors/opencl.py, vulkan.py)
    "opencl-icd-loader": "ICD loader",
    "pocl": "PoCL",
    "nvidia-opencl": "NVIDIA OpenCL",
    "intel-opencl": "Intel OpenCL",
    "rocm-opencl": "ROCm OpenCL",
    "mesa": "Mesa",
    "vulkan-loader": "loader",
    "nvidia-vulkan": "NVIDIA Vulkan",
    "amdvlk": "AMDVLK",
    # Triton and GPU framework builds (collectors/triton.py, frameworks.py)
    "triton": "Triton",
    "tensorflow": "TensorFlow",
    "onnxruntime": "ONNX Runtime",
    "cupy": "CuPy",
    "jax-cuda12-plugin": "CUDA 12 plugin",
    "jax-cuda13-plugin": "CUDA 13 plugin",
    "jax-cuda12-pjrt": "CUDA 12 PJRT",
    "jax-cuda13-pjrt": "CUDA 13 PJRT",
    "vllm": "vLLM",
}


def _vkey(v: str) -> tuple[int, object]:
    try:
        return (0, Version(v.split("+")[0].split("-")[0]))
    except InvalidVersion:
        return (1, v)


def _sorted_versions(vs: set[str]) -> list[str]:
    # (0, Version) sorts before (1, str); the two kinds are never compared with each other
    return sorted(vs, key=_vkey)


def summarize(components: list[Component]) -> list[StackSummary]:
    by_stack: dict[str, dict[str, StackPart]] = {}
    releases: dict[str, set[str]] = {}
    notes: dict[str, list[str]] = {}
    versions: dict[tuple[str, str], set[str]] = {}
    for c in components:
        products = list(c.products)
        if not products and c.properties.get("stack"):
            ver = c.properties.get("product-version") or c.version
            products = [Product(c.properties["stack"], c.properties.get("product") or c.name, ver)]
        for prod in products:
            stack, product = prod.stack, prod.name
            parts = by_stack.setdefault(stack, {})
            part = parts.get(product)
            if part is None:
                part = parts[product] = StackPart(
                    product=product, display=PRODUCT_NAMES.get(product, product)
                )
            if prod.version:
                versions.setdefault((stack, product), set()).add(prod.version)
            if c.bom_ref and c.bom_ref not in part.refs:
                part.refs.append(c.bom_ref)
        if products and c.properties.get("release"):
            releases.setdefault(products[0].stack, set()).add(c.properties["release"])
        if products and c.properties.get("disagreement"):
            notes.setdefault(products[0].stack, []).append(
                f"{c.name}: {c.properties['disagreement']}"
            )
    out: list[StackSummary] = []
    order = list(MAJOR_STACKS) + sorted(s for s in by_stack if s not in MAJOR_STACKS)
    for stack in order:
        parts = by_stack.get(stack, {})
        for (st, product), vs in versions.items():
            if st == stack:
                parts[product].versions = _sorted_versions(vs)
        rel = _sorted_versions(releases.get(stack, set()))
        out.append(
            StackSummary(
                stack=stack,
                display=STACK_NAMES.get(stack, stack),
                present=bool(parts),
                release=" + ".join(rel) if rel else None,
                parts=sorted(parts.values(), key=lambda p: p.product),
                notes=sorted(set(notes.get(stack, []))),
            )
        )
    return out
