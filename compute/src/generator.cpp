#include "loom/compute/generator.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "loom/compute/text/stop_matcher.hpp"
#include "loom/compute/text/streaming_detokenizer.hpp"

namespace loom::compute {

std::string_view to_string(FinishReason reason) noexcept {
  switch (reason) {
    case FinishReason::eos:
      return "eos";
    case FinishReason::length:
      return "length";
    case FinishReason::stop:
      return "stop";
    case FinishReason::cancelled:
      return "cancelled";
  }
  return "unknown";
}

Generator::Generator(LlamaModel& model, const Tokenizer& tokenizer, std::int64_t context_length,
                     const KvCacheOptions& kv)
    : model_(model),
      tokenizer_(tokenizer),
      cache_(model.make_cache(context_length, kv)),
      logits_(static_cast<std::size_t>(model.config().vocab_size)) {
  if (tokenizer.vocabulary().size() > model.config().vocab_size) {
    throw std::invalid_argument("the tokenizer has " + std::to_string(tokenizer.vocabulary().size()) +
                                " tokens but the model only " + std::to_string(model.config().vocab_size));
  }
}

GenerationResult Generator::generate(std::span<const std::int32_t> prompt, const GenerationSettings& settings,
                                     const TextSink& on_text, const std::atomic<bool>* cancel) {
  using Clock = std::chrono::steady_clock;
  const auto started = Clock::now();
  const std::int64_t context = cache_.context_length();
  const std::int32_t vocab = static_cast<std::int32_t>(model_.config().vocab_size);
  if (prompt.empty()) throw std::invalid_argument("the prompt has no tokens");
  if (static_cast<std::int64_t>(prompt.size()) >= context) {
    throw std::invalid_argument("the prompt has " + std::to_string(prompt.size()) +
                                " tokens; the context holds " + std::to_string(context) +
                                " and one more is needed to generate");
  }
  for (const std::int32_t id : prompt) {
    if (id < 0 || id >= vocab) throw std::invalid_argument("prompt token " + std::to_string(id) + " is outside the vocabulary");
  }
  if (settings.max_tokens < 1) throw std::invalid_argument("max_tokens must be at least 1");
  Sampler sampler(settings.sampler, vocab);  // validates the sampler settings before any work
  StopMatcher stops(settings.stop);

  // Reuse the cached positions that equal the prompt's start; at least the last prompt token is fed again
  // so that there are logits to sample from.
  const auto common = static_cast<std::size_t>(
      std::mismatch(cached_.begin(), cached_.end(), prompt.begin(), prompt.end()).first - cached_.begin());
  const std::size_t reuse = std::min(common, prompt.size() - 1);
  cached_.resize(reuse);

  GenerationResult result;
  result.prompt_tokens = static_cast<std::int32_t>(prompt.size());
  result.cached_tokens = static_cast<std::int32_t>(reuse);
  model_.forward(prompt.subspan(reuse), static_cast<std::int64_t>(reuse), cache_, LlamaModel::Logits::last,
                 logits_.data());
  cached_.insert(cached_.end(), prompt.begin() + static_cast<std::ptrdiff_t>(reuse), prompt.end());

  StreamingDetokenizer detokenizer(tokenizer_);
  bool cancelled = false;
  auto show = [&](std::string_view text) {
    if (text.empty()) return;
    result.text += text;
    if (on_text && !on_text(text)) cancelled = true;
  };
  // History for the penalties: the prompt and what was generated, which is exactly cached_ plus the
  // token just sampled.
  Clock::time_point first_token{};
  result.finish = FinishReason::length;
  bool stopped_by_text = false;
  for (std::int32_t produced = 0; produced < settings.max_tokens; ++produced) {
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) {
      result.finish = FinishReason::cancelled;
      break;
    }
    const std::int32_t token = sampler.sample(logits_, cached_);
    if (produced == 0) first_token = Clock::now();
    result.tokens.push_back(token);
    if (!settings.ignore_eos && tokenizer_.vocabulary().is_end_of_generation(token)) {
      result.finish = FinishReason::eos;
      break;
    }
    if (std::find(settings.stop_token_ids.begin(), settings.stop_token_ids.end(), token) != settings.stop_token_ids.end()) {
      result.finish = FinishReason::stop;
      break;
    }
    const auto matched = stops.push(detokenizer.push(token));
    show(matched.text);
    if (matched.stopped) {
      result.finish = FinishReason::stop;
      stopped_by_text = true;
      break;
    }
    if (cancelled) {
      result.finish = FinishReason::cancelled;
      break;
    }
    // Feed the token unless this was the last one or the context is full.
    if (produced + 1 == settings.max_tokens) break;
    if (static_cast<std::int64_t>(cached_.size()) + 1 > context) break;  // length: no room for its keys
    model_.forward({&token, 1}, static_cast<std::int64_t>(cached_.size()), cache_, LlamaModel::Logits::last,
                   logits_.data());
    cached_.push_back(token);
  }
  if (!stopped_by_text) {
    // Whatever is still held back (an incomplete character, the start of a stop string that never came)
    // belongs to the text.
    const auto tail = stops.push(detokenizer.finish());
    show(tail.text);
    if (tail.stopped) {
      result.finish = FinishReason::stop;
    } else {
      show(stops.finish());
    }
  }
  const auto finished = Clock::now();
  if (result.tokens.empty()) first_token = finished;
  result.prefill_seconds = std::chrono::duration<double>(first_token - started).count();
  result.decode_seconds = std::chrono::duration<double>(finished - first_token).count();
  return result;
}

}  // namespace loom::compute
