// Internal to loom_compute and its tests: the choice matmul_prepared() makes by itself, opened up so that the
// tests run both reductions of the product kernel on any device (lavapipe has subgroup arithmetic, so the
// shared-memory variant would otherwise go untested there).
#pragma once

#include <cstdint>

#include "loom/compute/vulkan/vulkan_matmul.hpp"

namespace loom::compute::vulkan::detail {

enum class Reduction {
  automatic,      // subgroupAdd where the device has subgroup arithmetic, else shared memory
  subgroup,       // shaders/matmul.comp
  shared_memory,  // shaders/matmul_shmem.comp
};

void matmul_prepared(OpContext& op, const DeviceTensor& w, const BufferRange& prepared, const BufferRange& y,
                     std::int64_t n, Reduction reduction, Barrier barrier = Barrier::after);

}  // namespace loom::compute::vulkan::detail
