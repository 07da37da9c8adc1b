// Attention and the forward pass through block tables: paging changes where keys and values live, never the
// arithmetic, so logits through scattered blocks of any size equal the contiguous layout's bit for bit; a step
// that mixes sequences of different lengths gives each the logits it gets alone; a fixed budget holds as many
// sequences as their lengths need; F32 storage is close to F16; bad tables are refused before any write.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "loom/compute/cpu/attention.hpp"
#include "loom/compute/cpu/llama_model.hpp"
#include "loom/compute/cpu/paged_kv_cache.hpp"
#include "loom/compute/model/half.hpp"
#include "loom/compute/model/model_loader.hpp"
#include "loom/compute/model_synth.hpp"
#include "test_files.hpp"

namespace loom::compute {
namespace {

using testing::shared_path;
using Step = LlamaModel::SequenceStep;

std::uint32_t bits(float f) { return std::bit_cast<std::uint32_t>(f); }

// `count` distinct block ids of a pool of `pool` blocks, in random order.
std::vector<std::int32_t> scattered_blocks(std::int64_t count, std::int64_t pool, std::mt19937& rng) {
  std::vector<std::int32_t> ids(static_cast<std::size_t>(pool));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  ids.resize(static_cast<std::size_t>(count));
  return ids;
}

// ---- one head ----

struct HeadCase {
  std::int64_t block_size;
  SumOrder order;
  TensorType type;
};

class PagedHead : public ::testing::TestWithParam<HeadCase> {};

TEST_P(PagedHead, ScatteredBlocksGiveTheContiguousBits) {
  const auto [block_size, order, type] = GetParam();
  const std::int64_t positions = 45, head_dim = 32;
  const std::size_t stride = 2 * head_dim;  // two KV heads per row; we attend with the second
  const std::size_t element = type == TensorType::f16 ? 2 : 4;
  std::mt19937 rng(static_cast<unsigned>(block_size * 7 + static_cast<int>(order)));
  std::normal_distribution<float> g(0.0f, 1.0f);
  auto make_rows = [&](std::int64_t rows) {
    std::vector<std::byte> storage(static_cast<std::size_t>(rows) * stride * element);
    for (std::size_t i = 0; i < storage.size() / element; ++i) {
      const float x = g(rng);
      if (type == TensorType::f16) {
        const std::uint16_t h = float_to_half(x);
        std::memcpy(&storage[i * 2], &h, 2);
      } else {
        std::memcpy(&storage[i * 4], &x, 4);
      }
    }
    return storage;
  };
  const auto keys = make_rows(positions), values = make_rows(positions);
  std::vector<float> query(static_cast<std::size_t>(head_dim));
  for (auto& q : query) q = g(rng);

  // The paged copy: position p's row goes to slot p % B of block table[p / B]; the other blocks of the pool
  // hold other random rows, which a wrong address would pick up.
  const std::int64_t needed = (positions + block_size - 1) / block_size;
  const auto table = scattered_blocks(needed, 3 * needed, rng);
  auto paged_keys = make_rows(3 * needed * block_size), paged_values = make_rows(3 * needed * block_size);
  const std::size_t row_bytes = stride * element;
  for (std::int64_t p = 0; p < positions; ++p) {
    const auto row = static_cast<std::size_t>(table[static_cast<std::size_t>(p / block_size)] * block_size + p % block_size);
    std::memcpy(&paged_keys[row * row_bytes], &keys[static_cast<std::size_t>(p) * row_bytes], row_bytes);
    std::memcpy(&paged_values[row * row_bytes], &values[static_cast<std::size_t>(p) * row_bytes], row_bytes);
  }

  for (KernelPath path : {KernelPath::scalar, KernelPath::avx2}) {
    if (!kernel_path_supported(path)) continue;
    std::vector<float> scratch(attention_scratch_floats(positions, head_dim));
    std::vector<float> contiguous_out(static_cast<std::size_t>(head_dim)), paged_out(contiguous_out.size());
    HeadAttention head;
    head.query = query.data();
    head.keys = keys.data() + head_dim * element;
    head.values = values.data() + head_dim * element;
    head.kv_type = type;
    head.stride = stride;
    head.positions = positions;
    head.head_dim = head_dim;
    head.scale = 0.25f;
    head.order = order;
    head.scores = scratch.data();
    head.out = contiguous_out.data();
    attend(head, path);
    head.keys = paged_keys.data() + head_dim * element;
    head.values = paged_values.data() + head_dim * element;
    head.block_table = table.data();
    head.block_size = block_size;
    head.out = paged_out.data();
    attend(head, path);
    for (std::int64_t d = 0; d < head_dim; ++d) {
      ASSERT_EQ(bits(contiguous_out[static_cast<std::size_t>(d)]), bits(paged_out[static_cast<std::size_t>(d)]))
          << "dim " << d << " on the " << (path == KernelPath::scalar ? "scalar" : "AVX2") << " path";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Blocks, PagedHead,
                         ::testing::Values(HeadCase{1, SumOrder::vector_dot, TensorType::f16},
                                           HeadCase{1, SumOrder::tiled, TensorType::f16},
                                           HeadCase{3, SumOrder::tiled, TensorType::f16},
                                           HeadCase{16, SumOrder::vector_dot, TensorType::f16},
                                           HeadCase{16, SumOrder::tiled, TensorType::f16},
                                           HeadCase{32, SumOrder::tiled, TensorType::f16},
                                           HeadCase{1, SumOrder::vector_dot, TensorType::f32},
                                           HeadCase{16, SumOrder::tiled, TensorType::f32}),
                         [](const auto& tested) {
                           return "b" + std::to_string(tested.param.block_size) +
                                  (tested.param.order == SumOrder::tiled ? "_tiled_" : "_vector_dot_") +
                                  std::string(name(tested.param.type));
                         });

TEST(PagedHead, F32AndScalarPathAgreeBitForBitWithAvx2) {
  if (!kernel_path_supported(KernelPath::avx2)) GTEST_SKIP() << "this CPU has no AVX2+FMA+F16C";
  const std::int64_t positions = 21, head_dim = 24;
  std::mt19937 rng(5);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> keys(static_cast<std::size_t>(positions * head_dim)), values(keys.size()), query(24);
  for (auto* v : {&keys, &values, &query}) {
    for (auto& x : *v) x = g(rng);
  }
  for (SumOrder order : {SumOrder::vector_dot, SumOrder::tiled}) {
    std::vector<float> scratch(attention_scratch_floats(positions, head_dim)), a(24), b(24);
    HeadAttention head;
    head.query = query.data();
    head.keys = keys.data();
    head.values = values.data();
    head.kv_type = TensorType::f32;
    head.stride = static_cast<std::size_t>(head_dim);
    head.positions = positions;
    head.head_dim = head_dim;
    head.order = order;
    head.scores = scratch.data();
    head.out = a.data();
    attend(head, KernelPath::scalar);
    head.out = b.data();
    attend(head, KernelPath::avx2);
    for (std::size_t d = 0; d < a.size(); ++d) ASSERT_EQ(bits(a[d]), bits(b[d])) << "dim " << d;
  }
}

// ---- the forward pass ----

// Feeds `prompt` as one step (all its logits), then each of `decode` as its own step (its logits), to one
// sequence whose positions live in `table`; returns every row of logits in order.
std::vector<float> run_sequence(LlamaModel& model, PagedKvCache& cache, std::span<const std::int32_t> table,
                                const std::vector<std::int32_t>& prompt, const std::vector<std::int32_t>& decode) {
  const auto vocab = static_cast<std::size_t>(model.config().vocab_size);
  std::vector<float> logits((prompt.size() + decode.size()) * vocab);
  Step step{prompt, 0, table, logits.data(), LlamaModel::Logits::all};
  model.forward({&step, 1}, cache);
  for (std::size_t i = 0; i < decode.size(); ++i) {
    Step next{{&decode[i], 1}, static_cast<std::int64_t>(prompt.size() + i), table,
              &logits[(prompt.size() + i) * vocab], LlamaModel::Logits::last};
    model.forward({&next, 1}, cache);
  }
  return logits;
}

void expect_same_bits(const std::vector<float>& want, const std::vector<float>& got, const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (std::size_t i = 0; i < want.size(); ++i) ASSERT_EQ(bits(want[i]), bits(got[i])) << what << ", logit " << i;
}

std::string temp_model(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("loom_test_paged_" + name + ".gguf")).string();
}

// A small qwen2 (biases, grouped KV heads) with Q8_0 weights, whose products sum in one order whatever the
// batch (vec_dot.hpp), so steps of different shapes can be compared bit for bit.
std::unique_ptr<LoadedModel> synth_q8_0(const std::string& name, std::int64_t context = 256) {
  SynthSpec spec;
  spec.architecture = Architecture::qwen2;
  spec.type = TensorType::q8_0;
  spec.ffn_dim = 96;
  spec.heads = 4;
  spec.kv_heads = 2;
  spec.vocab_size = 64;
  spec.context_length = context;
  spec.seed = 11;
  const std::string path = temp_model(name);
  write_synthetic_model(spec, path);
  auto loaded = LoadedModel::open(path);
  std::filesystem::remove(path);  // mapped: the mapping stays valid
  return loaded;
}

struct PagingCase {
  std::string model;  // "aidreams" or "synth"
  std::int64_t block_size;
};

class PagedForward : public ::testing::TestWithParam<PagingCase> {};

TEST_P(PagedForward, ScatteredBlocksGiveTheContiguousLogitsBitForBit) {
  const auto& param = GetParam();
  std::unique_ptr<LoadedModel> loaded;
  if (param.model == "aidreams") {
    REQUIRE_SHARED_FILE(shared_path("models/aidreams260K.gguf"));
    loaded = LoadedModel::open(shared_path("models/aidreams260K.gguf"));
  } else {
    loaded = synth_q8_0("paging_" + std::to_string(param.block_size), 128);
  }
  const auto& c = loaded->config();
  ThreadPool pool(2);
  LlamaModel model(c, loaded->weights(), pool, 64);
  std::vector<std::int32_t> prompt, decode;
  for (int i = 0; i < 37; ++i) prompt.push_back(static_cast<std::int32_t>((i * 37 + 11) % c.vocab_size));
  for (int i = 0; i < 6; ++i) decode.push_back(static_cast<std::int32_t>((i * 53 + 5) % c.vocab_size));
  const auto positions = static_cast<std::int64_t>(prompt.size() + decode.size());

  // The contiguous layout: one block holding the whole context, [layer][position][kv_dim].
  compute::KvCacheOptions contiguous_options;
  contiguous_options.block_size = c.context_length;
  auto contiguous = model.make_cache(0, contiguous_options);
  ASSERT_EQ(contiguous.pages().blocks(), 1);
  const auto want = run_sequence(model, contiguous.pages(), contiguous.block_table(), prompt, decode);

  std::mt19937 rng(static_cast<unsigned>(param.block_size));
  const std::int64_t needed = (positions + param.block_size - 1) / param.block_size;
  PagedKvCache pages(c.layers, c.kv_dim(), param.block_size, 2 * needed + 3);
  const auto table = scattered_blocks(needed, pages.blocks(), rng);
  const auto got = run_sequence(model, pages, table, prompt, decode);
  expect_same_bits(want, got, "block size " + std::to_string(param.block_size));
}

INSTANTIATE_TEST_SUITE_P(Models, PagedForward,
                         ::testing::Values(PagingCase{"aidreams", 1}, PagingCase{"aidreams", 16}, PagingCase{"aidreams", 32},
                                           PagingCase{"synth", 1}, PagingCase{"synth", 16}, PagingCase{"synth", 32}),
                         [](const auto& tested) { return tested.param.model + "_b" + std::to_string(tested.param.block_size); });

TEST(PagedForward, AMixedStepGivesEachSequenceItsLogitsAlone) {
  auto loaded = synth_q8_0("mixed");
  const auto& c = loaded->config();
  const auto vocab = static_cast<std::size_t>(c.vocab_size);
  ThreadPool pool(2);
  LlamaModel model(c, loaded->weights(), pool, 128);
  const std::int64_t block_size = 4;
  PagedKvCache pages(c.layers, c.kv_dim(), block_size, 60);
  std::mt19937 rng(3);
  const auto blocks = scattered_blocks(60, 60, rng);
  // Three sequences with 20 blocks each: A prefills 41 tokens, B 9, and C (prefilled 6 before) decodes one;
  // then all three decode one more. 41 + 9 + 1 = 51 rows of logits in the first step: staged in groups.
  const std::span<const std::int32_t> table_a(blocks.data(), 20), table_b(blocks.data() + 20, 20),
      table_c(blocks.data() + 40, 20);
  std::vector<std::int32_t> a, b, c_prompt{7, 3, 9, 1, 22, 40};
  for (int i = 0; i < 41; ++i) a.push_back(static_cast<std::int32_t>((i * 13 + 2) % c.vocab_size));
  for (int i = 0; i < 9; ++i) b.push_back(static_cast<std::int32_t>((i * 29 + 5) % c.vocab_size));
  const std::int32_t c_next = 17, a_next = 8, b_next = 60, c_last = 33;

  // Alone, each in a pool of its own.
  auto alone = [&](const std::vector<std::int32_t>& prompt, const std::vector<std::int32_t>& decode) {
    auto cache = model.make_cache(64);
    return run_sequence(model, cache.pages(), cache.block_table(), prompt, decode);
  };
  const auto want_a = alone(a, {a_next});
  const auto want_b = alone(b, {b_next});
  const auto want_c = alone(c_prompt, {c_next, c_last});

  std::vector<float> c_prefill(c_prompt.size() * vocab);
  Step first{c_prompt, 0, table_c, c_prefill.data(), LlamaModel::Logits::all};
  model.forward({&first, 1}, pages);
  std::vector<float> got_a((a.size() + 1) * vocab), got_b(vocab), got_c(vocab);
  const std::vector<Step> mixed{{a, 0, table_a, got_a.data(), LlamaModel::Logits::all},
                                {b, 0, table_b, got_b.data(), LlamaModel::Logits::last},
                                {{&c_next, 1}, 6, table_c, got_c.data(), LlamaModel::Logits::last}};
  model.forward(mixed, pages);
  expect_same_bits({want_a.begin(), want_a.begin() + static_cast<std::ptrdiff_t>(a.size() * vocab)},
                   {got_a.begin(), got_a.begin() + static_cast<std::ptrdiff_t>(a.size() * vocab)}, "A's prefill");
  expect_same_bits({want_b.begin() + static_cast<std::ptrdiff_t>((b.size() - 1) * vocab), want_b.begin() + static_cast<std::ptrdiff_t>(b.size() * vocab)},
                   got_b, "B's prefill");
  expect_same_bits({want_c.begin() + 6 * static_cast<std::ptrdiff_t>(vocab), want_c.begin() + 7 * static_cast<std::ptrdiff_t>(vocab)},
                   got_c, "C's decode in a mixed step");

  std::vector<float> next_a(vocab), next_b(vocab), next_c(vocab);
  const std::vector<Step> decode{{{&a_next, 1}, 41, table_a, next_a.data(), LlamaModel::Logits::last},
                                 {{&b_next, 1}, 9, table_b, next_b.data(), LlamaModel::Logits::last},
                                 {{&c_last, 1}, 7, table_c, next_c.data(), LlamaModel::Logits::last}};
  model.forward(decode, pages);
  expect_same_bits({want_a.end() - static_cast<std::ptrdiff_t>(vocab), want_a.end()}, next_a, "A's decode");
  expect_same_bits({want_b.end() - static_cast<std::ptrdiff_t>(vocab), want_b.end()}, next_b, "B's decode");
  expect_same_bits({want_c.end() - static_cast<std::ptrdiff_t>(vocab), want_c.end()}, next_c, "C's second decode");
}

TEST(PagedForward, MixedPrefillsOfARealModelEqualEachAlone) {
  // aidreams has F32 weights: a batch of 2+ tokens sums its products in one order (vec_dot.hpp), so
  // sequences that each bring several tokens get exactly their logits alone.
  REQUIRE_SHARED_FILE(shared_path("models/aidreams260K.gguf"));
  auto loaded = LoadedModel::open(shared_path("models/aidreams260K.gguf"));
  const auto& c = loaded->config();
  const auto vocab = static_cast<std::size_t>(c.vocab_size);
  ThreadPool pool(2);
  LlamaModel model(c, loaded->weights(), pool, 64);
  const std::vector<std::vector<std::int32_t>> prompts{{1, 403, 407, 285, 446, 280, 432, 269, 300, 301, 302},
                                                       {1, 60, 70},
                                                       {1, 403, 407, 285, 446, 280}};
  PagedKvCache pages(c.layers, c.kv_dim(), 16, 12);
  const std::vector<std::int32_t> blocks{7, 2, 11, 0, 5, 9};
  std::vector<std::vector<float>> got(prompts.size());
  std::vector<Step> steps;
  for (std::size_t s = 0; s < prompts.size(); ++s) {
    got[s].resize(prompts[s].size() * vocab);
    steps.push_back({prompts[s], 0, std::span<const std::int32_t>(blocks).subspan(2 * s, 2), got[s].data(),
                     LlamaModel::Logits::all});
  }
  model.forward(steps, pages);
  for (std::size_t s = 0; s < prompts.size(); ++s) {
    auto cache = model.make_cache();
    const auto want = run_sequence(model, cache.pages(), cache.block_table(), prompts[s], {});
    expect_same_bits(want, got[s], "sequence " + std::to_string(s));
  }
}

TEST(PagedForward, SixtyFourShortSequencesFitTheBudgetOfEightFullLengthSlots) {
  auto loaded = synth_q8_0("budget");
  const auto& c = loaded->config();
  const auto vocab = static_cast<std::size_t>(c.vocab_size);
  ThreadPool pool(2);
  LlamaModel model(c, loaded->weights(), pool, 256);
  // Eight contiguous slots of the full context would take 8 x 256 positions; the same bytes as a pool of
  // 16-token blocks hold 128 blocks, two for each of 64 sequences of 25 tokens.
  compute::KvCacheOptions options;
  options.budget_bytes = 8 * 256 / 16 * PagedKvCache::bytes_per_block(c.layers, c.kv_dim(), 16, TensorType::f16);
  auto pages = model.make_paged_cache(options);
  ASSERT_EQ(pages.blocks(), 128);
  constexpr int kSequences = 64;
  auto prompt_of = [&](int s) {
    std::vector<std::int32_t> prompt;
    for (int i = 0; i < 24; ++i) prompt.push_back(static_cast<std::int32_t>((s * 7 + i * 3 + 1) % c.vocab_size));
    return prompt;
  };
  std::vector<std::vector<std::int32_t>> prompts;
  for (int s = 0; s < kSequences; ++s) prompts.push_back(prompt_of(s));
  std::vector<std::int32_t> tables(2 * kSequences);
  std::iota(tables.begin(), tables.end(), 0);
  auto table_of = [&](int s) { return std::span<const std::int32_t>(tables).subspan(static_cast<std::size_t>(2 * s), 2); };

  // Prefill eight sequences a step (192 tokens), then one decode step of all 64.
  for (int first = 0; first < kSequences; first += 8) {
    std::vector<Step> steps;
    for (int s = first; s < first + 8; ++s) steps.push_back({prompts[static_cast<std::size_t>(s)], 0, table_of(s), nullptr, LlamaModel::Logits::none});
    model.forward(steps, pages);
  }
  std::vector<std::int32_t> next(kSequences);
  std::vector<float> logits(kSequences * vocab);
  std::vector<Step> decode;
  for (int s = 0; s < kSequences; ++s) {
    next[static_cast<std::size_t>(s)] = static_cast<std::int32_t>((s * 5 + 2) % c.vocab_size);
    decode.push_back({{&next[static_cast<std::size_t>(s)], 1}, 24, table_of(s), &logits[static_cast<std::size_t>(s) * vocab], LlamaModel::Logits::last});
  }
  model.forward(decode, pages);
  for (int s = 0; s < kSequences; s += 9) {
    auto cache = model.make_cache(32);
    const auto want = run_sequence(model, cache.pages(), cache.block_table(), prompts[static_cast<std::size_t>(s)],
                                   {next[static_cast<std::size_t>(s)]});
    expect_same_bits({want.end() - static_cast<std::ptrdiff_t>(vocab), want.end()},
                     {logits.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(s) * vocab),
                      logits.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(s + 1) * vocab)},
                     "sequence " + std::to_string(s));
  }
}

TEST(PagedForward, F32StorageIsCloseToF16ButNotEqual) {
  REQUIRE_SHARED_FILE(shared_path("models/aidreams260K.gguf"));
  auto loaded = LoadedModel::open(shared_path("models/aidreams260K.gguf"));
  const auto& c = loaded->config();
  ThreadPool pool(2);
  LlamaModel model(c, loaded->weights(), pool, 32);
  const std::vector<std::int32_t> prompt{1, 403, 407, 285, 446, 280, 432, 269}, decode{300, 301, 302, 303};
  auto run = [&](TensorType type) {
    compute::KvCacheOptions options;
    options.type = type;
    auto cache = model.make_cache(0, options);
    EXPECT_EQ(cache.pages().type(), type);
    return run_sequence(model, cache.pages(), cache.block_table(), prompt, decode);
  };
  const auto f16 = run(TensorType::f16);
  const auto f32 = run(TensorType::f32);
  double worst = 0, largest = 0;
  std::size_t differing = 0;
  for (std::size_t i = 0; i < f16.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::abs(f16[i] - f32[i])));
    largest = std::max(largest, static_cast<double>(std::abs(f16[i])));
    differing += bits(f16[i]) != bits(f32[i]) ? 1 : 0;
  }
  std::printf("[ paged ] F32 vs F16 KV storage: max |logit difference| %.6f (largest |logit| %.2f), %zu of %zu differ\n",
              worst, largest, differing, f16.size());
  // F16 keeps 11 significant bits: relative rounding of 2^-12 per stored value, seen through a few layers.
  EXPECT_LT(worst, 1e-2);
  EXPECT_GT(differing, 0u) << "F32 storage should not round like F16";
}

