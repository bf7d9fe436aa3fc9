"""TEST-ONLY kernel set: a kernel that never finishes (spins on a volatile load)."""

from gpusbom.probe.kernel import KernelSet

KERNELS = KernelSet(
    name="TEST-never-finishes",
    opencl=r"""
__kernel void gpusbom_matmul(__global const float *A, __global const float *B,
                             __global float *C, const uint n)
{
    volatile __global const float *a = A;
    while (a[0] < 1e30f) { }          /* A[0] is -8: spins forever */
    C[0] = a[0];
}
""",
    cuda_ptx=None,
    hip=None,
)
