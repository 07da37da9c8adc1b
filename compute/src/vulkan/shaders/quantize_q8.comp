// F32 activations -> Q8_0 or Q8_1 (specialization constant 1: 0 for Q8_0, 1 for Q8_1), one thread per
// 32-value block, exactly as compute/src/cpu/quantize.cpp and small_blocks.cpp quantize them: d = max|x| /
// 127 (stored f16-rounded), q = x * (127 / max|x|) rounded half to even in -127..127, and Q8_1's s =
// d * sum(q) with d before its rounding, itself rounded to f16. Layout: quantize_layout.glsl.
#version 450
#extension GL_EXT_control_flow_attributes : enable

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint WITH_SUMS = 0u;

layout(std430, set = 0, binding = 0) readonly buffer Input { float x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Prepared { uint prepared[]; };

layout(push_constant) uniform Push {
  uint n;
  uint cols;
} p;

#include "dequant_half.glsl"
#include "quantize_common.glsl"
#include "quantize_layout.glsl"

void main() {
  const uint blocks_per_row = p.cols / 32u;
  const uint block = thread_index();
  if (block >= p.n * blocks_per_row) return;
  const uint t = block / blocks_per_row, group = block % blocks_per_row;
  const uint first = t * p.cols + 32u * group;
  float amax = 0.0;
  for (uint i = 0u; i < 32u; ++i) amax = max(amax, abs(x[first + i]));
  const float d = divide_rounded(amax, 127.0);
  const float id = amax != 0.0 ? divide_rounded(127.0, amax) : 0.0;
  int sum = 0;
  const uint qs = qs_word(p.cols, t, group);
  [[unroll]] for (uint k = 0u; k < 8u; ++k) {
    uint word = 0u;
    [[unroll]] for (uint b = 0u; b < 4u; ++b) {
      precise float scaled = x[first + 4u * k + b] * id;
      const int q = int(clamp(roundEven(scaled), -127.0, 127.0));
      sum += q;
      word |= uint(q & 0xFF) << (8u * b);
    }
    prepared[qs + k] = word;
  }
  const QuantLayout l = quant_layout(WITH_SUMS != 0u ? ACT_Q8_1 : ACT_Q8_0, p.n, p.cols);
  prepared[l.scales + block] = floatBitsToUint(round_to_half(d));
  if (WITH_SUMS != 0u) {
    precise float s = d * float(sum);
    prepared[l.extra + block] = floatBitsToUint(round_to_half(s));
  }
}
