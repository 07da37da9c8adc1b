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

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "loom/compute/kv_blocks.hpp"
#include "loom/compute/kv_cache_options.hpp"
#include "loom/compute/model_config.hpp"
#include "loom/proto/sampling_params.hpp"

namespace loom::compute {

class Tokenizer;

// The KV storage sized from the machine's memory (kv_memory_budget.hpp has the rule): a share of the memory
// available after the weights, capped, at least one full context where memory allows.
struct KvAutoSize {
  double share = 0.25;                            // of the memory available after the weights and the margin
  std::int64_t max_sequences = 0;                 // cap: this many full contexts (a server's concurrent requests); 0: none
  std::uint64_t max_bytes = std::uint64_t{16} << 30;     // absolute cap
  std::uint64_t margin_bytes = std::uint64_t{256} << 20;  // kept free besides the weights
  std::uint64_t available_bytes = 0;              // 0: MemAvailable, read at load
};

// How a Vulkan device computes (the CPU backend ignores it). pinned: the CPU backend's own arithmetic, bit for
// bit (its summation orders, its exp, FMAs emulated in double: needs shaderFloat64, and costs a GPU most of its
// speed); fast: the device's own kernels (online-softmax attention, tiled products; logits a few ulps apart from
// the CPU's); automatic: pinned on a CPU device that can (lavapipe, where agreement matters more than speed),
// fast on a GPU.
enum class DeviceArithmetic { automatic, pinned, fast };

// What to load, and how large to make the KV storage and the steps.
struct LoadOptions {
  std::string model_path;      // GGUF, or a llama2.c checkpoint
  std::string tokenizer_path;  // empty: the GGUF's own vocabulary; else a GGUF or llama2.c tokenizer file
  int threads = 0;             // compute threads, the calling one included; 0: the physical core count
  // Where the forward pass runs: "cpu", "vulkan" (the first discrete GPU, else the first usable device) or
  // "vulkan:N" (device N as `loom info --devices` lists them); devices.hpp's load_backend() dispatches on it.
  std::string device = "cpu";
  DeviceArithmetic arithmetic = DeviceArithmetic::automatic;  // on a Vulkan device
  KvCacheOptions kv;           // block size, F16/F32, and a budget in bytes (0: sized by kv_tokens)
  std::int64_t kv_tokens = 0;  // without a budget: room for this many positions (0: kv_contexts full contexts)
  std::int64_t kv_contexts = 1;  // without a budget, kv_tokens or kv_auto: room for this many model contexts
  // Without a budget or kv_tokens: sized from the machine's memory (a server batching many requests); the
  // backend says how in BackendInfo::kv_sizing.
  std::optional<KvAutoSize> kv_auto;
  std::int64_t max_batch_tokens = 512;  // tokens of all sequences in one step, at most
  // Requested (by whoever owns the source) to end a load midway: the backend throws LoadCancelled at its
  // next check (load_cancelled.hpp). A default token is never requested.
  std::stop_token stop;

