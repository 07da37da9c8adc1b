#include "loom/compute/step_sampling.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace loom::compute {

namespace {

std::string name(SequenceId sequence) { return "sequence " + std::to_string(sequence); }

}  // namespace

StepSampling::StepSampling(const ModelConfig& config, std::shared_ptr<const Tokenizer> tokenizer, Limits limits)
    : config_(config), tokenizer_(std::move(tokenizer)), limits_(limits), constraints_(tokenizer_) {
  const Vocabulary& vocabulary = tokenizer_->vocabulary();  // the ends the session's end_ids() gives
  if (vocabulary.valid(vocabulary.eos)) end_ids_.push_back(vocabulary.eos);
  if (vocabulary.valid(vocabulary.eot) && vocabulary.eot != vocabulary.eos) end_ids_.push_back(vocabulary.eot);
}

void StepSampling::release(SequenceId sequence) {
  decodings_.erase(sequence);
  pooled_.erase(sequence);
  held_.release(sequence);
}

// Everything is checked before a block is copied or a position written, with the sequence's id in the
// message (the forward pass checks its inputs again, by position in the step).
void StepSampling::check(const StepBatch& batch) const {
  if (batch.sequences.empty()) throw std::invalid_argument("a step needs at least one sequence");
  const auto vocab = static_cast<std::int32_t>(config_.vocab_size);
  const std::int64_t context = config_.context_length;
  std::unordered_set<SequenceId> seen;
  std::int64_t total = 0;
  for (const StepSequence& s : batch.sequences) {
    if (!seen.insert(s.sequence).second) throw std::invalid_argument(name(s.sequence) + " appears twice in the step");
    const auto n = static_cast<std::int64_t>(s.tokens.size());
    if (n == 0) throw std::invalid_argument(name(s.sequence) + " has no tokens");
    if (s.start < 0 || s.start > context - n) {
      throw std::out_of_range(name(s.sequence) + ": positions " + std::to_string(s.start) + " + " + std::to_string(n) +
                              " exceed the context length " + std::to_string(context));
    }
    const auto in_vocabulary = [vocab](std::int32_t token) { return token >= 0 && token < vocab; };
    for (const std::int32_t token : s.tokens) {
      if (!in_vocabulary(token)) {
        throw std::out_of_range(name(s.sequence) + ": token id " + std::to_string(token) + " is outside the vocabulary");
      }
    }
    held_.check(s, limits_.block_size);
    if (s.embed) check_embedding(s);
    check_forks(s, seen);
    for (const BlockId block : s.blocks) check_block(block, name(s.sequence) + ": block table");
    total += n;
    if (!s.begin) continue;
    for (const std::int32_t token : s.begin->prefix) {
      if (!in_vocabulary(token)) {
        throw std::out_of_range(name(s.sequence) + ": prefix token id " + std::to_string(token) +
                                " is outside the vocabulary");
      }
    }
    const std::int32_t logprobs = s.begin->params.logprobs;
    if (logprobs < 0 || logprobs > std::min(proto::SamplingParams::kMaxLogprobs, vocab)) {
      throw std::invalid_argument(name(s.sequence) + ": logprobs " + std::to_string(logprobs) + " is outside [0, " +
                                  std::to_string(std::min(proto::SamplingParams::kMaxLogprobs, vocab)) + "]");
    }
  }
  if (total > limits_.max_batch_tokens) {
    throw std::invalid_argument("a step of " + std::to_string(total) + " tokens exceeds the " +
                                std::to_string(limits_.max_batch_tokens) + " tokens a step may hold");
  }
  for (const BlockCopy& copy : batch.copies) {
    const std::string what = "block copy " + std::to_string(copy.source) + " -> " + std::to_string(copy.destination);
    check_block(copy.source, what);
    check_block(copy.destination, what);
  }
}

