// gate = gelu(gate) * up, GELU in its tanh form 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2))), 0 at or
// below -10 and x at or above 10 as the CPU's gelu_tanh (which also rounds to F16 through a table: not here).
// One value per invocation, striding by the whole grid (the host caps the grid at 65535 workgroups).
#version 450
#extension GL_GOOGLE_include_directive : require

#include "ops_half.glsl"

layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) buffer Gate { float gate[]; };
layout(std430, set = 0, binding = 1) readonly buffer Up { float up[]; };

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
    } else if (g < 10.0) {
      gelu = 0.5 * g * (1.0 + ops_tanh(0.79788456080286535587989211986876 * g * (1.0 + 0.044715 * g * g)));
    }
    gate[i] = gelu * up[i];
  }
}
