// Tokenizer throughput on 1 MiB of English prose: the licence texts that every Debian system carries in
// /usr/share/common-licenses (GPL, Apache, MPL, ...), concatenated and repeated to 1 MiB. The issue asks
// that 1 MB take well under a second; the report gives seconds per MiB and tokens per second, and, as a
// same-run baseline, a plain scan of the same bytes splitting at spaces (what any tokenizer must at least do).
//
//   build/bin/tokenizer_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
//
// Environment: LOOM_SHARED_DIR (default ../shared) for the vocabularies.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>

#include "loom/compute/model/gguf_file.hpp"
#include "loom/compute/text/tokenizer.hpp"

namespace {

using namespace loom::compute;

constexpr std::size_t kTextBytes = 1u << 20;

std::string shared_dir() {
  if (const char* env = std::getenv("LOOM_SHARED_DIR")) return env;
  return LOOM_DEFAULT_SHARED_DIR;
}

const std::string& english_text() {
  static const std::string text = [] {
    std::string corpus;
    const std::filesystem::path dir = "/usr/share/common-licenses";
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (entry.is_regular_file()) files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      std::ifstream in(file, std::ios::binary);
      corpus.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    if (corpus.empty()) throw std::runtime_error("no text found in " + dir.string());
    std::string out;
    while (out.size() < kTextBytes) out += corpus;
    out.resize(kTextBytes);
    return out;
  }();
  return text;
}

const Tokenizer& tokenizer(const std::string& vocab_file) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& entry = cache[vocab_file];
  if (!entry) entry = std::make_unique<Tokenizer>(Vocabulary::from_gguf(GgufFile::open(shared_dir() + "/vocab/" + vocab_file)));
  return *entry;
}

void report(benchmark::State& state, std::size_t tokens) {
  const auto bytes = static_cast<double>(english_text().size());
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(bytes));
  state.counters["tokens"] = static_cast<double>(tokens);
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["s_per_MiB"] = benchmark::Counter(bytes / (1 << 20), benchmark::Counter::kIsIterationInvariantRate |
                                                                          benchmark::Counter::kInvert);
}

void BM_Encode(benchmark::State& state, const std::string& vocab_file) {
  const Tokenizer& t = tokenizer(vocab_file);
  const std::string& text = english_text();
  std::size_t tokens = 0;
  for (auto _ : state) {
    const auto ids = t.encode(text, {.add_special = false});
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  report(state, tokens);
}

// The baseline: find every word boundary in the same bytes.
void BM_SplitAtSpaces(benchmark::State& state) {
  const std::string& text = english_text();
  std::size_t words = 0;
  for (auto _ : state) {
    words = 0;
    for (std::size_t i = text.find(' '); i != std::string::npos; i = text.find(' ', i + 1)) ++words;
    benchmark::DoNotOptimize(words);
  }
  report(state, words);
}

}  // namespace

BENCHMARK_CAPTURE(BM_Encode, sentencepiece_llama, std::string("ggml-vocab-llama-spm.gguf"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, byte_level_bpe_gpt2, std::string("ggml-vocab-gpt-2.gguf"))->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SplitAtSpaces)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
