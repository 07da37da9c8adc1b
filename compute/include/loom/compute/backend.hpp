// Backend: the interface every compute backend implements (the CPU one in cpu/, a Vulkan one beside it),
// and the values a step speaks in: a StepBatch in, a StepResult out. A backend holds a loaded model, its KV
// storage and one sampler per sequence; a step first does the block copies the cache bookkeeping asked
// for (copy-on-write of a shared block), then runs every sequence's tokens (a prefill chunk, or one decode
// token) through one forward pass, then samples the sequences that want a next token.
//
// The engine's executor calls a backend from one compute thread only, one call at a time, so an
// implementation needs no lock. Everything here is a plain value: a batch moves to the compute thread and
// its result moves back, never sharing state. Nothing here names a file format or a kernel, so the engine
// (and an application embedding it) compiles against this header without compute's model/ or cpu/ rooms.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "loom/compute/kv_blocks.hpp"
#include "loom/compute/kv_cache_options.hpp"
#include "loom/compute/model_config.hpp"
#include "loom/proto/sampling_params.hpp"

namespace loom::compute {

class Tokenizer;

// What to load, and how large to make the KV storage and the steps.
struct LoadOptions {
  std::string model_path;      // GGUF, or a llama2.c checkpoint
  std::string tokenizer_path;  // empty: the GGUF's own vocabulary; else a GGUF or llama2.c tokenizer file
  int threads = 0;             // compute threads, the calling one included; 0: the physical core count
  KvCacheOptions kv;           // block size, F16/F32, and a budget in bytes (0: sized by kv_tokens)
  std::int64_t kv_tokens = 0;  // without a budget: room for this many positions (0: kv_contexts full contexts)
  std::int64_t kv_contexts = 1;  // without a budget or kv_tokens: room for this many model contexts (a server
                                 // batching several requests wants more than one)
  std::int64_t max_batch_tokens = 512;  // tokens of all sequences in one step, at most

  static constexpr int kMaxThreads = 1024;
  static constexpr std::int64_t kMaxBatchTokens = 1 << 16;
  static constexpr std::int64_t kMaxKvTokens = std::int64_t{1} << 26;
  static constexpr std::int64_t kMaxKvContexts = 1024;
};

// The loaded model as the engine sees it: its shape, and the KV storage the cache bookkeeping must mirror
// (BlockManagerConfig{.block_count = kv_blocks, .block_size = kv_block_size}).
struct BackendInfo {
  ModelConfig config;
  std::int64_t kv_block_size = 0;
  std::int64_t kv_blocks = 0;
  std::uint64_t kv_bytes = 0;
  std::int64_t max_batch_tokens = 0;
  std::string chat_template_source;  // the model's tokenizer.chat_template (Jinja), empty when it has none
};

// One sequence's share of a step.
struct StepSequence {
  SequenceId sequence = 0;
  std::vector<std::int32_t> tokens{};  // computed at positions start, start + 1, ...
  std::int64_t start = 0;              // positions before it are already in the KV storage
  std::vector<BlockId> block_table{};  // physical block ids, covering start + tokens.size() positions
  // Sample a next token after the last of `tokens`: a decode, or the last chunk of a prompt.
  bool sample = false;
  // The request's sampling parameters, as it came. Its sampler (and random stream) is made at its first
  // sampled step and kept until the backend is told release(); later steps must give the same parameters.
  proto::SamplingParams sampler{};
  std::vector<std::int32_t> history{};  // every token of the sequence so far, for the penalties
  // How many top alternatives to report with the sampled token (0: none), at most
  // proto::SamplingParams::kMaxLogprobs.
  std::int32_t logprobs = 0;
};

struct StepBatch {
  std::vector<BlockCopy> copies{};         // done before the forward pass, in order
  std::vector<StepSequence> sequences{};   // each id at most once
};

// A token's log-probability under the model's own distribution: the softmax of the raw logits (temperature
// 1, before logit bias and penalties), so it does not depend on the sampling parameters.
struct TokenLogprob {
  std::int32_t token = 0;
  float logprob = 0.0f;
};

struct SampledToken {
  SequenceId sequence = 0;
  std::int32_t token = 0;
  float logprob = 0.0f;              // of `token`; set only when logprobs were asked for (else 0)
  std::vector<TokenLogprob> top{};   // the `logprobs` most likely tokens, most likely first (lower id on ties)
};

// What a backend returns for a step: one entry per sequence that asked to sample, in batch order.
struct StepResult {
  std::vector<SampledToken> sampled{};
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual BackendInfo info() const = 0;
  // The model's tokenizer; its const members may be used from any thread.
  virtual std::shared_ptr<const Tokenizer> tokenizer() const = 0;
  // Runs one step. Throws (std::exception, its what() naming the problem) when the step cannot be done;
  // the backend stays usable for the next one.
  virtual StepResult run(const StepBatch& batch) = 0;
  // Forgets the sequence's sampler (a later step with this id starts a fresh one). Unknown ids are ignored.
  virtual void release(SequenceId sequence) = 0;
};

// Builds a backend; throws when the files cannot be loaded or the options are out of range.
using BackendFactory = std::function<std::unique_ptr<Backend>(const LoadOptions&)>;

}  // namespace loom::compute
