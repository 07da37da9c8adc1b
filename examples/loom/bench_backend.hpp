// `loom bench --device vulkan[:N]`: prompt processing, single-stream generation and batched decode timed
// through the Backend's steps (compute::load_backend), as the engine drives a device: the CPU's bandwidth
// and compute probes do not apply there, so each line gives tokens/s and ms per step alone.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loom/compute/backend.hpp"

namespace loom::cli {

struct BackendBenchOptions {
  std::string model_path;
  std::string device;
  compute::DeviceArithmetic arithmetic = compute::DeviceArithmetic::automatic;
  std::int64_t prompt_tokens = 512;
  std::int64_t generated_tokens = 128;
  std::vector<std::int64_t> batch_sizes;
  int repetitions = 3;
  bool json = false;
};

int run_backend_bench(const BackendBenchOptions& options);

}  // namespace loom::cli
