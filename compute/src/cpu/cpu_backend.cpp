#include "loom/compute/cpu/cpu_backend.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_set>

#include "loom/compute/kv_memory_budget.hpp"
#include "loom/compute/load_cancelled.hpp"
#include "loom/compute/model/gguf_file.hpp"
#include "loom/compute/text/vocabulary.hpp"

namespace loom::compute {

namespace {


void check_options(const LoadOptions& o) {
  const auto out_of_range = [](const std::string& field, std::int64_t value, std::int64_t low, std::int64_t high) {
    if (value < low || value > high) {
      throw std::invalid_argument("load option " + field + " = " + std::to_string(value) + " is outside [" +
                                  std::to_string(low) + ", " + std::to_string(high) + "]");
    }
  };
  if (o.model_path.empty()) throw std::invalid_argument("load option model_path is empty");
  out_of_range("threads", o.threads, 0, LoadOptions::kMaxThreads);
  out_of_range("max_batch_tokens", o.max_batch_tokens, 1, LoadOptions::kMaxBatchTokens);
  out_of_range("kv_tokens", o.kv_tokens, 0, LoadOptions::kMaxKvTokens);
  out_of_range("kv_contexts", o.kv_contexts, 1, LoadOptions::kMaxKvContexts);
  out_of_range("kv.block_size", o.kv.block_size, 1, PagedKvCache::kMaxBlockSize);
  if (o.kv_auto && !(o.kv_auto->share > 0.0 && o.kv_auto->share <= 1.0)) {
    throw std::invalid_argument("load option kv_auto.share = " + std::to_string(o.kv_auto->share) + " is outside (0, 1]");
  }
}

// The model's vocabulary: from the tokenizer file when one is named, else from the GGUF model itself.
Vocabulary load_vocabulary(const LoadOptions& o, const LoadedModel& loaded) {
  if (!o.tokenizer_path.empty()) {
    if (GgufFile::has_magic(o.tokenizer_path)) return Vocabulary::from_gguf(GgufFile::open(o.tokenizer_path));
    return Vocabulary::from_llama2c_tokenizer(o.tokenizer_path, static_cast<std::int32_t>(loaded.config().vocab_size));
  }
  if (loaded.gguf() == nullptr) {
    throw std::invalid_argument(o.model_path + " is a llama2.c checkpoint, which holds no vocabulary: give a tokenizer path");
  }
  return Vocabulary::from_gguf(*loaded.gguf());
}

std::string name(SequenceId sequence) { return "sequence " + std::to_string(sequence); }

// The options with the KV budget kv_auto asks for filled in (and how it was chosen), or as they came when
// a budget or a token count is given, or no kv_auto.
LoadOptions with_kv_sized_from_memory(const LoadOptions& options, const LoadedModel& loaded, std::string& sizing) {
  if (!options.kv_auto || options.kv.budget_bytes > 0 || options.kv_tokens > 0) return options;
  const ModelConfig& config = loaded.config();
  const std::uint64_t block = PagedKvCache::bytes_per_block(config.layers, config.kv_dim(), options.kv.block_size, options.kv.type);
  const KvAutoSize& automatic = *options.kv_auto;
  std::error_code ec;
  const std::uintmax_t file_bytes = std::filesystem::file_size(options.model_path, ec);
  const KvMemoryBudget budget = kv_budget_from_memory(KvMemoryInputs{
      .available_bytes = automatic.available_bytes > 0 ? automatic.available_bytes : available_memory_bytes_or_zero(),
      .weight_bytes = ec ? 0 : static_cast<std::uint64_t>(file_bytes),
      .margin_bytes = automatic.margin_bytes,
      .bytes_per_token = block / static_cast<std::uint64_t>(options.kv.block_size),
      .context_length = config.context_length,
      .share = automatic.share,
      .max_sequences = automatic.max_sequences,
      .max_bytes = automatic.max_bytes,
      .min_bytes = block,
      .contexts_when_unknown = options.kv_contexts});
  LoadOptions sized = options;
  sized.kv.budget_bytes = budget.bytes;
  sizing = budget.reason;
  return sized;
}

}  // namespace

std::unique_ptr<CpuBackend> CpuBackend::load(const LoadOptions& options) {
  check_options(options);
  throw_if_stopped(options.stop, "it began");
  auto loaded = LoadedModel::open(options.model_path);
  throw_if_stopped(options.stop, "the model file was read");
  auto tokenizer = std::make_shared<const Tokenizer>(load_vocabulary(options, *loaded));
  throw_if_stopped(options.stop, "the vocabulary was read");
  if (tokenizer->vocabulary().size() != loaded->config().vocab_size) {
    throw std::invalid_argument("the tokenizer has " + std::to_string(tokenizer->vocabulary().size()) +
                                " tokens, the model " + std::to_string(loaded->config().vocab_size));
  }
  std::string kv_sizing;
  const LoadOptions sized = with_kv_sized_from_memory(options, *loaded, kv_sizing);
  auto backend = std::make_unique<CpuBackend>(std::move(loaded), std::move(tokenizer), sized);
  backend->kv_sizing_ = std::move(kv_sizing);
  return backend;
}

std::unique_ptr<Backend> load_cpu_backend(const LoadOptions& options) { return CpuBackend::load(options); }

CpuBackend::CpuBackend(std::unique_ptr<LoadedModel> loaded,
                           std::shared_ptr<const Tokenizer> tokenizer, const LoadOptions& options)
    : loaded_(std::move(loaded)),
      tokenizer_(std::move(tokenizer)),
      pool_(std::make_unique<ThreadPool>(options.threads > 0 ? options.threads : physical_core_count())),
      model_(std::make_unique<LlamaModel>(loaded_->config(), loaded_->weights(), *pool_, options.max_batch_tokens)),
      cache_(model_->make_paged_cache(options.kv,
                                      options.kv_tokens > 0 ? options.kv_tokens
                                                            : options.kv_contexts * loaded_->config().context_length,
                                      options.stop)),
      constraints_(tokenizer_) {
  const Vocabulary& vocabulary = tokenizer_->vocabulary();  // the ends the session's end_ids() gives
  if (vocabulary.valid(vocabulary.eos)) end_ids_.push_back(vocabulary.eos);
  if (vocabulary.valid(vocabulary.eot) && vocabulary.eot != vocabulary.eos) end_ids_.push_back(vocabulary.eot);
  if (loaded_->gguf() != nullptr) {
    if (auto source = loaded_->gguf()->find_string("tokenizer.chat_template")) chat_template_source_ = std::string(*source);
  }
  hidden_.resize(static_cast<std::size_t>(model_->max_batch() * model_->config().dim));
}

BackendInfo CpuBackend::info() const {
  ModelTensorSummary tensors;
  for (const TensorView& t : loaded_->tensors()) {
    tensors.parameters += static_cast<std::uint64_t>(t.elements());
    tensors.bytes += t.bytes;
    ++tensors.types[std::string(name(t.type))];
  }
  return BackendInfo{.config = model_->config(),
                     .kv_block_size = cache_.block_size(),
                     .kv_blocks = cache_.blocks(),
                     .kv_bytes = cache_.bytes(),
                     .max_batch_tokens = model_->max_batch(),
                     .kv_sizing = kv_sizing_,
                     .chat_template_source = chat_template_source_,
                     .tensors = std::move(tensors)};
}

// Everything is checked before a block is copied or a position written, with the sequence's id in the
// message (the forward pass checks its inputs again, by position in the step).
void CpuBackend::check(const StepBatch& batch) const {
  if (batch.sequences.empty()) throw std::invalid_argument("a step needs at least one sequence");
  const auto vocab = static_cast<std::int32_t>(model_->config().vocab_size);
  const std::int64_t context = model_->config().context_length;
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
    held_.check(s, cache_.block_size());
    if (s.embed) check_embedding(s);
    check_forks(s, seen, vocab);
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
  if (total > model_->max_batch()) {
    throw std::invalid_argument("a step of " + std::to_string(total) + " tokens exceeds the " +
                                std::to_string(model_->max_batch()) + " tokens a step may hold");
  }
  for (const BlockCopy& copy : batch.copies) {
    const std::string what = "block copy " + std::to_string(copy.source) + " -> " + std::to_string(copy.destination);
    check_block(copy.source, what);
    check_block(copy.destination, what);
  }
}

void CpuBackend::check_embedding(const StepSequence& s) const {
  const Pooling pooling = model_->config().pooling;
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
void CpuBackend::check_forks(const StepSequence& s, std::unordered_set<SequenceId>& seen, std::int32_t vocab) const {
  if (s.forks.empty()) return;
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

void CpuBackend::check_block(BlockId block, const std::string& what) const {
  if (block < 0 || block >= cache_.blocks()) {
    throw std::out_of_range(what + ": block " + std::to_string(block) + " is outside the pool of " +
                            std::to_string(cache_.blocks()));
  }
}

// The sampling of sequences that start with parameters other than their kept one's (or have none). Made
// before anything is touched: a sampler that refuses the parameters fails the step with nothing kept. A
// constraint that does not compile fails only its sequence: the Decoding keeps the error for its sample.
std::vector<std::pair<SequenceId, CpuBackend::Decoding>> CpuBackend::new_decodings(const StepBatch& batch) {
  std::vector<std::pair<SequenceId, Decoding>> made;
  const auto vocab = static_cast<std::int32_t>(model_->config().vocab_size);
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

StepResult CpuBackend::run(const StepBatch& batch) {
  check(batch);
  for (auto& [sequence, decoding] : new_decodings(batch)) decodings_.insert_or_assign(sequence, std::move(decoding));
  for (const BlockCopy& copy : batch.copies) cache_.copy_block(copy.source, copy.destination);
  const auto vocab = static_cast<std::size_t>(model_->config().vocab_size);
  const auto sampling = static_cast<std::size_t>(std::count_if(
      batch.sequences.begin(), batch.sequences.end(), [](const StepSequence& s) { return s.sample && !s.embed; }));
  if (logits_.size() < sampling * vocab) logits_.resize(sampling * vocab);
  const auto dim = static_cast<std::size_t>(model_->config().dim);
  steps_.clear();
  std::size_t row = 0;
  std::size_t hidden_rows = 0;
  for (const StepSequence& s : batch.sequences) {
    const HeldSequences::Sequence& held = held_.apply(s);  // node-based map: the table stays put
    if (s.embed && s.begin) pooled_.insert_or_assign(s.sequence, Pooled{std::vector<double>(dim, 0.0), 0});
    const bool logits = s.sample && !s.embed;
    for (const SequenceFork& fork : s.forks) held_.fork(s.sequence, fork);
    LlamaModel::SequenceStep step;
    step.tokens = s.tokens;
    step.start = s.start;
    step.block_table = held.table;
    step.mode = logits ? LlamaModel::Logits::last : LlamaModel::Logits::none;
    step.logits = logits ? logits_.data() + vocab * row++ : nullptr;
    step.hidden = s.embed ? hidden_.data() + dim * hidden_rows : nullptr;
    hidden_rows += s.embed ? s.tokens.size() : 0;
    steps_.push_back(step);
  }
  model_->forward(steps_, cache_);

  StepResult result;
  result.sampled.reserve(sampling);
  row = 0;
  for (std::size_t i = 0; i < batch.sequences.size(); ++i) {
    const StepSequence& s = batch.sequences[i];
    if (s.embed) {
      pool(s, steps_[i].hidden);
      if (s.sample) result.embeddings.push_back(finish_pooling(s.sequence));
      continue;
    }
    if (!s.sample) continue;
    const std::span<const float> logits(logits_.data() + vocab * row++, vocab);
    result.sampled.push_back(sample(s.sequence, logits));
    for (const SequenceFork& fork : s.forks) result.sampled.push_back(sample(fork.sequence, logits));
  }
  return result;
}

// Mean sums every row; cls keeps position 0's; last keeps the latest row.
void CpuBackend::pool(const StepSequence& s, const float* hidden) {
  Pooled& pooled = pooled_.at(s.sequence);
  const std::size_t dim = pooled.sum.size();
  const std::size_t rows = s.tokens.size();
  switch (model_->config().pooling) {
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
PooledEmbedding CpuBackend::finish_pooling(SequenceId id) {
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

SampledToken CpuBackend::sample(SequenceId id, std::span<const float> logits) {
  const HeldSequences::Sequence& held = *held_.find(id);  // applied before the forward pass
  const auto it = decodings_.find(id);                    // made when the sequence started
  if (it == decodings_.end()) throw std::logic_error(name(id) + " has no sampler");
  Decoding& decoding = it->second;
  SampledToken out;
  out.sequence = id;
  if (decoding.error.empty()) {
    try {
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
std::int32_t CpuBackend::sample_constrained(SequenceId id, Decoding& decoding, std::span<const float> logits,
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
