#include "bench_command.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_backend.hpp"
#include "bench_timing.hpp"
#include "device_option.hpp"
#include "loom/compute/cpu/cpu_features.hpp"
#include "loom/compute/cpu/llama_model.hpp"
#include "loom/compute/cpu/machine_probe.hpp"
#include "loom/compute/cpu/thread_pool.hpp"
#include "loom/compute/model/model_loader.hpp"

namespace loom::cli {
namespace {

using namespace loom::compute;

constexpr std::int64_t kMaxBatch = 512;       // sequences in one batched decode step
constexpr std::size_t kMaxListEntries = 16;   // entries in -b and -d
constexpr std::int64_t kMaxPrefillChunk = 512;  // tokens per forward pass of the prefill

struct BenchOptions {
  std::string model_path;
  std::int64_t prompt_tokens = 512;
  std::int64_t generated_tokens = 128;
  std::vector<std::int64_t> batch_sizes{1, 8, 64};
  std::vector<std::int64_t> depths{0};  // context already in the cache when generation is timed
  int threads = 1;
  int repetitions = 3;
  bool json = false;
  std::size_t probe_bytes = BandwidthProbe::kDefaultBytes;
  DeviceOption device;  // elsewhere than the CPU: bench_backend.hpp's tests instead
};

// A comma-separated list of integers in [low, high], as option --NAME (-LETTER) takes it.
std::vector<std::int64_t> parse_list(const std::string& text, const std::string& option, std::int64_t low,
                                     std::int64_t high, const std::string& what) {
  std::vector<std::int64_t> values;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    std::int64_t value = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || ec != std::errc{} || end != item.data() + item.size() || value < low || value > high) {
      throw UsageError("option " + option + " expects comma-separated " + what + " in [" + std::to_string(low) + ", " +
                       std::to_string(high) + "], got '" + item + "'");
    }
    values.push_back(value);
    start = comma + 1;
  }
  if (values.size() > kMaxListEntries) {
    throw UsageError("option " + option + " takes at most " + std::to_string(kMaxListEntries) + " " + what);
  }
  return values;
}

BenchOptions read_options(CommandLine& args) {
  BenchOptions o;
  o.model_path = args.text("model", "");
  o.prompt_tokens = args.integer("n-prompt", 512, 0, 1 << 20);
  o.generated_tokens = args.integer("n-gen", 128, 0, 1 << 20);
  const std::string batches = args.text("batch", "1,8,64");
  if (batches != "none") o.batch_sizes = parse_list(batches, "--batch (-b)", 1, kMaxBatch, "batch sizes");
  else o.batch_sizes.clear();
  o.depths = parse_list(args.text("depth", "0"), "--depth (-d)", 0, 1 << 20, "context depths");
  o.threads = static_cast<int>(args.integer("threads", physical_core_count(), 1, 1024));
  o.repetitions = static_cast<int>(args.integer("repetitions", 3, 1, 1000));
  o.json = args.flag("json");
  // The bandwidth probe's buffer must dwarf the last-level cache; 256 MiB does on today's CPUs.
  o.probe_bytes = static_cast<std::size_t>(args.integer("probe-mb", 256, 8, 16384)) << 20;
  o.device = read_device(args);
  args.reject_unknown();
  if (o.model_path.empty()) throw UsageError("bench needs --model PATH");
  if (o.prompt_tokens == 0 && o.generated_tokens == 0) throw UsageError("bench has nothing to run with -p 0 and -n 0");
  return o;
}

// What one token costs the model's matrix products: the bytes of weights it reads (each matrix once; the
// embedding only one row, left out) and the multiply-adds it does.
struct ModelCost {
  std::uint64_t weight_bytes = 0;  // every tensor, as stored
  std::uint64_t params = 0;
  std::uint64_t bytes_per_token = 0;
  std::uint64_t macs_per_token = 0;
  std::string main_type;  // the type holding most of the matrices' bytes
  bool quantized = false;   // most multiply-adds are on quantized weights: the int8 peak bounds them
};

