// The Vulkan entry points of devices.hpp in a build without the Vulkan backend (LOOM_VULKAN off): each says
// how to get one. compute/CMakeLists.txt compiles this file only then.
#include <stdexcept>
#include <string>

#include "loom/compute/devices.hpp"

namespace loom::compute {

std::unique_ptr<Backend> load_vulkan_backend(const LoadOptions& options) {
  throw std::invalid_argument("device " + options.device + ": " + std::string(kNoVulkanBuild));
}

bool has_vulkan_backend() noexcept { return false; }

std::vector<VulkanDeviceListing> list_vulkan_devices() { throw std::runtime_error(std::string(kNoVulkanBuild)); }

}  // namespace loom::compute
