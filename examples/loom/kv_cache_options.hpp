// The KV cache options shared by `loom logits`, `generate` and `chat`: --kv-block-size, --kv-cache-mb and
// --kv-type, read into the compute library's compute::KvCacheOptions.
#pragma once

#include <cstdint>
#include <string>

#include "available_memory.hpp"
#include "command_line.hpp"
#include "loom/compute/cpu/paged_kv_cache.hpp"
#include "loom/compute/model_config.hpp"

namespace loom::cli {

inline compute::KvCacheOptions read_kv_cache_options(CommandLine& args) {
  compute::KvCacheOptions options;
  options.block_size = args.integer("kv-block-size", 16, 1, compute::PagedKvCache::kMaxBlockSize);
  // 0 (the default): as much as the context needs. At most 1 TiB.
  const std::int64_t megabytes = args.integer("kv-cache-mb", 0, 0, 1 << 20);
  check_kv_cache_fits_memory(megabytes);
  options.budget_bytes = static_cast<std::uint64_t>(megabytes) * 1024 * 1024;
  const std::string type = args.text("kv-type", "f16");
  if (type == "f16") {
    options.type = compute::TensorType::f16;
  } else if (type == "f32") {
    options.type = compute::TensorType::f32;
  } else {
    throw UsageError("option --kv-type expects f16 or f32, got '" + type + "'");
  }
  return options;
}

// A budget that holds not even one block of this model is a usage error (before any work).
inline void check_kv_budget(const compute::KvCacheOptions& options, const compute::ModelConfig& config) {
  const std::uint64_t block = compute::PagedKvCache::bytes_per_block(config.layers, config.kv_dim(), options.block_size, options.type);
  if (options.budget_bytes > 0 && options.budget_bytes < block) {
    throw UsageError("--kv-cache-mb holds no block of this model: one block of " + std::to_string(options.block_size) +
                     " tokens takes " + std::to_string(block) + " bytes");
  }
}

}  // namespace loom::cli
