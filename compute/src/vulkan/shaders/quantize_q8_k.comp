// F32 activations -> Q8_K, one thread per 256-value block, exactly as compute/src/cpu/quantize.cpp does it:
// iscale = -127 / (the signed value of largest magnitude, the first on ties), q = iscale * x rounded half to
// even (at most 127), d = 1 / iscale (F32), and the sixteen 16-value sums of q (bsums). Layout:
// quantize_layout.glsl.
#version 450
#extension GL_EXT_control_flow_attributes : enable

layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) readonly buffer Input { float x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Prepared { uint prepared[]; };

layout(push_constant) uniform Push {
  uint n;
  uint cols;
} p;

#include "quantize_common.glsl"
#include "quantize_layout.glsl"

void main() {
  const uint blocks_per_row = p.cols / 256u;
  const uint block = thread_index();
  if (block >= p.n * blocks_per_row) return;
  const uint t = block / blocks_per_row, b = block % blocks_per_row;
  const uint first = t * p.cols + 256u * b;
  float best = 0.0, best_abs = 0.0;
  for (uint i = 0u; i < 256u; ++i) {
    const float v = x[first + i];
    if (abs(v) > best_abs) {
      best_abs = abs(v);
      best = v;
    }
  }
  const QuantLayout l = quant_layout(ACT_Q8_K, p.n, p.cols);
  const float iscale = best != 0.0 ? divide_rounded(-127.0, best) : 0.0;
  for (uint sub = 0u; sub < 16u; ++sub) {
    int sum = 0;
    [[unroll]] for (uint k = 0u; k < 4u; ++k) {
      uint word = 0u;
      [[unroll]] for (uint j = 0u; j < 4u; ++j) {
        precise float scaled = iscale * x[first + 16u * sub + 4u * k + j];
        const int q = int(clamp(roundEven(scaled), -128.0, 127.0));
        sum += q;
        word |= uint(q & 0xFF) << (8u * j);
      }
      prepared[qs_word(p.cols, t, 8u * b) + 4u * sub + k] = word;
    }
    prepared[l.extra + t * (p.cols / 16u) + 16u * b + sub] = uint(sum);
  }
  prepared[l.scales + block] = floatBitsToUint(best != 0.0 ? divide_rounded(1.0, iscale) : 0.0);
}
