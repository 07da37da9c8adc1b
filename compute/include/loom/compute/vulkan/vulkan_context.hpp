// VulkanContext: one Vulkan device opened for compute (instance, device, one compute queue, a command pool),
// and the list of the devices the loader reports, which `--device vulkan:N` indexes and `loom info --devices`
// prints. Device choice: `vulkan` takes the first discrete GPU, else the first device of any kind (Mesa's
// lavapipe, a CPU device, included), so every machine with the Vulkan loader and a driver can run the backend.
//
// The backend needs compute queues, storage buffers, push constants and VK_KHR_push_descriptor (the buffers of
// a dispatch are pushed into the command buffer, so a recorded step carries its own bindings and needs no
// descriptor pool); a device without them is listed but refused by open() with the reason.
#pragma once

#include <vulkan/vulkan.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace loom::compute::vulkan {

// A Vulkan call that failed: what was attempted and the VkResult, by name.
class VulkanError : public std::runtime_error {
 public:
  VulkanError(const std::string& what, VkResult result);
  VkResult result() const noexcept { return result_; }

 private:
  VkResult result_;
};

// Throws VulkanError("<what>: VK_ERROR_...") unless result is VK_SUCCESS.
void check(VkResult result, const char* what);
std::string_view result_name(VkResult result) noexcept;

struct DeviceDescription {
  int index = 0;               // in the loader's order: what vulkan:N names
  std::string name;            // "NVIDIA H100 80GB HBM3", "llvmpipe (LLVM 15.0.6, 256 bits)"
  std::string type;            // discrete, integrated, virtual, cpu, other
  std::uint32_t vendor_id = 0;
  std::uint32_t device_id = 0;
  std::string api_version;     // "1.3.230"
  std::string driver;          // driver name and info where the device reports them
  std::uint64_t device_local_bytes = 0;  // the largest device-local heap
  std::uint64_t host_visible_bytes = 0;  // the largest host-visible heap
  std::uint32_t max_workgroup_invocations = 0;
  std::array<std::uint32_t, 3> max_workgroup_count{};
  std::uint32_t max_push_constant_bytes = 0;
  std::uint64_t max_storage_buffer_range = 0;
  std::uint64_t min_storage_buffer_offset_alignment = 0;  // a BufferRange's offset must be a multiple of it
  std::uint64_t max_memory_allocation_bytes = 0;          // one Buffer's limit
  std::uint32_t subgroup_size = 0;       // 0: unknown
  bool subgroup_arithmetic = false;      // subgroupAdd & co. in compute shaders
  bool shader_float16 = false;
  bool shader_float64 = false;          // double in shaders (the pinned attention's softmax sum)
  bool shader_int8 = false;
  bool push_descriptors = false;         // VK_KHR_push_descriptor (required)
  std::string unusable;                  // non-empty: why open() refuses this device
};

// Every device the loader reports, in its order. Empty when the loader finds no driver or no device;
// throws only when the loader itself cannot be used (the message says so).
std::vector<DeviceDescription> list_devices();

// "vulkan" -> nullopt (the default choice), "vulkan:N" -> N. Throws std::invalid_argument for anything else.
std::optional<int> parse_device_spec(std::string_view spec);

class VulkanContext {
 public:
  // Opens device `index`, or the default choice (the first discrete GPU, else the first usable device).
  // Throws std::runtime_error naming the problem: no Vulkan device, index out of range (with the count), a
  // device that lacks what the backend needs.
  static std::unique_ptr<VulkanContext> open(std::optional<int> index = std::nullopt);
  ~VulkanContext();
  VulkanContext(const VulkanContext&) = delete;
  VulkanContext& operator=(const VulkanContext&) = delete;

  const DeviceDescription& description() const noexcept { return description_; }
  VkInstance instance() const noexcept { return instance_; }
  VkPhysicalDevice physical_device() const noexcept { return physical_; }
  VkDevice device() const noexcept { return device_; }
  VkQueue queue() const noexcept { return queue_; }
  std::uint32_t queue_family() const noexcept { return queue_family_; }
  VkCommandPool command_pool() const noexcept { return command_pool_; }
  PFN_vkCmdPushDescriptorSetKHR push_descriptor_set() const noexcept { return push_descriptor_set_; }

  // A memory type allowed by `type_bits` with every `required` flag, preferring one that also has the
  // `preferred` flags; nullopt when none has the required ones.
  std::optional<std::uint32_t> memory_type(std::uint32_t type_bits, VkMemoryPropertyFlags required,
                                           VkMemoryPropertyFlags preferred = 0) const noexcept;
  const VkPhysicalDeviceMemoryProperties& memory_properties() const noexcept { return memory_; }

 private:
  VulkanContext() = default;

  DeviceDescription description_;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  std::uint32_t queue_family_ = 0;
  VkCommandPool command_pool_ = VK_NULL_HANDLE;
  PFN_vkCmdPushDescriptorSetKHR push_descriptor_set_ = nullptr;
  VkPhysicalDeviceMemoryProperties memory_{};
};

}  // namespace loom::compute::vulkan
