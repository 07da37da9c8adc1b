// x = cap * tanh(x / cap), as the CPU's soft_cap: times 1/cap, tanh, times cap.
// One value per invocation, striding by the whole grid (the host caps the grid at 65535 workgroups).
#version 450
#extension GL_GOOGLE_include_directive : require

#include "ops_half.glsl"

layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) buffer X { float x[]; };

layout(push_constant) uniform Push {
  uint count;
  float cap;
  float inverse_cap;
} p;

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < p.count; i += stride) {
    x[i] = p.cap * ops_tanh(x[i] * p.inverse_cap);
  }
}
