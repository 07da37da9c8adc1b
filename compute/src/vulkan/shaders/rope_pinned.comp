// Rotary embeddings in place as rope.comp, with the CPU's fused forms through pinned_fma() (pinned_math.glsl):
// GLSL's fma() may reach the driver unfused (see there). rotary_kernel.hpp: fma(x0, cos, -(x1 sin)), fma(x0, sin, x1 cos).
// The pair is (2i, 2i + 1) (adjacent) or (i, i + head_dim / 2) (NeoX). Needs shaderFloat64.
// rotation holds head_dim / 2 (cos, sin) pairs per token.
#version 450
#extension GL_GOOGLE_include_directive : require

#include "pinned_math.glsl"

layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) buffer Vectors { float vectors[]; };
layout(std430, set = 0, binding = 1) readonly buffer Rotation { float rotation[]; };

layout(push_constant) uniform Push {
  uint count;  // n * heads * head_dim / 2 pairs
  uint heads;
  uint head_dim;
  uint adjacent;
} p;

void main() {
  const uint pairs = p.head_dim / 2;
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint index = gl_GlobalInvocationID.x; index < p.count; index += stride) {
    const uint head = index / pairs;  // token * heads + head
    const uint i = index - head * pairs;
    const uint token = head / p.heads;
    const float cos_a = rotation[token * p.head_dim + 2 * i];
    const float sin_a = rotation[token * p.head_dim + 2 * i + 1];
    const uint a = head * p.head_dim + (p.adjacent != 0 ? 2 * i : i);
    const uint b = head * p.head_dim + (p.adjacent != 0 ? 2 * i + 1 : i + pairs);
    const float x0 = vectors[a];
    const float x1 = vectors[b];
    precise float rotated0 = pinned_fma(x0, cos_a, -(x1 * sin_a));
    precise float rotated1 = pinned_fma(x0, sin_a, x1 * cos_a);
    vectors[a] = rotated0;
    vectors[b] = rotated1;
  }
}
