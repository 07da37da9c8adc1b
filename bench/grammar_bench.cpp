// Token-mask cost per generated token under a grammar (issue 21's target: median <= 0.3 ms and p99 <= 2 ms
// per token per sequence). For each vocabulary and grammar, a JSON document is cut into tokens (greedy
// longest match over the vocabulary's bytes: every byte string a model could produce, no tokenizer
// specifics), and at the state after each token the mask for the next one is computed with
// grammar::allowed_tokens; the counters give the median and p99 over those positions, in milliseconds.
// The same-run baseline: the brute-force mask (copy the state and try each token alone) at every 8th
// position; `speedup` is its median over the trie walk's median at those positions.
//
// Vocabularies: the real 32,000-token Llama SentencePiece vocabulary (synth11M-q8_0.gguf), and a synthetic
// 151,936-token one (Qwen2's size): GPT-2's 50,257 real byte-level BPE pieces, then 20,000 CJK pieces of 1
// to 3 ideographs (half with a leading space), then concatenations of two random GPT-2 pieces (at most 16
// bytes) until 151,936, all distinct, from a fixed seed.
//
// Grammars: the generic JSON grammar of the tests, a schema-shaped one written by hand (fixed keys, typed
// values), and the JSON Schema converter's own grammar of a person schema (json_schema_to_gbnf: keys in
// order, bounded whitespace, an integer range, an email format, a nested object).
//
//   build/bin/grammar_bench --benchmark_min_time=1
//
// Environment: LOOM_SHARED_DIR (default ../shared) for the vocabularies; GRAMMAR_BENCH_SLOW=1 lists the warm
// positions over 0.5 ms (position, live stacks, whether a UTF-8 character is begun).
//
// Step overhead at batch 16 (BM_ConstrainedSampling, BM_ConstrainedStep): what a decode step of 16 sequences
// pays for their constraints. BM_ConstrainedSampling is the sampling phase alone on the 32,000-token Llama
// vocabulary (ggml-vocab-llama-spm.gguf): each of 16 sequences walks the JSON document from its own offset,
// and per step each is masked (its TokenMasker, warm), sampled under the mask (default sampling parameters,
// fixed random logits) and moved on by the document's next token (accept_token); the same-run baseline is
// the 16 samples without a constraint. BM_ConstrainedStep is the whole CpuBackend step (forward pass of
// synth11M-q8_0, the same vocabulary, 2 threads) of 16 decoding sequences, all under the JSON grammar
// against all free, alternated in the same run.
#include <benchmark/benchmark.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <limits>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "loom/compute/grammar/grammar.hpp"
#include "loom/compute/grammar/grammar_state.hpp"
#include "loom/compute/grammar/json_schema.hpp"
#include "loom/compute/grammar/token_mask.hpp"
#include "loom/compute/grammar/token_masker.hpp"
#include "loom/compute/cpu/cpu_backend.hpp"
#include "loom/compute/sampler.hpp"
#include "loom/compute/model/gguf_file.hpp"
#include "loom/compute/text/tokenizer.hpp"
#include "../tests/compute/grammar_test_grammars.hpp"

namespace {

using namespace loom::compute;
using namespace loom::compute::grammar;

constexpr const char* kSchemaGrammar = R"g(root ::= "{" ws "\"name\":" ws string "," ws "\"age\":" ws integer "," ws "\"email\":" ws string "," ws "\"tags\":" ws "[" ws (string ("," ws string)*)? "]" ws "," ws "\"address\":" ws address "}" ws
address ::= "{" ws "\"street\":" ws string "," ws "\"city\":" ws string "," ws "\"zip\":" ws string "}" ws
string  ::= "\"" ([^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}))* "\"" ws
integer ::= "-"? ("0" | [1-9] [0-9]{0,15}) ws
ws      ::= | " " | "\n" [ ]{0,20}
)g";

std::string shared_dir() {
  if (const char* env = std::getenv("LOOM_SHARED_DIR")) return env;
  return LOOM_DEFAULT_SHARED_DIR;
}

