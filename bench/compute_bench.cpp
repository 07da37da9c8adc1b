// CPU backend throughput, reported against the machine's own memory bandwidth measured in this binary:
// decode is memory-bound (every weight byte is read once per token), so bytes streamed per second over the
// bandwidth a plain parallel read reaches is the fraction of the possible we achieve. Matrix-matrix
// products (BM_Gemm: prefill and batched decode) are compute-bound instead, so they are reported against
// the int8 dot-product and FP32 FMA peaks probed in this binary, and against OpenBLAS sgemm on the same
// shape in the same run. See bench/README.md.
//
//   build/bin/compute_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
//   build/bin/compute_bench --benchmark_filter='BM_ComputePeak|BM_Gemm/q8_0'
//
// Environment: LOOM_BENCH_THREADS (default: physical cores), LOOM_SHARED_DIR (default ../shared).
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cstdlib>
#include <ctime>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <filesystem>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "loom/compute/cpu/attention.hpp"
#include "loom/compute/cpu/dequantize.hpp"
#include "loom/compute/cpu/kernel_path.hpp"
#include "loom/compute/cpu/llama_model.hpp"
#include "loom/compute/cpu/machine_probe.hpp"
#include "loom/compute/cpu/matmul.hpp"
#include "loom/compute/cpu/paged_kv_cache.hpp"
#include "loom/compute/cpu/quantize.hpp"
#include "loom/compute/cpu/thread_pool.hpp"
#include "loom/compute/cpu/vec_dot.hpp"
#include "loom/compute/model/half.hpp"
#include "loom/compute/model/model_loader.hpp"
#include "loom/compute/model_synth.hpp"

namespace {

using namespace loom::compute;

int bench_threads() {
  if (const char* env = std::getenv("LOOM_BENCH_THREADS")) return std::max(1, std::atoi(env));
  return physical_core_count();
}

std::string shared_dir() {
  if (const char* env = std::getenv("LOOM_SHARED_DIR")) return env;
  return LOOM_DEFAULT_SHARED_DIR;
}

ThreadPool& pool() {
  static ThreadPool instance(bench_threads());
  return instance;
}

// Bytes per second of a parallel streaming read of a buffer far larger than the caches, by the same
// thread pool and chunking the kernels use (machine_probe.hpp: 256-bit loads, XOR-folded), best of 3 passes.
double probe_bandwidth() {
  static BandwidthProbe probe;  // 256 MiB, allocated once
  return probe.measure(pool(), 3);
}

// The probe read just before a benchmark's loop and again just after it, keeping the higher: on a shared
// host the bandwidth moves by up to 2x within minutes, so a fraction is only honest against a probe of the
// same moment, and the higher of the two keeps it conservative.
class BandwidthAround {
 public:
  BandwidthAround() : before_(probe_bandwidth()) {}
  double bandwidth() const { return std::max(before_, probe_bandwidth()); }

 private:
  double before_;
};

void BM_MemoryBandwidth(benchmark::State& state) {
  double best = 0;
  for (auto _ : state) best = std::max(best, probe_bandwidth());
  state.counters["GB/s"] = best / 1e9;
}

// A 16384 x 4096 weight matrix (larger than the last-level cache in every type) times one activation
// vector: the decode shape.
void BM_Matvec(benchmark::State& state, TensorType type) {
  const std::int64_t n = 4096, rows = 16384;
  std::vector<float> values(static_cast<std::size_t>(rows * n));
  std::uint64_t x = 88172645463325252ull;
  for (auto& v : values) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    v = static_cast<float>(static_cast<double>(x >> 11) * 0x1.0p-53 - 0.5);
  }
  const std::uint64_t row_bytes = *tensor_bytes(type, n);
  std::vector<std::byte> data(row_bytes * rows);
  for (std::int64_t r = 0; r < rows; ++r) quantize_row(type, &values[static_cast<std::size_t>(r * n)], &data[row_bytes * r], n);
  TensorView w{"bench", type, {n, rows}, data.data(), data.size()};
  std::vector<float> in(static_cast<std::size_t>(n), 0.5f), out(static_cast<std::size_t>(rows));
  MatmulScratch scratch;
  scratch.reserve(1, n);
  const BandwidthAround probe;
  for (auto _ : state) matmul(w, in.data(), 1, out.data(), pool(), scratch);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * data.size()));
  // (bytes per call / seconds per call) / bandwidth
  state.counters["of_bandwidth"] = benchmark::Counter(static_cast<double>(data.size()) / probe.bandwidth(),
                                                       benchmark::Counter::kIsIterationInvariantRate);
}

