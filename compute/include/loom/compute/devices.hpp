// Where a model runs: the `device` of LoadOptions ("cpu", "vulkan" or "vulkan:N") and its arithmetic, the one factory that loads
// the backend it names, and the Vulkan devices `loom info --devices` lists. Compiled in every build: a build
// without the Vulkan backend (LOOM_VULKAN off) answers every Vulkan request with an error saying how to get
// one (src/vulkan_unavailable.cpp), so the CLI and the gateway need no build switches of their own.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "loom/compute/backend.hpp"

namespace loom::compute {

// What a build without the Vulkan backend says when one is asked for.
inline constexpr std::string_view kNoVulkanBuild =
    "this build has no Vulkan backend (configure with -DLOOM_VULKAN=ON; needs libvulkan-dev and glslc)";

// Throws std::invalid_argument naming the value unless it is "cpu", "vulkan" or "vulkan:N" (N a device index
// in [0, 1024)).
void check_device_spec(std::string_view device);

// The names of DeviceArithmetic (backend.hpp) on command lines and in configuration: "auto", "pinned", "fast".
// parse_device_arithmetic throws std::invalid_argument naming the value and the three names.
DeviceArithmetic parse_device_arithmetic(std::string_view name);
std::string_view to_string(DeviceArithmetic arithmetic) noexcept;

// The BackendFactory of the real engine: the CPU backend for "cpu", the Vulkan one for "vulkan[:N]".
std::unique_ptr<Backend> load_backend(const LoadOptions& options);
// The Vulkan backend on the device options.device names; throws in a build without it (kNoVulkanBuild).
std::unique_ptr<Backend> load_vulkan_backend(const LoadOptions& options);

// Whether this build has the Vulkan backend.
bool has_vulkan_backend() noexcept;

// A Vulkan device as `loom info --devices` prints it.
struct VulkanDeviceListing {
  int index = 0;  // what vulkan:N names
  std::string name;
  std::string type;  // discrete, integrated, virtual, cpu, other
  std::uint64_t device_local_bytes = 0;
  std::uint32_t max_workgroup_invocations = 0;
  std::uint32_t subgroup_size = 0;  // 0: unknown
  bool push_descriptors = false;
  std::string driver;
  std::string unusable;  // non-empty: why the backend refuses the device
};

// Every device the Vulkan loader reports (empty when it finds none). Throws std::runtime_error in a build
// without the Vulkan backend (kNoVulkanBuild) or when the loader cannot be used.
std::vector<VulkanDeviceListing> list_vulkan_devices();

}  // namespace loom::compute