std::vector<std::string> pieces_of(const std::string& vocab_path, std::vector<bool>& special) {
  const Tokenizer tokenizer(Vocabulary::from_gguf(GgufFile::open(vocab_path)));
  const Vocabulary& v = tokenizer.vocabulary();
  std::vector<std::string> pieces;
  special.clear();
  for (std::int32_t id = 0; id < v.size(); ++id) {
    const TokenKind kind = v.kinds[static_cast<std::size_t>(id)];
    special.push_back(kind == TokenKind::control || kind == TokenKind::unknown || kind == TokenKind::unused ||
                      kind == TokenKind::undefined);
    pieces.push_back(tokenizer.piece(id));
  }
  return pieces;
}

std::string utf8(char32_t cp) {
  std::string out;
  out += static_cast<char>(0xE0 | (cp >> 12));
  out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
  out += static_cast<char>(0x80 | (cp & 0x3F));
  return out;
}

struct Vocab {
  std::vector<std::string> pieces;
  std::vector<bool> special;
  std::shared_ptr<const TokenTrie> trie;
};

const Vocab& vocabulary(const std::string& name) {
  static std::map<std::string, Vocab> cache;
  Vocab& v = cache[name];
  if (v.trie) return v;
  if (name == "llama32000") {
    v.pieces = pieces_of(shared_dir() + "/models/synth11M-q8_0.gguf", v.special);
  } else {
    v.pieces = pieces_of(shared_dir() + "/vocab/ggml-vocab-gpt-2.gguf", v.special);
    std::set<std::string> seen(v.pieces.begin(), v.pieces.end());
    const std::size_t base = v.pieces.size();
    std::mt19937_64 rng(151936);
    auto add = [&](std::string s) {
      if (!s.empty() && seen.insert(s).second) {
        v.pieces.push_back(std::move(s));
        v.special.push_back(false);
      }
    };
    while (v.pieces.size() < base + 20000) {
      std::string s = rng() % 2 ? " " : "";
      const int n = 1 + static_cast<int>(rng() % 3);
      for (int i = 0; i < n; ++i) s += utf8(0x4E00 + static_cast<char32_t>(rng() % 0x5200));
      add(std::move(s));
    }
    while (v.pieces.size() < 151936) {
      const std::string& a = v.pieces[rng() % base];
      const std::string& b = v.pieces[rng() % base];
      if (a.size() + b.size() <= 16) add(a + b);
    }
  }
  v.trie = TokenTrie::build(v.pieces, v.special);
  return v;
}

std::string json_document() {
  std::string doc = "{\"items\": [";
  const char* words[] = {"alpha", "caf\xc3\xa9", "r\xc3\xa9sum\xc3\xa9", "\xe6\x9d\xb1\xe4\xba\xac", "x", "quote \\\"q\\\"", "tab\\t", "3.14"};
  for (int i = 0; i < 12; ++i) {
    if (i) doc += ", ";
    doc += "{\"id\": " + std::to_string(1000 + i * 37) + ", \"name\": \"" + words[i % 8] + " " + words[(i + 3) % 8] +
           "\", \"score\": " + std::to_string(i) + "." + std::to_string(i * 7 % 10) + "e-" + std::to_string(i % 3) +
           ", \"ok\": " + (i % 2 ? "true" : "false") + ", \"tags\": [\"a\", \"bc\"], \"next\": null}";
  }
  doc += "],\n  \"count\": 12}";
  return doc;
}

// The person schema the converter's grammar comes from, and a document under it (the converter writes keys
// in sorted order: nlohmann::json keeps objects sorted).
constexpr const char* kPersonSchema = R"j({"type":"object","additionalProperties":false,
  "required":["address","age","email","name","tags"],
  "properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0,"maximum":150},
    "email":{"type":"string","format":"email"},"tags":{"type":"array","items":{"type":"string"}},
    "address":{"type":"object","additionalProperties":false,"required":["city","street","zip"],
      "properties":{"street":{"type":"string"},"city":{"type":"string"},"zip":{"type":"string"}}}}})j";

