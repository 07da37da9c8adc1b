// The Vulkan backend's other operations of the forward pass, each recorded as dispatches into an OpContext's
// CommandRecording: norms, rotary embeddings, element-wise steps, the paged KV store and attention, and the
// selection of the few candidates a sampler needs. Buffers hold F32 unless said otherwise; everything that
// changes from step to step (positions, block tables) is read from buffers, never from push constants, so a
// recording stays valid for every step of the same shape.
#pragma once

#include <cstdint>

#include "loom/compute/tensor_type.hpp"
#include "loom/compute/vulkan/vulkan_matmul.hpp"

namespace loom::compute::vulkan {

// out[r] = x[r] / sqrt(mean(x[r]^2) + epsilon) * weight, for `rows` rows of `width` values (weight: width
// values). out may be x.
void rms_norm(OpContext& op, const BufferRange& x, const BufferRange& weight, const BufferRange& out,
              std::int64_t rows, std::int64_t width, float epsilon);

// x += y over `count` values.
void add(OpContext& op, const BufferRange& x, const BufferRange& y, std::int64_t count);
// rows[t] += bias for n rows of `width`.
void add_bias(OpContext& op, const BufferRange& rows, const BufferRange& bias, std::int64_t n, std::int64_t width);
// x *= factor over `count` values.
void scale(OpContext& op, const BufferRange& x, std::int64_t count, float factor);
// x = cap * tanh(x / cap) over `count` values (gemma2's soft-capping).
void soft_cap(OpContext& op, const BufferRange& x, std::int64_t count, float cap);
// gate = silu(gate) * up (SwiGLU), or gelu_tanh(gate) * up (GeGLU, F16 in and out as the CPU's gelu_tanh),
// over `count` values.
void swiglu(OpContext& op, const BufferRange& gate, const BufferRange& up, std::int64_t count);
void geglu(OpContext& op, const BufferRange& gate, const BufferRange& up, std::int64_t count);

// Rotary embeddings in place: vectors is n tokens of `heads` heads of head_dim values; rotation is, per token,
// head_dim / 2 (cos, sin) pairs (the host computes the angles per step, as the CPU backend does). Adjacent
// pairs (x[2i], x[2i+1]) for llama, or halves (x[i], x[i + head_dim/2]) for the NeoX style (qwen2, qwen3,
// gemma, phi3).
void rope(OpContext& op, const BufferRange& vectors, const BufferRange& rotation, std::int64_t n, std::int64_t heads,
          std::int64_t head_dim, bool adjacent_pairs);

// dst[i] = src[rows[i]] for m rows of `width` values (rows: m int32 indices).
void gather_rows(OpContext& op, const BufferRange& src, const BufferRange& rows, const BufferRange& dst,
                 std::int64_t m, std::int64_t width);

// The paged KV storage of one layer on the device: keys and values each [block][kv_head][slot][head_dim]
// of `type` (F16 or F32), block_size slots per block.
struct KvLayout {
  TensorType type = TensorType::f16;
  std::int64_t block_size = 16;
  std::int64_t kv_heads = 0;
  std::int64_t head_dim = 0;
};

// Writes n tokens' keys and values (k, v: n rows of kv_heads * head_dim F32) to their slots: slots[t] (int32)
// is block * block_size + slot of token t's position (a negative slot: the token is not stored). F16 storage
// rounds to nearest even, the bits the CPU's float_to_half gives.
void store_kv(OpContext& op, const KvLayout& layout, const BufferRange& k, const BufferRange& v,
              const BufferRange& slots, const BufferRange& keys, const BufferRange& values, std::int64_t n);

// Per token of a step, int32 x 4: its position, where its sequence's block table starts in `tables`, and two
// values that only the pinned attention reads (its span and order: vulkan_pinned.hpp). Token t attends to its sequence's positions max(0, position - window + 1) .. position.
struct AttentionShape {
  std::int64_t n = 0;         // tokens of the step
  std::int64_t heads = 0;     // query heads; heads / kv_heads share a KV head
  float scale = 1.0f;         // applied to q.k before the soft cap and the softmax
  std::int64_t window = 0;    // > 0: a sliding window of this many positions
  float softcap = 0.0f;       // > 0: scores become softcap * tanh(score / softcap)
  std::int64_t max_positions = 0;  // the context length: no token's position reaches it
};

// out[t][h] = softmax over the token's visible positions of scale * q[t][h] . key, weighted sum of the values.
// q, out: n rows of heads * head_dim F32. tables: int32 block ids of every sequence of the step, concatenated.
// With an F16 storage the query is rounded to F16 before the dot products, as the CPU backend's (and the
// reference's) F16 dot product does. Scores, softmax and sums are F32 (an online softmax: any context length).
// head_dim: even, at most 512; n and heads at most 65535.
// Work split: one workgroup per (token, group of query heads that share a KV head), or, when a step has too
// few of those to fill a device (a decode step of a few sequences), per (token, group, part of max_positions)
// followed by a pass that merges the parts: `scratch` holds attention_scratch_bytes(shape, layout) bytes for
// the parts, which is what a shape of shape.n tokens or fewer may need (so size the buffer once, for the
// widest step); 0 when none splits.
void attention(OpContext& op, const KvLayout& layout, const AttentionShape& shape, const BufferRange& q,
               const BufferRange& keys, const BufferRange& values, const BufferRange& token_info,
               const BufferRange& tables, const BufferRange& out, const BufferRange& scratch);
std::uint64_t attention_scratch_bytes(const AttentionShape& shape, const KvLayout& layout);
// The parts attention() splits each token's positions into for this shape (1: no split).
std::int64_t attention_splits(const AttentionShape& shape, const KvLayout& layout);

// For each of `rows` rows of `vocab` logits, its k largest as (int32 token, float logit) pairs, largest first,
// the lower token first on ties (-0 and +0 are equal): out holds rows * k * 8 bytes. k <= kMaxTopK,
// k <= vocab < 2^24, rows <= 65535.
inline constexpr std::int64_t kMaxTopK = 64;
void top_k(OpContext& op, const BufferRange& logits, std::int64_t rows, std::int64_t vocab, std::int64_t k,
           const BufferRange& out);

}  // namespace loom::compute::vulkan
