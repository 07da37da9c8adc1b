// The Vulkan forward pass's attention and activations in the CPU backend's pinned arithmetic (the reference
// implementation's, compute/include/loom/compute/cpu/attention.hpp), so that the two backends' logits agree to
// the bit rather than drifting apart where a last-bit difference flips an activation's quantization: the
// scores, the softmax and the weighted values in the reference's lane and accumulator orders, its vectorised
// expf, the C library's expf and tanhf where the CPU calls them (computed in double and rounded once: the same
// bits but for inputs whose exact result is within a hair of a rounding boundary), SwiGLU's silu in the same
// form, and GeGLU read from the CPU's own table of F16 results. These need shaderFloat64 (the softmax sum is a
// double, as the CPU's): pinned_supported() says whether the device has it; without it the backend keeps the
// online-softmax attention and the plain activations of vulkan_ops.hpp.
#pragma once

#include <cstdint>
#include <vector>

#include "loom/compute/cpu/attention.hpp"
#include "loom/compute/vulkan/vulkan_ops.hpp"

namespace loom::compute::vulkan {

bool pinned_supported(const VulkanContext& context);

// As attention() (vulkan_ops.hpp), with token_info's last two entries used: per token, its sequence's
// reference span (reference_span() of the sequence's last position in the step + 1, capped at the context)
// and its order (1: SumOrder::tiled, a sequence with several tokens in the step; 0: vector_dot). `lanes`
// picks whose orders (LaneWidth). scratch: attention_pinned_scratch_bytes(shape) bytes, for the scores of
// every (token, head) over the whole context. head_dim at most 512; n and heads at most 65535.
void attention_pinned(OpContext& op, const KvLayout& layout, const AttentionShape& shape, LaneWidth lanes,
                      const BufferRange& q, const BufferRange& keys, const BufferRange& values,
                      const BufferRange& token_info, const BufferRange& tables, const BufferRange& out,
                      const BufferRange& scratch);
std::uint64_t attention_pinned_scratch_bytes(const AttentionShape& shape);

// rms_norm() and rope() (vulkan_ops.hpp) in the CPU's arithmetic: the norm's mean from a double sum of float
// squares and its scale rounded as the CPU's division and square root; rope's FMAs fused on every driver.
void rms_norm_pinned(OpContext& op, const BufferRange& x, const BufferRange& weight, const BufferRange& out,
                     std::int64_t rows, std::int64_t width, float epsilon);
void rope_pinned(OpContext& op, const BufferRange& vectors, const BufferRange& rotation, std::int64_t n,
                 std::int64_t heads, std::int64_t head_dim, bool adjacent_pairs);

// gate = silu(gate) * up over `rows` rows of `width`, as the CPU's swiglu(row, up, width, path, lanes).
void swiglu_pinned(OpContext& op, const BufferRange& gate, const BufferRange& up, std::int64_t rows,
                   std::int64_t width, LaneWidth lanes);

// gate = gelu_tanh(gate) * up over `count` values, as the CPU's gelu_tanh: `table` holds gelu_table_words().
void geglu_table(OpContext& op, const BufferRange& gate, const BufferRange& up, std::int64_t count,
                 const BufferRange& table);
// The CPU's F16 GELU result for every F16 input, two per word (entry i in the low half of word i / 2 when i
// is even): 128 KiB.
std::vector<std::uint32_t> gelu_table_words();

}  // namespace loom::compute::vulkan