std::string converted_document() {
  std::string doc = "{\"address\": {\"city\": \"London\", \"street\": \"12 St James's Square\", \"zip\": \"SW1Y 4JH\"}, "
                    "\"age\": 36, \"email\": \"ada@example.org\", \"name\": \"Ada Lovelace\", \"tags\": [";
  for (int i = 0; i < 30; ++i) doc += std::string(i ? ", " : "") + "\"tag number " + std::to_string(i) + "\"";
  return doc + "]}";
}

std::string schema_document() {
  std::string doc = "{\"name\": \"Ada Lovelace\", \"age\": 36, \"email\": \"ada@example.org\", \"tags\": [";
  for (int i = 0; i < 30; ++i) doc += std::string(i ? ", " : "") + "\"tag number " + std::to_string(i) + "\"";
  doc += "], \"address\": {\"street\": \"12 St James's Square\", \"city\": \"London\", \"zip\": \"SW1Y 4JH\"}}";
  return doc;
}

// The document cut into the vocabulary's tokens (greedy longest match over the trie): their ids.
std::vector<std::int32_t> token_cut(const TokenTrie& trie, const std::string& doc) {
  std::vector<std::int32_t> ids;
  const auto& nodes = trie.nodes();
  std::size_t at = 0;
  while (at < doc.size()) {
    std::size_t node = 0;
    std::size_t best = 0;
    std::int32_t best_id = -1;
    for (std::size_t k = at; k < doc.size(); ++k) {
      const auto& n = nodes[node];
      std::size_t next = 0;
      for (std::uint32_t c = n.first_child; c < n.first_child + n.child_count; ++c) {
        if (nodes[c].byte == static_cast<std::uint8_t>(doc[k])) next = c;
      }
      if (next == 0) break;
      node = next;
      if (nodes[node].tokens_end > nodes[node].tokens_begin) {
        best = k + 1 - at;
        best_id = trie.token_ids()[nodes[node].tokens_begin];
      }
    }
    if (best == 0) throw std::runtime_error("the document has a byte no token covers");
    ids.push_back(best_id);
    at += best;
  }
  return ids;
}

// The states before each token of `doc`, cut greedily into the vocabulary's longest matching pieces.
std::vector<GrammarState> positions(const std::shared_ptr<const Grammar>& g, const Vocab& v, const std::string& doc) {
  std::vector<GrammarState> states;
  GrammarState state(g);
  for (const std::int32_t id : token_cut(*v.trie, doc)) {
    states.push_back(state);
    if (!state.accept(v.trie->bytes(id))) throw std::runtime_error("the grammar refuses the document");
  }
  states.push_back(state);
  return states;
}

// Per-call times are this thread's CPU time, not wall time: the benchmark machine is shared (load 6-7 on
// 2 cores while this was written), and a wall clock puts other processes' time slices into the p99.
struct ThreadCpuClock {
  using duration = std::chrono::nanoseconds;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = std::chrono::time_point<ThreadCpuClock>;
  [[maybe_unused]] static constexpr bool is_steady = true;
  static time_point now() noexcept {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return time_point(duration(std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec));
  }
};

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

