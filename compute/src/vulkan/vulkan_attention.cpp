// Paged attention on the device (vulkan_ops.hpp): one workgroup per (token, group of query heads that share a
// KV head), the token's visible positions in tiles of one per invocation with an online softmax, each key and
// value read once for the group (shaders/attention_common.glsl). Every
// token reads its position and block table from buffers, so one recording serves prefill chunks and decode
// steps of any sequences, whatever their positions, as long as the step's shape (n, heads) is the same.
// A step of few (token, head) pairs (decode) would leave most of a GPU idle while each workgroup walks a long
// context alone, so its positions are split into parts of max_positions, each its own workgroup, and
// attention_combine.comp merges the parts' softmax sums. The split depends only on the shape, so it too holds
// for every step a recording serves.
#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>

#include "loom/compute/vulkan/vulkan_ops.hpp"
#include "vulkan_ops_common.hpp"

namespace loom::compute::vulkan {
namespace {

using detail::checked_u32;
using detail::floats;
using detail::require_bytes;

// Invocations per workgroup: a tile of this many positions; each invocation accumulates up to four of the
// head's dimensions, so head_dim may reach 4 * kAttentionGroupSize.
constexpr std::uint32_t kAttentionGroupSize = 128;
constexpr std::int64_t kMaxHeadDim = 4 * kAttentionGroupSize;
// Query heads per workgroup: the largest divisor of the heads per KV head up to 8 (the invocations keep
// sums for each), with the group's queries (group * head_dim floats) within 8 KiB of shared memory.
constexpr std::int64_t kMaxGroupHeads = 8;
constexpr std::int64_t kMaxGroupQueryFloats = 2048;

std::uint32_t heads_per_workgroup(const AttentionShape& shape, const KvLayout& layout) {
  if (layout.kv_heads < 1 || shape.heads % layout.kv_heads != 0) return 1;  // check_shape() refuses those
  const std::int64_t sharing = shape.heads / layout.kv_heads;
  for (std::int64_t group = std::min(sharing, kMaxGroupHeads); group > 1; --group) {
    if (sharing % group == 0 && group * layout.head_dim <= kMaxGroupQueryFloats) return static_cast<std::uint32_t>(group);
  }
  return 1;
}

// Splitting aims at this many workgroups, in parts of at least two tiles, at most kMaxSplits of them.
constexpr std::int64_t kTargetWorkgroups = 256;
constexpr std::int64_t kMinPartPositions = 2 * kAttentionGroupSize;
constexpr std::int64_t kMaxSplits = 32;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Positions per part: max_positions over the splits, rounded up to whole tiles.
std::int64_t part_positions(const AttentionShape& shape, std::int64_t splits) {
  return ceil_div(ceil_div(shape.max_positions, splits), kAttentionGroupSize) * kAttentionGroupSize;
}

// The second pass of a split attention: one workgroup per (head, token) merges its parts.
void record_combine(OpContext& op, const KvLayout& layout, const AttentionShape& shape, std::int64_t splits,
                    const BufferRange& partials, const BufferRange& out) {
  struct Push {
    std::uint32_t heads;
    std::uint32_t head_dim;
    std::uint32_t splits;
  };
  const Push push{static_cast<std::uint32_t>(shape.heads), static_cast<std::uint32_t>(layout.head_dim),
                  static_cast<std::uint32_t>(splits)};
  const std::array<std::uint32_t, 1> spec{64};
  const auto& pipeline = op.pipelines.get("attention_combine", 2, sizeof(Push), spec);
  op.recording.dispatch(pipeline, {partials, out}, push, push.heads, static_cast<std::uint32_t>(shape.n));
}

void check_shape(const KvLayout& layout, const AttentionShape& shape) {
  if (layout.type != TensorType::f16 && layout.type != TensorType::f32) {
    throw std::invalid_argument("vulkan ops: attention takes an F16 or F32 KV storage");
  }
  if (layout.head_dim < 2 || layout.head_dim % 2 != 0 || layout.head_dim > kMaxHeadDim) {
    throw std::invalid_argument("vulkan ops: attention head_dim must be even and at most " +
                                std::to_string(kMaxHeadDim) + ", not " + std::to_string(layout.head_dim));
  }
  if (layout.kv_heads < 1 || shape.heads < 1 || shape.heads % layout.kv_heads != 0) {
    throw std::invalid_argument("vulkan ops: attention heads (" + std::to_string(shape.heads) +
                                ") must be a multiple of kv_heads (" + std::to_string(layout.kv_heads) + ")");
  }
  if (layout.block_size < 1) throw std::invalid_argument("vulkan ops: attention block_size must be at least 1");
  if (shape.window < 0) throw std::invalid_argument("vulkan ops: attention window must not be negative");
  if (shape.n > detail::kMaxGroups || shape.heads > detail::kMaxGroups) {
    throw std::invalid_argument("vulkan ops: attention takes at most 65535 tokens and heads per dispatch");
  }
}

}  // namespace

std::int64_t attention_splits(const AttentionShape& shape, const KvLayout& layout) {
  const std::int64_t workgroups = shape.n * (shape.heads / heads_per_workgroup(shape, layout));
  if (workgroups <= 0 || workgroups >= kTargetWorkgroups || shape.max_positions < 2 * kMinPartPositions) return 1;
  const std::int64_t wanted = std::min({ceil_div(kTargetWorkgroups, workgroups),
                                        shape.max_positions / kMinPartPositions, kMaxSplits});
  // Whole tiles per part can leave the last parts past max_positions: drop those.
  return ceil_div(shape.max_positions, part_positions(shape, wanted));
}

std::uint64_t attention_scratch_bytes(const AttentionShape& shape, const KvLayout& layout) {
  // Fewer tokens can mean more parts, so the answer is the largest need of 1..n tokens (only steps of fewer
  // than kTargetWorkgroups workgroups split): a buffer sized for a backend's widest step serves all its steps.
  std::uint64_t most = 0;
  for (std::int64_t n = 1; n <= shape.n && n < kTargetWorkgroups; ++n) {
    AttentionShape fewer = shape;
    fewer.n = n;
    const std::int64_t splits = attention_splits(fewer, layout);
    if (splits == 1) continue;
    most = std::max(most, static_cast<std::uint64_t>(n * shape.heads * splits * (layout.head_dim + 2)) * 4);
  }
  return most;
}

void attention(OpContext& op, const KvLayout& layout, const AttentionShape& shape, const BufferRange& q,
               const BufferRange& keys, const BufferRange& values, const BufferRange& token_info,
               const BufferRange& tables, const BufferRange& out, const BufferRange& scratch) {
  check_shape(layout, shape);
  const std::uint32_t n = checked_u32(shape.n, "attention n");
  if (n == 0) return;
  const std::int64_t row = shape.heads * layout.head_dim;
  require_bytes(q, floats(shape.n * row), "attention q");
  require_bytes(out, floats(shape.n * row), "attention out");
  require_bytes(token_info, static_cast<std::uint64_t>(shape.n) * 16, "attention token_info");
  const std::int64_t splits = attention_splits(shape, layout);
  require_bytes(scratch, attention_scratch_bytes(shape, layout), "attention scratch");
  struct Push {
    std::uint32_t heads;
    std::uint32_t kv_heads;
    std::uint32_t block_size;
    std::uint32_t window;
    float scale;
    float softcap;
    std::uint32_t chunk;
  };
  const Push push{checked_u32(shape.heads, "attention heads"), checked_u32(layout.kv_heads, "attention kv_heads"),
                  checked_u32(layout.block_size, "attention block_size"), checked_u32(shape.window, "attention window"),
                  shape.scale, shape.softcap > 0.0f ? shape.softcap : 0.0f,
                  splits > 1 ? checked_u32(part_positions(shape, splits), "attention part") : 0u};
  const std::uint32_t group = heads_per_workgroup(shape, layout);
  const std::array<std::uint32_t, 3> spec{kAttentionGroupSize, static_cast<std::uint32_t>(layout.head_dim), group};
  const auto& pipeline = op.pipelines.get(layout.type == TensorType::f16 ? "attention_f16" : "attention_f32", 7,
                                          sizeof(Push), spec);
  // With one part the shader writes `out` and never touches its partials binding.
  const BufferRange& partials = splits > 1 ? scratch : out;
  op.recording.dispatch(pipeline, {q, keys, values, token_info, tables, out, partials}, push, push.heads / group, n,
                        static_cast<std::uint32_t>(splits));
  if (splits > 1) record_combine(op, layout, shape, splits, scratch, out);
}

}  // namespace loom::compute::vulkan
