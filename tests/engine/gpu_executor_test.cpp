// GpuExecutorActor, driven through its messages as the scheduler will drive it, on the shared aidreams260K
// model (F32, well separated logits: its greedy tokens must equal the reference exactly). Block tables are
// written by hand here (the cache manager's job in the engine), deliberately scattered over the pool so a
// sequence's result can only be right if the backend reads through its own table.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/use_future.hpp>
#include <nlohmann/json.hpp>

#include "loom/actors/engine/gpu_executor_actor.hpp"
#include "loom/cache/block_manager.hpp"
#include "loom/compute/cpu/cpu_backend.hpp"
#include "loom/compute/cpu/kv_cache.hpp"
#include "loom/compute/cpu/llama_model.hpp"
#include "loom/compute/cpu/thread_pool.hpp"
#include "loom/compute/model/model_loader.hpp"
#include "loom/compute/sampler.hpp"
#include "test_files.hpp"
#include "test_support.hpp"

namespace loom::actors {
namespace {

using namespace std::chrono_literals;
namespace asio = boost::asio;
using compute::testing::shared_path;
using testing::RunningContext;

constexpr auto kGpuTimeout = 120s;  // generous: the suite also runs under sanitizers
constexpr std::int64_t kGpuBlockSize = 4;
constexpr std::int64_t kKvTokens = 512;  // 128 blocks of 4

struct TopEntry {
  std::int32_t token;
  float logit;
};

struct Reference {
  std::vector<std::int32_t> prompt;
  std::vector<std::int32_t> greedy;
  std::vector<std::vector<TopEntry>> greedy_top;  // [g]: the logits after feeding greedy[g]
};

Reference read_reference(const std::string& name) {
  std::ifstream in(shared_path("reference/" + name));
  if (!in) throw std::runtime_error("missing reference file " + shared_path("reference/" + name));
  const auto j = nlohmann::json::parse(in);
  Reference r{j.at("prompt_tokens").get<std::vector<std::int32_t>>(), j.at("greedy").get<std::vector<std::int32_t>>(), {}};
  for (const auto& row : j.at("greedy_top")) {
    auto& top = r.greedy_top.emplace_back();
    for (const auto& pair : row) top.push_back({pair[0].get<std::int32_t>(), pair[1].get<float>()});
  }
  return r;
}

std::string gpu_model_path() { return shared_path("models/aidreams260K.gguf"); }

compute::LoadOptions load_options() {
  compute::LoadOptions o;
  o.model_path = gpu_model_path();
  o.threads = 2;
  o.kv.block_size = kGpuBlockSize;
  o.kv_tokens = kKvTokens;
  o.max_batch_tokens = 128;
  return o;
}

proto::SamplingParams greedy() {
  proto::SamplingParams c;
  c.temperature = 0.0f;
  return c;
}

// A block table of `count` blocks: first, first + stride, ... modulo the pool (128 blocks).
std::vector<std::int32_t> scattered_table(std::int32_t count, std::int32_t first, std::int32_t stride) {
  std::vector<std::int32_t> table;
  for (std::int32_t i = 0; i < count; ++i) table.push_back((first + i * stride) % 128);
  return table;
}

// One sequence as the scheduler would drive it: its prompt in chunks of `chunk` tokens, sampling after the
// last chunk, then one decode token per step (the token it sampled last). Its first step (and any step from
// position 0, a fresh start) starts it on the backend with its parameters, the tokens before the step as
// prefix and the whole table; later steps change nothing of the table (tests give it whole up front).
struct Driven {
  cache::SequenceId id = 0;
  std::vector<std::int32_t> prompt;
  std::vector<std::int32_t> table;
  proto::SamplingParams sampler = greedy();
  std::size_t chunk = 512;
  std::int32_t logprobs = 0;
  std::size_t position = 0;
  std::vector<std::int32_t> generated{};
  bool started = false;  // the backend holds it

