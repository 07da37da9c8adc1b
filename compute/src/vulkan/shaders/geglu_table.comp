// gate = gelu_tanh(gate) * up exactly as the CPU's gelu_tanh (compute/src/cpu/activations.cpp): 0 at or below
// -10, x at or above 10, and between them the F16 result of x rounded to F16 read from the CPU's own table of
// every F16 input's result (65,536 F16 values, two per uint), which the host uploads once.
// One value per invocation, striding by the whole grid.
#version 450
#extension GL_GOOGLE_include_directive : require

#include "ops_half.glsl"

layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) buffer Gate { float gate[]; };
layout(std430, set = 0, binding = 1) readonly buffer Up { float up[]; };
layout(std430, set = 0, binding = 2) readonly buffer Table { uint table[]; };

layout(push_constant) uniform Push {
  uint count;
} p;

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < p.count; i += stride) {
    const float g = gate[i];
    float gelu = g;
    if (g <= -10.0) {
      gelu = 0.0;
    } else if (!(g >= 10.0)) {
      const uint h = ops_float_to_half(g) & 0xFFFFu;
      gelu = ops_half_to_float(table[h / 2u] >> (16u * (h & 1u)));
    }
    precise float result = gelu * up[i];
    gate[i] = result;
  }
}