void StepSampling::check_embedding(const StepSequence& s) const {
  const Pooling pooling = config_.pooling;
  if (!pools_sequences(pooling)) {
    throw std::invalid_argument(name(s.sequence) + ": this model's pooling type is " + to_string(pooling) +
                                ", which gives no sequence embedding");
  }
  if (s.begin && s.start != 0) {
    throw std::invalid_argument(name(s.sequence) + ": an embedding starts at position 0 (its hidden states are pooled), not " +
                                std::to_string(s.start));
  }
  if (!s.begin && !pooled_.contains(s.sequence)) {
    throw std::invalid_argument(name(s.sequence) + " is not an embedding sequence the backend holds");
  }
}

// Forks only where the sequence samples, each a new id (neither held nor elsewhere in the batch).
void StepSampling::check_forks(const StepSequence& s, std::unordered_set<SequenceId>& seen) const {
  if (s.forks.empty()) return;
  const auto vocab = static_cast<std::int32_t>(config_.vocab_size);
  if (!s.sample) throw std::invalid_argument(name(s.sequence) + ": forks need a step that samples");
  for (const SequenceFork& fork : s.forks) {
    if (held_.find(fork.sequence) != nullptr || !seen.insert(fork.sequence).second) {
      throw std::invalid_argument(name(s.sequence) + ": its fork " + std::to_string(fork.sequence) +
                                  " is not a new sequence");
    }
    const std::int32_t logprobs = fork.params.logprobs;
    if (logprobs < 0 || logprobs > std::min(proto::SamplingParams::kMaxLogprobs, vocab)) {
      throw std::invalid_argument(name(fork.sequence) + ": logprobs " + std::to_string(logprobs) + " is out of range");
    }
  }
}

void StepSampling::check_block(BlockId block, const std::string& what) const {
  if (block < 0 || block >= limits_.blocks) {
    throw std::out_of_range(what + ": block " + std::to_string(block) + " is outside the pool of " +
                            std::to_string(limits_.blocks));
  }
}

// The sampling of sequences that start with parameters other than their kept one's (or have none). Made
// before anything is touched: a sampler that refuses the parameters fails the step with nothing kept. A
// constraint that does not compile fails only its sequence: the Decoding keeps the error for its sample.

std::vector<std::pair<SequenceId, StepSampling::Decoding>> StepSampling::new_decodings(const StepBatch& batch) {
  std::vector<std::pair<SequenceId, Decoding>> made;
  const auto vocab = static_cast<std::int32_t>(config_.vocab_size);
  for (const StepSequence& s : batch.sequences) {
    for (const SequenceFork& fork : s.forks) {
      try {
        made.emplace_back(fork.sequence, Decoding{Sampler(fork.params, vocab), nullptr, std::nullopt, {}});
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(name(fork.sequence) + ": " + e.what());
      }
    }
    if (!s.begin) continue;
    const auto kept = decodings_.find(s.sequence);
    if (kept != decodings_.end() && kept->second.sampler.params() == s.begin->params) continue;
    try {
      made.emplace_back(s.sequence, Decoding{Sampler(s.begin->params, vocab), nullptr, std::nullopt, {}});
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(name(s.sequence) + ": " + e.what());
    }
  }
  for (auto& [sequence, decoding] : made) {
    const auto& constraint = decoding.sampler.params().constraint;
    if (!constraint) continue;
    try {
      grammar::CompiledConstraint compiled = constraints_.get(*constraint);
      decoding.grammar.emplace(compiled.grammar);
      decoding.masker = std::move(compiled.masker);
    } catch (const std::exception& e) {
      decoding.error = name(sequence) + ": the output constraint does not compile: " + e.what();
    }
  }
  return made;
}

std::vector<const HeldSequences::Sequence*> StepSampling::begin(const StepBatch& batch) {
  for (auto& [sequence, decoding] : new_decodings(batch)) decodings_.insert_or_assign(sequence, std::move(decoding));
  std::vector<const HeldSequences::Sequence*> held;
  held.reserve(batch.sequences.size());
  const auto dim = static_cast<std::size_t>(config_.dim);
  for (const StepSequence& s : batch.sequences) {
    held.push_back(&held_.apply(s));  // node-based map: the table stays put
    if (s.embed && s.begin) pooled_.insert_or_assign(s.sequence, Pooled{std::vector<double>(dim, 0.0), 0});
    for (const SequenceFork& fork : s.forks) held_.fork(s.sequence, fork);
  }
  return held;
}

