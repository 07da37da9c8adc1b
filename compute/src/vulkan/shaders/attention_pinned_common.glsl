// Paged attention in the CPU's pinned arithmetic (compute/include/loom/compute/cpu/attention.hpp, the scalar
// definition in compute/src/cpu/attention.cpp), bit for bit: one workgroup per (query head, token). Token t's
// info holds its position, where its sequence's block table starts, the reference's span (reference_span()
// of the step's last position of its sequence) and the order (1: tiled, a prefill step; 0: vector_dot). Each
// invocation scores positions of its own (the query rounded to F16 for an F16 storage, each dot in the
// order's lanes and accumulators), the maximum comes from a shared-memory tree (exact in any order), then each
// invocation takes groups of LANES positions through the pinned expf and sums each group in the lanes' tree;
// one invocation adds the groups in double in position order, and the rest through the C library's expf;
// then each invocation weighs the values for output dimensions of its own, over the span in the order's
// lanes. Scores and group sums live in `scratch` (one region of `region` floats per (token, head)): not an
// online softmax, whose single pass rounds differently. Needs shaderFloat64.
#include "ops_half.glsl"
#include "pinned_math.glsl"

layout(local_size_x_id = 0) in;                     // a power of two
layout(constant_id = 1) const uint LANES = 16;      // 16: the reference's AVX-512 orders, 8: its AVX2 ones
layout(constant_id = 2) const uint HEAD_DIM = 128;

#include "attention_storage.glsl"  // bindings 0-5; token info: position, table, span, order
layout(std430, set = 0, binding = 6) coherent buffer Scratch { float scratch[]; };

layout(push_constant) uniform Push {
  uint heads;
  uint kv_heads;
  uint block_size;
  uint window;        // 0: none
  float scale;
  float softcap;      // 0: none
  float inverse_cap;  // 1 / softcap, rounded on the host (the device's division need not round exactly)
  uint region;        // scratch floats per (token, head): scores, then group sums
  uint group_sums;    // where a region's group sums start
} p;

shared float query_s[HEAD_DIM];
shared float reduce_s[gl_WorkGroupSize.x];
shared float inverse_s;
// Each invocation's 64 accumulators of a dot, accumulator k at k * size + invocation: in shared memory, as
// a local array indexed by a loop variable compiles to a ladder of branches per access on some drivers.
shared float acc_s[64 * gl_WorkGroupSize.x];

#ifdef LOOM_KV_F16
float storage_round(float x) { return ops_half_to_float(ops_float_to_half(x)); }
#else
float storage_round(float x) { return x; }
#endif

// The attended token's facts, set once by main().
uint g_table, g_kv_head, g_positions, g_first, g_region;

// Where position pos's row (of keys or values) starts in the storage.
uint row_of(uint pos) {
  const uint block = uint(tables[g_table + pos / p.block_size]);
  return ((block * p.kv_heads + g_kv_head) * p.block_size + pos % p.block_size) * HEAD_DIM;
}

// Term i of a dot: a score's (key element, query element), or a weighted value's (value, probability) at
// position i for output dimension `which`; positions outside [first, positions) add 0 * 0.
const uint kScore = 0u, kValue = 1u;
vec2 term(uint mode, uint which, uint i) {
  if (mode == kScore) return vec2(key_at(which + i), query_s[i]);
  if (i < g_first || i >= g_positions) return vec2(0.0);
  return vec2(value_at(row_of(i) + which), scratch[g_region + i]);
}

// Lane trees: AVX-512's horizontal add (16), the AVX2 tiled kernel's (8) and its vector dot's two hadds (8).
float sum_lanes(float x[16], bool hadd) {
  precise float r;
  if (LANES == 16) {
    float t[8];
    for (int i = 0; i < 8; ++i) {
      precise float s = x[8 + i] + x[i];
      t[i] = s;
    }
    precise float t0 = t[4] + t[0], t1 = t[5] + t[1], t2 = t[6] + t[2], t3 = t[7] + t[3];
    r = (t0 + t2) + (t1 + t3);
  } else {
    float t[4];
    for (int i = 0; i < 4; ++i) {
      precise float s = x[4 + i] + x[i];
      t[i] = s;
    }
    r = hadd ? (t[0] + t[1]) + (t[2] + t[3]) : (t[0] + t[2]) + (t[1] + t[3]);
  }
  return r;
}

