// CommandRecording: one command buffer of compute dispatches and copies, recorded once and submitted as often
// as wanted, each submit ending in one fence wait (the backend records a forward pass per batch shape and
// resubmits it every step with new inputs in host-visible buffers: no per-layer synchronisation with the host).
//
// Each dispatch pushes its buffers (bindings 0.. in the order given) and its push constants into the command
// buffer, then by default a compute-to-compute memory barrier, so the next dispatch sees what it wrote; pass
// Barrier::none for dispatches that the next one does not read (the q, k and v products of one input).
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <initializer_list>
#include <span>

#include "loom/compute/vulkan/vulkan_buffer.hpp"
#include "loom/compute/vulkan/vulkan_context.hpp"
#include "loom/compute/vulkan/vulkan_pipeline.hpp"

namespace loom::compute::vulkan {

enum class Barrier { after, none };

class CommandRecording {
 public:
  explicit CommandRecording(VulkanContext& context);
  ~CommandRecording();
  CommandRecording(const CommandRecording&) = delete;
  CommandRecording& operator=(const CommandRecording&) = delete;

  // Starts recording anew (what was recorded before is dropped).
  void begin();
  // Throws std::invalid_argument when the buffer count or push-constant size differ from the pipeline's, or a
  // group count is 0 or above the device's limit.
  void dispatch(const ComputePipeline& pipeline, std::initializer_list<BufferRange> buffers, const void* push,
                std::uint32_t push_bytes, std::uint32_t groups_x, std::uint32_t groups_y = 1,
                std::uint32_t groups_z = 1, Barrier barrier = Barrier::after);
  template <class PushConstants>
  void dispatch(const ComputePipeline& pipeline, std::initializer_list<BufferRange> buffers,
                const PushConstants& push, std::uint32_t groups_x, std::uint32_t groups_y = 1,
                std::uint32_t groups_z = 1, Barrier barrier = Barrier::after) {
    dispatch(pipeline, buffers, &push, sizeof(PushConstants), groups_x, groups_y, groups_z, barrier);
  }
  // Device-side copy of `bytes` (ranges of at least that size), then a barrier (transfer to compute/transfer).
  void copy(const BufferRange& source, const BufferRange& destination, VkDeviceSize bytes);
  // A barrier on its own (after dispatches recorded with Barrier::none).
  void barrier();
  void end();
  // Submits what was recorded and waits for it. Throws VulkanError (VK_ERROR_DEVICE_LOST and the like).
  void submit_and_wait();
  // Submits `first`'s recorded commands, then these, in one submission with one fence wait (a step's block copies
  // before its forward pass: copy() ends in a barrier, which orders the copies before everything after them).
  void submit_after_and_wait(const CommandRecording& first);

  bool recording() const noexcept { return recording_; }
  std::uint32_t dispatches() const noexcept { return dispatches_; }
  VkCommandBuffer handle() const noexcept { return commands_; }

 private:
  void submit(std::span<const VkCommandBuffer> buffers);

  VulkanContext& context_;
  VkCommandBuffer commands_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  bool recording_ = false;
  std::uint32_t dispatches_ = 0;
};

// The number of workgroups of `size` invocations that cover `count` items.
constexpr std::uint32_t groups_for(std::uint64_t count, std::uint32_t size) noexcept {
  return static_cast<std::uint32_t>((count + size - 1) / size);
}

}  // namespace loom::compute::vulkan
