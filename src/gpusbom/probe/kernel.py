"""The probe kernel: a tiled 16x16 FP32 matrix multiply at N = 100, and its CPU reference.

N = 100 is not a multiple of the 16x16 tile, so the kernels' bounds checks run (a
7x7 grid of 16x16 work-groups covers 112x112; the edge tiles are partly outside).
The inputs are small integers, so every partial sum is an integer below 2**24 and
exact in FP32 whatever the summation order: the device result must equal the CPU
reference bit for bit, and any difference is a real fault.

The product kernels live here. Tests may substitute a deliberately wrong or
never-ending kernel set through ``GPUSBOM_PROBE_TEST_KERNELS`` (a module name that
defines ``KERNELS``); the reference and the comparison below are never replaced,
so a substitute can only make a probe fail or time out, never pass when it should
not, and the kernel's name is recorded with every result.
"""

from __future__ import annotations

import importlib
import math
from array import array
from dataclasses import dataclass, field
from importlib import resources

from .. import settings

N = 100
TILE = 16
#: grid in work-groups per dimension
GROUPS = (N + TILE - 1) // TILE
KERNEL_ENTRY = "gpusbom_matmul"
TEST_KERNELS_ENV = settings.env_name("probe_test_kernels")


def a_value(i: int, k: int) -> int:
    return (i * 7 + k * 3) % 17 - 8


def b_value(k: int, j: int) -> int:
    return (k * 5 + j * 11) % 13 - 6


def inputs() -> tuple[array[float], array[float]]:
    """A and B, row-major N x N, as float32 arrays (``array('f')``)."""
    a = array("f", (float(a_value(i, k)) for i in range(N) for k in range(N)))
    b = array("f", (float(b_value(k, j)) for k in range(N) for j in range(N)))
    return a, b


def reference() -> list[int]:
    """C = A x B in exact integer arithmetic (row-major)."""
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy comes with pyopencl
        rows = [[a_value(i, k) for k in range(N)] for i in range(N)]
        cols = [[b_value(k, j) for k in range(N)] for j in range(N)]
        return [sum(x * y for x, y in zip(row, col, strict=True)) for row in rows for col in cols]
    i = np.arange(N, dtype=np.int64)
    a = (i[:, None] * 7 + i[None, :] * 3) % 17 - 8
    b = (i[:, None] * 5 + i[None, :] * 11) % 13 - 6
    return [int(x) for x in (a @ b).ravel()]


def max_abs_error(result: array[float] | list[float] | bytes, ref: list[int] | None = None) -> float:
    """Largest |device - reference| over all N*N elements (inf for NaN/missing values)."""
    if isinstance(result, (bytes, bytearray, memoryview)):
        floats = array("f")
        floats.frombytes(bytes(result))
        got: array[float] | list[float] = floats
    else:
        got = result
    ref = ref if ref is not None else reference()
    if len(got) != len(ref):
        return float("inf")
    worst = 0.0
    for g, r in zip(got, ref, strict=True):  # equal lengths: checked above
        d = abs(float(g) - r)
        if math.isnan(d):
            return float("inf")
        worst = max(worst, d)
    return worst


# --- OpenCL C ---------------------------------------------------------------------------

OPENCL_SOURCE = r"""
#define TILE 16
__kernel __attribute__((reqd_work_group_size(TILE, TILE, 1)))
void gpusbom_matmul(__global const float *A, __global const float *B,
                    __global float *C, const uint n)
{
    __local float ta[TILE][TILE];
    __local float tb[TILE][TILE];
    const uint tx = get_local_id(0), ty = get_local_id(1);
    const uint col = get_group_id(0) * TILE + tx;
    const uint row = get_group_id(1) * TILE + ty;
    float acc = 0.0f;
    for (uint k0 = 0; k0 < n; k0 += TILE) {
        const uint ka = k0 + tx, kb = k0 + ty;
        ta[ty][tx] = (row < n && ka < n) ? A[row * n + ka] : 0.0f;
        tb[ty][tx] = (kb < n && col < n) ? B[kb * n + col] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint k = 0; k < TILE; ++k)
            acc = fma(ta[ty][k], tb[k][tx], acc);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < n && col < n)
        C[row * n + col] = acc;
}
"""

# --- HIP C++ (compiled at run time by hiprtc) --------------------------------------------

