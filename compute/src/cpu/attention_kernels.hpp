// Internal: what attention.cpp decides once per head and hands to a kernel path, and the AVX2 entry points
// (defined in attention_avx2.cpp, compiled for AVX2 + FMA + F16C).
#pragma once

#include <cmath>
#include <cstddef>
#include <algorithm>
#include <cstdint>

#include "loom/compute/cpu/attention.hpp"

namespace loom::compute::detail {

// Internal linkage on purpose: attention_avx2.cpp is compiled for AVX2, and one shared inline copy could be
// the AVX2 one (compute/README.md, "SIMD files").
namespace {

// Walks positions 0, 1, 2, ... of a head and gives each one's offset (in elements) in the K/V storage,
// without a division per position: block start + slot * slot_stride (the keys' and row values' slot_stride
// is HeadAttention::stride, transposed values' 1).
class PositionRows {
 public:
  // Starting at position `start` (a sliding window's first), the table entries before it never read.
  PositionRows(const HeadAttention& h, std::size_t slot_stride, std::int64_t start = 0)
      : table_(h.block_table != nullptr ? h.block_table : &kNoTable),
        block_size_(h.block_table != nullptr ? h.block_size : h.positions),
        slot_stride_(slot_stride),
        block_stride_(h.block_stride != 0 ? h.block_stride : static_cast<std::size_t>(block_size_) * h.stride),
        block_(start / block_size_), slot_(start % block_size_) {}
  std::size_t offset() const noexcept {
    return static_cast<std::size_t>(table_[block_]) * block_stride_ + static_cast<std::size_t>(slot_) * slot_stride_;
  }
  void next() noexcept {
    if (++slot_ == block_size_) {
      slot_ = 0;
      ++block_;
    }
  }

 private:
  static constexpr std::int32_t kNoTable = 0;  // one block holding every position: slot p is position p
  const std::int32_t* table_;
  std::int64_t block_size_;
  std::size_t slot_stride_;
  std::size_t block_stride_;
  std::int64_t block_;
  std::int64_t slot_;
};

// A scaled score soft-capped as the reference does it (times 1/cap, tanhf, times cap); cap 0: as it is.
inline float soft_cap(float score, float cap) { return cap > 0.0f ? cap * std::tanh(score * (1.0f / cap)) : score; }

}  // namespace

struct AttentionPlan {
  std::int64_t span = 0;              // cells of the reference's KV view (HeadAttention::span, or positions)
  std::int64_t padded_scores = 0;     // scores kept, rounded up to whole 16-position groups
  int lanes = 16;                     // the reference's vector width in floats (HeadAttention::lanes)
  bool tiled_scores = false;          // scores in SumOrder::tiled (else vector_dot)
  bool tiled_values = false;          // weighted values in SumOrder::tiled (else vector_dot)
  bool f32_cache = false;             // keys and values are F32 (else F16)
  std::int64_t last = 0;              // the last query's positions (HeadAttention::queries)
  // Sliding window: the first position any query sees (the first query's window start), and that rounded
  // down to 64, where loops over positions begin so that each position keeps its lane (both orders' lane
  // counts divide 64). Without a window both are 0.
  std::int64_t first = 0;
  std::int64_t base = 0;
};

AttentionPlan plan_attention(const HeadAttention& head);  // validates the arguments

// Where attention_scratch_floats() puts its parts: per query head g its scores and rounded query, then the
// positions' offsets (8-byte aligned: the parts before are an even number of floats) and the partial sums.
struct AttentionScratch {
  AttentionScratch(const HeadAttention& h, const AttentionPlan& plan)
      : base_(h.scores), per_head_(plan.padded_scores + h.head_dim), padded_(plan.padded_scores),
        offsets(reinterpret_cast<std::uint64_t*>(h.scores + h.query_heads * per_head_)),
        partial(reinterpret_cast<float*>(offsets + h.positions)) {}
  float* scores(std::int64_t g) const noexcept { return base_ + g * per_head_; }
  float* query(std::int64_t g) const noexcept { return scores(g) + padded_; }

 private:
  float* base_;
  std::int64_t per_head_, padded_;

 public:
  std::uint64_t* offsets;
  float* partial;
};

// Position p's value offsets (PositionRows with the values' slot stride) into `offsets`: element d of its value
// is at values + offsets[p] + d * value_dim_stride(head).
// Positions from `first` on (a sliding window's first; before it nothing is read).
void find_value_offsets(const HeadAttention& head, std::uint64_t* offsets, std::int64_t first);
inline std::size_t value_dim_stride(const HeadAttention& head) {
  return head.values_transposed ? static_cast<std::size_t>(head.block_size) : 1;
}

// Output dimension d of the weighted sum of values (the scalar definition; the AVX2 path uses it for head
// sizes that are not a multiple of 8). value_offsets from find_value_offsets().
float weigh_values_one_dim(const HeadAttention& head, const AttentionPlan& plan, const float* probabilities,
                           const std::uint64_t* value_offsets, std::int64_t d);

void attend_avx2(const HeadAttention& head, const AttentionPlan& plan);
// A prefill tile (attention.hpp) in the tiled order with transposed values (attention_tiled_avx2.cpp).
void attend_tile_avx2(const HeadAttention& head, const AttentionPlan& plan);
void swiglu_avx2(float* gate, const float* up, std::int64_t n, LaneWidth lanes);
void store_as_f16_avx2(const float* src, std::uint16_t* dst, std::int64_t n);
void vector_expf_avx2(const float* x, float* out, std::int64_t n);
void avx2_expf_avx2(const float* x, float* out, std::int64_t n);

}  // namespace loom::compute::detail
