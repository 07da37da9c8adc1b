#include <charconv>
#include <stdexcept>
#include <string>

#include "loom/compute/cpu/cpu_backend.hpp"
#include "loom/compute/devices.hpp"

namespace loom::compute {

void check_device_spec(std::string_view device) {
  if (device == "cpu" || device == "vulkan") return;
  constexpr std::string_view prefix = "vulkan:";
  if (device.starts_with(prefix)) {
    const std::string_view digits = device.substr(prefix.size());
    int index = -1;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (!digits.empty() && error == std::errc{} && end == digits.data() + digits.size() && index >= 0 && index < 1024) return;
  }
  throw std::invalid_argument("device '" + std::string(device) + "' is not cpu, vulkan or vulkan:N (N a device index)");
}

DeviceArithmetic parse_device_arithmetic(std::string_view name) {
  if (name == "auto") return DeviceArithmetic::automatic;
  if (name == "pinned") return DeviceArithmetic::pinned;
  if (name == "fast") return DeviceArithmetic::fast;
  throw std::invalid_argument("arithmetic '" + std::string(name) + "' is not auto, pinned or fast");
}

std::string_view to_string(DeviceArithmetic arithmetic) noexcept {
  switch (arithmetic) {
    case DeviceArithmetic::automatic: return "auto";
    case DeviceArithmetic::pinned: return "pinned";
    case DeviceArithmetic::fast: return "fast";
  }
  return "auto";
}

std::unique_ptr<Backend> load_backend(const LoadOptions& options) {
  check_device_spec(options.device);
  if (options.device == "cpu") return load_cpu_backend(options);
  return load_vulkan_backend(options);
}

}  // namespace loom::compute
