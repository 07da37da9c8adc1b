// RMS norm, one workgroup per row: out = x / sqrt(mean(x^2) + epsilon) * weight, the squares summed in float
// per invocation then by a shared-memory tree (the CPU sums float squares in double: the two agree to a few
// ulp of the mean). `out` may be `x`: every value is read and written by the invocation that owns it.
#version 450

layout(local_size_x_id = 0) in;  // a power of two

layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) readonly buffer Weight { float weight[]; };
layout(std430, set = 0, binding = 2) buffer Out { float out_values[]; };

layout(push_constant) uniform Push {
  uint rows;
  uint width;
  float epsilon;
} p;

shared float partial[gl_WorkGroupSize.x];

void main() {
  const uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (row >= p.rows) return;  // uniform over the workgroup
  const uint tid = gl_LocalInvocationID.x;
  const uint base = row * p.width;
  float sum = 0.0;
  for (uint i = tid; i < p.width; i += gl_WorkGroupSize.x) {
    const float v = x[base + i];
    sum += v * v;
  }
  partial[tid] = sum;
  barrier();
  for (uint half_size = gl_WorkGroupSize.x / 2; half_size > 0; half_size /= 2) {
    if (tid < half_size) partial[tid] += partial[tid + half_size];
    barrier();
  }
  const float mean = partial[0] / float(p.width);
  const float factor = 1.0 / sqrt(mean + p.epsilon);
  for (uint i = tid; i < p.width; i += gl_WorkGroupSize.x) {
    out_values[base + i] = x[base + i] * factor * weight[i];
  }
}