HIP_SOURCE = r"""
#define TILE 16
extern "C" __global__ void __launch_bounds__(TILE * TILE)
gpusbom_matmul(const float *A, const float *B, float *C, unsigned n)
{
    __shared__ float ta[TILE][TILE];
    __shared__ float tb[TILE][TILE];
    const unsigned tx = threadIdx.x, ty = threadIdx.y;
    const unsigned col = blockIdx.x * TILE + tx;
    const unsigned row = blockIdx.y * TILE + ty;
    float acc = 0.0f;
    for (unsigned k0 = 0; k0 < n; k0 += TILE) {
        const unsigned ka = k0 + tx, kb = k0 + ty;
        ta[ty][tx] = (row < n && ka < n) ? A[row * n + ka] : 0.0f;
        tb[ty][tx] = (kb < n && col < n) ? B[kb * n + col] : 0.0f;
        __syncthreads();
        for (unsigned k = 0; k < TILE; ++k)
            acc = fmaf(ta[ty][k], tb[k][tx], acc);
        __syncthreads();
    }
    if (row < n && col < n)
        C[row * n + col] = acc;
}
"""

# --- PTX (JIT-compiled by the CUDA driver: no toolkit needed) -----------------------------
# Hand-written. PTX ISA 6.0 / sm_50 so that any driver since CUDA 9 can JIT it for
# whatever GPU it drives. Shared-memory addresses are 32-bit (the shared window).

CUDA_PTX = r"""
.version 6.0
.target sm_50
.address_size 64

.visible .entry gpusbom_matmul(
    .param .u64 p_a,
    .param .u64 p_b,
    .param .u64 p_c,
    .param .u32 p_n
)
.reqntid 16, 16, 1
{
    .reg .pred  %p<8>;
    .reg .b32   %r<32>;
    .reg .f32   %f<8>;
    .reg .b64   %rd<16>;
    .shared .align 4 .f32 ta[256];
    .shared .align 4 .f32 tb[256];

    ld.param.u64        %rd1, [p_a];
    ld.param.u64        %rd2, [p_b];
    ld.param.u64        %rd3, [p_c];
    ld.param.u32        %r0, [p_n];
    cvta.to.global.u64  %rd1, %rd1;
    cvta.to.global.u64  %rd2, %rd2;
    cvta.to.global.u64  %rd3, %rd3;

    mov.u32             %r1, %tid.x;
    mov.u32             %r2, %tid.y;
    mov.u32             %r3, %ctaid.x;
    mov.u32             %r4, %ctaid.y;
    mad.lo.u32          %r5, %r4, 16, %r2;      // row
    mad.lo.u32          %r6, %r3, 16, %r1;      // col
    mov.f32             %f1, 0f00000000;        // acc
    mov.u32             %r7, 0;                 // k0

    mad.lo.u32          %r8, %r2, 16, %r1;      // ty*16+tx
    shl.b32             %r9, %r8, 2;
    mov.u32             %r10, ta;
    mov.u32             %r12, tb;
    add.u32             %r11, %r10, %r9;        // &ta[ty][tx]
    add.u32             %r13, %r12, %r9;        // &tb[ty][tx]
    shl.b32             %r14, %r2, 6;
    add.u32             %r15, %r10, %r14;       // &ta[ty][0]
    shl.b32             %r16, %r1, 2;
    add.u32             %r17, %r12, %r16;       // &tb[0][tx]
    setp.lt.u32         %p5, %r5, %r0;          // row < n
    setp.lt.u32         %p6, %r6, %r0;          // col < n

TILE_LOOP:
    setp.ge.u32         %p1, %r7, %r0;
    @%p1 bra            TILE_DONE;

    add.u32             %r18, %r7, %r1;         // ka = k0 + tx
    setp.lt.u32         %p2, %r18, %r0;
    and.pred            %p2, %p2, %p5;
    mov.f32             %f2, 0f00000000;
    mad.lo.u32          %r19, %r5, %r0, %r18;
    mul.wide.u32        %rd4, %r19, 4;
    add.u64             %rd5, %rd1, %rd4;
    @%p2 ld.global.f32  %f2, [%rd5];
    st.shared.f32       [%r11], %f2;

    add.u32             %r20, %r7, %r2;         // kb = k0 + ty
    setp.lt.u32         %p3, %r20, %r0;
    and.pred            %p3, %p3, %p6;
    mov.f32             %f3, 0f00000000;
    mad.lo.u32          %r21, %r20, %r0, %r6;
    mul.wide.u32        %rd6, %r21, 4;
    add.u64             %rd7, %rd2, %rd6;
    @%p3 ld.global.f32  %f3, [%rd7];
    st.shared.f32       [%r13], %f3;
    bar.sync            0;

    mov.u32             %r22, 0;
INNER:
    shl.b32             %r23, %r22, 2;
    add.u32             %r24, %r15, %r23;
    ld.shared.f32       %f4, [%r24];            // ta[ty][k]
    shl.b32             %r25, %r22, 6;
    add.u32             %r26, %r17, %r25;
    ld.shared.f32       %f5, [%r26];            // tb[k][tx]
    fma.rn.f32          %f1, %f4, %f5, %f1;
    add.u32             %r22, %r22, 1;
    setp.lt.u32         %p4, %r22, 16;
    @%p4 bra            INNER;

    bar.sync            0;
    add.u32             %r7, %r7, 16;
    bra                 TILE_LOOP;

TILE_DONE:
    and.pred            %p7, %p5, %p6;
    @!%p7 bra           END;
    mad.lo.u32          %r27, %r5, %r0, %r6;
    mul.wide.u32        %rd8, %r27, 4;
    add.u64             %rd9, %rd3, %rd8;
    st.global.f32       [%rd9], %f1;
END:
    ret;
}
"""