void BM_Mask(benchmark::State& state, const std::string& vocab_name, const std::string& grammar_name) {
  const Vocab& v = vocabulary(vocab_name);
  const bool schema = grammar_name == "schema";
  const bool converted = grammar_name == "converted";
  const auto g = parse_gbnf(converted ? json_schema_to_gbnf(nlohmann::json::parse(kPersonSchema))
                                      : schema ? kSchemaGrammar : testing::kJsonGrammar);
  const auto states =
      positions(g, v, converted ? converted_document() : schema ? schema_document() : json_document());
  std::vector<std::uint8_t> mask;
  using clock = ThreadCpuClock;
  auto ms_since = [](clock::time_point t0) { return std::chrono::duration<double, std::milli>(clock::now() - t0).count(); };

  // Cold: a fresh masker meets each context for the first time along the document (a new grammar's first
  // request). Warm: the same masker on later passes (every later request under that grammar).
  std::vector<double> cold;
  std::vector<double> warm;
  for (auto _ : state) {
    const TokenMasker masker(g, v.trie);
    for (int pass = 0; pass < 3; ++pass) {
      for (const GrammarState& s : states) {
        const auto t0 = clock::now();
        masker.fill(s, 0, mask);
        (pass == 0 ? cold : warm).push_back(ms_since(t0));
        if (pass == 2 && std::getenv("GRAMMAR_BENCH_SLOW") && warm.back() > 0.5) {
          std::fprintf(stderr, "slow %.3f ms: position %zu stacks %zu partial %d\n", warm.back(),
                       static_cast<std::size_t>(&s - states.data()), s.ends().size(), s.partial().needed);
        }
        benchmark::DoNotOptimize(mask.data());
      }
    }
  }
  state.counters["positions"] = static_cast<double>(states.size());
  state.counters["median_ms"] = percentile(warm, 0.5);
  state.counters["p99_ms"] = percentile(warm, 0.99);
  state.counters["max_ms"] = percentile(warm, 1.0);
  state.counters["cold_median_ms"] = percentile(cold, 0.5);
  state.counters["cold_p99_ms"] = percentile(cold, 0.99);
  state.counters["cold_max_ms"] = percentile(cold, 1.0);

  // Baselines at every 4th position: the plain trie walk (allowed_tokens) and each token tried alone.
  std::vector<double> brute;
  std::vector<double> walk;
  std::vector<double> masked;
  const TokenMasker masker(g, v.trie);
  for (const GrammarState& s : states) masker.fill(s, 0, mask);
  for (std::size_t i = 0; i < states.size(); i += 4) {
    auto t0 = clock::now();
    allowed_tokens(states[i], *v.trie, 0, mask);
    walk.push_back(ms_since(t0));
    t0 = clock::now();
    masker.fill(states[i], 0, mask);
    masked.push_back(ms_since(t0));
    if (i % 32 == 0) {
      t0 = clock::now();
      std::size_t allowed = 0;
      for (std::int32_t id = 0; id < v.trie->vocab_size(); ++id) {
        if (v.trie->in_trie(id)) allowed += states[i].can_accept(v.trie->bytes(id)) ? 1 : 0;
      }
      benchmark::DoNotOptimize(allowed);
      brute.push_back(ms_since(t0));
    }
  }
  state.counters["walk_median_ms"] = percentile(walk, 0.5);
  state.counters["walk_p99_ms"] = percentile(walk, 0.99);
  state.counters["brute_median_ms"] = percentile(brute, 0.5);
  state.counters["x_walk_mean"] = std::accumulate(walk.begin(), walk.end(), 0.0) / std::accumulate(masked.begin(), masked.end(), 0.0);
}


constexpr std::size_t kBatch = 16;

