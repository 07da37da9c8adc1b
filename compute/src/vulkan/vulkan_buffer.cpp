#include "loom/compute/vulkan/vulkan_buffer.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

namespace loom::compute::vulkan {
namespace {

std::string gib(std::uint64_t bytes) {
  const double value = static_cast<double>(bytes) / static_cast<double>(std::uint64_t{1} << 30);
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB", value);
  return text;
}

bool out_of_memory(VkResult result) {
  return result == VK_ERROR_OUT_OF_DEVICE_MEMORY || result == VK_ERROR_OUT_OF_HOST_MEMORY;
}

}  // namespace

DeviceMemoryError::DeviceMemoryError(const std::string& what, std::uint64_t requested, std::uint64_t heap_bytes)
    : std::runtime_error(what), requested_(requested), heap_bytes_(heap_bytes) {}

BufferRange BufferRange::sub(VkDeviceSize from, VkDeviceSize count) const {
  if (from > bytes || count > bytes - from) {
    throw std::out_of_range("buffer range [" + std::to_string(from) + ", +" + std::to_string(count) +
                            ") past the end of a range of " + std::to_string(bytes) + " bytes");
  }
  return {buffer, offset + from, count};
}

Buffer::Buffer(VulkanContext& context, std::uint64_t bytes, MemoryKind kind, const std::string& what)
    : device_(context.device()), size_(std::max<std::uint64_t>(4, (bytes + 3) / 4 * 4)), kind_(kind) {
  const auto& limit = context.description().max_memory_allocation_bytes;
  if (limit > 0 && size_ > limit) {
    throw DeviceMemoryError(what + ": " + std::to_string(size_) + " bytes exceed the device's largest allocation (" +
                                std::to_string(limit) + " bytes)", size_, limit);
  }
  VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  info.size = size_;
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  check(vkCreateBuffer(device_, &info, nullptr, &buffer_), "vkCreateBuffer");
  VkMemoryRequirements requirements;
  vkGetBufferMemoryRequirements(device_, buffer_, &requirements);
  const bool host = kind == MemoryKind::host_visible;
  const VkMemoryPropertyFlags required =
      host ? VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
  // Results come back through host-visible buffers: cached memory makes the host's reads fast.
  const VkMemoryPropertyFlags preferred = host ? VK_MEMORY_PROPERTY_HOST_CACHED_BIT : 0;
  const auto type = context.memory_type(requirements.memoryTypeBits, required, preferred);
  if (!type) {
    release();
    throw std::runtime_error(what + ": the device has no " + (host ? "host-visible" : "device-local") + " memory for storage buffers");
  }
  const auto& memory = context.memory_properties();
  const std::uint64_t heap = memory.memoryHeaps[memory.memoryTypes[*type].heapIndex].size;
  VkMemoryAllocateInfo allocate{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  allocate.allocationSize = requirements.size;
  allocate.memoryTypeIndex = *type;
  const VkResult result = vkAllocateMemory(device_, &allocate, nullptr, &memory_);
  if (result != VK_SUCCESS) {
    release();
    if (out_of_memory(result)) {
      throw DeviceMemoryError(what + ": the device is out of memory for " + gib(requirements.size) + " (its heap holds " +
                                  gib(heap) + ")", requirements.size, heap);
    }
    check(result, "vkAllocateMemory");
  }
  try {
    check(vkBindBufferMemory(device_, buffer_, memory_, 0), "vkBindBufferMemory");
    if (host) check(vkMapMemory(device_, memory_, 0, VK_WHOLE_SIZE, 0, &mapped_), "vkMapMemory");
  } catch (...) {
    release();  // a constructor that throws runs no destructor
    throw;
  }
}

Buffer::~Buffer() { release(); }

Buffer::Buffer(Buffer&& other) noexcept
    : device_(std::exchange(other.device_, VK_NULL_HANDLE)),
      buffer_(std::exchange(other.buffer_, VK_NULL_HANDLE)),
      memory_(std::exchange(other.memory_, VK_NULL_HANDLE)),
      size_(std::exchange(other.size_, 0)),
      kind_(other.kind_),
      mapped_(std::exchange(other.mapped_, nullptr)) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    release();
    device_ = std::exchange(other.device_, VK_NULL_HANDLE);
    buffer_ = std::exchange(other.buffer_, VK_NULL_HANDLE);
    memory_ = std::exchange(other.memory_, VK_NULL_HANDLE);
    size_ = std::exchange(other.size_, 0);
    kind_ = other.kind_;
    mapped_ = std::exchange(other.mapped_, nullptr);
  }
  return *this;
}