  compute::StepSequence next() const {
    compute::StepSequence s;
    s.sequence = id;
    s.start = static_cast<std::int64_t>(position);
    if (!started || position == 0) {
      compute::SequenceStart begin{sampler, prompt};
      begin.params.logprobs = logprobs;
      begin.prefix.insert(begin.prefix.end(), generated.begin(), generated.end());
      begin.prefix.resize(position);
      s.begin = std::move(begin);
      s.blocks = table;
    } else {
      s.table_from = static_cast<std::int64_t>(table.size());
    }
    if (position < prompt.size()) {
      const std::size_t n = std::min(chunk, prompt.size() - position);
      s.tokens.assign(prompt.begin() + static_cast<std::ptrdiff_t>(position),
                      prompt.begin() + static_cast<std::ptrdiff_t>(position + n));
      s.sample = position + n == prompt.size();
    } else {
      s.tokens = {generated.back()};
      s.sample = true;
    }
    return s;
  }
  // After a StepDone: the positions are computed; `sampled` is this sequence's entry, if it sampled.
  void advance(const compute::StepSequence& step, const compute::SampledToken* sampled) {
    started = true;
    position += step.tokens.size();
    if (sampled != nullptr) generated.push_back(sampled->token);
  }
};

const compute::SampledToken* find_sampled(const StepDone& done, cache::SequenceId id) {
  for (const auto& s : done.sampled) {
    if (s.sequence == id) return &s;
  }
  return nullptr;
}

// Counts and checks what the executor does with its backend: wraps the real one.
struct GpuProbe {
  int fail_on_run = -1;                // this run() call (0-based) throws instead of computing
  asio::io_context* io = nullptr;      // when set: count calls made on one of its threads
  std::atomic<int> runs{0};
  std::atomic<int> calls_on_io_thread{0};
  std::atomic<int> loads{0};
  std::atomic<int> inside{0}, most_inside{0};
  // Written by the compute thread only; read by the test after the replies (the mailbox and the reply
  // hand-offs order the accesses).
  std::vector<cache::SequenceId> first_sequence_of_run;
};

class GpuProbedBackend final : public compute::Backend {
 public:
  GpuProbedBackend(std::unique_ptr<compute::Backend> inner, std::shared_ptr<GpuProbe> probe)
      : inner_(std::move(inner)), probe_(std::move(probe)) {}
  compute::BackendInfo info() const override { return inner_->info(); }
  std::shared_ptr<const compute::Tokenizer> tokenizer() const override { return inner_->tokenizer(); }
  compute::StepResult run(const compute::StepBatch& batch) override {
    const int inside = ++probe_->inside;
    probe_->most_inside = std::max(probe_->most_inside.load(), inside);
    if (probe_->io != nullptr && probe_->io->get_executor().running_in_this_thread()) ++probe_->calls_on_io_thread;
    probe_->first_sequence_of_run.push_back(batch.sequences.empty() ? 0 : batch.sequences.front().sequence);
    const int run = probe_->runs++;
    struct Leave {
      GpuProbe& p;
      ~Leave() { --p.inside; }
    } leave{*probe_};
    if (run == probe_->fail_on_run) throw std::runtime_error("injected failure on step " + std::to_string(run));
    return inner_->run(batch);
  }
  void release(cache::SequenceId sequence) override { inner_->release(sequence); }

 private:
  std::unique_ptr<compute::Backend> inner_;
  std::shared_ptr<GpuProbe> probe_;
};

compute::BackendFactory probed_factory(std::shared_ptr<GpuProbe> probe) {
  return [probe](const compute::LoadOptions& options) -> std::unique_ptr<compute::Backend> {
    ++probe->loads;
    if (probe->io != nullptr && probe->io->get_executor().running_in_this_thread()) ++probe->calls_on_io_thread;
    return std::make_unique<GpuProbedBackend>(compute::load_cpu_backend(options), probe);
  };
}

class GpuExecutorTest : public ::testing::Test {
 protected:
  using Executor = ActorHandle<GpuExecutorProtocol>;