void BM_ConstrainedSampling(benchmark::State& state) {
  const auto tokenizer = std::make_shared<const Tokenizer>(
      Vocabulary::from_gguf(GgufFile::open(shared_dir() + "/vocab/ggml-vocab-llama-spm.gguf")));
  const Vocabulary& vocabulary = tokenizer->vocabulary();
  const std::vector<std::int32_t> ends{vocabulary.eos};
  const auto trie = TokenTrie::from_tokenizer(*tokenizer);
  const auto g = parse_gbnf(testing::kJsonGrammar);
  const TokenMasker masker(g, trie);
  const std::string doc = json_document();
  const std::vector<std::int32_t> cut = token_cut(*trie, doc);
  const auto vocab = static_cast<std::size_t>(trie->vocab_size());

  std::mt19937_64 rng(16);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<std::vector<float>> logits(kBatch, std::vector<float>(vocab));
  for (auto& row : logits) {
    for (float& l : row) l = normal(rng);
  }
  std::vector<std::int32_t> history(64);
  for (auto& t : history) t = static_cast<std::int32_t>(rng() % vocab);
  std::vector<Sampler> constrained_samplers;
  std::vector<Sampler> free_samplers;
  for (std::size_t i = 0; i < kBatch; ++i) {
    loom::proto::SamplingParams params;  // the defaults: temperature 0.8, top-k 40, top-p 0.95, min-p 0.05
    params.seed = i;
    constrained_samplers.emplace_back(params, static_cast<std::int32_t>(vocab));
    free_samplers.emplace_back(params, static_cast<std::int32_t>(vocab));
  }
  // Each sequence at its own place in the document; back to its start at the end.
  std::vector<GrammarState> states(kBatch, GrammarState(g));
  std::vector<std::size_t> at(kBatch, 0);
  for (std::size_t i = 0; i < kBatch; ++i) {
    for (std::size_t k = 0; k < i * cut.size() / kBatch; ++k) accept_token(states[i], *trie, cut[at[i]++]);
  }
  std::vector<std::vector<std::uint8_t>> masks(kBatch);
  using clock = ThreadCpuClock;
  auto ms_since = [](clock::time_point t0) { return std::chrono::duration<double, std::milli>(clock::now() - t0).count(); };
  double mask_ms = 0.0;  // of the step, by part
  double accept_ms = 0.0;
  auto constrained_step = [&] {
    mask_ms = accept_ms = 0.0;
    for (std::size_t i = 0; i < kBatch; ++i) {
      auto t0 = clock::now();
      masker.fill(states[i], ends, masks[i]);
      mask_ms += ms_since(t0);
      benchmark::DoNotOptimize(constrained_samplers[i].sample(logits[i], history, masks[i]));
      if (at[i] == cut.size()) {
        states[i] = GrammarState(g);
        at[i] = 0;
      }
      t0 = clock::now();
      if (!accept_token(states[i], *trie, cut[at[i]++])) throw std::runtime_error("the grammar refused the document");
      accept_ms += ms_since(t0);
    }
  };
  auto free_step = [&] {
    for (std::size_t i = 0; i < kBatch; ++i) benchmark::DoNotOptimize(free_samplers[i].sample(logits[i], history));
  };
  for (std::size_t k = 0; k < cut.size(); ++k) constrained_step();  // warm: every context met once

  std::vector<double> constrained;
  std::vector<double> free;
  std::vector<double> masks_ms;
  std::vector<double> accepts_ms;
  for (auto _ : state) {
    for (std::size_t k = 0; k < cut.size(); ++k) {
      auto t0 = clock::now();
      free_step();
      free.push_back(ms_since(t0));
      t0 = clock::now();
      constrained_step();
      constrained.push_back(ms_since(t0));
      masks_ms.push_back(mask_ms);
      accepts_ms.push_back(accept_ms);
    }
  }
  state.counters["mask_median_ms"] = percentile(masks_ms, 0.5);
  state.counters["mask_p99_ms"] = percentile(masks_ms, 0.99);
  state.counters["accept_median_ms"] = percentile(accepts_ms, 0.5);
  state.counters["accept_p99_ms"] = percentile(accepts_ms, 0.99);
  state.counters["steps"] = static_cast<double>(constrained.size());
  state.counters["free_median_ms"] = percentile(free, 0.5);
  state.counters["constrained_median_ms"] = percentile(constrained, 0.5);
  state.counters["constrained_p99_ms"] = percentile(constrained, 0.99);
  state.counters["overhead_median_ms"] = percentile(constrained, 0.5) - percentile(free, 0.5);
  state.counters["x_free"] = percentile(constrained, 0.5) / percentile(free, 0.5);
}

