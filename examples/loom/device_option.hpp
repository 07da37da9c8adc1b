// --device and --vulkan-arithmetic for the commands that run a model (generate, chat, logits, bench): where the
// forward pass runs, cpu (the default), vulkan or vulkan:N, as compute/devices.hpp names them (`loom info
// --devices` lists the Vulkan devices), and how a Vulkan device computes: auto (the default), pinned or fast
// (compute/backend.hpp's DeviceArithmetic).
#pragma once

#include <stdexcept>
#include <string>

#include "command_line.hpp"
#include "loom/compute/devices.hpp"

namespace loom::cli {

struct DeviceOption {
  std::string device = "cpu";
  compute::DeviceArithmetic arithmetic = compute::DeviceArithmetic::automatic;
};

inline DeviceOption read_device(CommandLine& args) {
  DeviceOption option;
  option.device = args.text("device", "cpu");
  const std::string arithmetic = args.text("vulkan-arithmetic", "auto");
  try {
    compute::check_device_spec(option.device);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("option --") + e.what());
  }
  try {
    option.arithmetic = compute::parse_device_arithmetic(arithmetic);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("option --vulkan-") + e.what());
  }
  if (option.device == "cpu" && option.arithmetic != compute::DeviceArithmetic::automatic) {
    throw UsageError("--vulkan-arithmetic is for --device vulkan[:N]; the CPU backend has one arithmetic");
  }
  return option;
}

}  // namespace loom::cli