  Executor spawn_executor(compute::BackendFactory factory = compute::load_cpu_backend) {
    return spawn<GpuExecutorActor>(ctx_.executor(), {.name = "executor"}, std::move(factory));
  }
  static LoadResult load(const Executor& executor, compute::LoadOptions options = load_options()) {
    LoadModel request{std::move(options), {}};
    return executor.address().ask(std::move(request), kGpuTimeout, asio::use_future).get();
  }
  static StepOutcome run(const Executor& executor, compute::StepBatch batch) {
    RunStep request{std::move(batch), {}};
    return executor.address().ask(std::move(request), kGpuTimeout, asio::use_future).get();
  }
  static ExecutorStats stats(const Executor& executor) {
    return executor.address().ask(GetExecutorStats{}, kGpuTimeout, asio::use_future).get();
  }
  // Runs one step of the driven sequences together; a StepFailed fails the test and gives nullopt.
  static std::optional<StepDone> step(const Executor& executor, std::vector<Driven*> sequences,
                                      std::vector<compute::BlockCopy> copies = {}) {
    compute::StepBatch batch;
    batch.copies = std::move(copies);
    for (const Driven* d : sequences) batch.sequences.push_back(d->next());
    const auto steps = batch.sequences;
    auto outcome = run(executor, std::move(batch));
    if (const auto* failed = std::get_if<StepFailed>(&outcome)) {
      ADD_FAILURE() << "step failed: " << failed->error;
      return std::nullopt;
    }
    auto done = std::get<StepDone>(std::move(outcome));
    for (std::size_t i = 0; i < sequences.size(); ++i) sequences[i]->advance(steps[i], find_sampled(done, sequences[i]->id));
    return done;
  }
  // Drives the sequences together until each has generated `tokens` tokens (or a step fails).
  static void generate(const Executor& executor, std::vector<Driven*> sequences, std::size_t tokens) {
    for (;;) {
      std::vector<Driven*> active;
      for (Driven* d : sequences) {
        if (d->generated.size() < tokens) active.push_back(d);
      }
      if (active.empty() || !step(executor, active)) return;
    }
  }

  void SetUp() override { REQUIRE_SHARED_FILE(gpu_model_path()); }

