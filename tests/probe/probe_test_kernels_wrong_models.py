"""TEST-ONLY kernel set for the Vulkan, SYCL and Triton probes: every kernel stops one
tile short (drops k = 96..99), so each backend must report ``fail`` with the error size.

The Vulkan shader is built from the product's GLSL with that one change, by the same
glslangValidator the product's build script uses (a real SPIR-V module, built at import).
"""

import os
import subprocess
import tempfile
from importlib import resources

from gpusbom.probe.kernel import OPENCL_SOURCE, TRITON_SOURCE, KernelSet

_GLSL = resources.files("gpusbom.probe").joinpath("shaders", "matmul.comp").read_text()
_WRONG_GLSL = _GLSL.replace("for (uint k0 = 0; k0 < n; k0 += TILE)",
                            "for (uint k0 = 0; k0 + TILE <= n; k0 += TILE)")
assert _WRONG_GLSL != _GLSL


def _spirv(source: str) -> bytes:
    with tempfile.TemporaryDirectory() as d:
        src, out = os.path.join(d, "wrong.comp"), os.path.join(d, "wrong.spv")
        with open(src, "w") as f:
            f.write(source)
        subprocess.run(["glslangValidator", "-V", "--target-env", "vulkan1.0", "-o", out, src],
                       check=True, capture_output=True)
        with open(out, "rb") as f:
            return f.read()


KERNELS = KernelSet(
    name="TEST-wrong-last-tile-dropped",
    opencl=OPENCL_SOURCE.replace("for (uint k0 = 0; k0 < n; k0 += TILE)",
                                 "for (uint k0 = 0; k0 + TILE <= n; k0 += TILE)"),
    cuda_ptx=None,
    hip=None,
    vulkan=_spirv(_WRONG_GLSL),
    triton=TRITON_SOURCE.replace("for k0 in range(0, n, TILE):", "for k0 in range(0, n - TILE + 1, TILE):"),
)
assert KERNELS.opencl != OPENCL_SOURCE and KERNELS.triton != TRITON_SOURCE
