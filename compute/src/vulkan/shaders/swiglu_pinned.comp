// gate = silu(gate) * up in the CPU's pinned form (swiglu(..., lanes) in compute/src/cpu/attention.cpp), bit
// for bit: per row of `width` values, its whole groups of LANES through the pinned expf (vector_expf for 16,
// avx2_expf for 8), the rest through the C library's expf; silu(x) = x / (1 + e^-x) with an exactly rounded
// division. One value per invocation, striding by the whole grid. Needs shaderFloat64.
#version 450
#extension GL_GOOGLE_include_directive : require

#include "pinned_math.glsl"

layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) buffer Gate { float gate[]; };
layout(std430, set = 0, binding = 1) readonly buffer Up { float up[]; };

layout(push_constant) uniform Push {
  uint count;
  uint width;   // values per row (a token's feed-forward width)
  uint lanes;   // 16 or 8
} p;

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  const uint whole = p.width / p.lanes * p.lanes;
  for (uint i = gl_GlobalInvocationID.x; i < p.count; i += stride) {
    const float g = gate[i];
    precise float minus = 0.0 - g;
    const float e = i % p.width >= whole ? pinned_libc_expf(minus)
                    : (p.lanes == 16u ? pinned_vector_expf(minus) : pinned_avx2_expf(minus));
    precise float denominator = 1.0 + e;
    precise float result = pinned_divide(g, denominator) * up[i];
    gate[i] = result;
  }
}