// The same matrix through one kernel path's rows_cols on the pool (tasks of 128 rows, as matmul splits
// them), with Arg activation columns: 1 is decode's matrix-vector shape, 16 a batch, where the kernels are
// compute-bound rather than memory-bound. The AVX-512 and AVX2 paths give the same bits (vec_dot.hpp), so
// their ratio in one run is what VNNI buys; the activations are quantized once, outside the timing.
void BM_KernelPath(benchmark::State& state, TensorType type, KernelPath path) {
  if (!kernel_path_supported(path)) {
    state.SkipWithError(("this CPU cannot run the " + std::string(name(path)) + " path").c_str());
    return;
  }
  const std::int64_t n = 4096, rows = 16384;
  const int cols = static_cast<int>(state.range(0));
  std::uint64_t x = 88172645463325252ull;
  auto next = [&] {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return static_cast<float>(static_cast<double>(x >> 11) * 0x1.0p-53 - 0.5);
  };
  const std::uint64_t row_bytes = *tensor_bytes(type, n);
  std::vector<std::byte> data(row_bytes * rows);
  std::vector<float> values(static_cast<std::size_t>(n));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (auto& v : values) v = next();
    quantize_row(type, values.data(), &data[row_bytes * r], n);
  }
  const VecDotKernel kernel = vec_dot_kernel(type, path);
  const std::uint64_t act_row_bytes = *tensor_bytes(kernel.activation_type(), n);
  std::vector<std::byte> activations(act_row_bytes * static_cast<std::uint64_t>(cols));
  for (int c = 0; c < cols; ++c) {
    for (auto& v : values) v = next();
    quantize_row(kernel.activation_type(), values.data(), &activations[act_row_bytes * c], n);
  }
  std::vector<float> out(static_cast<std::size_t>(rows * cols));
  constexpr std::int64_t kRows = 128;
  const BandwidthAround probe;
  for (auto _ : state) {
    pool().parallel_for(rows / kRows, [&](std::int64_t task) {
      const std::int64_t first = task * kRows;
      kernel.rows_cols(&data[row_bytes * first], row_bytes, kRows, activations.data(), act_row_bytes, cols, n,
                       &out[static_cast<std::size_t>(first)], static_cast<std::size_t>(rows));
    });
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["of_bandwidth"] = benchmark::Counter(static_cast<double>(data.size()) / probe.bandwidth(),
                                                       benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GMAC/s"] = benchmark::Counter(static_cast<double>(rows * n * cols) / 1e9,
                                                benchmark::Counter::kIsIterationInvariantRate);
}

// A model of 110M-parameter shape (dim 768, ffn 2048, 12 layers, 12 heads, Llama-2 vocabulary), written
// once per type (and context length) into the temp folder, or a shared file.
std::string model_path(const std::string& which, std::int64_t context_length = 1024) {
  if (which == "q4_k_m") return shared_dir() + "/models/synth11M-q4_k_m.gguf";
  const std::string context = context_length == 1024 ? "" : "_ctx" + std::to_string(context_length);
  const auto path = std::filesystem::temp_directory_path() / ("loom_bench_110M_" + which + context + ".gguf");
  if (!std::filesystem::exists(path)) {
    SynthSpec spec;
    spec.dim = 768;
    spec.ffn_dim = 2048;
    spec.layers = 12;
    spec.heads = 12;
    spec.kv_heads = 12;
    spec.context_length = context_length;
    spec.vocab_from = shared_dir() + "/vocab/ggml-vocab-llama-spm.gguf";
    spec.type = which == "f16"    ? TensorType::f16
                : which == "q8_0" ? TensorType::q8_0
                : which == "q4_k" ? TensorType::q4_k
                : which == "q6_k" ? TensorType::q6_k
                : which == "q4_1" ? TensorType::q4_1
                : which == "q5_0" ? TensorType::q5_0
                : which == "q5_1" ? TensorType::q5_1
                : which == "iq4_nl" ? TensorType::iq4_nl
                : which == "q2_k" ? TensorType::q2_k
                : which == "q3_k" ? TensorType::q3_k
                : which == "iq4_xs" ? TensorType::iq4_xs
                                  : TensorType::q4_0;
    write_synthetic_model(spec, path.string());
  }
  return path.string();
}

std::uint64_t weight_bytes(const GgufFile& file) {
  std::uint64_t total = 0;
  for (const auto& t : file.tensors()) {
    if (t.name != "token_embd.weight") total += t.bytes;  // the embedding is read one row per token
  }
  return total;
}