ModelCost model_cost(const ModelWeights& w) {
  ModelCost cost;
  std::map<TensorType, std::uint64_t> bytes_by_type;
  std::uint64_t quantized_macs = 0;
  auto matrix = [&](const TensorView* t) {
    if (t == nullptr) return;
    cost.bytes_per_token += t->bytes;
    const auto macs = static_cast<std::uint64_t>(t->rows()) * static_cast<std::uint64_t>(t->cols());
    cost.macs_per_token += macs;
    bytes_by_type[t->type] += t->bytes;
    if (t->type != TensorType::f32 && t->type != TensorType::f16 && t->type != TensorType::bf16) quantized_macs += macs;
  };
  auto stored = [&](const TensorView* t) {
    if (t == nullptr) return;
    cost.weight_bytes += t->bytes;
    cost.params += static_cast<std::uint64_t>(t->elements());
  };
  for (const auto* t : {w.token_embd, w.output_norm, w.rope_freqs}) stored(t);
  if (w.output != w.token_embd) stored(w.output);
  matrix(w.output);
  for (const auto& l : w.layers) {
    for (const auto* t : {l.wq, l.wk, l.wv, l.wo, l.gate, l.up, l.down}) stored(t), matrix(t);
    for (const auto* t : {l.attn_norm, l.bq, l.bk, l.bv, l.q_norm, l.k_norm, l.ffn_norm}) stored(t);
  }
  const auto most = std::max_element(bytes_by_type.begin(), bytes_by_type.end(),
                                     [](const auto& a, const auto& b) { return a.second < b.second; });
  cost.main_type = most == bytes_by_type.end() ? "-" : std::string(name(most->first));
  cost.quantized = 2 * quantized_macs > cost.macs_per_token;
  return cost;
}

struct Machine {
  double bandwidth = 0;  // bytes/s
  ComputePeak int8;
  ComputePeak fma;
};

// The progress line on stderr: rewritten in place on a terminal, one line per change otherwise.
class Progress {
 public:
  Progress() : terminal_(::isatty(STDERR_FILENO) != 0) {}
  void show(const std::string& text) {
    if (terminal_) {
      std::fprintf(stderr, "\r\033[Kloom bench: %s", text.c_str());
    } else {
      std::fprintf(stderr, "loom bench: %s\n", text.c_str());
    }
    std::fflush(stderr);
  }
  void done() {
    if (terminal_) std::fputs("\r\033[K", stderr);
  }

 private:
  bool terminal_;
};

// One configuration's repetitions: seconds each, and the tokens and steps each one ran.
struct Result {
  std::string test;
  std::string kind;  // prefill, generate, batched
  std::int64_t batch = 1;
  std::int64_t tokens = 0;  // per repetition, all sequences together
  std::int64_t steps = 0;   // forward passes per repetition
  std::vector<double> seconds;
  std::int64_t depth = 0;   // positions of context before the timed tokens
};

std::int64_t largest(const std::vector<std::int64_t>& values) {
  return values.empty() ? 0 : *std::max_element(values.begin(), values.end());
}

class Runner {
 public:
  Runner(const BenchOptions& options, const LoadedModel& loaded, ThreadPool& pool, Progress& progress)
      : options_(options),
        config_(loaded.config()),
        model_(config_, loaded.weights(), pool,
               std::max({std::min(std::max(options.prompt_tokens, largest(options.depths)), kMaxPrefillChunk),
                         largest(options.batch_sizes), std::int64_t{1}})),
        progress_(progress),
        logits_(static_cast<std::size_t>(config_.vocab_size)) {}

  // One token through every weight, so the file's pages are in memory before anything is timed.
  void warm_up() {
    auto cache = model_.make_cache(1);
    const std::int32_t token = token_at(0, config_.vocab_size);
    model_.forward({&token, 1}, 0, cache, LlamaModel::Logits::last, logits_.data());
  }

  Result prefill() {
    const std::int64_t p = options_.prompt_tokens;
    Result r{"pp" + std::to_string(p), "prefill", 1, p, (p + kMaxPrefillChunk - 1) / kMaxPrefillChunk, {}};
    std::vector<std::int32_t> prompt(static_cast<std::size_t>(p));
    for (std::int64_t i = 0; i < p; ++i) prompt[static_cast<std::size_t>(i)] = token_at(i, config_.vocab_size);
    auto cache = model_.make_cache(p);
    repeat(r, [&] { model_.forward(prompt, 0, cache, LlamaModel::Logits::last, logits_.data()); });
    return r;
  }

