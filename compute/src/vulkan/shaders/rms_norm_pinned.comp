// RMS norm in the CPU's arithmetic (rms_norm in compute/src/cpu/llama_model.cpp): out = x * scale * weight
// with scale = 1 / sqrt(mean + epsilon) rounded as float division and square root round, mean the float of
// the double sum of the float squares over the width. One workgroup per row; each invocation sums its squares
// in double, then a shared-memory tree in double: a double sum of at most a few thousand float squares is
// within a few double ulps of the CPU's sequential one, so the float mean is the CPU's but for a row whose
// mean lies within that of a float rounding boundary. `out` may be `x`. Needs shaderFloat64.
#version 450
#extension GL_GOOGLE_include_directive : require

#include "pinned_math.glsl"

layout(local_size_x_id = 0) in;  // a power of two

layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) readonly buffer Weight { float weight[]; };
layout(std430, set = 0, binding = 2) buffer Out { float out_values[]; };

layout(push_constant) uniform Push {
  uint rows;
  uint width;
  float epsilon;
} p;

shared double partial[gl_WorkGroupSize.x];

void main() {
  const uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (row >= p.rows) return;  // uniform over the workgroup
  const uint tid = gl_LocalInvocationID.x;
  const uint base = row * p.width;
  precise double sum = 0.0;
  for (uint i = tid; i < p.width; i += gl_WorkGroupSize.x) {
    const float v = x[base + i];
    precise float square = v * v;
    sum = sum + double(square);
  }
  partial[tid] = sum;
  barrier();
  for (uint half_size = gl_WorkGroupSize.x / 2; half_size > 0; half_size /= 2) {
    if (tid < half_size) {
      precise double s = partial[tid] + partial[tid + half_size];
      partial[tid] = s;
    }
    barrier();
  }
  precise double mean_exact = partial[0] / double(p.width);
  const float mean = float(mean_exact);
  precise float shifted = mean + p.epsilon;
  const float root = float(sqrt(double(shifted)));  // correctly rounded: a float's root is never that close to a tie
  const float scale = pinned_divide(1.0, root);
  for (uint i = tid; i < p.width; i += gl_WorkGroupSize.x) {
    precise float scaled = x[base + i] * scale;
    precise float result = scaled * weight[i];
    out_values[base + i] = result;
  }
}
