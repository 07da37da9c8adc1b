// "No heap allocation in the per-token hot path": a decode step, a prefill chunk and a step mixing several
// sequences of a loaded model, and sampling a token, must not call operator new. This binary replaces the global operator new with a
// counting one (counting only while a test asks it to), so the check is of the real code paths, kernels and
// thread pool included.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include "loom/compute/cpu/llama_model.hpp"
#include "loom/compute/cpu/paged_kv_cache.hpp"
#include "loom/compute/model/model_loader.hpp"
#include "loom/compute/model_synth.hpp"
#include "loom/compute/sampler.hpp"

namespace {
std::atomic<bool> counting{false};
std::atomic<long> allocations{0};
}  // namespace

void* operator new(std::size_t size) {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
// The nothrow form too (std::stable_sort's buffer uses it): otherwise a sanitizer's own nothrow new would
// hand out memory that the free() below does not own.
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(size == 0 ? 1 : size);
}
// The pair is replaced together, so free() does match the malloc() above; GCC cannot see that.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace {

using namespace loom::compute;

TEST(HotPathAllocation, DecodeAndPrefillStepsAllocateNothing) {
  // First make sure the counting operator new is the one in effect, or the test could not fail.
  counting = true;
  auto probe = std::make_unique<int>(1);
  counting = false;
  ASSERT_GT(allocations.load(), 0) << "the replacement operator new is not in effect";

  // qwen2 in three types; gemma2 and gemma3 with sliding windows shorter than the steps, soft-caps, GeGLU; a
  // qwen2moe (experts and a shared expert: ExpertFeedForward's scratch).
  const std::pair<Architecture, TensorType> models[] = {
      {Architecture::qwen2, TensorType::f16}, {Architecture::qwen2, TensorType::q8_0}, {Architecture::qwen2, TensorType::q4_0},
      {Architecture::gemma2, TensorType::f16}, {Architecture::gemma3, TensorType::q8_0}, {Architecture::qwen2moe, TensorType::q8_0}};
  for (const auto& [arch, type] : models) {
    SynthSpec spec;
    spec.architecture = arch;
    spec.sliding_window = arch == Architecture::gemma2 || arch == Architecture::gemma3 ? 4 : 0;
    spec.attn_softcap = spec.final_softcap = arch == Architecture::gemma2 ? 5.0f : 0.0f;
    spec.type = type;
    if (arch == Architecture::qwen2moe) {
      spec.experts = 4;
      spec.expert_ffn_dim = 64;
      spec.shared_expert_ffn_dim = 96;
    }
    spec.ffn_dim = 96;
    spec.vocab_size = 64;
    const auto path = (std::filesystem::temp_directory_path() / "loom_test_hot_path.gguf").string();
    write_synthetic_model(spec, path);
    auto loaded = LoadedModel::open(path);
    ThreadPool pool(2);
    LlamaModel model(loaded->config(), loaded->weights(), pool, 8);
    auto cache = model.make_cache();
    std::vector<float> logits(static_cast<std::size_t>(8 * loaded->config().vocab_size));
    const std::vector<std::int32_t> prompt{1, 2, 3, 4, 5, 6, 7, 8};
    // Warm up the one-time lazy tables (the scalar F16 dot builds one on its first use under
    // LOOM_FORCE_SCALAR=1).
    model.forward(prompt, 0, cache, LlamaModel::Logits::all, logits.data());
    model.forward({prompt.data(), 1}, 8, cache, LlamaModel::Logits::last, logits.data());

    allocations = 0;
    counting = true;
    model.forward(prompt, 8, cache, LlamaModel::Logits::all, logits.data());
    for (std::int32_t i = 0; i < 8; ++i) {
      model.forward({&i, 1}, 16 + i, cache, LlamaModel::Logits::last, logits.data());
    }
    counting = false;
    // A step of three sequences in a shared pool (two prefills and a decode, logits staged for all three).
    PagedKvCache pages = model.make_paged_cache();
    const std::vector<std::int32_t> table_a{0, 1}, table_b{2, 3}, table_c{4, 5}, decode{9};
    std::vector<float> more(static_cast<std::size_t>(3 * loaded->config().vocab_size));
    const auto row = [&](int i) { return &more[static_cast<std::size_t>(i * loaded->config().vocab_size)]; };
    const std::vector<LlamaModel::SequenceStep> prefill{{{prompt.data(), 3}, 0, table_c, nullptr, LlamaModel::Logits::none}};
    model.forward(prefill, pages);
    const std::vector<LlamaModel::SequenceStep> mixed{{{prompt.data(), 3}, 0, table_a, row(0), LlamaModel::Logits::last},
                                                      {{prompt.data(), 2}, 0, table_b, row(1), LlamaModel::Logits::last},
                                                      {decode, 3, table_c, row(2), LlamaModel::Logits::last}};
    counting = true;
    model.forward(mixed, pages);
    counting = false;
    EXPECT_EQ(allocations.load(), 0) << "heap allocations during steps of a " << name(type) << " " << to_string(arch) << " model";
    std::filesystem::remove(path);
  }
}

TEST(HotPathAllocation, SamplingATokenAllocatesNothing) {
  // Every path of the sampler: greedy, top-k, and top-p over the whole vocabulary, penalties and bias on,
  // with and without an allowed-token mask.
  constexpr std::int32_t vocab = 5000;
  std::vector<float> logits(vocab);
  for (std::int32_t i = 0; i < vocab; ++i) {
    logits[static_cast<std::size_t>(i)] = static_cast<float>((i * 7919) % 1000) / 200.0f;
  }
  std::vector<std::int32_t> history;
  for (std::int32_t i = 0; i < 100; ++i) history.push_back((i * 31) % vocab);
  std::vector<loom::proto::SamplingParams> configs(3);
  configs[0].temperature = 0.0f;
  configs[2].top_k = 0;
  configs[2].min_p = 0.0f;
  configs[2].top_p = 0.9f;
  for (loom::proto::SamplingParams& config : configs) {
    config.repetition_penalty = 1.1f;
    config.frequency_penalty = 0.1f;
    config.presence_penalty = 0.1f;
    config.logit_bias = {{3, 1.0f}, {4, -std::numeric_limits<double>::infinity()}};
  }
  // A grammar's mask (every third token allowed) takes the masked path of every configuration.
  std::vector<std::uint8_t> mask(vocab);
  for (std::int32_t i = 0; i < vocab; ++i) mask[static_cast<std::size_t>(i)] = i % 3 == 0 ? 1 : 0;
  for (const loom::proto::SamplingParams& config : configs) {
    Sampler sampler(config, vocab);
    allocations = 0;
    counting = true;
    for (int i = 0; i < 8; ++i) sampler.sample(logits, history);
    for (int i = 0; i < 8; ++i) sampler.sample(logits, history, mask);
    counting = false;
    EXPECT_EQ(allocations.load(), 0) << "heap allocations while sampling (temperature " << config.temperature
                                     << ", top_k " << config.top_k << ")";
  }
}

}  // namespace
