// top_k on the device (vulkan_ops.hpp): one workgroup per row, a radix select of the k-th largest logit
// (shaders/top_k.comp), so a 150,000-token vocabulary is read a few times by one workgroup and nothing but the
// k pairs comes back to the host.
#include <array>
#include <stdexcept>
#include <string>

#include "loom/compute/vulkan/vulkan_ops.hpp"
#include "vulkan_ops_common.hpp"

namespace loom::compute::vulkan {

void top_k(OpContext& op, const BufferRange& logits, std::int64_t rows, std::int64_t vocab, std::int64_t k,
           const BufferRange& out) {
  if (k < 1 || k > kMaxTopK) {
    throw std::invalid_argument("vulkan ops: top_k k must be 1.." + std::to_string(kMaxTopK) + ", not " +
                                std::to_string(k));
  }
  // The shader keys each token by 24 bits.
  if (vocab < k || vocab >= (std::int64_t{1} << 24)) {
    throw std::invalid_argument("vulkan ops: top_k vocab must be k..16777215, not " + std::to_string(vocab));
  }
  if (rows > detail::kMaxGroups) throw std::invalid_argument("vulkan ops: top_k takes at most 65535 rows");
  const std::uint32_t row_count = detail::checked_u32(rows, "top_k rows");
  detail::require_bytes(logits, detail::floats(rows * vocab), "top_k logits");
  detail::require_bytes(out, static_cast<std::uint64_t>(rows * k) * 8, "top_k out");
  if (row_count == 0) return;
  struct Push {
    std::uint32_t vocab;
    std::uint32_t k;
  };
  const std::array<std::uint32_t, 1> spec{detail::group_size(op, 256)};
  const auto& pipeline = op.pipelines.get("top_k", 2, sizeof(Push), spec);
  op.recording.dispatch(pipeline, {logits, out},
                        Push{static_cast<std::uint32_t>(vocab), static_cast<std::uint32_t>(k)}, row_count);
}

}  // namespace loom::compute::vulkan
