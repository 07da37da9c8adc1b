#include "bench_backend.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <numeric>

#include <nlohmann/json.hpp>

#include "bench_timing.hpp"
#include "command_line.hpp"
#include "loom/compute/devices.hpp"

namespace loom::cli {
namespace {

using namespace loom::compute;

constexpr std::int64_t kChunk = 512;  // prompt tokens per step

// Sequences with disjoint block ranges of `per` blocks each, greedy, released after each test.
class BackendRunner {
 public:
  BackendRunner(Backend& backend, std::int64_t per) : backend_(backend), per_(per) {}

  // A prompt of p tokens in chunks, the last sampling.
  void prefill(SequenceId id, std::int64_t p) {
    const std::int64_t vocab = backend_.info().config.vocab_size;
    for (std::int64_t start = 0; start < p; start += kChunk) {
      StepSequence s{.sequence = id, .start = start, .table_from = start == 0 ? 0 : per_, .sample = start + kChunk >= p};
      for (std::int64_t i = start; i < std::min(p, start + kChunk); ++i) s.tokens.push_back(token_at(i, vocab));
      if (start == 0) s.blocks = table(id), s.begin = SequenceStart{.params = greedy()};
      backend_.run(StepBatch{.sequences = {std::move(s)}});
    }
  }

  // n steps of one token for each of `ids`, all in one step; each sequence holds `held` positions.
  void decode(const std::vector<SequenceId>& ids, std::int64_t held, std::int64_t n) {
    for (std::int64_t g = 0; g < n; ++g) {
      StepBatch batch;
      for (const SequenceId id : ids) {
        batch.sequences.push_back(StepSequence{.sequence = id, .tokens = {token_at(g, 97)}, .start = held + g,
                                               .table_from = per_, .sample = true});
      }
      backend_.run(batch);
    }
  }

  void release(const std::vector<SequenceId>& ids) {
    for (const SequenceId id : ids) backend_.release(id);
  }

 private:
  static proto::SamplingParams greedy() {
    proto::SamplingParams p;
    p.temperature = 0.0;
    return p;
  }
  std::vector<BlockId> table(SequenceId id) const {
    std::vector<BlockId> blocks(static_cast<std::size_t>(per_));
    std::iota(blocks.begin(), blocks.end(), static_cast<BlockId>(id * per_));
    return blocks;
  }
  Backend& backend_;
  std::int64_t per_;
};

nlohmann::json summary(const std::string& test, std::int64_t tokens, std::int64_t steps, std::vector<double> seconds) {
  std::vector<double> rates;
  for (const double s : seconds) rates.push_back(static_cast<double>(tokens) / s);
  std::sort(rates.begin(), rates.end());
  std::sort(seconds.begin(), seconds.end());
  const std::size_t mid = rates.size() / 2;
  return {{"test", test},
          {"tokens_per_s", {{"median", rates[mid]}, {"min", rates.front()}, {"max", rates.back()}}},
          {"ms_per_step", seconds[mid] * 1e3 / static_cast<double>(std::max<std::int64_t>(1, steps))}};
}

}  // namespace

int run_backend_bench(const BackendBenchOptions& o) {
  const std::int64_t widest = std::max<std::int64_t>(1, o.batch_sizes.empty() ? 1 : *std::max_element(o.batch_sizes.begin(), o.batch_sizes.end()));
  const std::int64_t positions = std::max(o.prompt_tokens, o.generated_tokens + 1) + 1;
  const std::int64_t per = (positions + 15) / 16;
  LoadOptions load;
  load.model_path = o.model_path;
  load.device = o.device;
  load.arithmetic = o.arithmetic;
  load.kv_tokens = per * 16 * widest;
  load.max_batch_tokens = std::max(kChunk, widest);
  std::fprintf(stderr, "loom bench: loading %s on %s\n", o.model_path.c_str(), o.device.c_str());
  const auto backend = load_backend(load);
  const ModelConfig& config = backend->info().config;
  if (positions > config.context_length) {
    throw UsageError("-p and -n must each fit the model's context length " + std::to_string(config.context_length));
  }
  BackendRunner runner(*backend, per);
  runner.prefill(0, 1);  // warm-up: pipelines made, weights touched
  runner.release({0});
  nlohmann::json results = nlohmann::json::array();
  if (o.prompt_tokens > 0) {
    std::vector<double> seconds;
    for (int r = 0; r < o.repetitions; ++r) {
      seconds.push_back(seconds_of([&] { runner.prefill(0, o.prompt_tokens); }));
      runner.release({0});
    }
    results.push_back(summary("pp" + std::to_string(o.prompt_tokens), o.prompt_tokens,
                              (o.prompt_tokens + kChunk - 1) / kChunk, seconds));
  }
  if (o.generated_tokens > 0) {
    std::vector<std::int64_t> batches{1};
    for (const std::int64_t b : o.batch_sizes) {
      if (b > 1) batches.push_back(b);
    }
    for (const std::int64_t b : batches) {
      std::vector<SequenceId> ids(static_cast<std::size_t>(b));
      std::iota(ids.begin(), ids.end(), 0);
      std::vector<double> seconds;
      for (int r = 0; r < o.repetitions; ++r) {
        for (const SequenceId id : ids) runner.prefill(id, 1);
        seconds.push_back(seconds_of([&] { runner.decode(ids, 1, o.generated_tokens); }));
        runner.release(ids);
      }
      const std::string name = b == 1 ? "tg" + std::to_string(o.generated_tokens)
                                      : "tg" + std::to_string(o.generated_tokens) + " x" + std::to_string(b);
      results.push_back(summary(name, o.generated_tokens * b, o.generated_tokens, seconds));
    }
  }
  nlohmann::json doc{{"model", {{"path", o.model_path}, {"name", std::filesystem::path(o.model_path).stem().string()}}},
                     {"device", o.device},
                     {"device_name", backend->info().device},
                     {"repetitions", o.repetitions},
                     {"results", results}};
  if (o.json) {
    std::printf("%s\n", doc.dump(2).c_str());
    return 0;
  }
  std::printf("model: %s, device %s (%s), %d repetitions\n", o.model_path.c_str(), o.device.c_str(),
              backend->info().device.c_str(), o.repetitions);
  std::printf("%-12s %10s %10s %10s %10s\n", "test", "t/s", "t/s min", "t/s max", "ms/step");
  for (const auto& r : results) {
    std::printf("%-12s %10.1f %10.1f %10.1f %10.2f\n", r["test"].get<std::string>().c_str(),
                r["tokens_per_s"]["median"].get<double>(), r["tokens_per_s"]["min"].get<double>(),
                r["tokens_per_s"]["max"].get<double>(), r["ms_per_step"].get<double>());
  }
  return 0;
}

}  // namespace loom::cli
