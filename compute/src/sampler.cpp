#include "loom/compute/sampler.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace loom::compute {

namespace {

[[noreturn]] void bad_param(const char* field, const std::string& rule, double value) {
  throw std::invalid_argument("sampling parameter " + std::string(field) + " " + rule + " (got " +
                              std::to_string(value) + ")");
}

void validate(const proto::SamplingParams& p, std::int32_t vocab_size) {
  if (vocab_size <= 0) {
    throw std::invalid_argument("Sampler: vocab_size must be > 0 (got " + std::to_string(vocab_size) + ")");
  }
  if (!std::isfinite(p.temperature) || p.temperature < 0.0) {
    bad_param("temperature", "must be a finite number >= 0", p.temperature);
  }
  if (p.top_k < 0) bad_param("top_k", "must be >= 0 (0 = off)", p.top_k);
  if (!(p.top_p > 0.0 && p.top_p <= 1.0)) bad_param("top_p", "must lie in (0, 1] (1 = off)", p.top_p);
  if (!(p.min_p >= 0.0 && p.min_p <= 1.0)) bad_param("min_p", "must lie in [0, 1] (0 = off)", p.min_p);
  if (!std::isfinite(p.repetition_penalty) || p.repetition_penalty <= 0.0) {
    bad_param("repetition_penalty", "must be a finite number > 0 (1 = off)", p.repetition_penalty);
  }
  if (p.repetition_last_n < -1) {
    bad_param("repetition_last_n", "must be >= -1 (-1 = the whole history)", p.repetition_last_n);
  }
  if (!std::isfinite(p.frequency_penalty)) bad_param("frequency_penalty", "must be finite", p.frequency_penalty);
  if (!std::isfinite(p.presence_penalty)) bad_param("presence_penalty", "must be finite", p.presence_penalty);
  for (const auto& [id, bias] : p.logit_bias) {
    if (id < 0 || id >= vocab_size) {
      throw std::invalid_argument("sampling parameter logit_bias: token id " + std::to_string(id) +
                                  " is outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
    }
    if (std::isnan(bias) || bias == std::numeric_limits<double>::infinity()) {
      throw std::invalid_argument("sampling parameter logit_bias: the bias of token " + std::to_string(id) +
                                  " must be a finite number or -inf (got " + std::to_string(bias) + ")");
    }
  }
}

[[noreturn]] void no_pickable_token() {
  throw NoTokenError(
      "Sampler::sample: no token can be picked (every logit is -inf or NaN after the mask, bias and penalties)");
}

template <class Settings>
bool penalties_on(const Settings& config) {
  return config.penalty_last_n != 0 && (config.repetition_penalty != 1.0f ||
                                        config.frequency_penalty != 0.0f || config.presence_penalty != 0.0f);
}

// A double in [0, 1) from the top 53 bits of one 64-bit output: every double it can return is equally
// likely, and the conversion is exact, so it is the same on every platform (unlike
// std::uniform_real_distribution, whose algorithm each standard library chooses).
double uniform_unit(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// The ranking every selection uses: higher logit first, lower id first among equal logits. It is a strict
// total order over distinct ids, so whatever algorithm a standard library's heap and sort functions use,
// they end with the same elements in the same order.
struct RanksBefore {
  template <class C>
  bool operator()(const C& a, const C& b) const {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  }
};
constexpr RanksBefore ranks_before;

// Moves the elements satisfying `keep` to the front, in their order; returns how many there are. Written
// without a branch on `keep` (a rejected element is copied and then overwritten), which a 50/50 filter
// over a large vocabulary would mispredict half the time.
template <class C, class Keep>
std::size_t compact(C* begin, std::size_t count, Keep keep) {
  std::size_t kept = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const C element = begin[i];
    begin[kept] = element;
    kept += keep(element) ? 1 : 0;
  }
  return kept;
}

}  // namespace

Sampler::Settings Sampler::settings_of(const proto::SamplingParams& p, std::int32_t vocab_size) {
  validate(p, vocab_size);
  Settings s;
  s.temperature = static_cast<float>(p.temperature);
  s.top_k = p.top_k;
  s.top_p = static_cast<float>(p.top_p);
  s.min_p = static_cast<float>(p.min_p);
  s.repetition_penalty = static_cast<float>(p.repetition_penalty);
  s.penalty_last_n = p.repetition_last_n;
  s.frequency_penalty = static_cast<float>(p.frequency_penalty);
  s.presence_penalty = static_cast<float>(p.presence_penalty);
  s.logit_bias.reserve(p.logit_bias.size());
  for (const auto& [id, bias] : p.logit_bias) s.logit_bias.emplace_back(id, static_cast<float>(bias));
  return s;
}

Sampler::Sampler(proto::SamplingParams params, std::int32_t vocab_size)
    : params_(std::move(params)), config_(settings_of(params_, vocab_size)), vocab_size_(vocab_size) {
  // An absent seed asks for a different stream each time.
  rng_.seed(params_.seed ? *params_.seed
                         : (static_cast<std::uint64_t>(std::random_device{}()) << 32 | std::random_device{}()));
  candidates_.resize(static_cast<std::size_t>(vocab_size_));
  if (config_.temperature > 0.0f && config_.top_k > 0) {
    top_k_heap_.resize(static_cast<std::size_t>(std::min(config_.top_k, vocab_size_)));
  }
  if (penalties_on(config_)) window_counts_.assign(static_cast<std::size_t>(vocab_size_), 0);
}

void Sampler::apply_penalties(std::span<const std::int32_t> history) {
  if (window_counts_.empty()) return;
  const std::size_t window_size =
      config_.penalty_last_n < 0 ? history.size()
                                 : std::min(history.size(), static_cast<std::size_t>(config_.penalty_last_n));
  const std::span<const std::int32_t> window = history.last(window_size);
  for (std::size_t i = 0; i < window.size(); ++i) {
    const std::int32_t token = window[i];
    if (token < 0 || token >= vocab_size_) {
      // Undo the counting so far: the counts must be all zero for the next call.
      for (std::size_t j = 0; j < i; ++j) window_counts_[static_cast<std::size_t>(window[j])] = 0;
      throw std::invalid_argument("Sampler::sample: history token " + std::to_string(token) +
                                  " at position " + std::to_string(history.size() - window_size + i) +
                                  " is outside the vocabulary [0, " + std::to_string(vocab_size_) + ")");
    }
    ++window_counts_[static_cast<std::size_t>(token)];
  }
  // Each distinct token once: the first visit applies its penalty and resets its count.
  for (const std::int32_t token : window) {
    std::int32_t& count = window_counts_[static_cast<std::size_t>(token)];
    if (count == 0) continue;
    float& logit = candidates_[static_cast<std::size_t>(token)].logit;
    if (logit > 0.0f) {
      logit /= config_.repetition_penalty;
    } else {
      logit *= config_.repetition_penalty;
    }
    logit -= static_cast<float>(count) * config_.frequency_penalty + config_.presence_penalty;
    count = 0;
  }
}

std::int32_t Sampler::greedy() const {
  std::int32_t best = -1;
  float best_logit = -std::numeric_limits<float>::infinity();
  for (const Candidate& c : candidates_) {
    if (c.logit > best_logit) {  // strict: the lowest id wins a tie; NaN never compares greater
      best = c.id;
      best_logit = c.logit;
    }
  }
  if (best < 0) no_pickable_token();
  return best;
}

std::size_t Sampler::keep_top_k(std::size_t count) {
  // One pass keeping the k best seen so far in a heap whose front is the worst of them: most tokens lose
  // to the front in one comparison, so this costs little more than reading the candidates. The heap then
  // holds exactly the k best (the ranking is a total order), sorted best first.
  const std::size_t k = top_k_heap_.size();
  Candidate* heap = top_k_heap_.data();
  std::copy_n(candidates_.data(), k, heap);
  std::make_heap(heap, heap + k, ranks_before);
  for (std::size_t i = k; i < count; ++i) {
    if (ranks_before(candidates_[i], heap[0])) {
      std::pop_heap(heap, heap + k, ranks_before);
      heap[k - 1] = candidates_[i];
      std::push_heap(heap, heap + k, ranks_before);
    }
  }
  std::sort_heap(heap, heap + k, ranks_before);
  std::copy_n(heap, k, candidates_.data());
  return k;
}

std::size_t Sampler::keep_top_p(std::size_t count, float max_logit, bool ranked) {
  Candidate* begin = candidates_.data();
  const double max = max_logit;
  const auto weight = [max](const Candidate& c) { return std::exp(static_cast<double>(c.logit) - max); };
  const double p = config_.top_p;
  if (ranked) {
    double mass = 0.0;
    for (std::size_t i = 0; i < count; ++i) mass += weight(begin[i]);
    double cumulative = 0.0;
    for (std::size_t i = 0; i < count; ++i) {
      cumulative += weight(begin[i]);
      if (cumulative >= p * mass) return i + 1;
    }
    return count;
  }

  // Unranked (top-k did not run): rank only the tokens near the cut. One pass spreads the probability
  // over buckets of logit below the maximum; the bucket in which the running mass reaches p is the only
  // one whose tokens need sorting. The rearrangements below are our own loops, so the order left for the
  // draw is the same on every platform.
  constexpr std::size_t bucket_count = 256;
  constexpr float buckets_per_nat = 16.0f;  // the last bucket takes everything 16 nats or more below
  const auto depth = [max_logit](const Candidate& c) { return (max_logit - c.logit) * buckets_per_nat; };
  std::array<double, bucket_count> bucket_mass{};
  double mass = 0.0;
  for (std::size_t i = 0; i < count; ++i) {
    const double w = weight(begin[i]);
    bucket_mass[static_cast<std::size_t>(std::min(depth(begin[i]), static_cast<float>(bucket_count - 1)))] +=
        w;
    mass += w;
  }
  std::size_t cut_bucket = 0;
  double mass_before = 0.0;  // of the buckets before cut_bucket
  while (cut_bucket + 1 < bucket_count && mass_before + bucket_mass[cut_bucket] < p * mass) {
    mass_before += bucket_mass[cut_bucket++];
  }
  // Bucket membership as comparisons of the depth (bucket <= b  <=>  depth < b + 1), which compile to
  // flag arithmetic, not to branches that a large vocabulary would mispredict.
  const float end_of_cut = static_cast<float>(cut_bucket + 1);
  const float start_of_cut = static_cast<float>(cut_bucket);
  const std::size_t kept =
      cut_bucket + 1 < bucket_count
          ? compact(begin, count, [&](const Candidate& c) { return depth(c) < end_of_cut; })
          : count;
  // [0, whole): the buckets before the cut one, in id order; [whole, i): the cut bucket. The swap is
  // unconditional: when begin[i] is in the cut bucket it trades places with another of that bucket.
  std::size_t whole = 0;
  for (std::size_t i = 0; i < kept; ++i) {
    const bool before_cut = depth(begin[i]) < start_of_cut;
    std::swap(begin[i], begin[whole]);
    whole += before_cut ? 1 : 0;
  }
  std::sort(begin + whole, begin + kept, ranks_before);
  double cumulative = mass_before;
  for (std::size_t i = whole; i < kept; ++i) {
    cumulative += weight(begin[i]);
    if (cumulative >= p * mass) return i + 1;
  }
  return kept;  // rounding left the sum just short of p * mass: keep the whole bucket
}

std::size_t Sampler::keep_min_p(std::size_t count, float max_logit) {
  // p_i >= min_p * p_max  <=>  logit_i - max_logit >= log(min_p), whatever the normalisation.
  const double log_min_p = std::log(static_cast<double>(config_.min_p));
  return compact(candidates_.data(), count,
                 [&](const Candidate& c) { return static_cast<double>(c.logit) - max_logit >= log_min_p; });
}

std::int32_t Sampler::draw(std::size_t count, float max_logit) {
  // The weights replace the logits (no longer needed), so the walk adds up exactly what the total did.
  const double temperature = config_.temperature;
  double total = 0.0;
  for (std::size_t i = 0; i < count; ++i) {
    Candidate& c = candidates_[i];
    c.logit = static_cast<float>(std::exp((static_cast<double>(c.logit) - max_logit) / temperature));
    total += c.logit;
  }
  const double target = uniform_unit(rng_) * total;
  double cumulative = 0.0;
  for (std::size_t i = 0; i < count; ++i) {
    cumulative += candidates_[i].logit;
    if (cumulative > target) return candidates_[i].id;
  }
  return candidates_[count - 1].id;  // only if rounding put the target at the total
}

std::int32_t Sampler::sample(std::span<const float> logits, std::span<const std::int32_t> history,
                             std::span<const std::uint8_t> allowed) {
  if (logits.size() != candidates_.size()) {
    throw std::invalid_argument("Sampler::sample: got " + std::to_string(logits.size()) +
                                " logits for a vocabulary of " + std::to_string(vocab_size_));
  }
  if (!allowed.empty() && allowed.size() != candidates_.size()) {
    throw std::invalid_argument("Sampler::sample: got a mask of " + std::to_string(allowed.size()) +
                                " entries for a vocabulary of " + std::to_string(vocab_size_));
  }
  constexpr float inf = std::numeric_limits<float>::infinity();
  if (allowed.empty()) {
    for (std::size_t i = 0; i < logits.size(); ++i) candidates_[i] = {static_cast<std::int32_t>(i), logits[i]};
  } else {
    // A select, not a branch: a grammar's mask is often half allowed in no pattern a predictor could learn.
    for (std::size_t i = 0; i < logits.size(); ++i) {
      candidates_[i] = {static_cast<std::int32_t>(i), allowed[i] != 0 ? logits[i] : -inf};
    }
  }
  for (const auto& [id, bias] : config_.logit_bias) candidates_[static_cast<std::size_t>(id)].logit += bias;
  apply_penalties(history);
  if (config_.temperature == 0.0f) return greedy();

  float max_logit = -inf;
  std::size_t count = 0;
  for (const Candidate& c : candidates_) {
    if (c.logit > -inf) {  // drops NaN too
      candidates_[count++] = c;
      max_logit = std::max(max_logit, c.logit);
    }
  }
  if (count == 0) no_pickable_token();
  if (max_logit == inf) {
    // An infinite logit has all the probability; several share it equally.
    count = compact(candidates_.data(), count, [](const Candidate& c) { return c.logit == inf; });
    for (std::size_t i = 0; i < count; ++i) candidates_[i].logit = 0.0f;
    max_logit = 0.0f;
  }

  return filter_and_draw(count, max_logit);
}

// Steps 4-7 on candidates [0, count), all finite, of which max_logit is the highest.
std::int32_t Sampler::filter_and_draw(std::size_t count, float max_logit) {
  bool ranked = false;  // candidates [0, count) sorted best first; otherwise in id order
  if (!top_k_heap_.empty() && top_k_heap_.size() < count) {
    count = keep_top_k(count);
    ranked = true;
  }
  if (config_.top_p < 1.0f) count = keep_top_p(count, max_logit, ranked);
  if (config_.min_p > 0.0f) count = keep_min_p(count, max_logit);
  return draw(count, max_logit);
}

std::int32_t Sampler::best_logits_needed(const proto::SamplingParams& p, std::int32_t vocab_size) {
  if (!p.logit_bias.empty() || p.repetition_penalty != 1.0 || p.frequency_penalty != 0.0 ||
      p.presence_penalty != 0.0) {
    return 0;
  }
  if (p.greedy()) return 1;
  if (p.top_k <= 0 || p.top_k >= vocab_size) return 0;  // top-k off (or keeping everything): every token counts
  return p.top_k + 1;
}

// With more than k candidates, all finite, the whole row's path keeps the same k best in the same order: those k
// are the row's k best (the ranking is a total order), its maximum is the first candidate, and after top-k
// nothing looks at the other tokens. So the candidates go through the same steps as the row's survivors.
std::int32_t Sampler::sample_best(std::span<const std::int32_t> ids, std::span<const float> logits) {
  const std::int32_t needed = best_logits_needed(params_, vocab_size_);
  if (needed == 0) throw std::invalid_argument("Sampler::sample_best: these sampling parameters need the whole row");
  if (ids.size() != logits.size() || ids.size() > candidates_.size()) {
    throw std::invalid_argument("Sampler::sample_best: " + std::to_string(ids.size()) + " candidates with " +
                                std::to_string(logits.size()) + " logits");
  }
  // -inf and NaN candidates are dropped, as sample() drops such tokens; +inf is left to the whole row's rules.
  std::size_t count = 0;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size_ || logits[i] == std::numeric_limits<float>::infinity()) {
      throw std::invalid_argument("Sampler::sample_best: candidate " + std::to_string(i) + " (token " +
                                  std::to_string(ids[i]) + ") is outside the vocabulary or +inf");
    }
    if (logits[i] > -std::numeric_limits<float>::infinity()) candidates_[count++] = {ids[i], logits[i]};
  }
  if (count < static_cast<std::size_t>(needed)) {
    throw std::invalid_argument("Sampler::sample_best: " + std::to_string(count) + " finite candidates where " +
                                std::to_string(needed) + " are needed");
  }
  // Not trusting the order: the best by the ranking (for greedy) and the maximum cost k comparisons.
  const Candidate best =
      *std::min_element(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(count), ranks_before);
  if (config_.temperature == 0.0f) return best.id;
  return filter_and_draw(count, best.logit);
}

}  // namespace loom::compute
