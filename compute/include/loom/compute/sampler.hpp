// Sampler: turns one position's logits into the next token id, with the usual filters (top-k, top-p,
// min-p), temperature, repetition/frequency/presence penalties, logit bias and a seeded random stream.
// One Sampler per sequence: it owns the sequence's random stream and scratch buffers. It takes the
// request's own proto::SamplingParams (the one form of sampling parameters, carried from the wire or the
// application to here) and keeps the fields it computes with as floats.
//
// Order of the steps (that of the reference GGUF engine's default sampler chain, where our default values
// come from, with the grammar's mask in front as there):
//   0. allowed-token mask      optional (a grammar's TokenMasker fills it): a token whose mask entry is 0
//                              becomes -inf, banned before anything else looks at it, so the penalties and
//                              filters below work on the allowed tokens only and greedy picks among them
//   1. logit bias              added to the raw logits; -inf bans a token
//   2. penalties               repetition (divide positive / multiply negative logits), then frequency and
//                              presence (subtracted), for tokens among the last `repetition_last_n` of history
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
// Cost: no heap allocation per call (buffers are sized in the constructor; the mask is the caller's) and no
// sort of the vocabulary:
// a few linear passes, top-k by a k-entry heap (then sorting k), top-p by a histogram of the probability
// over logit buckets (then sorting the one bucket where the cut falls).
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

#include "loom/proto/sampling_params.hpp"

namespace loom::compute {

// No token can be picked: every logit is NaN or -inf after the mask, bias and penalties (a grammar that
// allows nothing the model gives a finite logit, every allowed token banned by a bias). The sequence cannot
// go on; other sequences can.
class NoTokenError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Sampler {
 public:
  // Throws std::invalid_argument naming the field for values it cannot compute with: temperature negative
  // or not finite, top_k negative, top_p outside (0, 1], min_p outside [0, 1], repetition_penalty not a
  // finite positive number, repetition_last_n below -1, frequency/presence penalties not finite, a bias id
  // outside the vocabulary or a bias that is NaN or +inf (-inf bans the token); and for vocab_size <= 0.
  // The wire parser and the session refuse such requests before they get here; this guards the
  // arithmetic. Without a seed the stream is seeded at random.
  Sampler(proto::SamplingParams params, std::int32_t vocab_size);

  const proto::SamplingParams& params() const noexcept { return params_; }
  std::int32_t vocab_size() const noexcept { return vocab_size_; }

  // Picks the next token. `logits` has vocab_size values and is not modified; `history` is the sequence
  // so far (prompt and generated). `allowed` is empty (no constraint) or has vocab_size entries, 1 for a
  // token that may be picked and 0 for one that may not (step 0 above). NaN logits are never picked; a
  // +inf logit takes all the probability (shared equally among several). Throws std::invalid_argument when
  // logits.size() != vocab_size, allowed.size() is neither 0 nor vocab_size, or a history token the
  // penalties read is outside the vocabulary; NoTokenError when no token can be picked (every logit NaN or
  // -inf after the mask, bias and penalties).
  std::int32_t sample(std::span<const float> logits, std::span<const std::int32_t> history,
                      std::span<const std::uint8_t> allowed = {});

  // How many of a row's best logits decide what sample() picks from the whole row, without a mask:
  //   1          greedy with no bias or penalty: the best one is the token;
  //   top_k + 1  temperature sampling with top-k on and no bias or penalty: top-k keeps the k best, and top-p,
  //              min-p and the draw look at nothing else (one more than k, so that the top-k step runs on
  //              them exactly as on the whole row, and the kept tokens come in its order);
  //   0          the whole row is needed (top-k off, a bias, a penalty).
  // A device that selects the best candidates (best first, the lower id on ties) then sends only those.
  static std::int32_t best_logits_needed(const proto::SamplingParams& params, std::int32_t vocab_size);
  // sample() on a row of which only the best candidates are given (ids and their logits; the row's best, in any
  // order, at least best_logits_needed() > 0 of them finite; -inf and NaN ones are dropped as sample() drops
  // them): the same token, from the same draw, as sample() on the whole row would give. Throws
  // std::invalid_argument when the parameters need the whole row, or the finite candidates are too few, or one
  // is outside the vocabulary or +inf.
  std::int32_t sample_best(std::span<const std::int32_t> ids, std::span<const float> logits);

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
  std::int32_t filter_and_draw(std::size_t count, float max_logit);

  // The parameters in the sampler's own arithmetic (float logits), converted once.
  struct Settings {
    float temperature = 0.0f;
    std::int32_t top_k = 0;
    float top_p = 1.0f;
    float min_p = 0.0f;
    float repetition_penalty = 1.0f;
    std::int32_t penalty_last_n = 0;
    float frequency_penalty = 0.0f;
    float presence_penalty = 0.0f;
    std::vector<std::pair<std::int32_t, float>> logit_bias;
  };
  static Settings settings_of(const proto::SamplingParams& params, std::int32_t vocab_size);

  proto::SamplingParams params_;
  Settings config_;
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
