// F32 activations -> Q8_K, exactly as compute/src/cpu/quantize.cpp does it: iscale = -127 / (the signed value
// of largest magnitude, the first on ties), q = iscale * x rounded half to even (at most 127), d = 1 / iscale
// (F32), and the sixteen 16-value sums of q (bsums). One workgroup of 64 threads per 256-value block, 4
// values a thread (a decode step's few blocks would leave a thread-per-block shader nearly serial).
// Layout: quantize_layout.glsl.
#version 450
#extension GL_EXT_control_flow_attributes : enable

layout(local_size_x = 64) in;

layout(std430, set = 0, binding = 0) readonly buffer Input { float x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Prepared { uint prepared[]; };

layout(push_constant) uniform Push {
  uint n;
  uint cols;
} p;

#include "quantize_common.glsl"
#include "quantize_layout.glsl"

shared float largest[64];  // each thread's value of largest magnitude, then the tree's
shared uint largest_at[64];  // its index in the block, for the first-on-ties rule
shared int quad_sums[64];
shared float block_iscale;

void main() {
  const uint blocks_per_row = p.cols / 256u;
  const uint block = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (block >= p.n * blocks_per_row) return;  // the whole workgroup
  const uint me = gl_LocalInvocationID.x;
  const uint t = block / blocks_per_row, b = block % blocks_per_row;
  const uint first = t * p.cols + 256u * b;
  vec4 v;
  float best = 0.0;
  uint best_at = 0u;
  [[unroll]] for (uint j = 0u; j < 4u; ++j) {
    v[j] = x[first + 4u * me + j];
    if (abs(v[j]) > abs(best)) {
      best = v[j];
      best_at = 4u * me + j;
    }
  }
  largest[me] = best;
  largest_at[me] = best_at;
  barrier();
  for (uint stride = 32u; stride > 0u; stride /= 2u) {
    if (me < stride) {
      const float a = largest[me], other = largest[me + stride];
      // The larger magnitude wins; on a tie the earlier index (a zero block keeps 0 at index 0).
      if (abs(other) > abs(a) || (abs(other) == abs(a) && largest_at[me + stride] < largest_at[me])) {
        largest[me] = other;
        largest_at[me] = largest_at[me + stride];
      }
    }
    barrier();
  }
  if (me == 0u) block_iscale = largest[0] != 0.0 ? divide_rounded(-127.0, largest[0]) : 0.0;
  barrier();
  const float iscale = block_iscale;
  uint word = 0u;
  int sum = 0;
  [[unroll]] for (uint j = 0u; j < 4u; ++j) {
    precise float scaled = iscale * v[j];
    const int q = int(clamp(roundEven(scaled), -128.0, 127.0));
    sum += q;
    word |= uint(q & 0xFF) << (8u * j);
  }
  prepared[qs_word(p.cols, t, 8u * b) + me] = word;
  quad_sums[me] = sum;
  barrier();
  const QuantLayout l = quant_layout(ACT_Q8_K, p.n, p.cols);
  if (me < 16u) {
    const int bsum = quad_sums[4u * me] + quad_sums[4u * me + 1u] + quad_sums[4u * me + 2u] + quad_sums[4u * me + 3u];
    prepared[l.extra + t * (p.cols / 16u) + 16u * b + me] = uint(bsum);
  }
  if (me == 0u) prepared[l.scales + block] = floatBitsToUint(iscale != 0.0 ? divide_rounded(1.0, iscale) : 0.0);
}