  RunningContext ctx_{2};
};

TEST_F(GpuExecutorTest, LoadsTheModelAndReportsItsKvStorage) {
  auto executor = spawn_executor();
  const auto result = load(executor);
  ASSERT_TRUE(result.loaded()) << result.error;
  EXPECT_EQ(result.info.config.vocab_size, 512);
  EXPECT_EQ(result.info.kv_block_size, kGpuBlockSize);
  EXPECT_EQ(result.info.kv_blocks, kKvTokens / kGpuBlockSize);  // room for exactly the positions asked
  EXPECT_EQ(result.info.max_batch_tokens, 128);
  ASSERT_NE(result.tokenizer, nullptr);
  EXPECT_EQ(result.tokenizer->vocabulary().size(), 512);
  // The reference prompt is "Once upon a time" with BOS in front.
  const auto reference = read_reference("aidreams260K.once.json");
  auto ids = result.tokenizer->encode("Once upon a time");
  EXPECT_EQ(ids, reference.prompt);

  const auto again = executor.address().ask(GetLoadedModel{}, kGpuTimeout, asio::use_future).get();
  EXPECT_TRUE(again.loaded());
  EXPECT_EQ(again.info.kv_blocks, result.info.kv_blocks);
  const auto s = stats(executor);
  EXPECT_TRUE(s.model_loaded);
  EXPECT_EQ(s.loads, 1u);
  EXPECT_EQ(s.queued_jobs, 0u);
}

TEST_F(GpuExecutorTest, AMissingFileIsAnErrorAndTheExecutorCarriesOn) {
  auto executor = spawn_executor();
  auto options = load_options();
  options.model_path = shared_path("models/no-such-model.gguf");
  const auto missing = load(executor, options);
  EXPECT_FALSE(missing.loaded());
  EXPECT_NE(missing.error.find("no-such-model.gguf"), std::string::npos) << missing.error;
  EXPECT_FALSE(stats(executor).model_loaded);
  // Out-of-range options are refused by name, before any file is read.
  options = load_options();
  options.max_batch_tokens = 0;
  EXPECT_NE(load(executor, options).error.find("max_batch_tokens"), std::string::npos);
  // The same executor then loads a good file.
  EXPECT_TRUE(load(executor).loaded());
}

// The same model as a llama2.c checkpoint: it holds no vocabulary, so it needs its tokenizer file, and then it
// computes what the GGUF does.
TEST_F(GpuExecutorTest, ALlamaCheckpointLoadsWithItsTokenizerFile) {
  const auto reference = read_reference("aidreams260K.once.json");
  auto executor = spawn_executor();
  auto options = load_options();
  options.model_path = shared_path("models/aidreams260K.bin");
  REQUIRE_SHARED_FILE(options.model_path);
  const auto without = load(executor, options);
  EXPECT_NE(without.error.find("give a tokenizer path"), std::string::npos) << without.error;

  options.tokenizer_path = shared_path("models/aidreams260K.tok512.bin");
  REQUIRE_SHARED_FILE(options.tokenizer_path);
  const auto with = load(executor, options);
  ASSERT_TRUE(with.loaded()) << with.error;
  ASSERT_NE(with.tokenizer, nullptr);
  EXPECT_EQ(with.tokenizer->encode("Once upon a time"), reference.prompt);
  Driven d{.id = 1, .prompt = reference.prompt, .table = scattered_table(10, 0, 1)};
  generate(executor, {&d}, 16);
  EXPECT_EQ(d.generated, std::vector<std::int32_t>(reference.greedy.begin(), reference.greedy.begin() + 16));
}

TEST_F(GpuExecutorTest, RunBeforeALoadFailsItsSequences) {
  auto executor = spawn_executor();
  compute::StepBatch batch;
  batch.sequences.push_back(compute::StepSequence{.sequence = 7, .tokens = {1}, .blocks = {0}, .sample = true, .begin = compute::SequenceStart{}});
  const auto outcome = run(executor, std::move(batch));
  const auto* failed = std::get_if<StepFailed>(&outcome);
  ASSERT_NE(failed, nullptr);
  EXPECT_NE(failed->error.find("no model is loaded"), std::string::npos);
  EXPECT_EQ(failed->sequences, std::vector<cache::SequenceId>{7});
  EXPECT_EQ(stats(executor).steps_failed, 1u);
}

TEST_F(GpuExecutorTest, GreedyStepsWithAChunkedPrefillGiveTheReferenceTokens) {
  const auto reference = read_reference("aidreams260K.once.json");
  auto executor = spawn_executor();
  ASSERT_TRUE(load(executor).loaded());
  // 13 prompt tokens + 64 generated = 77 positions: 20 blocks of 4, every third block of the pool.
  Driven d{.id = 1, .prompt = reference.prompt, .table = scattered_table(20, 5, 3), .chunk = 7};
  const auto first = step(executor, {&d});  // tokens 0..6: nothing sampled yet
  ASSERT_TRUE(first);
  EXPECT_TRUE(first->sampled.empty());
  EXPECT_EQ(first->tokens_computed, 7u);
  const auto second = step(executor, {&d});  // tokens 7..12, then the first sampled token
  ASSERT_TRUE(second);
  ASSERT_EQ(second->sampled.size(), 1u);
  EXPECT_EQ(second->tokens_computed, 6u);
  generate(executor, {&d}, reference.greedy.size());
  EXPECT_EQ(d.generated, reference.greedy);

  const auto s = stats(executor);
  EXPECT_EQ(s.steps_run, 1 + reference.greedy.size());  // two prefill steps, then 63 decodes
  EXPECT_EQ(s.tokens_computed, reference.prompt.size() + reference.greedy.size() - 1);
  EXPECT_EQ(s.tokens_sampled, reference.greedy.size());
  EXPECT_EQ(s.steps_failed, 0u);
}

TEST_F(GpuExecutorTest, TwoSequencesInOneBatchEachGetTheirTokensAlone) {
  // Each prompt's reference greedy tokens are what it gives alone (the test above shows that for "once").
  const auto once = read_reference("aidreams260K.once.json");
  const auto fox = read_reference("aidreams260K.fox.json");
  auto executor = spawn_executor();
  ASSERT_TRUE(load(executor).loaded());
  // Interleaved tables: "once" on even blocks, "fox" on odd ones; different prompt lengths, so one step mixes
  // a prefill chunk of one with a decode of the other.
  Driven a{.id = 10, .prompt = once.prompt, .table = scattered_table(24, 0, 2), .chunk = 13};
  Driven b{.id = 11, .prompt = fox.prompt, .table = scattered_table(24, 1, 2), .chunk = 8};
  generate(executor, {&a, &b}, 40);
  EXPECT_EQ(a.generated, std::vector<std::int32_t>(once.greedy.begin(), once.greedy.begin() + 40));
  EXPECT_EQ(b.generated, std::vector<std::int32_t>(fox.greedy.begin(), fox.greedy.begin() + 40));
}

// The same seed gives the same tokens on two executors, and those are the tokens one Sampler gives when it is
// driven directly over the model's logits (the sampler's random stream persists across the executor's steps).
TEST_F(GpuExecutorTest, SeededSamplingIsReproducibleAcrossExecutors) {
  const auto reference = read_reference("aidreams260K.once.json");
  proto::SamplingParams sampling;
  sampling.temperature = 1.5f;  // spread out, with no filter: every draw matters
  sampling.top_k = 0;
  sampling.top_p = 1.0f;
  sampling.min_p = 0.0f;
  sampling.seed = 1234;
  constexpr std::size_t kTokens = 30;

  auto sample_with = [&](std::uint64_t seed) {
    auto executor = spawn_executor();
    EXPECT_TRUE(load(executor).loaded());
    Driven d{.id = 3, .prompt = reference.prompt, .table = scattered_table(12, 7, 5)};
    d.sampler = sampling;
    d.sampler.seed = seed;
    generate(executor, {&d}, kTokens);
    executor.stop();
    return d.generated;
  };
  const auto first = sample_with(1234);
  const auto second = sample_with(1234);
  EXPECT_EQ(first, second);
  EXPECT_NE(first, sample_with(99));  // a different seed draws differently

  // The independent computation: the model's own forward pass over a per-sequence cache, one Sampler.
  const auto loaded = compute::LoadedModel::open(gpu_model_path());
  compute::ThreadPool pool(2);
  compute::LlamaModel model(loaded->config(), loaded->weights(), pool, 128);
  auto cache = model.make_cache(0, {.block_size = kGpuBlockSize});
  compute::Sampler sampler(sampling, 512);
  std::vector<float> logits(512);
  std::vector<std::int32_t> history = reference.prompt;
  model.forward(reference.prompt, 0, cache, compute::LlamaModel::Logits::last, logits.data());
  std::vector<std::int32_t> expected;
  while (expected.size() < kTokens) {
    expected.push_back(sampler.sample(logits, history));
    history.push_back(expected.back());
    model.forward({&expected.back(), 1}, static_cast<std::int64_t>(history.size() - 1), cache,
                  compute::LlamaModel::Logits::last, logits.data());
  }
  EXPECT_EQ(first, expected);
}

TEST_F(GpuExecutorTest, ReleasingASequenceStartsItsSamplerAfresh) {
  const auto reference = read_reference("aidreams260K.once.json");
  auto executor = spawn_executor();
  ASSERT_TRUE(load(executor).loaded());
  proto::SamplingParams sampling;
  sampling.temperature = 1.5f;
  sampling.top_k = 0;
  sampling.top_p = 1.0f;
  sampling.min_p = 0.0f;
  sampling.seed = 5;
  Driven d{.id = 4, .prompt = reference.prompt, .table = scattered_table(10, 0, 1), .sampler = sampling};
  generate(executor, {&d}, 12);
  const auto first = d.generated;

  // Without a release the same id keeps its random stream: the same steps again draw differently.
  Driven kept = d;
  kept.position = 0;
  kept.generated.clear();
  generate(executor, {&kept}, 12);
  EXPECT_NE(kept.generated, first);

  ASSERT_TRUE(executor.address().tell(ReleaseSequence{4}));
  Driven fresh = kept;
  fresh.position = 0;
  fresh.generated.clear();
  generate(executor, {&fresh}, 12);
  EXPECT_EQ(fresh.generated, first);

  // A fresh start with other parameters replaces the sampler: the stream of a new sequence with them.
  Driven changed = fresh;
  changed.sampler.seed = 6;
  changed.position = 0;
  changed.generated.clear();
  generate(executor, {&changed}, 12);
  Driven other_id = changed;
  other_id.id = 5;
  other_id.started = false;
  other_id.position = 0;
  other_id.generated.clear();
  generate(executor, {&other_id}, 12);
  EXPECT_EQ(changed.generated, other_id.generated);
  EXPECT_NE(changed.generated, first);

  // A step that does not follow from what the backend holds is refused, naming the sequence.
  Driven skipped = changed;
  skipped.position += 1;
  compute::StepBatch batch;
  batch.sequences.push_back(skipped.next());
  const auto outcome = run(executor, std::move(batch));
  ASSERT_TRUE(std::holds_alternative<StepFailed>(outcome));
  EXPECT_NE(std::get<StepFailed>(outcome).error.find("sequence 4 continues at position"),
            std::string::npos)
      << std::get<StepFailed>(outcome).error;
}

// A fork: the child shares the parent's full blocks and gets a copy of the partial last block, which the
// step copies before its forward pass. Block 100 held another sequence's keys and values before, so a child
// reading it uncopied would see the wrong position 12.
TEST_F(GpuExecutorTest, BlockCopiesOfAStepAreDoneBeforeItsForwardPass) {
  const auto reference = read_reference("aidreams260K.once.json");
  auto executor = spawn_executor();
  ASSERT_TRUE(load(executor).loaded());
  Driven other{.id = 99, .prompt = {1, 300, 301, 302, 303, 304}, .table = {100, 101}};
  ASSERT_TRUE(step(executor, {&other}));

  // 13 prompt tokens: blocks 20, 21, 22 full, block 23 holds position 12.
  Driven parent{.id = 1, .prompt = reference.prompt, .table = {20, 21, 22, 23, 24, 25}, .logprobs = 5};
  ASSERT_TRUE(step(executor, {&parent}));
  ASSERT_EQ(parent.generated, std::vector<std::int32_t>{reference.greedy[0]});
  Driven child = parent;
  child.id = 2;
  child.started = false;  // starts with the parent's 13 positions as its prefix
  child.table = {20, 21, 22, 100, 26, 27};
  const auto done = step(executor, {&parent, &child}, {compute::BlockCopy{23, 100}});
  ASSERT_TRUE(done);
  const auto* p = find_sampled(*done, 1);
  const auto* c = find_sampled(*done, 2);
  ASSERT_TRUE(p != nullptr && c != nullptr);
  EXPECT_EQ(p->token, reference.greedy[1]);
  EXPECT_EQ(c->token, reference.greedy[1]);
  // Same keys and values, same computation: the same distribution, not just the same argmax.
  ASSERT_EQ(c->top.size(), 5u);
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(c->top[i].token, p->top[i].token);
    EXPECT_NEAR(c->top[i].logprob, p->top[i].logprob, 1e-5f);
  }
  generate(executor, {&parent, &child}, 10);
  const std::vector<std::int32_t> expected(reference.greedy.begin(), reference.greedy.begin() + 10);
  EXPECT_EQ(parent.generated, expected);
  EXPECT_EQ(child.generated, expected);
}

// Log-probabilities come from the raw logits, so differences between them are differences of the reference's
// logits (log p_i - log p_j = logit_i - logit_j).
TEST_F(GpuExecutorTest, LogprobsFollowTheModelsLogits) {
  const auto reference = read_reference("aidreams260K.once.json");
  auto executor = spawn_executor();
  ASSERT_TRUE(load(executor).loaded());
  Driven d{.id = 1, .prompt = reference.prompt, .table = scattered_table(10, 3, 7), .logprobs = 4};
  ASSERT_TRUE(step(executor, {&d}));  // samples greedy[0]
  const auto done = step(executor, {&d});  // feeds greedy[0]: reference row greedy_top[0]
  ASSERT_TRUE(done);
  ASSERT_EQ(done->sampled.size(), 1u);
  const auto& s = done->sampled[0];
  const auto& row = reference.greedy_top[0];
  ASSERT_EQ(s.top.size(), 4u);
  EXPECT_EQ(s.token, s.top[0].token);  // greedy takes the most likely
  EXPECT_EQ(s.logprob, s.top[0].logprob);
  double total = 0;
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(s.top[i].token, row[i].token);
    EXPECT_NEAR(s.top[i].logprob - s.top[0].logprob, row[i].logit - row[0].logit, 2e-3);
    total += std::exp(s.top[i].logprob);
  }
  EXPECT_LT(total, 1.0);
  EXPECT_LT(s.top[0].logprob, 0.0f);