void BM_Decode(benchmark::State& state, std::string which) {
  auto loaded = LoadedModel::open(model_path(which));
  LlamaModel model(loaded->config(), loaded->weights(), pool(), 1);
  auto cache = model.make_cache(256);
  std::vector<float> logits(static_cast<std::size_t>(loaded->config().vocab_size));
  std::vector<double> token_seconds;
  token_seconds.reserve(100000);
  std::int64_t position = 0;
  const BandwidthAround probe;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    const std::int32_t token = static_cast<std::int32_t>(position % 1000) + 100;
    model.forward({&token, 1}, position, cache, LlamaModel::Logits::last, logits.data());
    position = (position + 1) % 64;  // attention stays short, as in the first tokens of a reply
    token_seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  const auto bytes = static_cast<double>(weight_bytes(*loaded->gguf()));
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["model_MB"] = bytes / 1e6;
  // Fraction of the bandwidth bound: (bytes per token / time per token) / bandwidth. The median token
  // (of_bandwidth) is the engine's own speed; the mean (of_bandwidth_mean, and the time column) also carries
  // the tokens that this shared host's neighbours stalled, which on these VMs is 10-15 % more.
  const double bandwidth = probe.bandwidth();
  std::nth_element(token_seconds.begin(), token_seconds.begin() + static_cast<std::ptrdiff_t>(token_seconds.size() / 2),
                   token_seconds.end());
  const double median = token_seconds[token_seconds.size() / 2];
  state.counters["probe_GB/s"] = bandwidth / 1e9;
  state.counters["ms_median"] = median * 1e3;
  state.counters["of_bandwidth"] = bytes / median / bandwidth;
  state.counters["of_bandwidth_mean"] = benchmark::Counter(bytes / bandwidth, benchmark::Counter::kIsIterationInvariantRate);
}

// Decode of one token at 100 positions of context and at 2,000, alternating in one run (110M shape, F16
// KV cache in 16-token blocks): the long-context target is tokens/s at 2,000 >= 0.6x tokens/s at 100,
// so `ratio` (median token at 100 / median token at 2,000) is that figure. The cache is filled with random
// F16 keys and values instead of a 2,000-token prefill: attention's time does not depend on their values.
void BM_DecodeAtContext(benchmark::State& state, std::string which) {
  constexpr std::int64_t kShort = 100, kLong = 2000;
  auto loaded = LoadedModel::open(model_path(which, 2048));
  LlamaModel model(loaded->config(), loaded->weights(), pool(), 1);
  auto cache = model.make_cache(2048);
  const auto& c = loaded->config();
  std::uint64_t x = 88172645463325252ull;
  auto next = [&] {  // uniform in [-1, 1): keys and values of the size a model's have
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return static_cast<float>(static_cast<double>(x >> 11) * 0x1.0p-52 - 1.0);
  };
  const auto elements = static_cast<std::size_t>(cache.pages().blocks() * cache.pages().block_size() * c.kv_dim());
  for (std::int64_t layer = 0; layer < c.layers; ++layer) {
    auto* k = static_cast<std::uint16_t*>(cache.pages().keys(layer));
    auto* v = static_cast<std::uint16_t*>(cache.pages().values(layer));
    for (std::size_t i = 0; i < elements; ++i) k[i] = float_to_half(next()), v[i] = float_to_half(next());
  }
  std::vector<float> logits(static_cast<std::size_t>(c.vocab_size));
  // Wall time, and the calling thread's CPU time: with LOOM_BENCH_THREADS=1 all the work is on this thread,
  // so its CPU time leaves out the waits for a core that a host shared with other jobs adds to wall time.
  struct Times {
    std::vector<double> wall, cpu;
  } short_times, long_times;
  const auto thread_seconds = [] {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
  };
  auto decode_at = [&](std::int64_t position, Times& times) {
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = thread_seconds();
    const std::int32_t token = static_cast<std::int32_t>(100 + times.wall.size() % 1000);
    model.forward({&token, 1}, position, cache, LlamaModel::Logits::last, logits.data());
    times.cpu.push_back(thread_seconds() - cpu_start);
    times.wall.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  };
  for (auto _ : state) {
    decode_at(kShort, short_times);
    decode_at(kLong, long_times);
  }
  const auto median = [](std::vector<double>& values) {
    std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2), values.end());
    return values[values.size() / 2];
  };
  const double at_short = median(short_times.wall), at_long = median(long_times.wall);
  state.counters["ms_at_100"] = at_short * 1e3;
  state.counters["ms_at_2000"] = at_long * 1e3;
  state.counters["ratio"] = at_short / at_long;  // tokens/s at 2,000 over tokens/s at 100
  const double cpu_short = median(short_times.cpu), cpu_long = median(long_times.cpu);
  state.counters["cpu_ms_at_100"] = cpu_short * 1e3;
  state.counters["cpu_ms_at_2000"] = cpu_long * 1e3;
  state.counters["cpu_ratio"] = cpu_short / cpu_long;  // the same from CPU time: for one thread only
}

