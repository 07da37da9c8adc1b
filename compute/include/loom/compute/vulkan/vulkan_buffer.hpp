// Buffers on a Vulkan device: device-local ones for the weights, the KV blocks and the step's activations,
// host-visible (mapped, coherent) ones for what the host writes each step (token ids, positions, block tables)
// and reads back (logits, candidates). A BufferRange is what a dispatch binds: a buffer, an offset and a size.
// The Uploader moves bytes into device-local buffers through one reused staging buffer, a chunk per submit.
#pragma once

#include <vulkan/vulkan.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>

#include "loom/compute/vulkan/vulkan_context.hpp"

namespace loom::compute::vulkan {

// The device could not give the memory asked for: how much was needed, of what kind, and what the device's
// heap holds, so the error can say how much was needed (the "clear error at load").
class DeviceMemoryError : public std::runtime_error {
 public:
  DeviceMemoryError(const std::string& what, std::uint64_t requested, std::uint64_t heap_bytes);
  std::uint64_t requested() const noexcept { return requested_; }
  std::uint64_t heap_bytes() const noexcept { return heap_bytes_; }

 private:
  std::uint64_t requested_;
  std::uint64_t heap_bytes_;
};

struct BufferRange {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceSize offset = 0;
  VkDeviceSize bytes = 0;
  // [offset + from, offset + from + count) of this range; throws std::out_of_range past its end.
  BufferRange sub(VkDeviceSize from, VkDeviceSize count) const;
};

enum class MemoryKind {
  device_local,  // fastest for the device; the host reaches it only through the Uploader or a copy
  host_visible,  // mapped for the whole life of the buffer, host-coherent (cached where the device offers it)
};

class Buffer {
 public:
  Buffer() = default;
  // `what` names the buffer in errors ("weights blk.3.attn_q.weight", "KV blocks"). Throws DeviceMemoryError
  // when the allocation fails for lack of memory, VulkanError otherwise. Sizes of 0 are rounded up to 4.
  Buffer(VulkanContext& context, std::uint64_t bytes, MemoryKind kind, const std::string& what);
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  VkBuffer handle() const noexcept { return buffer_; }
  std::uint64_t size() const noexcept { return size_; }
  MemoryKind kind() const noexcept { return kind_; }
  // The host's view of a host-visible buffer; nullptr for a device-local one.
  void* mapped() const noexcept { return mapped_; }
  BufferRange range() const noexcept { return {buffer_, 0, size_}; }
  BufferRange range(VkDeviceSize offset, VkDeviceSize bytes) const { return range().sub(offset, bytes); }

 private:
  void release() noexcept;

  VkDevice device_ = VK_NULL_HANDLE;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  std::uint64_t size_ = 0;
  MemoryKind kind_ = MemoryKind::device_local;
  void* mapped_ = nullptr;
};

// Copies between the host and device-local buffers through a host-visible staging buffer of `staging_bytes`,
// one submit and fence wait per chunk (a load's cost, never a step's).
class Uploader {
 public:
  explicit Uploader(VulkanContext& context, std::uint64_t staging_bytes = std::uint64_t{64} << 20);
  ~Uploader();
  Uploader(const Uploader&) = delete;
  Uploader& operator=(const Uploader&) = delete;

  void upload(const BufferRange& destination, std::span<const std::byte> bytes);
  void download(const BufferRange& source, std::span<std::byte> bytes);
  // Fills the range with a 32-bit pattern (zeros by default) on the device.
  void fill(const BufferRange& destination, std::uint32_t pattern = 0);

 private:
  void submit(const std::function<void(VkCommandBuffer)>& record);

  VulkanContext& context_;
  Buffer staging_;
  VkCommandBuffer commands_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
};

}  // namespace loom::compute::vulkan