// A constraint and logprobs need the whole row whatever the sampler's own needs.
std::int32_t StepSampling::sequence_best_logits_wanted(SequenceId id) const {
  const auto it = decodings_.find(id);
  if (it == decodings_.end() || !it->second.error.empty()) return 0;
  const proto::SamplingParams& params = it->second.sampler.params();
  if (params.constraint || params.logprobs != 0) return 0;
  return Sampler::best_logits_needed(params, static_cast<std::int32_t>(config_.vocab_size));
}

std::int32_t StepSampling::best_logits_wanted(const StepSequence& s) const {
  std::int32_t wanted = sequence_best_logits_wanted(s.sequence);
  for (const SequenceFork& fork : s.forks) {
    if (wanted == 0) break;
    const std::int32_t fork_wanted = sequence_best_logits_wanted(fork.sequence);
    wanted = fork_wanted == 0 ? 0 : std::max(wanted, fork_wanted);
  }
  return wanted;
}

bool StepSampling::best_logits_suffice(const StepSequence& s, std::span<const float> values) const {
  const std::int32_t wanted = best_logits_wanted(s);
  if (wanted == 0 || values.size() < static_cast<std::size_t>(wanted)) return false;
  return std::all_of(values.begin(), values.begin() + wanted, [](float v) { return std::isfinite(v); });
}

StepResult StepSampling::finish(const StepBatch& batch, std::span<const LogitRow> rows, const float* hidden) {
  StepResult result;
  result.sampled.reserve(rows.size());
  std::size_t row = 0;
  std::size_t hidden_rows = 0;
  const auto dim = static_cast<std::size_t>(config_.dim);
  for (const StepSequence& s : batch.sequences) {
    if (s.embed) {
      pool(s, hidden + hidden_rows * dim);
      hidden_rows += s.tokens.size();
      if (s.sample) result.embeddings.push_back(finish_pooling(s.sequence));
      continue;
    }
    if (!s.sample) continue;
    const LogitRow& logits = rows[row++];
    result.sampled.push_back(sample(s.sequence, logits));
    for (const SequenceFork& fork : s.forks) result.sampled.push_back(sample(fork.sequence, logits));
  }
  return result;
}

void StepSampling::pool(const StepSequence& s, const float* hidden) {
  Pooled& pooled = pooled_.at(s.sequence);
  const std::size_t dim = pooled.sum.size();
  const std::size_t rows = s.tokens.size();
  switch (config_.pooling) {
    case Pooling::mean:
      for (std::size_t r = 0; r < rows; ++r) {
        for (std::size_t i = 0; i < dim; ++i) pooled.sum[i] += hidden[r * dim + i];
      }
      pooled.rows += static_cast<std::int64_t>(rows);
      return;
    case Pooling::cls:
      if (s.start != 0) return;
      std::copy_n(hidden, dim, pooled.sum.begin());
      pooled.rows = 1;
      return;
    case Pooling::last:
      std::copy_n(hidden + (rows - 1) * dim, dim, pooled.sum.begin());
      pooled.rows = 1;
      return;
    case Pooling::none:
    case Pooling::rank:
      return;  // refused by check()
  }
}

// The mean (or the kept row), scaled to unit length; the sequence's pooling is done with.
PooledEmbedding StepSampling::finish_pooling(SequenceId id) {
  const auto it = pooled_.find(id);
  Pooled& pooled = it->second;
  double norm = 0.0;
  for (double& v : pooled.sum) {
    v /= static_cast<double>(std::max<std::int64_t>(1, pooled.rows));
    norm += v * v;
  }
  norm = std::sqrt(norm);
  PooledEmbedding out;
  out.sequence = id;
  out.values.reserve(pooled.sum.size());
  for (const double v : pooled.sum) out.values.push_back(static_cast<float>(norm > 0.0 ? v / norm : 0.0));
  pooled_.erase(it);
  return out;
}