// Prefill of Arg tokens from position 0 (a model of context 2,048 past 1,024 tokens).
void BM_Prefill(benchmark::State& state, std::string which) {
  const std::int64_t n = state.range(0);
  auto loaded = LoadedModel::open(model_path(which, n > 1024 ? 2048 : 1024));
  LlamaModel model(loaded->config(), loaded->weights(), pool(), n);
  auto cache = model.make_cache(n);
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) tokens[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(100 + i);
  std::vector<float> logits(static_cast<std::size_t>(loaded->config().vocab_size));
  for (auto _ : state) model.forward(tokens, 0, cache, LlamaModel::Logits::last, logits.data());
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(state.iterations() * n), benchmark::Counter::kIsRate);
}

// `sequences` sequences each decoding one token per iteration, at 64 positions of history in a shared paged
// cache: as one step (Arg 1: all tokens through each matrix product together) or as one step per sequence
// (Arg 0: the baseline). tokens/s of the two, from the same run, is what batching decode buys.
void BM_DecodeSequences(benchmark::State& state, std::string which) {
  auto loaded = LoadedModel::open(model_path(which));
  constexpr int kSequences = 8;
  constexpr std::int64_t kHistory = 64;
  const bool batched = state.range(0) != 0;
  LlamaModel model(loaded->config(), loaded->weights(), pool(), kHistory);
  PagedKvCache pages = model.make_paged_cache({}, kSequences * (kHistory + 16));
  const auto vocab = static_cast<std::size_t>(loaded->config().vocab_size);
  std::vector<float> logits(kSequences * vocab);
  std::vector<std::int32_t> tables(static_cast<std::size_t>(pages.blocks()));
  std::iota(tables.begin(), tables.end(), 0);
  const auto blocks_each = static_cast<std::size_t>(pages.blocks() / kSequences);
  std::vector<std::int32_t> history(kHistory);
  std::iota(history.begin(), history.end(), 100);
  std::vector<LlamaModel::SequenceStep> steps;
  for (int s = 0; s < kSequences; ++s) {
    const std::span<const std::int32_t> table(tables.data() + s * blocks_each, blocks_each);
    LlamaModel::SequenceStep prefill{history, 0, table, nullptr, LlamaModel::Logits::none};
    model.forward({&prefill, 1}, pages);
    steps.push_back({{&history[static_cast<std::size_t>(s)], 1}, kHistory, table, &logits[s * vocab], LlamaModel::Logits::last});
  }
  for (auto _ : state) {
    if (batched) {
      model.forward(steps, pages);
    } else {
      for (const auto& step : steps) model.forward({&step, 1}, pages);
    }
  }
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * kSequences), benchmark::Counter::kIsRate);
}


