// The runtime's own check shader (tests/vulkan): out[i] = in[i] * a + b, one invocation per value, with the
// count in push constants and the workgroup size as specialization constant 0.
#version 450

layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) readonly buffer Input { float values_in[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Output { float values_out[]; };

layout(push_constant) uniform Push {
  uint count;
  float a;
  float b;
} p;

void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i < p.count) values_out[i] = values_in[i] * p.a + p.b;
}
