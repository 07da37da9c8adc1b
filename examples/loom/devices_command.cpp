// `loom info --devices`: the Vulkan devices this machine offers, one block each, in the order `--device
// vulkan:N` indexes them, with what decides whether (and how fast) the Vulkan backend runs there.
#include <cstdio>
#include <exception>

#include "loom/compute/devices.hpp"
#include "model_commands.hpp"

namespace loom::cli {

int run_info_devices() {
  std::printf("cpu: the CPU backend (--device cpu, the default)\n");
  if (!compute::has_vulkan_backend()) {
    std::printf("vulkan: %s\n", std::string(compute::kNoVulkanBuild).c_str());
    return 0;
  }
  const auto devices = compute::list_vulkan_devices();
  if (devices.empty()) {
    std::printf("vulkan: no device (the Vulkan loader found no driver; Mesa's lavapipe is mesa-vulkan-drivers)\n");
    return 0;
  }
  for (const compute::VulkanDeviceListing& d : devices) {
    std::printf("vulkan:%d: %s (%s)\n", d.index, d.name.c_str(), d.type.c_str());
    std::printf("  device-local memory: %.1f GiB\n", static_cast<double>(d.device_local_bytes) / (1024.0 * 1024.0 * 1024.0));
    std::printf("  max workgroup invocations: %u, subgroup size: %s\n", d.max_workgroup_invocations,
                d.subgroup_size > 0 ? std::to_string(d.subgroup_size).c_str() : "unknown");
    std::printf("  push descriptors: %s\n", d.push_descriptors ? "yes" : "no");
    std::printf("  driver: %s\n", d.driver.empty() ? "(not reported)" : d.driver.c_str());
    std::printf("  usable: %s\n", d.unusable.empty() ? "yes" : ("no: " + d.unusable).c_str());
  }
  return 0;
}

}  // namespace loom::cli