// Time to first token for a 1,000-token prompt (the shared synth11M Q8_0 model, context 2,048), with its
// first `cached` tokens already in the paged cache (Arg 960: a conversation's next turn whose history is
// cached) or none (Arg 0: the baseline, everything prefilled). Only positions [cached, 1000) run.
void BM_TimeToFirstToken(benchmark::State& state) {
  constexpr std::int64_t kPrompt = 1000;
  const std::int64_t cached = state.range(0);
  auto loaded = LoadedModel::open(shared_dir() + "/models/synth11M-q8_0.gguf");
  LlamaModel model(loaded->config(), loaded->weights(), pool(), kPrompt);
  auto cache = model.make_cache(kPrompt);
  std::vector<std::int32_t> prompt(static_cast<std::size_t>(kPrompt));
  for (std::int64_t i = 0; i < kPrompt; ++i) prompt[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(100 + (i * 37) % 30000);
  std::vector<float> logits(static_cast<std::size_t>(loaded->config().vocab_size));
  model.forward(prompt, 0, cache, LlamaModel::Logits::last, logits.data());  // the cached history
  const std::span<const std::int32_t> rest(prompt.data() + cached, static_cast<std::size_t>(kPrompt - cached));
  for (auto _ : state) model.forward(rest, cached, cache, LlamaModel::Logits::last, logits.data());
  state.counters["positions_computed"] = static_cast<double>(kPrompt - cached);
}

// Decode attention alone over the paged F16 cache, in 16-token blocks, several layers' worth of K/V (more
// than the last-level cache) visited in turn. Every K/V byte of a layer is read once per step (a group's query
// heads are one task, HeadAttention::query_heads), so of_bandwidth = (K/V bytes per layer / time) / bandwidth.
// First Arg: the layout, 1 the forward pass's (per block, each KV head's key rows and its transposed values,
// llama_model.cpp), 0 rows of kv_dim (the layout before it), for an A/B in one run. Second Arg: the shape,
// 0: 32 query heads in groups of 4 over 8 KV heads of 128, 4,096 positions in scattered blocks, 4 layers
// (67 MB); 1: the 110M model's, 12 heads of 64, 2,000 positions in consecutive blocks (a lone sequence's
// KvCache), 12 layers (74 MB).
void BM_AttentionDecode(benchmark::State& state) {
  const bool blocks_layout = state.range(0) != 0;
  const bool small_heads = state.range(1) != 0;
  const std::int64_t kLayers = small_heads ? 12 : 4, kHeads = small_heads ? 12 : 32, kKvHeads = small_heads ? 12 : 8;
  const std::int64_t kHeadDim = small_heads ? 64 : 128, kPositions = small_heads ? 2000 : 4096;
  constexpr std::int64_t kBlock = 16;
  const std::int64_t kKvDim = kKvHeads * kHeadDim, kBlocks = (kPositions + kBlock - 1) / kBlock;
  PagedKvCache pages(kLayers, kKvDim, kBlock, kBlocks);
  std::uint64_t x = 88172645463325252ull;
  auto next = [&] {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return static_cast<float>(static_cast<double>(x >> 11) * 0x1.0p-53 - 0.5);
  };
  for (std::int64_t layer = 0; layer < kLayers; ++layer) {
    auto* k = static_cast<std::uint16_t*>(pages.keys(layer));
    auto* v = static_cast<std::uint16_t*>(pages.values(layer));
    for (std::int64_t i = 0; i < kBlocks * kBlock * kKvDim; ++i) {
      k[i] = float_to_half(next());
      v[i] = float_to_half(next());
    }
  }
  std::vector<std::int32_t> table(static_cast<std::size_t>(kBlocks));
  std::iota(table.begin(), table.end(), 0);
  if (!small_heads) std::shuffle(table.begin(), table.end(), std::mt19937(5));
  std::vector<float> query(static_cast<std::size_t>(kHeads * kHeadDim)), out(query.size());
  for (auto& q : query) q = next();
  const std::int64_t span = small_heads ? reference_span(kPositions, 2048) : kPositions;  // the model's view
  const std::int64_t group = kHeads / kKvHeads;
  const std::size_t scratch = attention_scratch_floats(span, kHeadDim, group);
  std::vector<float> scores(scratch * static_cast<std::size_t>(pool().size()));
  std::int64_t layer = 0;
  const BandwidthAround probe;
  for (auto _ : state) {
    const auto* keys = static_cast<const std::uint16_t*>(pages.keys(layer));
    const auto* values = static_cast<const std::uint16_t*>(pages.values(layer));
    pool().parallel_for(kKvHeads, [&](std::int64_t kv_head, int thread) {  // a task per group of query heads
      HeadAttention head;
      const std::int64_t h = kv_head * group;
      head.query = &query[static_cast<std::size_t>(h * kHeadDim)];
      head.query_heads = group;
      const std::int64_t head_offset = kv_head * kHeadDim * (blocks_layout ? kBlock : 1);
      head.keys = keys + head_offset;
      head.values = values + head_offset;
      head.stride = blocks_layout ? kHeadDim : kKvDim;
      head.block_table = table.data();
      head.block_size = kBlock;
      head.block_stride = kKvDim * kBlock;
      head.values_transposed = blocks_layout;
      head.positions = kPositions;
      head.head_dim = kHeadDim;
      head.scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
      head.span = span;
      head.scores = &scores[static_cast<std::size_t>(thread) * scratch];
      head.out = &out[static_cast<std::size_t>(h * kHeadDim)];
      attend(head);
    });
    layer = (layer + 1) % kLayers;
  }
  const double bytes = 2.0 * kPositions * kKvDim * sizeof(std::uint16_t);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
  state.counters["of_bandwidth"] = benchmark::Counter(bytes / probe.bandwidth(), benchmark::Counter::kIsIterationInvariantRate);
}
// The machine's arithmetic peaks on the benchmarks' pool (machine_probe.hpp), probed once per run: the
// int8 dot-product instruction the quantized kernels use, and FP32 FMA. Every GEMM result below is a
// fraction of one of them. Best of 100 rounds of 5 ms (machine_probe.hpp says why short rounds).
const ComputePeak& int8_peak() {
  static const ComputePeak peak = probe_int8_peak(pool(), best_int8_dot_form(), {0.005, 100});
  return peak;
}

const ComputePeak& fma_peak() {
  static const ComputePeak peak = probe_fma_peak(pool(), best_fma_form(), {0.005, 100});
  return peak;
}

void BM_ComputePeak(benchmark::State& state, bool int8) {
  ComputePeak peak;
  for (auto _ : state) {
    peak = int8 ? probe_int8_peak(pool(), best_int8_dot_form(), {0.005, 100}) : probe_fma_peak(pool(), best_fma_form(), {0.005, 100});
  }
  state.SetLabel(std::string(peak.instruction));
  state.counters[int8 ? "GMAC/s" : "GFLOP/s"] = peak.ops_per_second / 1e9;
  state.counters["Ginstr/s"] = peak.instructions_per_second / 1e9;
  state.counters["ops/instr"] = peak.ops_per_instruction;
  state.counters["threads"] = peak.threads;
}

// One weight matrix of a GEMM benchmark: random values in `type` (compute's quantizers), and the same
// weights dequantized to F32 for the OpenBLAS baseline. Only the latest is kept: the benchmarks of one
// (type, shape) run one after another, and the 1.1B shape in F32 alone is 46 MB.
struct GemmWeights {
  TensorType type{};
  std::int64_t rows = 0, cols = 0;
  std::vector<std::byte> data;
  std::vector<float> dequantized;
  TensorView view;
};

const GemmWeights& gemm_weights(TensorType type, std::int64_t rows, std::int64_t cols) {
  static GemmWeights w;
  if (w.type == type && w.rows == rows && w.cols == cols && !w.data.empty()) return w;
  w = GemmWeights{type, rows, cols, {}, {}, {}};
  std::uint64_t x = 88172645463325252ull ^ static_cast<std::uint64_t>(rows * 131 + cols);
  std::vector<float> values(static_cast<std::size_t>(cols));
  const std::uint64_t row_bytes = *tensor_bytes(type, static_cast<std::uint64_t>(cols));
  w.data.resize(row_bytes * static_cast<std::uint64_t>(rows));
  w.dequantized.resize(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (auto& v : values) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      v = static_cast<float>(static_cast<double>(x >> 11) * 0x1.0p-53 - 0.5);
    }
    std::byte* row = &w.data[row_bytes * static_cast<std::uint64_t>(r)];
    quantize_row(type, values.data(), row, cols);
    dequantize_row(type, row, &w.dequantized[static_cast<std::size_t>(r * cols)], cols);
  }
  w.view = TensorView{"gemm", type, {cols, rows}, w.data.data(), w.data.size()};
  return w;
}