# --- Triton (compiled by the host's own Triton for the GPU it probes) --------------------
# Python source: Triton's JIT reads a kernel's source from its file, so the child writes
# this text to a private module file and imports it. ``tl.dot`` is avoided on purpose: its
# precision default (TF32) differs across Triton releases, and the exact comparison with
# the reference needs plain FP32 multiply-adds.

TRITON_SOURCE = r"""
import triton
import triton.language as tl


@triton.jit
def gpusbom_matmul(A, B, C, n, TILE: tl.constexpr):
    rows = tl.program_id(1) * TILE + tl.arange(0, TILE)
    cols = tl.program_id(0) * TILE + tl.arange(0, TILE)
    acc = tl.zeros((TILE, TILE), dtype=tl.float32)
    for k0 in range(0, n, TILE):
        ks = k0 + tl.arange(0, TILE)
        a = tl.load(A + rows[:, None] * n + ks[None, :],
                    mask=(rows[:, None] < n) & (ks[None, :] < n), other=0.0)
        b = tl.load(B + ks[:, None] * n + cols[None, :],
                    mask=(ks[:, None] < n) & (cols[None, :] < n), other=0.0)
        acc += tl.sum(a[:, :, None] * b[None, :, :], axis=1)
    tl.store(C + rows[:, None] * n + cols[None, :], acc,
             mask=(rows[:, None] < n) & (cols[None, :] < n))
"""


def shipped_spirv() -> bytes:
    """The product's Vulkan compute shader: ``shaders/matmul.spv``, built by
    ``scripts/build-shaders`` from ``shaders/matmul.comp`` (a test checks they agree)."""
    return resources.files(__package__).joinpath("shaders", "matmul.spv").read_bytes()


@dataclass(frozen=True)
class KernelSet:
    """One kernel in each backend's language. ``None``: no kernel for that backend."""

    name: str
    opencl: str | None = OPENCL_SOURCE
    cuda_ptx: str | None = CUDA_PTX
    hip: str | None = HIP_SOURCE
    entry: str = KERNEL_ENTRY
    #: SPIR-V words of a GLSL compute shader (entry ``main``; bindings 0-2 = A, B, C;
    #: push constant = n; 16 x 16 work-groups)
    vulkan: bytes | None = field(default_factory=shipped_spirv, repr=False)
    #: Python source defining ``@triton.jit`` function ``entry(A, B, C, n, TILE: constexpr)``
    triton: str | None = TRITON_SOURCE


PRODUCT_KERNELS = KernelSet(name=f"matmul-fp32-tiled{TILE}-n{N}")


def kernels() -> KernelSet:
    """The kernel set in use: the product's, unless a test named a substitute."""
    mod_name = (settings.raw("probe_test_kernels") or None)
    if not mod_name:
        return PRODUCT_KERNELS
    mod = importlib.import_module(mod_name)
    ks = mod.KERNELS
    if not isinstance(ks, KernelSet):
        raise TypeError(f"{mod_name}.KERNELS is not a KernelSet")
    return ks
