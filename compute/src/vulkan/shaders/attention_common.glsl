// Paged attention, one workgroup per (token, query head, split): workgroup (h, t, s) attends token t's query
// head h to the positions its sequence holds up to the token's own (causal), or the last `window` of them,
// reading each position's block from the sequence's table. With one split it writes the output; with more
// (a decode step's few tokens over a long context) split s takes only positions [s * chunk, (s + 1) * chunk)
// and writes its unnormalised sums, its maximum and its denominator to `partials`, which
// attention_combine.comp merges. Positions go in tiles of one per invocation: each invocation
// scores its position (a whole dot product over head_dim), the tile's maximum is found by a shared-memory tree,
// then every invocation rescales its running sums by exp(old max - new max) and adds the tile's weighted
// values for its own dimensions (the online softmax: one pass, stable for any context length, F32 sums).
// With LOOM_KV_F16 the storage holds two F16 per uint, and the query is rounded to F16 first, as the CPU's
// (and the reference's) F16 dot product does.
#include "ops_half.glsl"

layout(local_size_x_id = 0) in;                // a power of two
layout(constant_id = 1) const uint HEAD_DIM = 128;  // even, at most 4 * the workgroup size
const uint kMaxDimsPerInvocation = 4;
const float kLowest = -3.402823e38;

layout(std430, set = 0, binding = 0) readonly buffer Query { float q[]; };
#ifdef LOOM_KV_F16
layout(std430, set = 0, binding = 1) readonly buffer Keys { uint keys[]; };
layout(std430, set = 0, binding = 2) readonly buffer Values { uint values[]; };
#else
layout(std430, set = 0, binding = 1) readonly buffer Keys { float keys[]; };
layout(std430, set = 0, binding = 2) readonly buffer Values { float values[]; };
#endif
layout(std430, set = 0, binding = 3) readonly buffer TokenInfo { int token_info[]; };  // position, table start, 0, 0
layout(std430, set = 0, binding = 4) readonly buffer Tables { int tables[]; };
layout(std430, set = 0, binding = 5) writeonly buffer Out { float out_values[]; };
// Per (token, head, split): head_dim sums, then the split's maximum score and its softmax denominator.
layout(std430, set = 0, binding = 6) writeonly buffer Partials { float partials[]; };

layout(push_constant) uniform Push {
  uint heads;
  uint kv_heads;
  uint block_size;
  uint window;   // 0: none
  float scale;
  float softcap; // 0: none
  uint chunk;    // positions per split (with one split: unused)
} p;

shared float query_s[HEAD_DIM];
shared float weight_s[gl_WorkGroupSize.x];  // the tile's exp(score - max), 0 past its end
shared uint row_s[gl_WorkGroupSize.x];      // where each of the tile's positions starts in keys and values
shared float reduce_s[gl_WorkGroupSize.x];

float key_dot(uint row) {
  float sum = 0.0;
#ifdef LOOM_KV_F16
  for (uint d = 0; d < HEAD_DIM; d += 2) {
    const vec2 key = unpackHalf2x16(keys[(row + d) / 2]);
    sum += query_s[d] * key.x + query_s[d + 1] * key.y;
  }
#else
  for (uint d = 0; d < HEAD_DIM; ++d) sum += query_s[d] * keys[row + d];
#endif
  return sum;
}

float value_at(uint element) {
#ifdef LOOM_KV_F16
  const vec2 pair = unpackHalf2x16(values[element / 2]);
  return (element & 1u) == 0u ? pair.x : pair.y;
#else
  return values[element];
#endif
}

// The workgroup's reduction of `value` (max or sum) in reduce_s; every invocation gets the result.
float workgroup_reduce(float value, bool take_max) {
  const uint tid = gl_LocalInvocationID.x;
  reduce_s[tid] = value;
  barrier();
  for (uint half_size = gl_WorkGroupSize.x / 2; half_size > 0; half_size /= 2) {
    if (tid < half_size) {
      const float other = reduce_s[tid + half_size];
      reduce_s[tid] = take_max ? max(reduce_s[tid], other) : reduce_s[tid] + other;
    }
    barrier();
  }
  const float result = reduce_s[0];
  barrier();  // before reduce_s is written again
  return result;
}