// Per-call times of a benchmark's calls, summarised two ways. On this shared host a neighbour's burst can
// deschedule one of the pool's threads in the middle of a call, and the caller then waits milliseconds for
// it: that stalls some calls (the median absorbs those) or, under heavy load, most of them (then only the
// best call shows the code's own speed, as the peak probes' best round shows the machine's).
struct CallTimes {
  double best = 0, median = 0;
};

CallTimes summarise(std::vector<double> seconds) {
  std::sort(seconds.begin(), seconds.end());
  return {seconds.front(), seconds[seconds.size() / 2]};
}

// Seconds per call of OpenBLAS sgemm on the dequantized weights, y = x · Wᵀ, split over the pool as
// matmul.cpp splits its own BLAS work: each thread one contiguous share of the weight rows, OpenBLAS
// single-threaded inside it. Enough calls to fill 0.2 s (at least 5), after one warm-up call.
CallTimes openblas_seconds(const GemmWeights& w, const float* x, std::int64_t tokens, float* y) {
  openblas_set_num_threads(1);
  const std::int64_t threads = pool().size();
  const std::int64_t share = (w.rows + threads - 1) / threads;
  auto call = [&] {
    pool().parallel_for(threads, [&](std::int64_t t) {
      const std::int64_t first = t * share, n = std::min(share, w.rows - first);
      if (n <= 0) return;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(tokens), static_cast<int>(n),
                  static_cast<int>(w.cols), 1.0f, x, static_cast<int>(w.cols), &w.dequantized[static_cast<std::size_t>(first * w.cols)],
                  static_cast<int>(w.cols), 0.0f, y + first, static_cast<int>(w.rows));
    });
  };
  call();
  std::vector<double> seconds;
  double elapsed = 0;
  while (seconds.size() < 5 || elapsed < 0.2) {
    const auto start = std::chrono::steady_clock::now();
    call();
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    elapsed += seconds.back();
  }
  return summarise(std::move(seconds));
}

bool quantized(TensorType type) { return type != TensorType::f32 && type != TensorType::f16 && type != TensorType::bf16; }

