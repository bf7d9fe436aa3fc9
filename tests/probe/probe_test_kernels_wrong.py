"""TEST-ONLY kernel set: a tiled matmul that stops one tile short (drops k = 96..99).

Selected with GPUSBOM_PROBE_TEST_KERNELS=probe_test_kernels_wrong; the product's CPU
reference and comparison stay in force, so the probe must report ``fail``.
"""

from gpusbom.probe.kernel import OPENCL_SOURCE, KernelSet

KERNELS = KernelSet(
    name="TEST-wrong-last-tile-dropped",
    opencl=OPENCL_SOURCE.replace("for (uint k0 = 0; k0 < n; k0 += TILE)",
                                 "for (uint k0 = 0; k0 + TILE <= n; k0 += TILE)"),
    cuda_ptx=None,
    hip=None,
)
assert KERNELS.opencl != OPENCL_SOURCE