  // N tokens generated one at a time after `depth` positions of context (prefilled untimed, once: every
  // repetition decodes over the same context), which is where attention's share of a token grows.
  Result generate(std::int64_t depth) {
    const std::int64_t n = options_.generated_tokens;
    const std::string test = "tg" + std::to_string(n) + (depth > 0 ? " @ d" + std::to_string(depth) : "");
    Result r{test, "generate", 1, n, n, {}, depth};
    auto cache = model_.make_cache(depth + n);
    if (depth > 0) {
      progress_.show(test + ": filling " + std::to_string(depth) + " positions of context");
      std::vector<std::int32_t> context(static_cast<std::size_t>(depth));
      for (std::int64_t i = 0; i < depth; ++i) context[static_cast<std::size_t>(i)] = token_at(i, config_.vocab_size);
      for (std::int64_t at = 0; at < depth; at += kMaxPrefillChunk) {
        const std::int64_t count = std::min(kMaxPrefillChunk, depth - at);
        model_.forward({context.data() + at, static_cast<std::size_t>(count)}, at, cache, LlamaModel::Logits::last,
                       logits_.data());
      }
    }
    repeat(r, [&] {
      for (std::int64_t i = 0; i < n; ++i) {
        const std::int32_t token = token_at(i, config_.vocab_size);
        model_.forward({&token, 1}, depth + i, cache, LlamaModel::Logits::last, logits_.data());
      }
    });
    return r;
  }

  // `batch` sequences decoding n tokens each, one token of every sequence per step, through one paged cache.
  Result batched(std::int64_t batch) {
    const std::int64_t n = options_.generated_tokens;
    Result r{"tg" + std::to_string(n) + " b" + std::to_string(batch), "batched", batch, batch * n, n, {}};
    KvCacheOptions kv;
    const std::int64_t blocks_each = (n + kv.block_size - 1) / kv.block_size;
    PagedKvCache pages = model_.make_paged_cache(kv, batch * blocks_each * kv.block_size);
    std::vector<std::int32_t> tables(static_cast<std::size_t>(batch * blocks_each));
    std::iota(tables.begin(), tables.end(), 0);
    std::vector<std::int32_t> tokens(static_cast<std::size_t>(batch));
    std::vector<float> logits(static_cast<std::size_t>(batch * config_.vocab_size));
    std::vector<LlamaModel::SequenceStep> steps(static_cast<std::size_t>(batch));
    for (std::int64_t s = 0; s < batch; ++s) {
      auto& step = steps[static_cast<std::size_t>(s)];
      step.tokens = {&tokens[static_cast<std::size_t>(s)], 1};
      step.block_table = {&tables[static_cast<std::size_t>(s * blocks_each)], static_cast<std::size_t>(blocks_each)};
      step.logits = &logits[static_cast<std::size_t>(s * config_.vocab_size)];
    }
    repeat(r, [&] {
      for (std::int64_t i = 0; i < n; ++i) {
        for (std::int64_t s = 0; s < batch; ++s) {
          tokens[static_cast<std::size_t>(s)] = token_at(i * batch + s, config_.vocab_size);
          steps[static_cast<std::size_t>(s)].start = i;
        }
        model_.forward(steps, pages);
      }
    });
    return r;
  }

 private:
  template <class Run>
  void repeat(Result& r, const Run& run) {
    for (int rep = 0; rep < options_.repetitions; ++rep) {
      progress_.show(r.test + ": repetition " + std::to_string(rep + 1) + "/" + std::to_string(options_.repetitions));
      r.seconds.push_back(seconds_of(run));
    }
  }

  const BenchOptions& options_;
  const ModelConfig& config_;
  LlamaModel model_;
  Progress& progress_;
  std::vector<float> logits_;
};

struct Spread {
  double median = 0, min = 0, max = 0;
};

Spread spread(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  const double median = n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
  return {median, values.front(), values.back()};
}