// matmul (the public API, as the forward pass calls it) of a rows x cols weight matrix with `tokens`
// activation columns. Rates come from the best call (CallTimes; `_median` counters from the median call;
// the Time column is the mean). GFLOP/s counts 2 per multiply-add; of_int8_peak (quantized weights: MACs per second
// over the int8 probe's) or of_fma_peak (float weights: FLOP/s over the FMA probe's) and vs_openblas (our
// speed over OpenBLAS sgemm's on the same shape, dequantized, same threads) all come from this run.
void BM_Gemm(benchmark::State& state, TensorType type, std::int64_t rows, std::int64_t cols) {
  const std::int64_t tokens = state.range(0);
  const GemmWeights& w = gemm_weights(type, rows, cols);
  std::vector<float> x(static_cast<std::size_t>(tokens * cols)), y(static_cast<std::size_t>(tokens * rows));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37) % 101) / 101.0f - 0.5f;
  MatmulScratch scratch;
  scratch.reserve(tokens, cols);
  const double macs = static_cast<double>(rows) * static_cast<double>(cols) * static_cast<double>(tokens);
  const double peak = quantized(type) ? int8_peak().ops_per_second : fma_peak().ops_per_second / 2;  // MAC/s
  matmul(w.view, x.data(), tokens, y.data(), pool(), scratch);  // warm-up
  std::vector<double> seconds;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    matmul(w.view, x.data(), tokens, y.data(), pool(), scratch);
    benchmark::DoNotOptimize(y.data());
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  const CallTimes ours = summarise(std::move(seconds));
  const CallTimes blas = openblas_seconds(w, x.data(), tokens, y.data());
  state.counters["GFLOP/s"] = 2 * macs / ours.best / 1e9;
  state.counters["GFLOP/s_median"] = 2 * macs / ours.median / 1e9;
  state.counters[quantized(type) ? "of_int8_peak" : "of_fma_peak"] = macs / ours.best / peak;
  state.counters["vs_openblas"] = blas.best / ours.best;
  state.counters["vs_openblas_median"] = blas.median / ours.median;
  state.counters["openblas_GFLOP/s"] = 2 * macs / blas.best / 1e9;
}