SampledToken StepSampling::sample(SequenceId id, const LogitRow& row) {
  const HeldSequences::Sequence& held = *held_.find(id);  // applied before the forward pass
  const auto it = decodings_.find(id);                    // made when the sequence started
  if (it == decodings_.end()) throw std::logic_error(name(id) + " has no sampler");
  Decoding& decoding = it->second;
  SampledToken out;
  out.sequence = id;
  const std::span<const float> logits = row.logits;
  if (decoding.error.empty()) {
    try {
      if (logits.empty()) {  // best_logits_wanted() > 0: no constraint, no logprobs, nothing to adjust
        out.token = decoding.sampler.sample_best(row.ids, row.values);
        return out;
      }
      out.token = decoding.masker ? sample_constrained(id, decoding, logits, held.tokens)
                                  : decoding.sampler.sample(logits, held.tokens);
    } catch (const NoTokenError& e) {
      decoding.error = name(id) + ": " + e.what();
    }
  }
  if (!decoding.error.empty()) {
    out.error = decoding.error;  // kept: a later sample (should the sequence go on) says the same
    return out;
  }
  if (held.params.logprobs == 0) return out;

  // log softmax(logits)[t] = logit[t] - max - log(sum exp(logit - max)); NaN logits count as impossible.
  float max_logit = -INFINITY;
  for (const float l : logits) {
    if (l > max_logit) max_logit = l;
  }
  double sum = 0.0;
  for (const float l : logits) {
    if (!std::isnan(l)) sum += std::exp(static_cast<double>(l) - max_logit);
  }
  const double log_sum = std::log(sum) + max_logit;
  const auto logprob = [&](std::int32_t token) {
    const float l = logits[static_cast<std::size_t>(token)];
    return std::isnan(l) ? -INFINITY : static_cast<float>(l - log_sum);
  };
  out.logprob = logprob(out.token);
  // The k best by (logit descending, id ascending), NaN last.
  std::vector<std::int32_t> ids(logits.size());
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int32_t>(i);
  const auto better = [&](std::int32_t a, std::int32_t b) {
    const float la = logits[static_cast<std::size_t>(a)], lb = logits[static_cast<std::size_t>(b)];
    if (std::isnan(la) || std::isnan(lb)) return !std::isnan(la) && std::isnan(lb);
    return la != lb ? la > lb : a < b;
  };
  const auto k = static_cast<std::size_t>(held.params.logprobs);
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(), better);
  out.top.reserve(k);
  for (std::size_t i = 0; i < k; ++i) out.top.push_back(TokenLogprob{ids[i], logprob(ids[i])});
  return out;
}

// Mask, sample under it, move the grammar on. The mask depends only on the state, so it is filled here,
// after the forward pass, from the state the last token left. Throws NoTokenError (the caller turns it into
// the sequence's error); a grammar that cannot go on sets decoding.error itself.
std::int32_t StepSampling::sample_constrained(SequenceId id, Decoding& decoding, std::span<const float> logits,
                                            std::span<const std::int32_t> history) {
  grammar::GrammarState& state = *decoding.grammar;
  try {
    decoding.masker->fill(state, end_ids_, mask_);
  } catch (const grammar::GrammarLimitError& e) {
    decoding.error = name(id) + ": the output constraint cannot go on: " + e.what();
    return 0;
  }
  std::int32_t token = 0;
  try {
    token = decoding.sampler.sample(logits, history, mask_);
  } catch (const NoTokenError&) {
    if (std::find(mask_.begin(), mask_.end(), std::uint8_t{1}) == mask_.end()) {
      decoding.error = name(id) + ": no token of the vocabulary can continue the text under the output constraint";
      return 0;
    }
    throw NoTokenError("every token the output constraint allows has a -inf or NaN logit after bias and penalties");
  }
  if (std::find(end_ids_.begin(), end_ids_.end(), token) != end_ids_.end()) return token;  // no bytes; allowed at an end
  try {
    if (!grammar::accept_token(state, decoding.masker->trie(), token)) {
      // The mask allowed it: the masker and the state disagree (a bug), which only this sequence pays for.
      decoding.error = name(id) + ": the output constraint refused token " + std::to_string(token) +
                       " that its mask allowed";
    }
  } catch (const grammar::GrammarLimitError& e) {
    decoding.error = name(id) + ": the output constraint cannot go on: " + e.what();
  }
  return token;
}

}  // namespace loom::compute
