// Generator: one conversation's text generation on one model, for the command line and for tests: feeds a
// prompt, samples token after token, turns them into text (UTF-8 safe, stop strings held back until they
// are known not to match) and says why it stopped. The engine's actors do the same work split over the
// scheduler and the session; this is the single-sequence form.
//
// The KV cache (the sequence's own paged pool, kv_cache.hpp) persists between calls: a new prompt that
// starts with tokens already in the cache (the previous turns of a chat) prefills only the rest.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "loom/compute/cpu/kv_cache.hpp"
#include "loom/compute/cpu/llama_model.hpp"
#include "loom/compute/sampler.hpp"
#include "loom/compute/text/tokenizer.hpp"

namespace loom::compute {

enum class FinishReason : std::uint8_t {
  eos,        // the model produced its end-of-sequence (or end-of-turn) token
  length,     // max_tokens reached, or the context is full
  stop,       // a stop string or stop token id matched
  cancelled,  // the caller asked to stop
};
std::string_view to_string(FinishReason reason) noexcept;

struct GenerationSettings {
  std::int32_t max_tokens = 256;
  SamplerConfig sampler;
  std::vector<std::string> stop;             // stop strings: generation ends before them, they are not shown
  std::vector<std::int32_t> stop_token_ids;  // generation ends when one is sampled (not shown)
  bool ignore_eos = false;                   // keep going past EOS/EOT (benchmarks)
};

struct GenerationResult {
  std::string text;                  // what was shown, stop strings excluded
  std::vector<std::int32_t> tokens;  // every sampled token, the final EOS / stop token included
  FinishReason finish = FinishReason::length;
  std::int32_t prompt_tokens = 0;    // positions of the prompt
  std::int32_t cached_tokens = 0;    // of which were already in the cache (not prefilled again)
  double prefill_seconds = 0;        // from the call to the first sampled token
  double decode_seconds = 0;         // from the first sampled token to the end
};

class Generator {
 public:
  // `model` and `tokenizer` must outlive the generator. The cache holds up to `context_length` positions
  // (0: the model's), fewer when `kv` gives a budget that holds fewer (context_length() says how many).
  Generator(LlamaModel& model, const Tokenizer& tokenizer, std::int64_t context_length = 0,
            const KvCacheOptions& kv = {});

  // Called with each piece of text as soon as it is safe to show. Return false to cancel.
  using TextSink = std::function<bool(std::string_view)>;

  // Generates after `prompt` (token ids, BOS included when wanted). Throws std::invalid_argument when the
  // prompt is empty, has an id outside the vocabulary, or does not fit the context. `cancel`, when given,
  // is polled once per token (a signal handler may set it).
  GenerationResult generate(std::span<const std::int32_t> prompt, const GenerationSettings& settings,
                            const TextSink& on_text = {}, const std::atomic<bool>* cancel = nullptr);

  // Forgets the cached positions (the next prompt is prefilled from its start).
  void reset() noexcept { cached_.clear(); }
  std::int64_t context_length() const noexcept { return cache_.context_length(); }

 private:
  LlamaModel& model_;
  const Tokenizer& tokenizer_;
  KvCache cache_;
  std::vector<std::int32_t> cached_;  // the tokens whose keys and values are in cache_, in order
  std::vector<float> logits_;
};

}  // namespace loom::compute
