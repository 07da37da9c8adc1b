// What a decode step costs the scheduler to build and what it sends: sequences decoding at a given
// position count (2,000 by default), driven through the plain Scheduler with the cache manager and the
// executor played by the benchmark (block tables of 16-token blocks, one sampled token per sequence).
// Reports the bytes of the StepBatch (its vectors' payloads and strings, as a message carries them) per
// step and per sequence, beside the time to plan, build and apply one step. Numbers: bench/README.md.
#include <benchmark/benchmark.h>

#include <chrono>
#include <map>
#include <vector>

#include "loom/actors/engine/scheduler.hpp"

namespace {

using loom::actors::ReserveItem;
using loom::actors::ReserveResult;
using loom::actors::Scheduler;
using loom::actors::SchedulerConfig;
using loom::actors::StepDone;
using loom::actors::SubmitSequence;

constexpr std::size_t kBlockSize = 16;

// The cache manager's part: every reservation granted, tables of consecutive block ids.
class FakeCache {
 public:
  ReserveResult grant(const std::vector<ReserveItem>& items) {
    ReserveResult result;
    result.reserved = true;
    for (const auto& item : items) {
      std::size_t& tokens = tokens_[item.sequence];
      tokens += item.tokens.size();
      result.reservations.emplace_back();
      std::vector<loom::cache::BlockId> table;
      const auto base = static_cast<loom::cache::BlockId>(item.sequence * 1000);
      for (std::size_t b = 0; b < (tokens + kBlockSize - 1) / kBlockSize; ++b) {
        table.push_back(base + static_cast<loom::cache::BlockId>(b));
      }
      result.block_tables.push_back(std::move(table));
    }
    return result;
  }

 private:
  std::map<loom::cache::SequenceId, std::size_t> tokens_;
};

StepDone answer(const loom::compute::StepBatch& batch) {
  StepDone done;
  for (const auto& s : batch.sequences) {
    if (s.sample) done.sampled.push_back({.sequence = s.sequence, .token = 5, .logprob = 0.0f, .top = {}});
    done.tokens_computed += s.tokens.size();
  }
  return done;
}

// args: sequences, positions each has when the measured steps begin.
void BM_DecodeStep(benchmark::State& state) {
  const auto sequences = static_cast<std::size_t>(state.range(0));
  const auto positions = static_cast<std::size_t>(state.range(1));
  SchedulerConfig config;
  config.context_length = static_cast<std::int64_t>(positions + 100'000);
  config.max_running = sequences;
  config.max_batch_tokens = 4096;
  Scheduler scheduler(config);
  FakeCache cache;
  for (std::size_t i = 0; i < sequences; ++i) {
    SubmitSequence submit;
    submit.sequence = i + 1;
    submit.prompt.assign(positions, 3);
    submit.params.max_tokens = 1 << 30;
    submit.params.stop = {"</s>", "\n\nUser:"};  // a typical request's stop strings
    (void)scheduler.submit(std::move(submit));
  }
  const auto now = std::chrono::steady_clock::now();
  // Prefill until every sequence decodes.
  for (int guard = 0; guard < 10'000; ++guard) {
    auto plan = scheduler.plan_step();
    auto batch = scheduler.start_step(cache.grant(plan.reserve), now);
    bool all_decode = true;
    for (const auto& s : batch.sequences) all_decode = all_decode && s.tokens.size() == 1;
    scheduler.apply_step(answer(batch), now);
    if (all_decode && batch.sequences.size() == sequences) break;
  }
  std::size_t bytes = 0, steps = 0;
  for (auto _ : state) {
    auto plan = scheduler.plan_step();
    auto batch = scheduler.start_step(cache.grant(plan.reserve), now);
    bytes += loom::compute::payload_bytes(batch);
    ++steps;
    benchmark::DoNotOptimize(batch);
    scheduler.apply_step(answer(batch), now);
  }
  state.counters["bytes_per_step"] = static_cast<double>(bytes) / static_cast<double>(steps);
  state.counters["bytes_per_sequence"] =
      static_cast<double>(bytes) / static_cast<double>(steps) / static_cast<double>(sequences);
}
// A fixed 100 steps, so the positions stay at 2,000-2,100 (each step adds one to every sequence).
BENCHMARK(BM_DecodeStep)
    ->Args({1, 2000})
    ->Args({8, 2000})
    ->Args({32, 2000})
    ->Iterations(100)
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
