// Paged attention, one workgroup per (token, group of query heads that share a KV head, split): workgroup
// (g, t, s) attends token t's query heads g * GROUP .. g * GROUP + GROUP - 1 to the positions its sequence holds
// up to the token's own (causal), or the last `window` of them, reading each position's block from the
// sequence's table, each key and value once for the whole group. With one split it writes the output; with more
// (a decode step's few tokens over a long context) split s takes only positions [s * chunk, (s + 1) * chunk)
// and writes each head's unnormalised sums, its maximum and its denominator to `partials`, which
// attention_combine.comp merges. Positions go in tiles of one per invocation: each invocation scores its
// position for every head of the group (dot products over head_dim), each head's tile maximum comes from a
// shared-memory tree, then every invocation rescales its running sums by exp(old max - new max) and adds the
// tile's weighted values for its own dimensions (the online softmax: one pass, stable for any context length,
// F32 sums). With LOOM_KV_F16 the storage holds two F16 per uint, and the queries are rounded to F16 first, as
// the CPU's (and the reference's) F16 dot product does.
#include "ops_half.glsl"

layout(local_size_x_id = 0) in;                     // a power of two
layout(constant_id = 1) const uint HEAD_DIM = 128;  // even, at most 4 * the workgroup size
layout(constant_id = 2) const uint GROUP = 1;       // query heads per workgroup, all of one KV head
const uint kMaxDims = 4;                            // dimensions per invocation and head
const float kLowest = -3.402823e38;

#include "attention_storage.glsl"  // bindings 0-5; token info: position, table start, 0, 0
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

shared float query_s[GROUP * HEAD_DIM];
shared float weight_s[GROUP * gl_WorkGroupSize.x];  // per head, the tile's exp(score - max), 0 past its end
shared uint row_s[gl_WorkGroupSize.x];              // where each of the tile's positions starts in keys and values
shared float reduce_s[GROUP * gl_WorkGroupSize.x];

// Each head's reduction (max or sum) of reduce_s[head * size + 0 .. size), left in reduce_s[head * size].
void reduce_heads(bool take_max) {
  const uint tid = gl_LocalInvocationID.x;
  barrier();
  for (uint half_size = gl_WorkGroupSize.x / 2; half_size > 0; half_size /= 2) {
    if (tid < half_size) {
      for (uint g = 0; g < GROUP; ++g) {
        const uint at = g * gl_WorkGroupSize.x + tid;
        const float other = reduce_s[at + half_size];
        reduce_s[at] = take_max ? max(reduce_s[at], other) : reduce_s[at] + other;
      }
    }
    barrier();
  }
}

void main() {
  const uint first_head = gl_WorkGroupID.x * GROUP;
  const uint token = gl_WorkGroupID.y;
  const uint tid = gl_LocalInvocationID.x;
  const uint size = gl_WorkGroupSize.x;
  const uint kv_head = first_head / (p.heads / p.kv_heads);
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

  // The group's heads are consecutive rows of q.
  const uint query_base = (token * p.heads + first_head) * HEAD_DIM;
  for (uint i = tid; i < GROUP * HEAD_DIM; i += size) {
#ifdef LOOM_KV_F16
    query_s[i] = ops_half_to_float(ops_float_to_half(q[query_base + i]));
#else
    query_s[i] = q[query_base + i];
#endif
  }
  barrier();

  float running_max[GROUP];
  float weight_sum[GROUP];  // this invocation's share of each head's softmax denominator
  float rescale[GROUP];
  float score[GROUP];
  float acc[GROUP * kMaxDims];
  for (uint g = 0; g < GROUP; ++g) {
    running_max[g] = kLowest;
    weight_sum[g] = 0.0;
    for (uint k = 0; k < kMaxDims; ++k) acc[g * kMaxDims + k] = 0.0;
  }
  for (int tile = first; tile <= last; tile += int(size)) {
    const int pos = tile + int(tid);
    for (uint g = 0; g < GROUP; ++g) score[g] = 0.0;
    if (pos <= last) {
      const int block = tables[table_start + pos / int(p.block_size)];
      const uint slot = uint(pos) % p.block_size;
      const uint row = ((uint(block) * p.kv_heads + kv_head) * p.block_size + slot) * HEAD_DIM;
      row_s[tid] = row;
      for (uint d = 0; d < HEAD_DIM; d += 2) {
        const vec2 key = key_pair(row + d);
        for (uint g = 0; g < GROUP; ++g) {
          score[g] += query_s[g * HEAD_DIM + d] * key.x + query_s[g * HEAD_DIM + d + 1] * key.y;
        }
      }
      for (uint g = 0; g < GROUP; ++g) {
        score[g] *= p.scale;
        if (p.softcap > 0.0) score[g] = p.softcap * ops_tanh(score[g] / p.softcap);
      }
    }
    for (uint g = 0; g < GROUP; ++g) reduce_s[g * size + tid] = pos <= last ? score[g] : kLowest;
    reduce_heads(true);
    for (uint g = 0; g < GROUP; ++g) {
      const float new_max = max(running_max[g], reduce_s[g * size]);
      rescale[g] = exp(running_max[g] - new_max);
      const float weight = pos <= last ? exp(score[g] - new_max) : 0.0;
      weight_s[g * size + tid] = weight;
      weight_sum[g] = weight_sum[g] * rescale[g] + weight;
      running_max[g] = new_max;
    }
    barrier();

    const uint count = uint(min(int(size), last - tile + 1));
    for (uint k = 0; k < kMaxDims; ++k) {
      const uint d = tid + k * size;
      if (d >= HEAD_DIM) break;
      for (uint g = 0; g < GROUP; ++g) acc[g * kMaxDims + k] *= rescale[g];
      for (uint i = 0; i < count; ++i) {
        const float v = value_at(row_s[i] + d);
        for (uint g = 0; g < GROUP; ++g) acc[g * kMaxDims + k] += weight_s[g * size + i] * v;
      }
    }
    barrier();  // before the next tile writes weight_s, row_s and reduce_s
  }

  for (uint g = 0; g < GROUP; ++g) reduce_s[g * size + tid] = weight_sum[g];
  reduce_heads(false);
  for (uint g = 0; g < GROUP; ++g) {
    const uint head = first_head + g;
    const float denominator = reduce_s[g * size];
    if (splits == 1) {  // a token that sees no position (none of a real step's) gets zeros, not 0 / 0
      for (uint k = 0; k < kMaxDims; ++k) {
        const uint d = tid + k * size;
        if (d < HEAD_DIM) {
          out_values[(token * p.heads + head) * HEAD_DIM + d] =
              denominator > 0.0 ? acc[g * kMaxDims + k] / denominator : 0.0;
        }
      }
      continue;
    }
    // An empty split (its positions all before the window or after the token) leaves 0, kLowest, 0: no weight.
    const uint partial_base = ((token * p.heads + head) * splits + split) * (HEAD_DIM + 2);
    for (uint k = 0; k < kMaxDims; ++k) {
      const uint d = tid + k * size;
      if (d < HEAD_DIM) partials[partial_base + d] = acc[g * kMaxDims + k];
    }
    if (tid == 0) {
      partials[partial_base + HEAD_DIM] = running_max[g];
      partials[partial_base + HEAD_DIM + 1] = denominator;
    }
  }
}