// The 110M model's products (768x768 attention, 2048x768 gate/up, 768x2048 down) and the 1.1B shape's
// (2048x2048, 5632x2048), weight rows x columns, for every weight type, at 1 to 512 tokens.
bool register_gemm_benchmarks() {
  const std::pair<const char*, TensorType> types[] = {
      {"f32", TensorType::f32},   {"f16", TensorType::f16},   {"bf16", TensorType::bf16}, {"q8_0", TensorType::q8_0},
      {"q4_0", TensorType::q4_0}, {"q4_k", TensorType::q4_k}, {"q5_k", TensorType::q5_k}, {"q6_k", TensorType::q6_k},
      {"q4_1", TensorType::q4_1}, {"q5_0", TensorType::q5_0}, {"q5_1", TensorType::q5_1}, {"iq4_nl", TensorType::iq4_nl},
      {"q2_k", TensorType::q2_k}, {"q3_k", TensorType::q3_k}, {"iq4_xs", TensorType::iq4_xs}};
  const std::pair<std::int64_t, std::int64_t> shapes[] = {{768, 768}, {2048, 768}, {768, 2048}, {2048, 2048}, {5632, 2048}};
  for (const auto& [type_name, type] : types) {
    for (const auto& [rows, cols] : shapes) {
      const std::string name = "BM_Gemm/" + std::string(type_name) + "/" + std::to_string(rows) + "x" + std::to_string(cols);
      benchmark::RegisterBenchmark(name.c_str(), [type, rows, cols](benchmark::State& state) { BM_Gemm(state, type, rows, cols); })
          ->ArgName("tokens")
          ->Arg(1)->Arg(8)->Arg(16)->Arg(64)->Arg(512)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  return true;
}

}  // namespace

BENCHMARK(BM_MemoryBandwidth)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ComputePeak, int8, true)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ComputePeak, fma, false)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Matvec, f16, TensorType::f16)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Matvec, q8_0, TensorType::q8_0)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Matvec, q4_0, TensorType::q4_0)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Matvec, q4_k, TensorType::q4_k)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Matvec, q2_k, TensorType::q2_k)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Matvec, q3_k, TensorType::q3_k)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Matvec, iq4_xs, TensorType::iq4_xs)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_KernelPath, q8_0_avx2, TensorType::q8_0, KernelPath::avx2)->Arg(1)->Arg(16)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_KernelPath, q8_0_avx512, TensorType::q8_0, KernelPath::avx512)->Arg(1)->Arg(16)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_KernelPath, q4_0_avx2, TensorType::q4_0, KernelPath::avx2)->Arg(1)->Arg(16)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_KernelPath, q4_0_avx512, TensorType::q4_0, KernelPath::avx512)->Arg(1)->Arg(16)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_KernelPath, q4_k_avx2, TensorType::q4_k, KernelPath::avx2)->Arg(1)->Arg(16)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_KernelPath, q4_k_avx512, TensorType::q4_k, KernelPath::avx512)->Arg(1)->Arg(16)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_KernelPath, q6_k_avx2, TensorType::q6_k, KernelPath::avx2)->Arg(1)->Arg(16)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_KernelPath, q6_k_avx512, TensorType::q6_k, KernelPath::avx512)->Arg(1)->Arg(16)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_KernelPath, q4_1_avx2, TensorType::q4_1, KernelPath::avx2)->Arg(1)->Arg(16)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_KernelPath, q4_1_avx512, TensorType::q4_1, KernelPath::avx512)->Arg(1)->Arg(16)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_KernelPath, q5_0_avx2, TensorType::q5_0, KernelPath::avx2)->Arg(1)->Arg(16)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_KernelPath, q5_0_avx512, TensorType::q5_0, KernelPath::avx512)->Arg(1)->Arg(16)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_KernelPath, q5_1_avx2, TensorType::q5_1, KernelPath::avx2)->Arg(1)->Arg(16)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_KernelPath, q5_1_avx512, TensorType::q5_1, KernelPath::avx512)->Arg(1)->Arg(16)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_KernelPath, iq4_nl_avx2, TensorType::iq4_nl, KernelPath::avx2)->Arg(1)->Arg(16)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_KernelPath, iq4_nl_avx512, TensorType::iq4_nl, KernelPath::avx512)->Arg(1)->Arg(16)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_KernelPath, q2_k_avx2, TensorType::q2_k, KernelPath::avx2)->Arg(1)->Arg(16)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_KernelPath, q2_k_avx512, TensorType::q2_k, KernelPath::avx512)->Arg(1)->Arg(16)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_KernelPath, q3_k_avx2, TensorType::q3_k, KernelPath::avx2)->Arg(1)->Arg(16)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_KernelPath, q3_k_avx512, TensorType::q3_k, KernelPath::avx512)->Arg(1)->Arg(16)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_KernelPath, iq4_xs_avx2, TensorType::iq4_xs, KernelPath::avx2)->Arg(1)->Arg(16)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_KernelPath, iq4_xs_avx512, TensorType::iq4_xs, KernelPath::avx512)->Arg(1)->Arg(16)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Decode, f16_110M, "f16")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Decode, q8_0_110M, "q8_0")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Decode, q4_0_110M, "q4_0")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Decode, q4_k_m_11M, "q4_k_m")->UseRealTime()->Unit(benchmark::kMillisecond);
// The 32-value block types of issue 20 (their kernels: vec_dot_small_blocks.inc).
BENCHMARK_CAPTURE(BM_Decode, q4_1_110M, "q4_1")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Decode, q5_0_110M, "q5_0")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Decode, q5_1_110M, "q5_1")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Decode, iq4_nl_110M, "iq4_nl")->UseRealTime()->Unit(benchmark::kMillisecond);
// The 256-value ones (vec_dot_low_bit_k.inc), and Q4_K at the same shape beside them.
BENCHMARK_CAPTURE(BM_Decode, q4_k_110M, "q4_k")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Decode, q2_k_110M, "q2_k")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Decode, q3_k_110M, "q3_k")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Decode, iq4_xs_110M, "iq4_xs")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_DecodeAtContext, q8_0_110M, "q8_0")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Prefill, f16_110M, "f16")->Arg(128)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Prefill, q8_0_110M, "q8_0")->Arg(128)->Arg(512)->Arg(2048)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Prefill, q4_0_110M, "q4_0")->Arg(128)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Prefill, q4_k_110M, "q4_k")->Arg(128)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Prefill, q6_k_110M, "q6_k")->Arg(128)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Prefill, q4_1_110M, "q4_1")->Arg(128)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Prefill, q5_0_110M, "q5_0")->Arg(128)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Prefill, q5_1_110M, "q5_1")->Arg(128)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Prefill, iq4_nl_110M, "iq4_nl")->Arg(128)->UseRealTime()->Unit(benchmark::kMillisecond);

BENCHMARK(BM_TimeToFirstToken)->Arg(0)->Arg(960)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AttentionDecode)->ArgsProduct({{0, 1}, {0, 1}})->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_DecodeSequences, q8_0_110M, "q8_0")->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

// After the benchmarks above (registration order is run order), so the probes' lines come first.
[[maybe_unused]] static const bool gemm_registered = register_gemm_benchmarks();

BENCHMARK_MAIN();