// Tokens/s and ms per step of each repetition, and where the median stands against the machine's bounds:
// generation reads every weight once per token (bandwidth), prefill multiplies each weight with many
// tokens (arithmetic), a batched step does both, and its larger fraction is the bound it is nearer.
nlohmann::json describe(const Result& r, const ModelCost& cost, const Machine& machine) {
  std::vector<double> rates, step_ms;
  for (double s : r.seconds) {
    rates.push_back(static_cast<double>(r.tokens) / s);
    step_ms.push_back(s * 1e3 / static_cast<double>(r.steps));
  }
  const Spread rate = spread(rates), ms = spread(step_ms);
  const double compute_peak = cost.quantized ? machine.int8.ops_per_second : machine.fma.ops_per_second / 2;  // MAC/s
  const double of_compute = static_cast<double>(cost.macs_per_token) * rate.median / compute_peak;
  // Each forward pass (a token, a step of the batch, a prefill chunk) reads every weight once.
  const double of_bandwidth = static_cast<double>(cost.bytes_per_token) * (1e3 / ms.median) / machine.bandwidth;
  nlohmann::json j{{"test", r.test},
                   {"kind", r.kind},
                   {"batch", r.batch},
                   {"depth", r.depth},
                   {"tokens", r.tokens},
                   {"steps", r.steps},
                   {"repetitions", r.seconds.size()},
                   {"tokens_per_s", {{"median", rate.median}, {"min", rate.min}, {"max", rate.max}}},
                   {"ms_per_step", {{"median", ms.median}, {"min", ms.min}, {"max", ms.max}}},
                   {"of_bandwidth", of_bandwidth},
                   {"of_compute_peak", of_compute}};
  const std::string compute_bound = cost.quantized ? "int8_peak" : "fma_peak";
  if (r.kind == "generate" || (r.kind == "batched" && of_bandwidth >= of_compute)) {
    j["bound"] = "bandwidth";
    j["of_bound"] = of_bandwidth;
  } else {
    j["bound"] = compute_bound;
    j["of_bound"] = of_compute;
  }
  return j;
}

std::string format(const char* pattern, auto... values) {
  char buffer[256];
  std::snprintf(buffer, sizeof buffer, pattern, values...);
  return buffer;
}

void print_table(const nlohmann::json& doc) {
  const auto& m = doc["machine"];
  const auto& model = doc["model"];
  std::printf("machine: %d threads, read bandwidth %.1f GB/s, int8 peak %.1f GMAC/s (%s), FP32 peak %.1f GFLOP/s (%s)\n",
              doc["threads"].get<int>(), m["bandwidth_bytes_per_s"].get<double>() / 1e9,
              m["int8_peak_macs_per_s"].get<double>() / 1e9, m["int8_instruction"].get<std::string>().c_str(),
              m["fma_peak_flops_per_s"].get<double>() / 1e9, m["fma_instruction"].get<std::string>().c_str());
  std::printf("model: %s, %.2f MiB, %.1fM params, %.2f MiB of weights read per token, %.1fM multiply-adds per token\n",
              model["path"].get<std::string>().c_str(), model["weight_bytes"].get<double>() / (1024.0 * 1024.0),
              model["params"].get<double>() / 1e6, model["bytes_per_token"].get<double>() / (1024.0 * 1024.0),
              model["macs_per_token"].get<double>() / 1e6);
  std::printf("| %-20s | %10s | %-6s | %7s | %-14s | %12s | %12s | %12s | %10s | %-16s |\n", "model", "size", "type",
              "threads", "test", "t/s", "t/s min", "t/s max", "ms/step", "of bound");
  std::printf("| %s | %s: | %s | %s: | %s | %s: | %s: | %s: | %s: | %s |\n", std::string(20, '-').c_str(),
              std::string(9, '-').c_str(), std::string(6, '-').c_str(), std::string(6, '-').c_str(),
              std::string(14, '-').c_str(), std::string(11, '-').c_str(), std::string(11, '-').c_str(),
              std::string(11, '-').c_str(), std::string(9, '-').c_str(), std::string(16, '-').c_str());
  for (const auto& r : doc["results"]) {
    const std::string size = format("%.1f MiB", model["weight_bytes"].get<double>() / (1024.0 * 1024.0));
    const std::string bound = format("%.3f %s", r["of_bound"].get<double>(), r["bound"].get<std::string>().c_str());
    std::printf("| %-20.20s | %10s | %-6s | %7d | %-14s | %12.2f | %12.2f | %12.2f | %10.3f | %-16s |\n",
                model["name"].get<std::string>().c_str(), size.c_str(), model["type"].get<std::string>().c_str(),
                doc["threads"].get<int>(), r["test"].get<std::string>().c_str(), r["tokens_per_s"]["median"].get<double>(),
                r["tokens_per_s"]["min"].get<double>(), r["tokens_per_s"]["max"].get<double>(),
                r["ms_per_step"]["median"].get<double>(), bound.c_str());
  }
}

}  // namespace

