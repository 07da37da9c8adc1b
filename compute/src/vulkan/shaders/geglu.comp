// gate = gelu(gate) * up, GELU in its tanh form 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2))) as the CPU's
// gelu_tanh (and the reference) computes it: 0 at or below -10, x at or above 10, and between them x rounded to
// F16 and the result rounded to F16 (the CPU looks both up in a table of F16 results), so the two agree but for
// the odd result that the device's tanh puts on the other side of an F16 rounding boundary.
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
      const float h = ops_half_to_float(ops_float_to_half(g));
      precise float exact = 0.5 * h * (1.0 + ops_tanh(0.79788456080286535587989211986876 * h * (1.0 + 0.044715 * h * h)));
      gelu = ops_half_to_float(ops_float_to_half(exact));
    }
    gate[i] = gelu * up[i];
  }
}
