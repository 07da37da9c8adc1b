// The steps of a load every backend takes the same way: the range checks of LoadOptions, the vocabulary (from
// the tokenizer file, else the GGUF itself), and the KV budget that LoadOptions::kv_auto asks for, sized from
// the memory the KV storage lives in (the host's for the CPU backend, the device's for the Vulkan one).
#pragma once

#include <cstdint>
#include <string>

#include "loom/compute/backend.hpp"
#include "loom/compute/model/model_loader.hpp"
#include "loom/compute/text/vocabulary.hpp"

namespace loom::compute {

// Throws std::invalid_argument naming the first option out of its range.
void check_load_options(const LoadOptions& options);

// The model's vocabulary: from the tokenizer file when one is named, else from the GGUF model itself; throws
// when the two disagree on the vocabulary's size.
Vocabulary load_vocabulary(const LoadOptions& options, const LoadedModel& loaded);

// Where the KV storage lives, for kv_auto: the memory available (0: the host's MemAvailable) and what the
// weights take of it.
struct KvMemoryPlace {
  std::uint64_t available_bytes = 0;
  std::uint64_t weight_bytes = 0;
};

// The options with the KV budget kv_auto asks for filled in (`sizing` says how it was chosen), or as they
// came when a budget or a token count is given, or no kv_auto. KvAutoSize::available_bytes, when set,
// overrides the place's.
LoadOptions with_kv_sized_from_memory(const LoadOptions& options, const ModelConfig& config, KvMemoryPlace place,
                                      std::string& sizing);

// The KV blocks the options ask for (as PagedKvCache::sized counts them): as many as the budget holds, else
// room for kv_tokens positions, else kv_contexts full contexts.
std::int64_t kv_block_count(const LoadOptions& options, const ModelConfig& config);

}  // namespace loom::compute
