// Internal: what attention.cpp decides once per head and hands to a kernel path, and the AVX2 entry points
// (defined in attention_avx2.cpp, compiled for AVX2 + FMA + F16C).
#pragma once

#include <cstdint>

#include "loom/compute/attention.hpp"

namespace loom::compute::detail {

struct AttentionPlan {
  std::int64_t padded_positions = 0;  // positions rounded up to whole 8-lane chunks
  bool tiled_scores = false;          // scores in SumOrder::tiled (else vector_dot)
  bool tiled_values = false;          // weighted values in SumOrder::tiled (else vector_dot)
};

AttentionPlan plan_attention(const HeadAttention& head);  // validates the arguments

// Output dimension d of the weighted sum of values (the scalar definition; the AVX2 path uses it for head
// sizes that are not a multiple of 8).
float weigh_values_one_dim(const HeadAttention& head, const float* probabilities, bool tiled, std::int64_t d);

void attend_avx2(const HeadAttention& head, const AttentionPlan& plan);
void swiglu_avx2(float* gate, const float* up, std::int64_t n);

}  // namespace loom::compute::detail