std::vector<std::string> expand_bench_short_options(int argc, char** argv) {
  static const std::map<std::string, std::string> kLong{
      {"-p", "--n-prompt"}, {"-n", "--n-gen"}, {"-b", "--batch"}, {"-d", "--depth"}, {"-r", "--repetitions"},
      {"-t", "--threads"}};
  std::vector<std::string> args(argv, argv + argc);
  if (argc < 2 || args[1] != "bench") return args;
  for (std::size_t i = 2; i < args.size(); ++i) {
    if (auto it = kLong.find(args[i]); it != kLong.end()) args[i] = it->second;
  }
  return args;
}

int run_bench(CommandLine& args) {
  const BenchOptions options = read_options(args);
  if (options.device.device != "cpu") {
    if (options.depths != std::vector<std::int64_t>{0}) throw UsageError("-d is for --device cpu only");
    return run_backend_bench(BackendBenchOptions{.model_path = options.model_path,
                                                 .device = options.device.device,
                                                 .arithmetic = options.device.arithmetic,
                                                 .prompt_tokens = options.prompt_tokens,
                                                 .generated_tokens = options.generated_tokens,
                                                 .batch_sizes = options.batch_sizes,
                                                 .repetitions = options.repetitions,
                                                 .json = options.json});
  }
  Progress progress;
  progress.show("loading " + options.model_path);
  auto loaded = LoadedModel::open(options.model_path);
  const ModelConfig& config = loaded->config();
  if (options.prompt_tokens > config.context_length || options.generated_tokens > config.context_length) {
    throw UsageError("-p " + std::to_string(options.prompt_tokens) + " and -n " + std::to_string(options.generated_tokens) +
                     " must each fit the model's context length " + std::to_string(config.context_length));
  }
  const std::int64_t deepest = largest(options.depths);
  if (options.generated_tokens > 0 && deepest + options.generated_tokens > config.context_length) {
    throw UsageError("-d " + std::to_string(deepest) + " plus -n " + std::to_string(options.generated_tokens) +
                     " must fit the model's context length " + std::to_string(config.context_length));
  }
  const ModelCost cost = model_cost(loaded->weights());
  ThreadPool pool(options.threads);

  Machine machine;
  progress.show("probing memory bandwidth");
  machine.bandwidth = BandwidthProbe(options.probe_bytes).measure(pool);
  progress.show("probing int8 and FP32 peaks");
  machine.int8 = probe_int8_peak(pool);
  machine.fma = probe_fma_peak(pool);

  Runner runner(options, *loaded, pool, progress);
  runner.warm_up();
  std::vector<Result> results;
  if (options.prompt_tokens > 0) results.push_back(runner.prefill());
  if (options.generated_tokens > 0) {
    for (const std::int64_t d : options.depths) results.push_back(runner.generate(d));
    for (const std::int64_t b : options.batch_sizes) results.push_back(runner.batched(b));
  }
  progress.done();

  nlohmann::json doc;
  doc["model"] = {{"path", options.model_path},
                  {"name", std::filesystem::path(options.model_path).stem().string()},
                  {"architecture", to_string(config.architecture)},
                  {"type", cost.main_type},
                  {"weight_bytes", cost.weight_bytes},
                  {"params", cost.params},
                  {"bytes_per_token", cost.bytes_per_token},
                  {"macs_per_token", cost.macs_per_token}};
  doc["threads"] = options.threads;
  doc["repetitions"] = options.repetitions;
  doc["machine"] = {{"bandwidth_bytes_per_s", machine.bandwidth},
                    {"int8_peak_macs_per_s", machine.int8.ops_per_second},
                    {"int8_instruction", std::string(machine.int8.instruction)},
                    {"fma_peak_flops_per_s", machine.fma.ops_per_second},
                    {"fma_instruction", std::string(machine.fma.instruction)},
                    {"cpu_features", to_string(cpu_features())}};
  doc["results"] = nlohmann::json::array();
  for (const auto& r : results) doc["results"].push_back(describe(r, cost, machine));
  if (options.json) {
    std::printf("%s\n", doc.dump(2).c_str());
  } else {
    print_table(doc);
  }
  return 0;
}

}  // namespace loom::cli
