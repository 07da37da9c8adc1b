// --device for the commands that run a model (generate, chat, logits, bench): cpu (the default), vulkan or
// vulkan:N, as compute/devices.hpp names them; `loom info --devices` lists the Vulkan devices.
#pragma once

#include <stdexcept>
#include <string>

#include "command_line.hpp"
#include "loom/compute/devices.hpp"

namespace loom::cli {

inline std::string read_device(CommandLine& args) {
  std::string device = args.text("device", "cpu");
  try {
    compute::check_device_spec(device);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("option --") + e.what());
  }
  return device;
}

}  // namespace loom::cli