// args: decode steps measured per run.
void BM_ConstrainedStep(benchmark::State& state) {
  constexpr std::int64_t kBlockSize = 16;
  constexpr std::int64_t kBlocksEach = 8;  // 128 positions per sequence
  LoadOptions options;
  options.model_path = shared_dir() + "/models/synth11M-q8_0.gguf";
  options.threads = 2;
  options.kv.block_size = kBlockSize;
  options.kv_tokens = kBlockSize * kBlocksEach * static_cast<std::int64_t>(kBatch);
  options.max_batch_tokens = 512;
  const auto backend = CpuBackend::load(options);
  const auto prompt = backend->tokenizer()->encode("Once upon a time");
  const Vocabulary& vocabulary = backend->tokenizer()->vocabulary();
  const auto decode_steps = static_cast<std::size_t>(state.range(0));
  SequenceId next_id = 0;
  // The tests' JSON grammar, but objects one after another and the end token banned: a random model closes
  // an object soon, and a sequence that may only end would measure nothing.
  std::string grammar = testing::kJsonGrammar;
  const std::string root = "root   ::= object";
  grammar.replace(grammar.find(root), root.size(), "root   ::= object (\"\\n\" object)*");

  // One run of 16 sequences: a prefill step, then `decode_steps` decode steps, each timed (wall clock: the
  // forward pass runs on the pool's threads).
  std::size_t samples = 0;
  std::size_t ended = 0;  // constrained samples that were the end token (the grammar complete)
  std::string example;    // one constrained sequence's text, for the log
  auto run = [&](bool constrained, std::vector<double>& times) {
    StepBatch batch;
    std::vector<SequenceId> ids;
    for (std::size_t i = 0; i < kBatch; ++i) {
      StepSequence s;
      s.sequence = next_id++;
      ids.push_back(s.sequence);
      loom::proto::SamplingParams params;
      params.seed = s.sequence;
      if (constrained) {
        params.constraint = loom::proto::OutputConstraint{loom::proto::OutputConstraint::Kind::grammar, grammar};
        params.logit_bias[vocabulary.eos] = -std::numeric_limits<double>::infinity();
      }
      s.begin = SequenceStart{params, {}};
      s.tokens = prompt;
      for (std::int64_t b = 0; b < kBlocksEach; ++b) s.blocks.push_back(static_cast<BlockId>(static_cast<std::int64_t>(i) * kBlocksEach + b));
      s.sample = true;
      batch.sequences.push_back(std::move(s));
    }
    StepResult result = backend->run(batch);
    std::vector<std::int32_t> first;
    for (std::size_t step = 0; step < decode_steps; ++step) {
      for (std::size_t i = 0; i < kBatch; ++i) {
        StepSequence& s = batch.sequences[i];
        if (!result.sampled[i].error.empty()) throw std::runtime_error(result.sampled[i].error);
        if (constrained) {
          ++samples;
          ended += vocabulary.is_end_of_generation(result.sampled[i].token) ? 1 : 0;
          if (i == 0) first.push_back(result.sampled[i].token);
        }
        s.start += static_cast<std::int64_t>(s.tokens.size());
        s.tokens = {result.sampled[i].token};  // an end token too: the grammar then allows only the end again
        s.begin.reset();
        s.blocks.clear();
        s.table_from = kBlocksEach;
      }
      const auto t0 = std::chrono::steady_clock::now();
      result = backend->run(batch);
      times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    for (const SequenceId id : ids) backend->release(id);
    if (constrained) example = backend->tokenizer()->decode(first);
  };
  std::vector<double> free;
  std::vector<double> constrained;
  std::vector<double> scratch;
  run(true, scratch);  // warm the masker's contexts the random model's text meets first
  for (auto _ : state) {
    run(false, free);
    run(true, constrained);
  }
  state.counters["free_median_ms"] = percentile(free, 0.5);
  state.counters["constrained_median_ms"] = percentile(constrained, 0.5);
  state.counters["overhead_median_ms"] = percentile(constrained, 0.5) - percentile(free, 0.5);
  state.counters["x_free"] = percentile(constrained, 0.5) / percentile(free, 0.5);
  state.counters["ended_share"] = static_cast<double>(ended) / static_cast<double>(samples);
  std::fprintf(stderr, "BM_ConstrainedStep: a constrained sequence's text: %s\n", example.c_str());
}

}  // namespace

BENCHMARK(BM_ConstrainedSampling)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_ConstrainedStep)->Arg(48)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_CAPTURE(BM_Mask, llama32000_json, std::string("llama32000"), std::string("json"))->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(BM_Mask, llama32000_schema, std::string("llama32000"), std::string("schema"))->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(BM_Mask, synthetic151936_json, std::string("synthetic151936"), std::string("json"))->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(BM_Mask, synthetic151936_schema, std::string("synthetic151936"), std::string("schema"))->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(BM_Mask, llama32000_converted, std::string("llama32000"), std::string("converted"))->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(BM_Mask, synthetic151936_converted, std::string("synthetic151936"), std::string("converted"))->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_MAIN();
