// y[t][r] = W[r] . x[t] in the CPU backend's summation order, bit for bit (vulkan_matmul.hpp's
// Summation::pinned): one invocation per output (row r = global x, token t = global y, row tiles wrapped
// over z as in matmul_body.glsl), walking its row's blocks in order.
// - Q8_0, Q5_0, Q4_1, Q5_1 (compute/src/cpu/vec_dot.cpp dot_q8_0, small_blocks.cpp dot_8_lanes: the orders
//   every CPU path keeps): eight float lanes, lane k of a block taking the exact integer dot of its values
//   4k..4k+3 times dw * da in one FMA, the lanes summed as ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7));
//   Q4_1/Q5_1 then add their min terms, summed apart as mins = fma(m_w, s_a, mins).
// - IQ4_NL: as Q8_0 in a batch; alone (n = 1, small_blocks.cpp dot_iq4_nl_single) even and odd blocks in two
//   sets of lanes, added lane by lane before the lanes' sum, an odd last block's whole dot fused in after.
// - Q4_0 (dot_q4_0): one accumulator, per block fma(float(whole block's integer dot), dw * da, acc).
// - Q6_K, Q5_K (vec_dot_x86.inc's Q6KKernel, KAffineKernel: the AVX2 and AVX-512 paths, not the scalar
//   ones): per superblock eight int32 lanes, lane j gathering over the 8 groups of 32 the scaled dots of values
//   4j..4j+3 (exact integers), then fma(dw * da, float(lane j), acc j), the lanes summed as Q8_0's; Q5_K adds
//   its mins, summed apart as fma(-da * dmin, float(superblock's integer min sum), mins).
// - Q3_K, IQ4_XS, Q2_K (vec_dot_low_bit_k.inc: every CPU path): as Q6_K; Q2_K first adds its mins to the
//   same lanes per superblock, lane k taking fma(-da * dmin, float(group k's integer min sum), lane k).
// - Q4_K (KAffineKernel): two accumulators, total = fma(float(superblock's scaled integer dot), dw * da,
//   total) and mins = fma(float(integer min sum), dmin * da, mins); the result total - mins.
// Every FMA is pinned_fma() (pinned_math.glsl: glslc drops `precise` on fma()), every other expression
// `precise`. Needs shaderFloat64. Bindings and push constants as matmul.comp's.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : enable

#include "pinned_math.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint WEIGHT_TYPE = 8u;

layout(std430, set = 0, binding = 0) readonly buffer Weights { uint weight_words[]; };
layout(std430, set = 0, binding = 1) readonly buffer Activations { uint act_words[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Output { float y[]; };

layout(push_constant) uniform Push {
  uint rows;
  uint cols;
  uint n;
  uint row_bytes;
  uint tiles_x;
} p;

#include "dequant_group.glsl"
#include "quantize_layout.glsl"

// Q8_0 activations: token t's block b's quants (8 words) and its scale.
int act_quad_dot(QuantGroup g, uint at, uint k) {
  const uint word = act_words[at + k];
  int sum = 0;
  [[unroll]] for (uint b = 0u; b < 4u; ++b) sum += g.q[4u * k + b] * signed_byte_of(word, b);
  return sum;
}

// The 8 lanes' horizontal sum, as the CPU kernels' hsum().
float sum_8_lanes(float lanes[8]) {
  precise float sum = ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) + ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]));
  return sum;
}

const bool WITH_MINS = WEIGHT_TYPE == TYPE_Q4_1 || WEIGHT_TYPE == TYPE_Q5_1;  // against Q8_1's s

float dot_8_lanes(uint row_base, uint t) {
  const uint blocks = p.cols / 32u;
  const QuantLayout layout_ = quant_layout(WITH_MINS ? ACT_Q8_1 : ACT_Q8_0, p.n, p.cols);
  float lanes[8];
  [[unroll]] for (uint k = 0u; k < 8u; ++k) lanes[k] = 0.0;
  float mins = 0.0;
  QuantGroup g;
  for (uint b = 0u; b < blocks; ++b) {
    decode_quant_group(row_base, b, g);
    precise float d = g.d * uintBitsToFloat(act_words[layout_.scales + t * blocks + b]);
    const uint at = qs_word(p.cols, t, b);
    [[unroll]] for (uint k = 0u; k < 8u; ++k) lanes[k] = pinned_fma(d, float(act_quad_dot(g, at, k)), lanes[k]);
    if (WITH_MINS) mins = pinned_fma(g.dm, uintBitsToFloat(act_words[layout_.extra + t * blocks + b]), mins);
  }
  precise float sum = sum_8_lanes(lanes);
  if (WITH_MINS) sum = sum + mins;
  return sum;
}

