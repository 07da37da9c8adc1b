// F32 activations rounded to f16 values (kept as F32), as the CPU rounds them where they meet F16 weights
// (compute/src/cpu/llama_model.cpp round_for_f16_weight), one thread per value.
#version 450

layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) readonly buffer Input { float x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Prepared { float prepared[]; };

layout(push_constant) uniform Push {
  uint count;
} p;

#include "dequant_half.glsl"
#include "quantize_common.glsl"

void main() {
  const uint i = thread_index();
  if (i < p.count) prepared[i] = round_to_half(x[i]);
}
