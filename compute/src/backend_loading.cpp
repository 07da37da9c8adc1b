#include "loom/compute/backend_loading.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "loom/compute/cpu/paged_kv_cache.hpp"
#include "loom/compute/kv_memory_budget.hpp"
#include "loom/compute/model/gguf_file.hpp"

namespace loom::compute {

void check_load_options(const LoadOptions& o) {
  const auto out_of_range = [](const std::string& field, std::int64_t value, std::int64_t low, std::int64_t high) {
    if (value < low || value > high) {
      throw std::invalid_argument("load option " + field + " = " + std::to_string(value) + " is outside [" +
                                  std::to_string(low) + ", " + std::to_string(high) + "]");
    }
  };
  if (o.model_path.empty()) throw std::invalid_argument("load option model_path is empty");
  out_of_range("threads", o.threads, 0, LoadOptions::kMaxThreads);
  out_of_range("max_batch_tokens", o.max_batch_tokens, 1, LoadOptions::kMaxBatchTokens);
  out_of_range("kv_tokens", o.kv_tokens, 0, LoadOptions::kMaxKvTokens);
  out_of_range("kv_contexts", o.kv_contexts, 1, LoadOptions::kMaxKvContexts);
  out_of_range("kv.block_size", o.kv.block_size, 1, PagedKvCache::kMaxBlockSize);
  if (o.kv_auto && !(o.kv_auto->share > 0.0 && o.kv_auto->share <= 1.0)) {
    throw std::invalid_argument("load option kv_auto.share = " + std::to_string(o.kv_auto->share) + " is outside (0, 1]");
  }
}

Vocabulary load_vocabulary(const LoadOptions& o, const LoadedModel& loaded) {
  auto vocabulary = [&] {
    if (!o.tokenizer_path.empty()) {
      if (GgufFile::has_magic(o.tokenizer_path)) return Vocabulary::from_gguf(GgufFile::open(o.tokenizer_path));
      return Vocabulary::from_llama2c_tokenizer(o.tokenizer_path, static_cast<std::int32_t>(loaded.config().vocab_size));
    }
    if (loaded.gguf() == nullptr) {
      throw std::invalid_argument(o.model_path + " is a llama2.c checkpoint, which holds no vocabulary: give a tokenizer path");
    }
    return Vocabulary::from_gguf(*loaded.gguf());
  }();
  if (vocabulary.size() != loaded.config().vocab_size) {
    throw std::invalid_argument("the tokenizer has " + std::to_string(vocabulary.size()) + " tokens, the model " +
                                std::to_string(loaded.config().vocab_size));
  }
  return vocabulary;
}

LoadOptions with_kv_sized_from_memory(const LoadOptions& options, const ModelConfig& config, KvMemoryPlace place,
                                      std::string& sizing) {
  if (!options.kv_auto || options.kv.budget_bytes > 0 || options.kv_tokens > 0) return options;
  const std::uint64_t block = PagedKvCache::bytes_per_block(config.layers, config.kv_dim(), options.kv.block_size, options.kv.type);
  const KvAutoSize& automatic = *options.kv_auto;
  const std::uint64_t available = automatic.available_bytes > 0 ? automatic.available_bytes
                                  : place.available_bytes > 0   ? place.available_bytes
                                                                : available_memory_bytes_or_zero();
  const KvMemoryBudget budget = kv_budget_from_memory(KvMemoryInputs{
      .available_bytes = available,
      .weight_bytes = place.weight_bytes,
      .margin_bytes = automatic.margin_bytes,
      .bytes_per_token = block / static_cast<std::uint64_t>(options.kv.block_size),
      .context_length = config.context_length,
      .share = automatic.share,
      .max_sequences = automatic.max_sequences,
      .max_bytes = automatic.max_bytes,
      .min_bytes = block,
      .contexts_when_unknown = options.kv_contexts});
  LoadOptions sized = options;
  sized.kv.budget_bytes = budget.bytes;
  sizing = budget.reason;
  return sized;
}

std::int64_t kv_block_count(const LoadOptions& options, const ModelConfig& config) {
  const std::uint64_t per_block =
      PagedKvCache::bytes_per_block(config.layers, config.kv_dim(), options.kv.block_size, options.kv.type);
  if (options.kv.budget_bytes > 0) {
    const std::uint64_t fit = options.kv.budget_bytes / per_block;
    if (fit == 0) {
      throw std::invalid_argument("a KV cache budget of " + std::to_string(options.kv.budget_bytes) +
                                  " bytes holds no block; one takes " + std::to_string(per_block) + " bytes");
    }
    return static_cast<std::int64_t>(std::min<std::uint64_t>(fit, PagedKvCache::kMaxBlocks));
  }
  const std::int64_t tokens = options.kv_tokens > 0 ? options.kv_tokens : options.kv_contexts * config.context_length;
  return (tokens + options.kv.block_size - 1) / options.kv.block_size;
}

}  // namespace loom::compute