  // Beyond the bound, the step is refused by name.
  Driven greedy_one = d;
  greedy_one.started = false;  // the parameters come with a start
  greedy_one.logprobs = proto::SamplingParams::kMaxLogprobs + 1;
  compute::StepBatch batch;
  batch.sequences.push_back(greedy_one.next());
  const auto outcome = run(executor, std::move(batch));
  ASSERT_TRUE(std::holds_alternative<StepFailed>(outcome));
  EXPECT_NE(std::get<StepFailed>(outcome).error.find("logprobs 21"), std::string::npos);
}

TEST_F(GpuExecutorTest, AFailingStepFailsOnlyItsSequencesAndTheNextStepRuns) {
  const auto reference = read_reference("aidreams260K.once.json");
  auto probe = std::make_shared<GpuProbe>();
  probe->fail_on_run = 3;
  auto executor = spawn_executor(probed_factory(probe));
  ASSERT_TRUE(load(executor).loaded());
  Driven a{.id = 1, .prompt = reference.prompt, .table = scattered_table(10, 0, 2)};
  Driven b{.id = 2, .prompt = reference.prompt, .table = scattered_table(10, 1, 2)};
  generate(executor, {&a, &b}, 3);  // runs 0, 1, 2
  compute::StepBatch batch;
  batch.sequences = {a.next(), b.next()};
  const auto outcome = run(executor, std::move(batch));  // run 3
  const auto* failed = std::get_if<StepFailed>(&outcome);
  ASSERT_NE(failed, nullptr);
  EXPECT_NE(failed->error.find("injected failure on step 3"), std::string::npos);
  EXPECT_EQ(failed->sequences, (std::vector<cache::SequenceId>{1, 2}));

  // The next step (a retry of sequence 1 here) runs, and its tokens are still the reference's.
  generate(executor, {&a}, 8);
  EXPECT_EQ(a.generated, std::vector<std::int32_t>(reference.greedy.begin(), reference.greedy.begin() + 8));
  const auto s = stats(executor);
  EXPECT_EQ(s.steps_failed, 1u);
  EXPECT_EQ(s.steps_run, 3u + 5u);

  // Bad input fails its step the same way, naming what is wrong.
  compute::StepBatch bad;
  bad.copies = {compute::BlockCopy{1, 5000}};
  bad.sequences = {a.next()};
  const auto refused = run(executor, std::move(bad));
  ASSERT_TRUE(std::holds_alternative<StepFailed>(refused));
  EXPECT_NE(std::get<StepFailed>(refused).error.find("block 5000 is outside the pool"), std::string::npos);
  compute::StepBatch twice;
  twice.sequences = {a.next(), a.next()};
  const auto doubled = run(executor, std::move(twice));
  ASSERT_TRUE(std::holds_alternative<StepFailed>(doubled));
  EXPECT_NE(std::get<StepFailed>(doubled).error.find("sequence 1 appears twice"), std::string::npos);
  compute::StepBatch short_table;
  short_table.sequences = {a.next()};
  short_table.sequences[0].table_from = 1;  // the table cut to 1 block (4 positions); the decode writes position 20
  const auto unplaced = run(executor, std::move(short_table));
  ASSERT_TRUE(std::holds_alternative<StepFailed>(unplaced));
  EXPECT_NE(std::get<StepFailed>(unplaced).error.find("sequence 1 has a block table of 1 blocks for 21 positions"), std::string::npos)
      << std::get<StepFailed>(unplaced).error;
  compute::StepBatch too_large;  // two prefills of 70 tokens (each within the context of 128): 140 in the step
  for (const cache::SequenceId id : {50, 51}) {
    too_large.sequences.push_back(compute::StepSequence{.sequence = id,
                                               .tokens = std::vector<std::int32_t>(70, 1),
                                               .blocks = scattered_table(18, static_cast<std::int32_t>(id), 2),
                                               .begin = compute::SequenceStart{}});
  }
  const auto refused_size = run(executor, std::move(too_large));
  ASSERT_TRUE(std::holds_alternative<StepFailed>(refused_size));
  EXPECT_NE(std::get<StepFailed>(refused_size).error.find("a step of 140 tokens exceeds the 128"), std::string::npos)
      << std::get<StepFailed>(refused_size).error;
  generate(executor, {&a}, 9);
  EXPECT_EQ(a.generated.back(), reference.greedy[8]);
}

