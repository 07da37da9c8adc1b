// Recording the pinned attention and activations (vulkan_pinned.hpp); the arithmetic is in the shaders
// attention_pinned_common.glsl, swiglu_pinned.comp, geglu_table.comp and pinned_math.glsl.
#include "loom/compute/vulkan/vulkan_pinned.hpp"

#include <array>
#include <stdexcept>
#include <string>

#include "../cpu/activations_kernels.hpp"
#include "vulkan_ops_common.hpp"

namespace loom::compute::vulkan {
namespace {

using detail::checked_u32;
using detail::floats;
using detail::require_bytes;

constexpr std::uint32_t kPinnedGroupSize = 64;
constexpr std::int64_t kMaxPinnedHeadDim = 512;

// A (token, head)'s scratch: its scores over the context padded to 16, then a sum per group of 8 of them.
struct Region {
  std::uint64_t scores = 0;
  std::uint64_t floats = 0;
};
Region region_of(const AttentionShape& shape) {
  const auto scores = static_cast<std::uint64_t>((shape.max_positions + 15) / 16 * 16);
  return {scores, scores + scores / 8};
}

void check_pinned(const OpContext& op, const KvLayout& layout, const AttentionShape& shape) {
  if (!pinned_supported(op.pipelines.context())) {
    throw std::invalid_argument("vulkan ops: the pinned attention needs a device with shaderFloat64");
  }
  if (layout.type != TensorType::f16 && layout.type != TensorType::f32) {
    throw std::invalid_argument("vulkan ops: attention takes an F16 or F32 KV storage");
  }
  if (layout.head_dim < 2 || layout.head_dim % 2 != 0 || layout.head_dim > kMaxPinnedHeadDim) {
    throw std::invalid_argument("vulkan ops: pinned attention head_dim must be even and at most 512, not " +
                                std::to_string(layout.head_dim));
  }
  if (layout.kv_heads < 1 || shape.heads < 1 || shape.heads % layout.kv_heads != 0) {
    throw std::invalid_argument("vulkan ops: attention heads must be a multiple of kv_heads");
  }
  if (layout.block_size < 1 || shape.window < 0 || shape.max_positions < 1) {
    throw std::invalid_argument("vulkan ops: attention needs a block size, a context and a window >= 0");
  }
  if (shape.n > detail::kMaxGroups || shape.heads > detail::kMaxGroups) {
    throw std::invalid_argument("vulkan ops: attention takes at most 65535 tokens and heads per dispatch");
  }
}

}  // namespace

bool pinned_supported(const VulkanContext& context) { return context.description().shader_float64; }

std::uint64_t attention_pinned_scratch_bytes(const AttentionShape& shape) {
  return static_cast<std::uint64_t>(shape.n * shape.heads) * region_of(shape).floats * sizeof(float);
}

void attention_pinned(OpContext& op, const KvLayout& layout, const AttentionShape& shape, LaneWidth lanes,
                      const BufferRange& q, const BufferRange& keys, const BufferRange& values,
                      const BufferRange& token_info, const BufferRange& tables, const BufferRange& out,
                      const BufferRange& scratch) {
  check_pinned(op, layout, shape);
  const std::uint32_t n = checked_u32(shape.n, "attention n");
  if (n == 0) return;
  const std::int64_t row = shape.heads * layout.head_dim;
  require_bytes(q, floats(shape.n * row), "attention q");
  require_bytes(out, floats(shape.n * row), "attention out");
  require_bytes(token_info, static_cast<std::uint64_t>(shape.n) * 16, "attention token_info");
  require_bytes(scratch, attention_pinned_scratch_bytes(shape), "pinned attention scratch");
  const Region region = region_of(shape);
  struct Push {
    std::uint32_t heads;
    std::uint32_t kv_heads;
    std::uint32_t block_size;
    std::uint32_t window;
    float scale;
    float softcap;
    float inverse_cap;
    std::uint32_t region;
    std::uint32_t group_sums;
  };
  const float cap = shape.softcap > 0.0f ? shape.softcap : 0.0f;
  const Push push{checked_u32(shape.heads, "attention heads"), checked_u32(layout.kv_heads, "attention kv_heads"),
                  checked_u32(layout.block_size, "attention block_size"), checked_u32(shape.window, "attention window"),
                  shape.scale, cap, cap > 0.0f ? 1.0f / cap : 0.0f,
                  checked_u32(static_cast<std::int64_t>(region.floats), "attention region"),
                  static_cast<std::uint32_t>(region.scores)};
  const std::array<std::uint32_t, 3> spec{detail::group_size(op, kPinnedGroupSize),
                                          lanes == LaneWidth::avx2 ? 8u : 16u,
                                          static_cast<std::uint32_t>(layout.head_dim)};
  const auto& pipeline = op.pipelines.get(layout.type == TensorType::f16 ? "attention_pinned_f16" : "attention_pinned_f32",
                                          7, sizeof(Push), spec);
  op.recording.dispatch(pipeline, {q, keys, values, token_info, tables, out, scratch}, push, push.heads, n);
}

void swiglu_pinned(OpContext& op, const BufferRange& gate, const BufferRange& up, std::int64_t rows,
                   std::int64_t width, LaneWidth lanes) {
  if (!pinned_supported(op.pipelines.context())) {
    throw std::invalid_argument("vulkan ops: the pinned SwiGLU needs a device with shaderFloat64");
  }
  const std::uint32_t count = checked_u32(rows * width, "swiglu count");
  require_bytes(gate, floats(rows * width), "swiglu gate");
  require_bytes(up, floats(rows * width), "swiglu up");
  if (count == 0) return;
  struct Push {
    std::uint32_t count;
    std::uint32_t width;
    std::uint32_t lanes;
  };
  const Push push{count, checked_u32(width, "swiglu width"), lanes == LaneWidth::avx2 ? 8u : 16u};
  const std::array<std::uint32_t, 1> spec{detail::group_size(op, detail::kElementwiseGroupSize)};
  const auto& pipeline = op.pipelines.get("swiglu_pinned", 2, sizeof(Push), spec);
  op.recording.dispatch(pipeline, {gate, up}, push, detail::elementwise_groups(count, spec[0]));
}

void geglu_table(OpContext& op, const BufferRange& gate, const BufferRange& up, std::int64_t count,
                 const BufferRange& table) {
  const std::uint32_t n = checked_u32(count, "geglu count");
  require_bytes(gate, floats(count), "geglu gate");
  require_bytes(up, floats(count), "geglu up");
  require_bytes(table, 65536 * 2, "geglu table");
  if (n == 0) return;
  struct Push {
    std::uint32_t count;
  };
  const std::array<std::uint32_t, 1> spec{detail::group_size(op, detail::kElementwiseGroupSize)};
  const auto& pipeline = op.pipelines.get("geglu_table", 3, sizeof(Push), spec);
  op.recording.dispatch(pipeline, {gate, up, table}, Push{n}, detail::elementwise_groups(n, spec[0]));
}

void rms_norm_pinned(OpContext& op, const BufferRange& x, const BufferRange& weight, const BufferRange& out,
                     std::int64_t rows, std::int64_t width, float epsilon) {
  const std::uint32_t row_count = checked_u32(rows, "rms_norm rows");
  const std::uint32_t row_width = checked_u32(width, "rms_norm width");
  require_bytes(x, floats(rows * width), "rms_norm x");
  require_bytes(out, floats(rows * width), "rms_norm out");
  require_bytes(weight, floats(width), "rms_norm weight");
  if (row_count == 0 || row_width == 0) return;
  struct Push {
    std::uint32_t rows;
    std::uint32_t width;
    float epsilon;
  };
  const std::array<std::uint32_t, 1> spec{detail::group_size(op, row_width >= 512 ? 256u : 64u)};
  const auto& pipeline = op.pipelines.get("rms_norm_pinned", 3, sizeof(Push), spec);
  const std::uint32_t groups_x = row_count < detail::kMaxGroups ? row_count : detail::kMaxGroups;
  op.recording.dispatch(pipeline, {x, weight, out}, Push{row_count, row_width, epsilon}, groups_x,
                        groups_for(row_count, groups_x));
}

void rope_pinned(OpContext& op, const BufferRange& vectors, const BufferRange& rotation, std::int64_t n,
                 std::int64_t heads, std::int64_t head_dim, bool adjacent_pairs) {
  detail::record_rope(op, "rope_pinned", vectors, rotation, n, heads, head_dim, adjacent_pairs);
}

std::vector<std::uint32_t> gelu_table_words() {
  const std::uint16_t* table = compute::detail::gelu_f16_table();
  std::vector<std::uint32_t> words(65536 / 2);
  for (std::size_t i = 0; i < words.size(); ++i) {
    words[i] = static_cast<std::uint32_t>(table[2 * i]) | (static_cast<std::uint32_t>(table[2 * i + 1]) << 16);
  }
  return words;
}

}  // namespace loom::compute::vulkan