TEST(PagedForward, BadStepsAreRefusedBeforeAnyWrite) {
  auto loaded = synth_q8_0("errors", 64);
  const auto& c = loaded->config();
  ThreadPool pool(1);
  LlamaModel model(c, loaded->weights(), pool, 8);
  PagedKvCache pages(c.layers, c.kv_dim(), 4, 4);
  for (std::int64_t layer = 0; layer < c.layers; ++layer) {
    std::memset(pages.keys(layer), 0x5a, static_cast<std::size_t>(4 * 4 * c.kv_dim()) * 2);
  }
  auto untouched = [&] {
    const auto* k = static_cast<const std::uint8_t*>(pages.keys(0));
    return std::all_of(k, k + 4 * 4 * c.kv_dim() * 2, [](std::uint8_t b) { return b == 0x5a; });
  };
  std::vector<float> logits(static_cast<std::size_t>(8 * c.vocab_size));
  const std::vector<std::int32_t> tokens{1, 2, 3, 4, 5};
  const std::vector<std::int32_t> outside{0, 4}, short_table{0};
  // The second block of the first step is outside the pool (and one sequence is fine).
  const std::vector<Step> bad_block{{tokens, 0, outside, logits.data(), LlamaModel::Logits::last}};
  EXPECT_THROW(model.forward(bad_block, pages), std::out_of_range);
  const std::vector<Step> too_short{{tokens, 0, short_table, logits.data(), LlamaModel::Logits::last}};
  EXPECT_THROW(model.forward(too_short, pages), std::out_of_range);
  const std::vector<std::int32_t> good{0, 1, 2, 3};
  const std::vector<Step> too_many{{tokens, 0, good, logits.data(), LlamaModel::Logits::last},
                                   {tokens, 0, good, logits.data(), LlamaModel::Logits::last}};
  EXPECT_THROW(model.forward(too_many, pages), std::invalid_argument);  // 10 tokens, batch of 8
  const std::vector<Step> no_buffer{{tokens, 0, good, nullptr, LlamaModel::Logits::last}};
  EXPECT_THROW(model.forward(no_buffer, pages), std::invalid_argument);
  EXPECT_THROW(model.forward(std::span<const Step>{}, pages), std::invalid_argument);
  const std::vector<Step> empty_tokens{{{}, 0, good, logits.data(), LlamaModel::Logits::last}};
  EXPECT_THROW(model.forward(empty_tokens, pages), std::invalid_argument);
  PagedKvCache other_shape(c.layers + 1, c.kv_dim(), 4, 4);
  const std::vector<Step> fine{{tokens, 0, good, logits.data(), LlamaModel::Logits::last}};
  EXPECT_THROW(model.forward(fine, other_shape), std::invalid_argument);
  EXPECT_TRUE(untouched()) << "a refused step wrote into the cache";
  EXPECT_NO_THROW(model.forward(fine, pages));
  EXPECT_FALSE(untouched());
}

}  // namespace
}  // namespace loom::compute
