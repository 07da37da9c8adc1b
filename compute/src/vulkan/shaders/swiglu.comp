// gate = silu(gate) * up, silu(x) = x / (1 + exp(-x)) (for x below -88 exp overflows and silu is -0).
// One value per invocation, striding by the whole grid (the host caps the grid at 65535 workgroups).
#version 450
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
    gate[i] = g / (1.0 + exp(-g)) * up[i];
  }
}
