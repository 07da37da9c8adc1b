// Internal to the Vulkan ops (vulkan_ops.cpp, vulkan_attention.cpp, vulkan_select.cpp): the checks every op
// makes before it records (sizes that fit the shaders' 32-bit indices, ranges that hold what the op touches)
// and the grid of the element-wise shaders.
#pragma once

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "loom/compute/vulkan/vulkan_buffer.hpp"
#include "loom/compute/vulkan/vulkan_commands.hpp"
#include "loom/compute/vulkan/vulkan_matmul.hpp"

namespace loom::compute::vulkan::detail {

// Workgroup size of the element-wise shaders, and the most workgroups one dimension of a grid may have on
// every device (the spec's minimum of maxComputeWorkGroupCount): those shaders stride by the whole grid.
inline constexpr std::uint32_t kElementwiseGroupSize = 256;
inline constexpr std::uint32_t kMaxGroups = 65535;

// `wanted` (a power of two) or, on a device that allows fewer invocations per workgroup (the spec's minimum is
// 128), the largest power of two it allows.
inline std::uint32_t group_size(const OpContext& op, std::uint32_t wanted) {
  const std::uint32_t limit = op.pipelines.context().description().max_workgroup_invocations;
  while (limit != 0 && wanted > limit && wanted > 1) wanted /= 2;
  return wanted;
}

// value as the shaders' uint, or std::invalid_argument naming `what` when it is negative or too large.
inline std::uint32_t checked_u32(std::int64_t value, const char* what) {
  if (value < 0 || value > std::int64_t{std::numeric_limits<std::uint32_t>::max()}) {
    throw std::invalid_argument(std::string("vulkan ops: ") + what + " out of range: " + std::to_string(value));
  }
  return static_cast<std::uint32_t>(value);
}

// Throws std::invalid_argument unless `range` holds `bytes`.
inline void require_bytes(const BufferRange& range, std::uint64_t bytes, const char* what) {
  if (range.bytes < bytes) {
    throw std::invalid_argument(std::string("vulkan ops: ") + what + " holds " + std::to_string(range.bytes) +
                                " bytes, needs " + std::to_string(bytes));
  }
}

inline std::uint64_t floats(std::int64_t count) { return static_cast<std::uint64_t>(count) * 4; }

// Workgroups of `size` invocations over `count` items: enough for one item per invocation, at most kMaxGroups
// (the element-wise shaders loop over the rest).
inline std::uint32_t elementwise_groups(std::uint64_t count, std::uint32_t size) {
  const std::uint32_t groups = groups_for(count, size);
  return groups == 0 ? 1 : (groups < kMaxGroups ? groups : kMaxGroups);
}

// rope() with `shader` (rope, or rope_pinned with the CPU's rounding): the checks and the dispatch they share.
void record_rope(OpContext& op, const char* shader, const BufferRange& vectors, const BufferRange& rotation,
                 std::int64_t n, std::int64_t heads, std::int64_t head_dim, bool adjacent_pairs);

}  // namespace loom::compute::vulkan::detail
