#include "loom/compute/vulkan/vulkan_commands.hpp"

#include <array>
#include <stdexcept>
#include <string>
#include <vector>

namespace loom::compute::vulkan {
namespace {

constexpr VkPipelineStageFlags kWork = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
constexpr VkAccessFlags kWrites = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
constexpr VkAccessFlags kAccesses =
    VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;

void memory_barrier(VkCommandBuffer commands, VkPipelineStageFlags to, VkAccessFlags access) {
  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = kWrites;
  barrier.dstAccessMask = access;
  vkCmdPipelineBarrier(commands, kWork, to, 0, 1, &barrier, 0, nullptr, 0, nullptr);
}

}  // namespace

CommandRecording::CommandRecording(VulkanContext& context) : context_(context) {
  VkCommandBufferAllocateInfo allocate{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  allocate.commandPool = context.command_pool();
  allocate.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  allocate.commandBufferCount = 1;
  check(vkAllocateCommandBuffers(context.device(), &allocate, &commands_), "vkAllocateCommandBuffers");
  VkFenceCreateInfo fence{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  const VkResult result = vkCreateFence(context.device(), &fence, nullptr, &fence_);
  if (result != VK_SUCCESS) {
    vkFreeCommandBuffers(context.device(), context.command_pool(), 1, &commands_);
    check(result, "vkCreateFence");
  }
}

CommandRecording::~CommandRecording() {
  vkDestroyFence(context_.device(), fence_, nullptr);
  vkFreeCommandBuffers(context_.device(), context_.command_pool(), 1, &commands_);
}

void CommandRecording::begin() {
  check(vkResetCommandBuffer(commands_, 0), "vkResetCommandBuffer");
  VkCommandBufferBeginInfo info{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  check(vkBeginCommandBuffer(commands_, &info), "vkBeginCommandBuffer");
  recording_ = true;
  dispatches_ = 0;
}

void CommandRecording::dispatch(const ComputePipeline& pipeline, std::initializer_list<BufferRange> buffers,
                                const void* push, std::uint32_t push_bytes, std::uint32_t groups_x,
                                std::uint32_t groups_y, std::uint32_t groups_z, Barrier barrier) {
  const std::string& name = pipeline.shader();
  if (!recording_) throw std::logic_error("dispatch of " + name + " outside begin()/end()");
  if (buffers.size() != pipeline.bindings()) {
    throw std::invalid_argument(name + ": " + std::to_string(buffers.size()) + " buffers for " +
                                std::to_string(pipeline.bindings()) + " bindings");
  }
  if (push_bytes != pipeline.push_constant_bytes()) {
    throw std::invalid_argument(name + ": " + std::to_string(push_bytes) + " bytes of push constants for " +
                                std::to_string(pipeline.push_constant_bytes()));
  }
  const auto& limit = context_.description().max_workgroup_count;
  const std::uint32_t groups[3] = {groups_x, groups_y, groups_z};
  for (int i = 0; i < 3; ++i) {
    if (groups[i] == 0 || groups[i] > limit[static_cast<std::size_t>(i)]) {
      throw std::invalid_argument(name + ": " + std::to_string(groups[i]) + " workgroups in dimension " +
                                  std::to_string(i) + " (1.." + std::to_string(limit[static_cast<std::size_t>(i)]) + ")");
    }
  }
  const std::uint64_t alignment = context_.description().min_storage_buffer_offset_alignment;
  std::vector<VkDescriptorBufferInfo> infos;
  std::vector<VkWriteDescriptorSet> writes;
  infos.reserve(buffers.size());
  writes.reserve(buffers.size());
  for (const BufferRange& range : buffers) {
    const auto binding = static_cast<std::uint32_t>(infos.size());
    if (range.buffer == VK_NULL_HANDLE || range.bytes == 0) {
      throw std::invalid_argument(name + ": binding " + std::to_string(binding) + " has no buffer");
    }
    if (alignment > 1 && range.offset % alignment != 0) {
      throw std::invalid_argument(name + ": binding " + std::to_string(binding) + " at offset " +
                                  std::to_string(range.offset) + ", not a multiple of the device's " +
                                  std::to_string(alignment));
    }
    infos.push_back({range.buffer, range.offset, range.bytes});
    VkWriteDescriptorSet write{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    write.dstBinding = binding;
    write.descriptorCount = 1;
    write.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes.push_back(write);
  }
  for (std::size_t i = 0; i < writes.size(); ++i) writes[i].pBufferInfo = &infos[i];
  vkCmdBindPipeline(commands_, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.pipeline());
  context_.push_descriptor_set()(commands_, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.layout(), 0,
                                 static_cast<std::uint32_t>(writes.size()), writes.data());
  if (push_bytes > 0) vkCmdPushConstants(commands_, pipeline.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes, push);
  vkCmdDispatch(commands_, groups_x, groups_y, groups_z);
  ++dispatches_;
  if (barrier == Barrier::after) this->barrier();
}

void CommandRecording::copy(const BufferRange& source, const BufferRange& destination, VkDeviceSize bytes) {
  if (!recording_) throw std::logic_error("copy outside begin()/end()");
  if (bytes > source.bytes || bytes > destination.bytes) {
    throw std::out_of_range("copy of " + std::to_string(bytes) + " bytes between ranges of " +
                            std::to_string(source.bytes) + " and " + std::to_string(destination.bytes));
  }
  const VkBufferCopy region{source.offset, destination.offset, bytes};
  vkCmdCopyBuffer(commands_, source.buffer, destination.buffer, 1, &region);
  barrier();
}

void CommandRecording::barrier() { memory_barrier(commands_, kWork, kAccesses); }

void CommandRecording::end() {
  if (!recording_) throw std::logic_error("end() without begin()");
  // The host reads results after the fence: make the last writes visible to it.
  memory_barrier(commands_, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
  check(vkEndCommandBuffer(commands_), "vkEndCommandBuffer");
  recording_ = false;
}

void CommandRecording::submit_and_wait() { submit({&commands_, 1}); }

void CommandRecording::submit_after_and_wait(const CommandRecording& first) {
  if (first.recording_) throw std::logic_error("submit_after_and_wait() with the first recording still open");
  const std::array<VkCommandBuffer, 2> both{first.commands_, commands_};
  submit(both);
}

void CommandRecording::submit(std::span<const VkCommandBuffer> buffers) {
  if (recording_) throw std::logic_error("submit_and_wait() while recording: call end() first");
  check(vkResetFences(context_.device(), 1, &fence_), "vkResetFences");
  VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  submit.commandBufferCount = static_cast<std::uint32_t>(buffers.size());
  submit.pCommandBuffers = buffers.data();
  check(vkQueueSubmit(context_.queue(), 1, &submit, fence_), "vkQueueSubmit");
  check(vkWaitForFences(context_.device(), 1, &fence_, VK_TRUE, UINT64_MAX), "vkWaitForFences");
}

}  // namespace loom::compute::vulkan