void main() {
  const uint head = gl_WorkGroupID.x;
  const uint token = gl_WorkGroupID.y;
  const uint tid = gl_LocalInvocationID.x;
  const uint kv_head = head / (p.heads / p.kv_heads);
  const int position = token_info[token * 4];
  const int table_start = token_info[token * 4 + 1];
  const uint split = gl_WorkGroupID.z;
  const uint splits = gl_NumWorkGroups.z;
  int first = p.window > 0 ? max(0, position - int(p.window) + 1) : 0;
  int last = position;
  if (splits > 1) {
    first = max(first, int(split * p.chunk));
    if (split + 1 < splits) last = min(last, int((split + 1) * p.chunk) - 1);  // the last part takes the rest
  }

  const uint query_base = (token * p.heads + head) * HEAD_DIM;
  for (uint d = tid; d < HEAD_DIM; d += gl_WorkGroupSize.x) {
#ifdef LOOM_KV_F16
    query_s[d] = ops_half_to_float(ops_float_to_half(q[query_base + d]));
#else
    query_s[d] = q[query_base + d];
#endif
  }
  barrier();

  float running_max = kLowest;
  float weight_sum = 0.0;  // this invocation's share of the softmax's denominator
  float acc[kMaxDimsPerInvocation] = float[](0.0, 0.0, 0.0, 0.0);
  for (int tile = first; tile <= last; tile += int(gl_WorkGroupSize.x)) {
    const int pos = tile + int(tid);
    float score = kLowest;
    if (pos <= last) {
      const int block = tables[table_start + pos / int(p.block_size)];
      const uint slot = uint(pos) % p.block_size;
      const uint row = ((uint(block) * p.kv_heads + kv_head) * p.block_size + slot) * HEAD_DIM;
      row_s[tid] = row;
      score = key_dot(row) * p.scale;
      if (p.softcap > 0.0) score = p.softcap * ops_tanh(score / p.softcap);
    }
    const float new_max = max(running_max, workgroup_reduce(score, true));
    const float rescale = exp(running_max - new_max);
    const float weight = pos <= last ? exp(score - new_max) : 0.0;
    weight_s[tid] = weight;
    weight_sum = weight_sum * rescale + weight;
    running_max = new_max;
    barrier();

    const uint count = uint(min(int(gl_WorkGroupSize.x), last - tile + 1));
    for (uint k = 0; k < kMaxDimsPerInvocation; ++k) {
      const uint d = tid + k * gl_WorkGroupSize.x;
      if (d >= HEAD_DIM) break;
      float sum = 0.0;
      for (uint i = 0; i < count; ++i) sum += weight_s[i] * value_at(row_s[i] + d);
      acc[k] = acc[k] * rescale + sum;
    }
    barrier();  // before the next tile writes weight_s and row_s
  }

  const float denominator = workgroup_reduce(weight_sum, false);
  if (splits == 1) {  // a token that sees no position (none of a real step's) gets zeros, not 0 / 0
    for (uint k = 0; k < kMaxDimsPerInvocation; ++k) {
      const uint d = tid + k * gl_WorkGroupSize.x;
      if (d < HEAD_DIM) out_values[query_base + d] = denominator > 0.0 ? acc[k] / denominator : 0.0;
    }
    return;
  }
  // An empty split (its positions all before the window or after the token) leaves 0, kLowest, 0: no weight.
  const uint partial_base = ((token * p.heads + head) * splits + split) * (HEAD_DIM + 2);
  for (uint k = 0; k < kMaxDimsPerInvocation; ++k) {
    const uint d = tid + k * gl_WorkGroupSize.x;
    if (d < HEAD_DIM) partials[partial_base + d] = acc[k];
  }
  if (tid == 0) {
    partials[partial_base + HEAD_DIM] = running_max;
    partials[partial_base + HEAD_DIM + 1] = denominator;
  }
}
