// F32 activations -> Q8_0 or Q8_1 (specialization constant 0: 0 for Q8_0, 1 for Q8_1), exactly as
// compute/src/cpu/quantize.cpp and small_blocks.cpp quantize them: d = max|x| / 127 (stored f16-rounded),
// q = x * (127 / max|x|) rounded half to even in -127..127, and Q8_1's s = d * sum(q) with d before its
// rounding, itself rounded to f16. 8 threads per 32-value block, 4 values (one word of quants) each; a
// workgroup of 64 takes 8 blocks. Layout: quantize_layout.glsl.
#version 450
#extension GL_EXT_control_flow_attributes : enable

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint WITH_SUMS = 0u;

layout(std430, set = 0, binding = 0) readonly buffer Input { float x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Prepared { uint prepared[]; };

layout(push_constant) uniform Push {
  uint n;
  uint cols;
} p;

#include "dequant_half.glsl"
#include "quantize_common.glsl"
#include "quantize_layout.glsl"

shared float block_max[64];  // per thread, then the tree's within each block's 8 threads
shared int block_sums[64];
shared float block_scale[8];   // d before its rounding
shared float block_inverse[8];  // 127 / max|x|

void main() {
  const uint blocks_per_row = p.cols / 32u;
  const uint me = gl_LocalInvocationID.x, slot = me / 8u, lane = me % 8u;
  const uint block = (gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x) * 8u + slot;
  const bool in_range = block < p.n * blocks_per_row;  // every thread reaches the barriers
  const uint t = in_range ? block / blocks_per_row : 0u, group = in_range ? block % blocks_per_row : 0u;
  const uint first = t * p.cols + 32u * group + 4u * lane;
  vec4 v = vec4(0.0);
  if (in_range) v = vec4(x[first], x[first + 1u], x[first + 2u], x[first + 3u]);
  block_max[me] = max(max(abs(v.x), abs(v.y)), max(abs(v.z), abs(v.w)));
  barrier();
  for (uint stride = 4u; stride > 0u; stride /= 2u) {
    if (lane < stride) block_max[me] = max(block_max[me], block_max[me + stride]);
    barrier();
  }
  if (lane == 0u) {
    const float amax = block_max[me];
    block_scale[slot] = divide_rounded(amax, 127.0);
    block_inverse[slot] = amax != 0.0 ? divide_rounded(127.0, amax) : 0.0;
  }
  barrier();
  const float id = block_inverse[slot];
  uint word = 0u;
  int sum = 0;
  [[unroll]] for (uint j = 0u; j < 4u; ++j) {
    precise float scaled = v[j] * id;
    const int q = int(clamp(roundEven(scaled), -127.0, 127.0));
    sum += q;
    word |= uint(q & 0xFF) << (8u * j);
  }
  if (in_range) prepared[qs_word(p.cols, t, group) + lane] = word;
  block_sums[me] = sum;
  barrier();
  if (!in_range || lane != 0u) return;
  const QuantLayout l = quant_layout(WITH_SUMS != 0u ? ACT_Q8_1 : ACT_Q8_0, p.n, p.cols);
  const float d = block_scale[slot];
  prepared[l.scales + block] = floatBitsToUint(round_to_half(d));
  if (WITH_SUMS != 0u) {
    int total = 0;
    for (uint k = 0u; k < 8u; ++k) total += block_sums[me + k];
    precise float s = d * float(total);
    prepared[l.extra + block] = floatBitsToUint(round_to_half(s));
  }
}