void Buffer::release() noexcept {
  if (device_ == VK_NULL_HANDLE) return;
  if (mapped_ != nullptr) vkUnmapMemory(device_, memory_);
  if (buffer_ != VK_NULL_HANDLE) vkDestroyBuffer(device_, buffer_, nullptr);
  if (memory_ != VK_NULL_HANDLE) vkFreeMemory(device_, memory_, nullptr);
  buffer_ = VK_NULL_HANDLE;
  memory_ = VK_NULL_HANDLE;
  mapped_ = nullptr;
}

Uploader::Uploader(VulkanContext& context, std::uint64_t staging_bytes)
    : context_(context), staging_(context, staging_bytes, MemoryKind::host_visible, "staging buffer") {
  VkCommandBufferAllocateInfo allocate{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  allocate.commandPool = context.command_pool();
  allocate.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  allocate.commandBufferCount = 1;
  check(vkAllocateCommandBuffers(context.device(), &allocate, &commands_), "vkAllocateCommandBuffers");
  VkFenceCreateInfo fence{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  check(vkCreateFence(context.device(), &fence, nullptr, &fence_), "vkCreateFence");
}

Uploader::~Uploader() {
  vkDestroyFence(context_.device(), fence_, nullptr);
  vkFreeCommandBuffers(context_.device(), context_.command_pool(), 1, &commands_);
}

void Uploader::submit(const std::function<void(VkCommandBuffer)>& record) {
  check(vkResetCommandBuffer(commands_, 0), "vkResetCommandBuffer");
  VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  check(vkBeginCommandBuffer(commands_, &begin), "vkBeginCommandBuffer");
  record(commands_);
  // What the copy wrote is visible to later dispatches and to the host once the fence signals.
  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  vkCmdPipelineBarrier(commands_, VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &barrier, 0, nullptr, 0,
                       nullptr);
  check(vkEndCommandBuffer(commands_), "vkEndCommandBuffer");
  check(vkResetFences(context_.device(), 1, &fence_), "vkResetFences");
  VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &commands_;
  check(vkQueueSubmit(context_.queue(), 1, &submit, fence_), "vkQueueSubmit");
  check(vkWaitForFences(context_.device(), 1, &fence_, VK_TRUE, UINT64_MAX), "vkWaitForFences");
}

void Uploader::upload(const BufferRange& destination, std::span<const std::byte> bytes) {
  if (bytes.size() > destination.bytes) {
    throw std::out_of_range("upload of " + std::to_string(bytes.size()) + " bytes into a range of " +
                            std::to_string(destination.bytes));
  }
  for (std::size_t done = 0; done < bytes.size();) {
    const std::size_t chunk = std::min<std::size_t>(bytes.size() - done, staging_.size());
    std::memcpy(staging_.mapped(), bytes.data() + done, chunk);
    submit([&](VkCommandBuffer commands) {
      const VkBufferCopy region{0, destination.offset + done, chunk};
      vkCmdCopyBuffer(commands, staging_.handle(), destination.buffer, 1, &region);
    });
    done += chunk;
  }
}

void Uploader::download(const BufferRange& source, std::span<std::byte> bytes) {
  if (bytes.size() > source.bytes) {
    throw std::out_of_range("download of " + std::to_string(bytes.size()) + " bytes from a range of " +
                            std::to_string(source.bytes));
  }
  for (std::size_t done = 0; done < bytes.size();) {
    const std::size_t chunk = std::min<std::size_t>(bytes.size() - done, staging_.size());
    submit([&](VkCommandBuffer commands) {
      // Earlier dispatches' writes to the source are visible to this copy.
      VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
      barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
      barrier.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT;
      vkCmdPipelineBarrier(commands, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                           VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &barrier, 0, nullptr, 0, nullptr);
      const VkBufferCopy region{source.offset + done, 0, chunk};
      vkCmdCopyBuffer(commands, source.buffer, staging_.handle(), 1, &region);
    });
    std::memcpy(bytes.data() + done, staging_.mapped(), chunk);
    done += chunk;
  }
}

void Uploader::fill(const BufferRange& destination, std::uint32_t pattern) {
  if (destination.offset % 4 != 0 || destination.bytes % 4 != 0) {
    throw std::invalid_argument("fill needs a range of whole 32-bit words at a 4-byte offset");
  }
  submit([&](VkCommandBuffer commands) {
    vkCmdFillBuffer(commands, destination.buffer, destination.offset, destination.bytes, pattern);
  });
}

}  // namespace loom::compute::vulkan