  static constexpr int kMaxThreads = 1024;
  static constexpr std::int64_t kMaxBatchTokens = 1 << 16;
  static constexpr std::int64_t kMaxKvTokens = std::int64_t{1} << 26;
  static constexpr std::int64_t kMaxKvContexts = 1024;
};

// The weights as stored: their parameters, bytes, and how many tensors of each stored type.
struct ModelTensorSummary {
  std::uint64_t parameters = 0;  // elements of every tensor
  std::uint64_t bytes = 0;       // their stored size
  std::map<std::string, std::int64_t> types{};  // type name ("q4_K", "f32", ...) -> tensors of it
};

// The loaded model as the engine sees it: its shape, and the KV storage the cache bookkeeping must mirror
// (BlockManagerConfig{.block_count = kv_blocks, .block_size = kv_block_size}).
struct BackendInfo {
  ModelConfig config;
  std::int64_t kv_block_size = 0;
  std::int64_t kv_blocks = 0;
  std::uint64_t kv_bytes = 0;
  std::int64_t max_batch_tokens = 0;
  std::string kv_sizing;             // how kv_bytes was chosen when LoadOptions::kv_auto sized it, else empty
  std::string chat_template_source;  // the model's tokenizer.chat_template (Jinja), empty when it has none
  ModelTensorSummary tensors{};      // what the file's tensors add up to (GET /v1/models reports it)
  // Where the forward pass runs, for people: "cpu", or a Vulkan device's name and arithmetic
  // ("NVIDIA H100 PCIe, fast arithmetic").
  std::string device{};
};

// How a sequence starts on a backend, in its first step (or its first after a preemption): what the
// backend keeps for it from then on, so that later steps carry only what changed.
struct SequenceStart {
  // The request's sampling parameters, as it came (logprobs among them). The backend makes the sequence's
  // sampler from them and keeps it until release(); a start with the same parameters keeps the sampler (a
  // preempted sequence's random stream goes on), other parameters replace it. With params.constraint the
  // sequence also gets a grammar state, kept and replaced with the sampler: a preempted sequence whose
  // history is computed again resumes under its grammar where it was (the state has already taken every
  // token the history holds). A constraint that does not compile fails only this sequence (its first
  // sampled token carries the error).
  proto::SamplingParams params{};
  // The tokens at positions [0, start) of this step, whose K/V is already in the cache (a reused prefix):
  // the start of the history the penalties read.
  std::vector<std::int32_t> prefix{};
};

// A choice forked from a sequence where it samples (a request's n > 1): after the step the new sequence
// holds the same block table and history, and it samples its first token from the same logits row with a
// sampler of its own, made from `params` (its own seed). Its later steps are its own; the cache bookkeeping
// copies a shared block before either writes to it.
struct SequenceFork {
  SequenceId sequence = 0;  // not held by the backend, not in the batch
  proto::SamplingParams params{};
};

// One sequence's share of a step: what changed since its last one.
struct StepSequence {
  SequenceId sequence = 0;
  std::vector<std::int32_t> tokens{};  // computed at positions start, start + 1, ...
  // Positions before it are already in the KV storage: for a sequence the backend holds, exactly the
  // positions its steps computed.
  std::int64_t start = 0;
  // The block table's change: its entries from table_from on become `blocks` (the entries before are kept;
  // a longer table is cut). A start gives the whole table (table_from 0). After it the table covers
  // start + tokens.size() positions.
  std::int64_t table_from = 0;
  std::vector<BlockId> blocks{};
  // Sample a next token after the last of `tokens`: a decode, or the last chunk of a prompt.
  bool sample = false;
  // An embedding sequence (on every step of it): its positions' final hidden states (after the output
  // norm; no logits are computed) feed the pooling the backend keeps for it from its start, which must be
  // at position 0 (a reused prefix's hidden states are not known). With `sample` its prompt ends here:
  // StepResult::embeddings carries its pooled, L2-normalised vector and nothing is sampled.
  bool embed = false;
  // Present in the first step of a sequence the backend does not hold, or holds from before a preemption
  // (it starts afresh); absent, the backend must hold the sequence.
  std::optional<SequenceStart> begin{};
  // Only with sample: sequences forked from this one after its step (see SequenceFork).
  std::vector<SequenceFork> forks{};
};

struct StepBatch {
  std::vector<BlockCopy> copies{};         // done before the forward pass, in order
  std::vector<StepSequence> sequences{};   // each id at most once
};

// The bytes a batch's values carry (vectors' payloads, strings), for the benchmarks that measure what a
// step sends.
std::size_t payload_bytes(const StepBatch& batch) noexcept;

// A token's log-probability under the model's own distribution: the softmax of the raw logits (temperature
// 1, before logit bias and penalties), so it does not depend on the sampling parameters.
struct TokenLogprob {
  std::int32_t token = 0;
  float logprob = 0.0f;
};

struct SampledToken {
  SequenceId sequence = 0;
  std::int32_t token = 0;
  // Non-empty: this sequence cannot go on (its grammar allows no token, a grammar limit was met, every
  // token it may pick has a -inf or NaN logit) and `token` is meaningless; the message names the sequence.
  // The other sequences of the step are not affected.
  std::string error{};
  float logprob = 0.0f;              // of `token`; set only when logprobs were asked for (else 0)
  std::vector<TokenLogprob> top{};   // the `logprobs` most likely tokens, most likely first (lower id on ties)
};

// An embedding sequence's pooled vector (ModelConfig::pooling), of the model's embedding length and unit
// L2 norm.
struct PooledEmbedding {
  SequenceId sequence = 0;
  std::vector<float> values{};
};

// What a backend returns for a step: one entry per sequence that asked to sample, in batch order, each
// followed by the entries of its forks, in their order (an embedding sequence's in `embeddings`, the others'
// in `sampled`).
struct StepResult {
  std::vector<SampledToken> sampled{};
  std::vector<PooledEmbedding> embeddings{};
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
  // Forgets the sequence: its table, history and sampler (a later step with this id must start it again).
  // Unknown ids are ignored.
  virtual void release(SequenceId sequence) = 0;
};

// Builds a backend; throws when the files cannot be loaded or the options are out of range.
using BackendFactory = std::function<std::unique_ptr<Backend>(const LoadOptions&)>;

}  // namespace loom::compute
