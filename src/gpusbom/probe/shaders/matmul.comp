// gpusbom probe kernel for Vulkan compute: the tiled 16x16 FP32 matrix multiply of
// probe/kernel.py (C = A x B, N x N row-major), with work-group shared memory and barriers.
// Built to SPIR-V by scripts/build-shaders (glslangValidator); tests check the shipped
// matmul.spv is exactly what this source builds to.
#version 450
#define TILE 16
layout(local_size_x = TILE, local_size_y = TILE, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer BufA { float A[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufB { float B[]; };
layout(std430, set = 0, binding = 2) writeonly buffer BufC { float C[]; };
layout(push_constant) uniform Params { uint n; } params;

shared float ta[TILE][TILE];
shared float tb[TILE][TILE];

void main()
{
    const uint n = params.n;
    const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
    const uint col = gl_WorkGroupID.x * TILE + tx;
    const uint row = gl_WorkGroupID.y * TILE + ty;
    float acc = 0.0;
    for (uint k0 = 0; k0 < n; k0 += TILE) {
        const uint ka = k0 + tx, kb = k0 + ty;
        ta[ty][tx] = (row < n && ka < n) ? A[row * n + ka] : 0.0;
        tb[ty][tx] = (kb < n && col < n) ? B[kb * n + col] : 0.0;
        barrier();
        for (uint k = 0; k < TILE; ++k)
            acc = fma(ta[ty][k], tb[k][tx], acc);
        barrier();
    }
    if (row < n && col < n)
        C[row * n + col] = acc;
}
