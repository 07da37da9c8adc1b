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

#include "loom/compute/backend_loading.hpp"
#include "loom/compute/load_cancelled.hpp"
#include "loom/compute/model/gguf_file.hpp"

namespace loom::compute {


std::unique_ptr<CpuBackend> CpuBackend::load(const LoadOptions& options) {
  check_load_options(options);
  throw_if_stopped(options.stop, "it began");
  auto loaded = LoadedModel::open(options.model_path);
  throw_if_stopped(options.stop, "the model file was read");
  auto tokenizer = std::make_shared<const Tokenizer>(load_vocabulary(options, *loaded));
  throw_if_stopped(options.stop, "the vocabulary was read");
  std::string kv_sizing;
  std::error_code ec;  // the file is memory-mapped: its pages stay resident beside the KV storage
  const std::uintmax_t file_bytes = std::filesystem::file_size(options.model_path, ec);
  const LoadOptions sized = with_kv_sized_from_memory(
      options, loaded->config(), KvMemoryPlace{.weight_bytes = ec ? 0 : static_cast<std::uint64_t>(file_bytes)}, kv_sizing);
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
      sampling_(loaded_->config(), tokenizer_,
                StepSampling::Limits{.blocks = cache_.blocks(), .block_size = cache_.block_size(),
                                     .max_batch_tokens = model_->max_batch()}) {
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
                     .tensors = std::move(tensors),
                     .device = "cpu"};
}

StepResult CpuBackend::run(const StepBatch& batch) {
  sampling_.check(batch);
  const std::vector<const HeldSequences::Sequence*> held = sampling_.begin(batch);
  for (const BlockCopy& copy : batch.copies) cache_.copy_block(copy.source, copy.destination);
  const auto vocab = static_cast<std::size_t>(model_->config().vocab_size);
  const auto sampling = static_cast<std::size_t>(std::count_if(
      batch.sequences.begin(), batch.sequences.end(), [](const StepSequence& s) { return s.sample && !s.embed; }));
  if (logits_.size() < sampling * vocab) logits_.resize(sampling * vocab);
  const auto dim = static_cast<std::size_t>(model_->config().dim);
  steps_.clear();
  rows_.clear();
  std::size_t hidden_rows = 0;
  for (std::size_t i = 0; i < batch.sequences.size(); ++i) {
    const StepSequence& s = batch.sequences[i];
    const bool logits = s.sample && !s.embed;
    LlamaModel::SequenceStep step;
    step.tokens = s.tokens;
    step.start = s.start;
    step.block_table = held[i]->table;
    step.mode = logits ? LlamaModel::Logits::last : LlamaModel::Logits::none;
    step.logits = logits ? logits_.data() + vocab * rows_.size() : nullptr;
    if (logits) rows_.push_back(StepSampling::LogitRow{.logits = std::span<const float>(step.logits, vocab)});
    step.hidden = s.embed ? hidden_.data() + dim * hidden_rows : nullptr;
    hidden_rows += s.embed ? s.tokens.size() : 0;
    steps_.push_back(step);
  }
  model_->forward(steps_, cache_);
  return sampling_.finish(batch, rows_, hidden_.data());
}

}  // namespace loom::compute
