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

from .model import Component, StackPart, StackSummary

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
    "hip-runtime": "HIP",
    "rocblas": "rocBLAS",
    "hipblas": "hipBLAS",
    "miopen": "MIOpen",
    "rccl": "RCCL",
    "level-zero-loader": "loader",
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
        stack = c.properties.get("stack")
        if not stack:
            continue
        product = c.properties.get("product") or c.name
        parts = by_stack.setdefault(stack, {})
        part = parts.get(product)
        if part is None:
            part = parts[product] = StackPart(
                product=product, display=PRODUCT_NAMES.get(product, product)
            )
        ver = c.properties.get("product-version") or c.version
        if ver:
            versions.setdefault((stack, product), set()).add(ver)
        if c.bom_ref and c.bom_ref not in part.refs:
            part.refs.append(c.bom_ref)
        if c.properties.get("release"):
            releases.setdefault(stack, set()).add(c.properties["release"])
        if c.properties.get("disagreement"):
            notes.setdefault(stack, []).append(f"{c.name}: {c.properties['disagreement']}")
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
