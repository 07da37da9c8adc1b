// The Vulkan entry points of devices.hpp in a build with the Vulkan backend.
#include "loom/compute/devices.hpp"
#include "loom/compute/vulkan/vulkan_backend.hpp"
#include "loom/compute/vulkan/vulkan_context.hpp"

namespace loom::compute {

std::unique_ptr<Backend> load_vulkan_backend(const LoadOptions& options) { return vulkan::VulkanBackend::load(options); }

bool has_vulkan_backend() noexcept { return true; }

std::vector<VulkanDeviceListing> list_vulkan_devices() {
  std::vector<VulkanDeviceListing> listed;
  for (const vulkan::DeviceDescription& d : vulkan::list_devices()) {
    listed.push_back(VulkanDeviceListing{.index = d.index,
                                         .name = d.name,
                                         .type = d.type,
                                         .device_local_bytes = d.device_local_bytes,
                                         .max_workgroup_invocations = d.max_workgroup_invocations,
                                         .subgroup_size = d.subgroup_size,
                                         .push_descriptors = d.push_descriptors,
                                         .driver = d.driver,
                                         .unusable = d.unusable});
  }
  return listed;
}

}  // namespace loom::compute
