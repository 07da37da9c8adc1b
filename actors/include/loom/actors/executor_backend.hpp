// ExecutorBackend: what the GpuExecutorActor drives: a loaded model with its KV storage and one sampler per
// sequence, turning a StepBatch into sampled tokens. The executor calls it from its one compute thread only,
// one call at a time, so an implementation needs no lock. The real one is LlamaBackend (llama_backend.hpp);
// tests wrap it (to fail a chosen step, or to see which thread runs it).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "loom/actors/step_batch.hpp"
#include "loom/compute/model_config.hpp"
#include "loom/compute/paged_kv_cache.hpp"
#include "loom/compute/tokenizer.hpp"

namespace loom::actors {

// What to load, and how large to make the KV storage and the steps.
struct LoadOptions {
  std::string model_path;      // GGUF, or a llama2.c checkpoint
  std::string tokenizer_path;  // empty: the GGUF's own vocabulary; else a GGUF or llama2.c tokenizer file
  int threads = 0;             // compute threads, the calling one included; 0: the physical core count
  compute::KvCacheOptions kv;  // block size, F16/F32, and a budget in bytes (0: sized by kv_tokens)
  std::int64_t kv_tokens = 0;  // without a budget: room for this many positions (0: kv_contexts full contexts)
  std::int64_t kv_contexts = 1;  // without a budget or kv_tokens: room for this many model contexts (a server
                                 // batching several requests wants more than one)
  std::int64_t max_batch_tokens = 512;  // tokens of all sequences in one step, at most

  static constexpr int kMaxThreads = 1024;
  static constexpr std::int64_t kMaxBatchTokens = 1 << 16;
  static constexpr std::int64_t kMaxKvTokens = std::int64_t{1} << 26;
  static constexpr std::int64_t kMaxKvContexts = 1024;
};

// The loaded model as the engine sees it: its shape, and the KV storage the cache manager must mirror
// (BlockManagerConfig{.block_count = kv_blocks, .block_size = kv_block_size}).
struct BackendInfo {
  compute::ModelConfig config;
  std::int64_t kv_block_size = 0;
  std::int64_t kv_blocks = 0;
  std::uint64_t kv_bytes = 0;
  std::int64_t max_batch_tokens = 0;
  std::string chat_template_source;  // the model's tokenizer.chat_template (Jinja), empty when it has none
};

class ExecutorBackend {
 public:
  virtual ~ExecutorBackend() = default;

  virtual BackendInfo info() const = 0;
  // The model's tokenizer; its const members may be used from any thread.
  virtual std::shared_ptr<const compute::Tokenizer> tokenizer() const = 0;
  // Runs one step. Throws (std::exception, its what() naming the problem) when the step cannot be done;
  // the backend stays usable for the next one.
  virtual StepResult run(const StepBatch& batch) = 0;
  // Forgets the sequence's sampler (a later step with this id starts a fresh one). Unknown ids are ignored.
  virtual void release(cache::SequenceId sequence) = 0;
};

// Builds a backend; throws when the files cannot be loaded or the options are out of range.
using BackendFactory = std::function<std::unique_ptr<ExecutorBackend>(const LoadOptions&)>;

}  // namespace loom::actors
