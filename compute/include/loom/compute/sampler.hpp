// Sampler: turns one position's logits into the next token id, with the usual filters (top-k, top-p,
// min-p), temperature, repetition/frequency/presence penalties, logit bias and a seeded random stream.
// One Sampler per sequence: it owns the sequence's random stream and scratch buffers.
//
// Order of the steps (that of the reference GGUF engine's default sampler chain, where our default values
// come from):
//   1. logit bias              added to the raw logits; -inf bans a token
//   2. penalties               repetition (divide positive / multiply negative logits), then frequency and
//                              presence (subtracted), for tokens among the last `penalty_last_n` of history
//   3. temperature == 0        greedy: the highest logit, the lowest id among equal ones; stop here
//   4. top-k                   keep the k highest logits
//   5. top-p                   softmax (at temperature 1) over what top-k kept; keep the smallest set of the
//                              most likely tokens whose probabilities sum to at least p
//   6. min-p                   keep tokens whose probability is at least min_p times the highest one
//   7. temperature             divide the surviving logits by it, softmax, draw
// The filters see the temperature-1 distribution, so temperature changes how the kept tokens share the
// probability but never which tokens are kept (engines that apply temperature first let a high
// temperature widen the top-p set).
//
// Determinism: the same seed, logits and history give the same tokens on every platform. The random
// stream is std::mt19937_64 (its output is fixed by the C++ standard), one 64-bit draw per sampled token
// (none when greedy), turned into a double in [0, 1) from its top 53 bits; ranking breaks ties between
// equal logits by the lower id, so partial selections give the same set on any standard library; the
// draw walks the kept tokens in an order that depends only on the input. Probabilities come from
// std::exp in double: another math library (or glibc's FMA and non-FMA code paths) may differ in the last
// bit, which can only change a draw that lands within about 1e-16 of the boundary between two tokens.
//
// Cost: no heap allocation per call (buffers are sized in the constructor) and no sort of the vocabulary:
// a few linear passes, top-k by a k-entry heap (then sorting k), top-p by a histogram of the probability
// over logit buckets (then sorting the one bucket where the cut falls).
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace loom::compute {

struct SamplerConfig {
  float temperature = 0.8f;          // 0 = greedy (argmax, lowest id on ties)
  std::int32_t top_k = 40;           // 0 = off
  float top_p = 0.95f;               // 1 = off
  float min_p = 0.05f;               // 0 = off
  float repetition_penalty = 1.0f;   // 1 = off; divides positive logits, multiplies negative ones (and 0)
  std::int32_t penalty_last_n = 64;  // how many of the latest tokens the penalties look at; -1 = all
  float frequency_penalty = 0.0f;    // subtracted once per occurrence in that window
  float presence_penalty = 0.0f;     // subtracted once if the token occurs in that window
  // Added to the logit; -inf bans the token. Several entries for one id add up.
  std::vector<std::pair<std::int32_t, float>> logit_bias;
  std::uint64_t seed = 0;
};

class Sampler {
 public:
  // Throws std::invalid_argument naming the field for values out of range: temperature negative or not
  // finite, top_k negative, top_p outside (0, 1], min_p outside [0, 1], repetition_penalty not a finite
  // positive number, penalty_last_n below -1, frequency/presence penalties not finite, a bias id outside
  // the vocabulary or a bias that is NaN or +inf; and for vocab_size <= 0.
  Sampler(SamplerConfig config, std::int32_t vocab_size);

  const SamplerConfig& config() const noexcept { return config_; }
  std::int32_t vocab_size() const noexcept { return vocab_size_; }

  // Picks the next token. `logits` has vocab_size values and is not modified; `history` is the sequence
  // so far (prompt and generated). NaN logits are never picked; a +inf logit takes all the probability
  // (shared equally among several). Throws std::invalid_argument when logits.size() != vocab_size or a
  // history token the penalties read is outside the vocabulary, std::runtime_error when no token can be
  // picked (every logit NaN or -inf after bias and penalties).
  std::int32_t sample(std::span<const float> logits, std::span<const std::int32_t> history);

 private:
  struct Candidate {
    std::int32_t id;
    float logit;
  };

  void apply_penalties(std::span<const std::int32_t> history);
  std::int32_t greedy() const;
  std::size_t keep_top_k(std::size_t count);
  std::size_t keep_top_p(std::size_t count, float max_logit, bool ranked);
  std::size_t keep_min_p(std::size_t count, float max_logit);
  std::int32_t draw(std::size_t count, float max_logit);

  SamplerConfig config_;
  std::int32_t vocab_size_;
  std::mt19937_64 rng_;
  // Every token as (id, adjusted logit); the filters compact the survivors to the front.
  std::vector<Candidate> candidates_;
  // The top-k selection's heap: min(top_k, vocab_size) entries; empty when top-k is off or greedy.
  std::vector<Candidate> top_k_heap_;
  // Occurrences of each token in the penalty window; all zero between calls. Empty when no penalty is on.
  std::vector<std::int32_t> window_counts_;
};

}  // namespace loom::compute
