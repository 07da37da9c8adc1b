// rows[t][i] += bias[i] over n rows of `width` values, one value per invocation striding by the whole grid.
#version 450

layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) buffer Rows { float rows[]; };
layout(std430, set = 0, binding = 1) readonly buffer Bias { float bias[]; };

layout(push_constant) uniform Push {
  uint count;  // n * width
  uint width;
} p;

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < p.count; i += stride) rows[i] += bias[i % p.width];
}
