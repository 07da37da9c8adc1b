// The Vulkan ops of vulkan_ops.hpp that are one pass over their values: norms, element-wise steps, rotary
// embeddings, row gathers and the KV store (attention: vulkan_attention.cpp; top_k: vulkan_select.cpp).
#include "loom/compute/vulkan/vulkan_ops.hpp"

#include <array>
#include <stdexcept>

#include "vulkan_ops_common.hpp"

namespace loom::compute::vulkan {
namespace {

using detail::checked_u32;
using detail::elementwise_groups;
using detail::floats;
using detail::require_bytes;

struct CountPush {
  std::uint32_t count;
};
struct CountFloatPush {
  std::uint32_t count;
  float value;
};
struct CountWidthPush {
  std::uint32_t count;
  std::uint32_t width;
};

template <class Push>
void record_elementwise(OpContext& op, const char* shader, std::initializer_list<BufferRange> buffers,
                        const Push& push, std::uint64_t count) {
  const std::array<std::uint32_t, 1> spec{detail::group_size(op, detail::kElementwiseGroupSize)};
  const auto& pipeline = op.pipelines.get(shader, static_cast<std::uint32_t>(buffers.size()), sizeof(Push), spec);
  op.recording.dispatch(pipeline, buffers, push, elementwise_groups(count, spec[0]));
}

// x (and y when given) hold `count` floats; the count fits the shaders' uint.
std::uint32_t checked_count(std::int64_t count, const BufferRange& x, const char* what) {
  const std::uint32_t checked = checked_u32(count, what);
  require_bytes(x, floats(count), what);
  return checked;
}

void gated_activation(OpContext& op, const char* shader, const BufferRange& gate, const BufferRange& up,
                      std::int64_t count) {
  const std::uint32_t n = checked_count(count, gate, "gate");
  require_bytes(up, floats(count), "up");
  if (n == 0) return;
  record_elementwise(op, shader, {gate, up}, CountPush{n}, n);
}

}  // namespace

void rms_norm(OpContext& op, const BufferRange& x, const BufferRange& weight, const BufferRange& out,
              std::int64_t rows, std::int64_t width, float epsilon) {
  const std::uint32_t row_count = checked_u32(rows, "rms_norm rows");
  const std::uint32_t row_width = checked_u32(width, "rms_norm width");
  checked_count(rows * width, x, "rms_norm x");
  require_bytes(out, floats(rows * width), "rms_norm out");
  require_bytes(weight, floats(width), "rms_norm weight");
  if (row_count == 0 || row_width == 0) return;
  // Wide rows (the model's dim) take 256 invocations; a head's q/k norm (64..256 values) takes 64.
  const std::array<std::uint32_t, 1> spec{detail::group_size(op, row_width >= 512 ? 256u : 64u)};
  struct Push {
    std::uint32_t rows;
    std::uint32_t width;
    float epsilon;
  };
  const auto& pipeline = op.pipelines.get("rms_norm", 3, sizeof(Push), spec);
  const std::uint32_t groups_x = row_count < detail::kMaxGroups ? row_count : detail::kMaxGroups;
  op.recording.dispatch(pipeline, {x, weight, out}, Push{row_count, row_width, epsilon}, groups_x,
                        groups_for(row_count, groups_x));
}

void add(OpContext& op, const BufferRange& x, const BufferRange& y, std::int64_t count) {
  const std::uint32_t n = checked_count(count, x, "add x");
  require_bytes(y, floats(count), "add y");
  if (n == 0) return;
  record_elementwise(op, "add", {x, y}, CountPush{n}, n);
}

void add_bias(OpContext& op, const BufferRange& rows, const BufferRange& bias, std::int64_t n, std::int64_t width) {
  checked_u32(n, "add_bias n");
  const std::uint32_t row_width = checked_u32(width, "add_bias width");
  const std::uint32_t count = checked_count(n * width, rows, "add_bias rows");
  require_bytes(bias, floats(width), "add_bias bias");
  if (count == 0) return;
  record_elementwise(op, "add_bias", {rows, bias}, CountWidthPush{count, row_width}, count);
}

void scale(OpContext& op, const BufferRange& x, std::int64_t count, float factor) {
  const std::uint32_t n = checked_count(count, x, "scale x");
  if (n == 0) return;
  record_elementwise(op, "scale", {x}, CountFloatPush{n, factor}, n);
}

void soft_cap(OpContext& op, const BufferRange& x, std::int64_t count, float cap) {
  const std::uint32_t n = checked_count(count, x, "soft_cap x");
  if (n == 0 || !(cap > 0.0f)) return;  // as the CPU's: no cap, nothing to do
  struct Push {
    std::uint32_t count;
    float cap;
    float inverse_cap;
  };
  record_elementwise(op, "soft_cap", {x}, Push{n, cap, 1.0f / cap}, n);
}

void swiglu(OpContext& op, const BufferRange& gate, const BufferRange& up, std::int64_t count) {
  gated_activation(op, "swiglu", gate, up, count);
}

void geglu(OpContext& op, const BufferRange& gate, const BufferRange& up, std::int64_t count) {
  gated_activation(op, "geglu", gate, up, count);
}

void rope(OpContext& op, const BufferRange& vectors, const BufferRange& rotation, std::int64_t n, std::int64_t heads,
          std::int64_t head_dim, bool adjacent_pairs) {
  detail::record_rope(op, "rope", vectors, rotation, n, heads, head_dim, adjacent_pairs);
}

void detail::record_rope(OpContext& op, const char* shader, const BufferRange& vectors, const BufferRange& rotation,
                         std::int64_t n, std::int64_t heads, std::int64_t head_dim, bool adjacent_pairs) {
  if (head_dim % 2 != 0) throw std::invalid_argument("vulkan ops: rope head_dim must be even");
  checked_u32(n, "rope n");
  const std::uint32_t head_count = checked_u32(heads, "rope heads");
  const std::uint32_t dim = checked_u32(head_dim, "rope head_dim");
  checked_count(n * heads * head_dim, vectors, "rope vectors");
  require_bytes(rotation, floats(n * head_dim), "rope rotation");
  const std::uint32_t pairs = checked_u32(n * heads * (head_dim / 2), "rope pairs");
  if (pairs == 0) return;
  struct Push {
    std::uint32_t count;
    std::uint32_t heads;
    std::uint32_t head_dim;
    std::uint32_t adjacent;
  };
  record_elementwise(op, shader, {vectors, rotation}, Push{pairs, head_count, dim, adjacent_pairs ? 1u : 0u}, pairs);
}

void gather_rows(OpContext& op, const BufferRange& src, const BufferRange& rows, const BufferRange& dst,
                 std::int64_t m, std::int64_t width) {
  checked_u32(m, "gather_rows m");
  const std::uint32_t row_width = checked_u32(width, "gather_rows width");
  const std::uint32_t count = checked_count(m * width, dst, "gather_rows dst");
  require_bytes(rows, static_cast<std::uint64_t>(m) * 4, "gather_rows rows");
  if (count == 0) return;
  record_elementwise(op, "gather_rows", {src, rows, dst}, CountWidthPush{count, row_width}, count);
}

void store_kv(OpContext& op, const KvLayout& layout, const BufferRange& k, const BufferRange& v,
              const BufferRange& slots, const BufferRange& keys, const BufferRange& values, std::int64_t n) {
  if (layout.type != TensorType::f16 && layout.type != TensorType::f32) {
    throw std::invalid_argument("vulkan ops: store_kv takes an F16 or F32 KV storage");
  }
  if (layout.head_dim % 2 != 0) throw std::invalid_argument("vulkan ops: store_kv head_dim must be even");
  if (layout.block_size < 1) throw std::invalid_argument("vulkan ops: store_kv block_size must be at least 1");
  checked_u32(n, "store_kv n");
  const std::int64_t row = layout.kv_heads * layout.head_dim;
  checked_count(n * row, k, "store_kv k");
  require_bytes(v, floats(n * row), "store_kv v");
  require_bytes(slots, static_cast<std::uint64_t>(n) * 4, "store_kv slots");
  const std::uint32_t pairs = checked_u32(n * row / 2, "store_kv pairs");
  if (pairs == 0) return;
  struct Push {
    std::uint32_t count;
    std::uint32_t kv_heads;
    std::uint32_t head_dim;
    std::uint32_t block_size;
  };
  const Push push{pairs, checked_u32(layout.kv_heads, "store_kv kv_heads"),
                  checked_u32(layout.head_dim, "store_kv head_dim"), checked_u32(layout.block_size, "store_kv block_size")};
  record_elementwise(op, layout.type == TensorType::f16 ? "store_kv_f16" : "store_kv_f32", {k, v, slots, keys, values},
                     push, pairs);
}

}  // namespace loom::compute::vulkan