// A dot of terms [from, n) (from: a multiple of 64) in either order, one body for both (each call site of a
// function is inlined, and this one is long: fewer copies compile faster).
// SumOrder::vector_dot: four LANES-lane accumulators over the first n - n % (4 LANES) terms, folded
// (a0 + a2) + (a1 + a3), summed by the vector dot's tree, then the rest in double.
// SumOrder::tiled: one LANES-lane accumulator over every term, summed by the tiled kernel's tree.
float dot(uint mode, uint which, uint n, uint from, bool tiled) {
  const uint step = tiled ? LANES : 4u * LANES;
  const uint whole = tiled ? n : n / step * step;
  const uint me = gl_LocalInvocationID.x, size = gl_WorkGroupSize.x;
  for (uint k = 0; k < 64u; ++k) acc_s[k * size + me] = 0.0;
  for (uint i = from; i < whole; ++i) {
    const vec2 ab = term(mode, which, i);
    const uint k = ((i - from) % step) * size + me;  // from is a multiple of step
    acc_s[k] = pinned_fma(ab.x, ab.y, acc_s[k]);
  }
  float x[16];
  for (uint l = 0; l < LANES; ++l) {
    const float a0 = acc_s[l * size + me], a1 = acc_s[(LANES + l) * size + me];
    const float a2 = acc_s[(2u * LANES + l) * size + me], a3 = acc_s[(3u * LANES + l) * size + me];
    precise float folded = (a0 + a2) + (a1 + a3);
    x[l] = tiled ? a0 : folded;
  }
  precise double sum = double(sum_lanes(x, !tiled));
  for (uint i = max(whole, from); i < n; ++i) {
    const vec2 ab = term(mode, which, i);
    precise float product = ab.x * ab.y;
    sum = sum + double(product);
  }
  return float(sum);
}

float pinned_expf(float x) { return LANES == 16 ? pinned_vector_expf(x) : pinned_avx2_expf(x); }

void main() {
  const uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x, size = gl_WorkGroupSize.x;
  const uint position = uint(token_info[4 * t]);
  g_table = uint(token_info[4 * t + 1]);
  g_positions = position + 1u;
  const uint span = max(uint(token_info[4 * t + 2]), g_positions);
  const bool tiled = token_info[4 * t + 3] != 0;
  g_kv_head = h / (p.heads / p.kv_heads);
  g_first = p.window > 0u && g_positions > p.window ? g_positions - p.window : 0u;
  const uint base = g_first / 64u * 64u;
  g_region = (t * p.heads + h) * p.region;
  const bool tiled_scores = tiled && HEAD_DIM % LANES == 0u && span % 4u == 0u;
  const bool tiled_values = tiled && span % LANES == 0u && HEAD_DIM % 4u == 0u;
  const uint row = (t * p.heads + h) * HEAD_DIM;
  for (uint d = tid; d < HEAD_DIM; d += size) query_s[d] = storage_round(q[row + d]);
  barrier();

  float most = uintBitsToFloat(0xff800000u);  // -inf
  for (uint pos = g_first + tid; pos < g_positions; pos += size) {
    const uint key = row_of(pos);
    precise float s = dot(kScore, key, HEAD_DIM, 0u, tiled_scores) * p.scale;
    if (p.softcap > 0.0) {
      precise float inside = s * p.inverse_cap;
      precise float capped = p.softcap * pinned_libc_tanhf(inside);
      s = capped;
    }
    scratch[g_region + pos] = s;
    most = max(most, s);
  }
  reduce_s[tid] = most;
  memoryBarrierBuffer();
  barrier();
  for (uint half_size = size / 2u; half_size > 0u; half_size /= 2u) {
    if (tid < half_size) reduce_s[tid] = max(reduce_s[tid], reduce_s[tid + half_size]);
    barrier();
  }
  most = reduce_s[0];

  // Whole groups of LANES positions from base through the pinned expf, each summed in its lanes' tree.
  const uint groups = g_positions > base ? min((span - base) / LANES, (g_positions - base + LANES - 1u) / LANES) : 0u;
  for (uint g = tid; g < groups; g += size) {
    float lane[16];
    for (uint l = 0; l < 16u; ++l) lane[l] = 0.0;
    for (uint l = 0; l < LANES; ++l) {
      const uint pos = base + g * LANES + l;
      if (pos < g_first || pos >= g_positions) continue;  // masked: exp(-inf) is 0
      precise float x = scratch[g_region + pos] - most;
      lane[l] = pinned_expf(x);
      scratch[g_region + pos] = lane[l];
    }
    scratch[g_region + p.group_sums + g] = sum_lanes(lane, false);
  }
  memoryBarrierBuffer();
  barrier();
  if (tid == 0u) {
    precise double sum = 0.0;
    for (uint g = 0; g < groups; ++g) sum = sum + double(scratch[g_region + p.group_sums + g]);
    for (uint pos = base + groups * LANES; pos < g_positions; ++pos) {
      precise float x = scratch[g_region + pos] - most;
      const float e = pinned_libc_expf(x);
      scratch[g_region + pos] = e;
      sum = sum + double(e);
    }
    inverse_s = float(1.0 / sum);
  }
  memoryBarrierBuffer();
  barrier();
  const float inverse = inverse_s;
  for (uint pos = g_first + tid; pos < g_positions; pos += size) {
    precise float probability = scratch[g_region + pos] * inverse;
    scratch[g_region + pos] = storage_round(probability);
  }
  memoryBarrierBuffer();
  barrier();

  for (uint d = tid; d < HEAD_DIM; d += size) {
    out_values[row + d] = dot(kValue, d, span, base, tiled_values);
  }
}
