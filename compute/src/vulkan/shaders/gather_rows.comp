// dst[i] = src[rows[i]] for m rows of `width` values, one value per invocation striding by the whole grid.
#version 450

layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) readonly buffer Source { float src[]; };
layout(std430, set = 0, binding = 1) readonly buffer Rows { int rows[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Destination { float dst[]; };

layout(push_constant) uniform Push {
  uint count;  // m * width
  uint width;
} p;

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < p.count; i += stride) {
    const uint row = i / p.width;
    dst[i] = src[uint(rows[row]) * p.width + (i - row * p.width)];
  }
}
