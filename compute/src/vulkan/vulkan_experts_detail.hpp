// Internal to loom_compute and its tests: the choices matmul_experts_prepared() makes by itself (the reduction
// its device allows, the slots one dispatch takes), opened up so that the tests run the shared-memory variant
// and the split into several dispatches on lavapipe too.
#pragma once

#include <cstdint>

#include "loom/compute/vulkan/vulkan_experts.hpp"
#include "vulkan_matmul_detail.hpp"

namespace loom::compute::vulkan::detail {

// max_slots_per_dispatch: 0 for the device's limit.
void matmul_experts_prepared(OpContext& op, const DeviceTensor& w, std::int64_t experts, const BufferRange& choices,
                             const BufferRange& prepared, const BufferRange& y, std::int64_t inputs, std::int64_t slots,
                             Reduction reduction, std::uint32_t max_slots_per_dispatch, Barrier barrier = Barrier::after);

}  // namespace loom::compute::vulkan::detail