TEST_F(GpuExecutorTest, RunsSentTogetherRunOneAtATimeInOrder) {
  const auto reference = read_reference("aidreams260K.once.json");
  auto probe = std::make_shared<GpuProbe>();
  auto executor = spawn_executor(probed_factory(probe));
  ASSERT_TRUE(load(executor).loaded());
  // Six prefills of six sequences, all sent before the first is done.
  std::vector<std::future<StepOutcome>> outcomes;
  for (cache::SequenceId id = 1; id <= 6; ++id) {
    Driven d{.id = id, .prompt = reference.prompt, .table = scattered_table(4, static_cast<std::int32_t>(4 * id), 1)};
    compute::StepBatch batch;
    batch.sequences.push_back(d.next());
    RunStep request{std::move(batch), {}};
    outcomes.push_back(executor.address().ask(std::move(request), kGpuTimeout, asio::use_future));
  }
  for (auto& f : outcomes) {
    const auto outcome = f.get();
    ASSERT_TRUE(std::holds_alternative<StepDone>(outcome));
    EXPECT_EQ(std::get<StepDone>(outcome).sampled.at(0).token, reference.greedy[0]);
  }
  EXPECT_EQ(probe->first_sequence_of_run, (std::vector<cache::SequenceId>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(probe->most_inside.load(), 1);
}

TEST_F(GpuExecutorTest, LoadAndStepsRunOffTheIoContextThreads) {
  const auto reference = read_reference("aidreams260K.once.json");
  auto probe = std::make_shared<GpuProbe>();
  probe->io = &ctx_.io();
  auto executor = spawn_executor(probed_factory(probe));
  ASSERT_TRUE(load(executor).loaded());
  Driven d{.id = 1, .prompt = reference.prompt, .table = scattered_table(5, 0, 1)};
  generate(executor, {&d}, 3);
  EXPECT_EQ(probe->loads.load(), 1);
  EXPECT_EQ(probe->runs.load(), 3);
  EXPECT_EQ(probe->calls_on_io_thread.load(), 0);
}

}  // namespace
}  // namespace loom::actors
