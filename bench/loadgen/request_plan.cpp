#include "request_plan.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <string_view>

namespace loom::loadgen {

namespace {

constexpr std::array<std::string_view, 64> kWords = {
    "the",   "of",    "and",  "to",    "in",   "is",    "was",  "for",   "on",    "with",  "as",    "at",  "by",
    "from",  "they",  "we",   "say",   "her",  "she",   "or",   "an",    "will",  "my",    "one",   "all", "would",
    "there", "their", "what", "so",    "up",   "out",   "if",   "about", "who",   "get",   "which", "go",  "me",
    "when",  "make",  "can",  "like",  "time", "no",    "just", "him",   "know",  "take",  "people", "into", "year",
    "your",  "good",  "some", "could", "them", "see",   "other", "than", "then",  "now",   "look",  "only"};

// splitmix64 over (seed, request, purpose): independent streams, the same on every platform.
class Random {
 public:
  Random(std::uint64_t seed, std::uint64_t index, std::uint64_t purpose)
      : state_(seed * 0x9E3779B97F4A7C15ull ^ (index + 1) * 0xD1B54A32D192ED03ull ^ purpose * 0xA24BAED4963EE407ull) {}

  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  // Uniform in [low, high] (the modulo's bias is below 2^-40 for the ranges the options allow).
  std::int64_t between(std::int64_t low, std::int64_t high) {
    const auto span = static_cast<std::uint64_t>(high - low) + 1;
    return low + static_cast<std::int64_t>(next() % span);
  }

 private:
  std::uint64_t state_;
};

enum Purpose : std::uint64_t { kPromptLength = 1, kMaxTokens = 2, kPromptWords = 3, kSharedPrefix = 4 };

std::string make_prompt(std::uint64_t seed, std::uint64_t index, std::int64_t words,
                        std::uint64_t purpose = kPromptWords) {
  Random random(seed, index, purpose);
  std::string prompt;
  prompt.reserve(static_cast<std::size_t>(words) * 6);
  for (std::int64_t i = 0; i < words; ++i) {
    if (i > 0) prompt += ' ';
    prompt += kWords[random.next() % kWords.size()];
  }
  return prompt;
}

}  // namespace

std::int64_t PromptScale::words_for(std::int64_t tokens) const {
  const double words = (static_cast<double>(tokens) - overhead_tokens) / std::max(tokens_per_word, 1e-3);
  return std::max<std::int64_t>(1, std::llround(words));
}

RequestPlan::RequestPlan(const Options& options, PromptScales scales) : options_(options), scales_(scales) {}

RequestSpec RequestPlan::request(std::uint64_t index) const {
  RequestSpec spec;
  spec.index = index;
  Random lengths(options_.seed, index, kPromptLength);
  spec.prompt_tokens = lengths.between(options_.prompt_tokens.low, options_.prompt_tokens.high);
  Random outputs(options_.seed, index, kMaxTokens);
  spec.max_tokens = outputs.between(options_.max_tokens.low, options_.max_tokens.high);
  spec.chat = options_.endpoint == Endpoint::chat || (options_.endpoint == Endpoint::both && index % 2 == 1);
  const PromptScale& scale = scales_.of(spec.chat);
  spec.prompt_words = scale.words_for(spec.prompt_tokens);
  if (options_.shared_prefix_tokens == 0) {
    spec.prompt = make_prompt(options_.seed, index, spec.prompt_words);
    return spec;
  }
  // The same words (request 0's of their own stream) open every prompt; the template's or BOS tokens come
  // before them, so the prefix's words are counted like a prompt's.
  const std::int64_t shared = std::min(scale.words_for(options_.shared_prefix_tokens), spec.prompt_words - 1);
  spec.prompt = shared > 0 ? make_prompt(options_.seed, 0, shared, kSharedPrefix) + ' ' : std::string();
  spec.prompt += make_prompt(options_.seed, index, spec.prompt_words - std::max<std::int64_t>(shared, 0));
  return spec;
}

RequestSpec RequestPlan::probe(std::uint64_t index, std::int64_t words, std::int64_t max_tokens, bool chat) const {
  RequestSpec spec;
  spec.index = index;
  spec.chat = chat;
  spec.prompt_tokens = words;
  spec.prompt_words = words;
  spec.max_tokens = max_tokens;
  // A seed of its own, so that the run's prompts are not already in the server's prefix cache.
  spec.prompt = make_prompt(options_.seed ^ 0x5EEDull, index, words);
  return spec;
}

}  // namespace loom::loadgen