float dot_iq4_nl_single(uint row_base, uint t) {
  const uint blocks = p.cols / 32u;
  const QuantLayout layout_ = quant_layout(ACT_Q8_0, p.n, p.cols);
  float even[8], odd[8];
  [[unroll]] for (uint k = 0u; k < 8u; ++k) { even[k] = 0.0; odd[k] = 0.0; }
  QuantGroup g;
  uint b = 0u;
  for (; b + 1u < blocks; b += 2u) {
    decode_quant_group(row_base, b, g);
    precise float d0 = g.d * uintBitsToFloat(act_words[layout_.scales + t * blocks + b]);
    uint at = qs_word(p.cols, t, b);
    [[unroll]] for (uint k = 0u; k < 8u; ++k) even[k] = pinned_fma(d0, float(act_quad_dot(g, at, k)), even[k]);
    decode_quant_group(row_base, b + 1u, g);
    precise float d1 = g.d * uintBitsToFloat(act_words[layout_.scales + t * blocks + b + 1u]);
    at = qs_word(p.cols, t, b + 1u);
    [[unroll]] for (uint k = 0u; k < 8u; ++k) odd[k] = pinned_fma(d1, float(act_quad_dot(g, at, k)), odd[k]);
  }
  float both[8];
  [[unroll]] for (uint k = 0u; k < 8u; ++k) {
    precise float e = even[k] + odd[k];
    both[k] = e;
  }
  float sum = sum_8_lanes(both);
  if (b < blocks) {
    decode_quant_group(row_base, b, g);
    precise float d = g.d * uintBitsToFloat(act_words[layout_.scales + t * blocks + b]);
    const uint at = qs_word(p.cols, t, b);
    int whole = 0;
    [[unroll]] for (uint k = 0u; k < 8u; ++k) whole += act_quad_dot(g, at, k);
    sum = pinned_fma(d, float(whole), sum);
  }
  return sum;
}

float dot_q4_0(uint row_base, uint t) {
  const uint blocks = p.cols / 32u;
  const QuantLayout layout_ = quant_layout(ACT_Q8_0, p.n, p.cols);
  float acc = 0.0;
  QuantGroup g;
  for (uint b = 0u; b < blocks; ++b) {
    decode_quant_group(row_base, b, g);
    precise float d = g.d * uintBitsToFloat(act_words[layout_.scales + t * blocks + b]);
    const uint at = qs_word(p.cols, t, b);
    int sum = 0;
    [[unroll]] for (uint k = 0u; k < 8u; ++k) sum += act_quad_dot(g, at, k);
    acc = pinned_fma(float(sum), d, acc);
  }
  return acc;
}

// The integer min sum of superblock s (Q4_K/Q5_K): sum over its groups of min_j * (bsums 2j + bsums 2j+1).
int superblock_mins(QuantGroup g, uint bsums, uint j) {
  return g.mn[0] * int(act_words[bsums + 2u * j]) + g.mn[1] * int(act_words[bsums + 2u * j + 1u]);
}

float dot_k(uint row_base, uint t) {
  const uint supers = p.cols / 256u;
  const QuantLayout layout_ = quant_layout(ACT_Q8_K, p.n, p.cols);
  float lanes[8];
  [[unroll]] for (uint k = 0u; k < 8u; ++k) lanes[k] = 0.0;
  float total = 0.0, mins = 0.0;
  QuantGroup g;
  for (uint s = 0u; s < supers; ++s) {
    int sums[8];
    [[unroll]] for (uint k = 0u; k < 8u; ++k) sums[k] = 0;
    int min_sum = 0, min_lanes[8];
    const uint bsums = layout_.extra + t * (p.cols / 16u) + 16u * s;
    for (uint j = 0u; j < 8u; ++j) {
      decode_quant_group(row_base, 8u * s + j, g);
      const uint at = qs_word(p.cols, t, 8u * s + j);
      [[unroll]] for (uint k = 0u; k < 8u; ++k) sums[k] += g.sc[k / 4u] * act_quad_dot(g, at, k);
      if (HAS_MIN) min_lanes[j] = superblock_mins(g, bsums, j);
      if (HAS_MIN) min_sum += min_lanes[j];
    }
    const float da = uintBitsToFloat(act_words[layout_.scales + t * supers + s]);
    precise float d = g.d * da;
    if (WEIGHT_TYPE == TYPE_Q4_K) {
      int whole = 0;
      [[unroll]] for (uint k = 0u; k < 8u; ++k) whole += sums[k];
      precise float dmin = g.dm * da;
      total = pinned_fma(float(whole), d, total);
      mins = pinned_fma(float(min_sum), dmin, mins);
    } else {
      precise float dmin = -da * g.dm;
      if (WEIGHT_TYPE == TYPE_Q2_K) {  // its mins first, into the same lanes: lane k takes group k's
        [[unroll]] for (uint k = 0u; k < 8u; ++k) lanes[k] = pinned_fma(dmin, float(min_lanes[k]), lanes[k]);
      }
      [[unroll]] for (uint k = 0u; k < 8u; ++k) lanes[k] = pinned_fma(d, float(sums[k]), lanes[k]);
      if (WEIGHT_TYPE == TYPE_Q5_K) mins = pinned_fma(dmin, float(min_sum), mins);
    }
  }
  if (WEIGHT_TYPE == TYPE_Q4_K) {
    precise float r = total - mins;
    return r;
  }
  precise float sum = sum_8_lanes(lanes);
  if (WEIGHT_TYPE == TYPE_Q5_K) sum = sum + mins;
  return sum;
}

void main() {
  const uint row = (gl_WorkGroupID.x + gl_WorkGroupID.z * p.tiles_x) * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
  const uint t = gl_WorkGroupID.y;
  if (row >= p.rows || t >= p.n) return;
  const uint row_base = row * p.row_bytes;
  y[t * p.rows + row] = WEIGHT_TYPE == TYPE_Q4_0 ? dot_q4_0(row_base, t) :
                          WEIGHT_TYPE == TYPE_IQ4_NL && p.n == 1u ? dot_iq4_nl_single(row_base, t) :
                          IS_K ? dot_k(row_base, t) : dot_8_lanes(row_base, t);
}
