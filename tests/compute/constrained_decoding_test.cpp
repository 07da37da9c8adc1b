// Constrained decoding in the CPU backend, on the shared aidreams260K model (a real tiny Llama, 512-token
// SentencePiece vocabulary with byte fallback): sequences of one batch each decode under their own grammar
// (or none), the text of a constrained one is always in its grammar and ends (EOS) only where the grammar
// is complete, a preempted sequence resumes under its grammar where it was, and a sequence that cannot go on
// fails alone. The steps are written by hand, as the engine's scheduler would send them (each sequence owns a
// fixed run of blocks). Also the ConstraintCache on its own.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "loom/compute/cpu/cpu_backend.hpp"
#include "loom/compute/grammar/constraint_cache.hpp"
#include "loom/compute/grammar/grammar.hpp"
#include "loom/compute/grammar/grammar_state.hpp"
#include "loom/compute/grammar/output_constraint.hpp"
#include "loom/compute/text/tokenizer.hpp"
#include "test_files.hpp"

namespace loom::compute {
namespace {

using testing::shared_path;

constexpr std::int64_t kBlockSize = 4;
constexpr std::int64_t kBlocksPerSequence = 32;  // 128 positions: the model's whole context
constexpr std::int64_t kSequences = 4;

std::string model_path() { return shared_path("models/aidreams260K.gguf"); }

std::unique_ptr<CpuBackend> load_backend() {
  LoadOptions o;
  o.model_path = model_path();
  o.threads = 2;
  o.kv.block_size = kBlockSize;
  o.kv_tokens = kBlockSize * kBlocksPerSequence * kSequences;
  o.max_batch_tokens = 512;
  return CpuBackend::load(o);
}

proto::OutputConstraint gbnf(std::string text) {
  return proto::OutputConstraint{proto::OutputConstraint::Kind::grammar, std::move(text)};
}

proto::SamplingParams random_params(std::uint64_t seed) {
  proto::SamplingParams p;
  p.temperature = 1.0;
  p.top_k = 0;
  p.top_p = 1.0;
  p.min_p = 0.0;
  p.seed = seed;
  return p;
}

proto::SamplingParams greedy_params() {
  proto::SamplingParams p;
  p.temperature = 0.0;
  return p;
}

// One sequence driven as the scheduler drives it: the prompt (and, after a preemption, what it generated)
// in its first step, then one token per step.
struct Driven {
  SequenceId id = 0;
  std::vector<std::int32_t> prompt;
  proto::SamplingParams params;
  std::vector<std::int32_t> generated{};
  bool started = false;
  bool ended = false;       // by an end token, an error, or the length limit
  bool ended_by_end = false;
  std::string error{};

  std::vector<BlockId> table() const {
    std::vector<BlockId> t;
    for (std::int64_t b = 0; b < kBlocksPerSequence; ++b) t.push_back(static_cast<BlockId>(id * kBlocksPerSequence + b));
    return t;
  }

  StepSequence next() const {
    StepSequence s;
    s.sequence = static_cast<SequenceId>(id);
    s.sample = true;
    if (!started) {
      s.begin = SequenceStart{params, {}};
      s.tokens = prompt;
      s.tokens.insert(s.tokens.end(), generated.begin(), generated.end());
      s.start = 0;
      s.blocks = table();
    } else {
      s.tokens = {generated.back()};
      s.start = static_cast<std::int64_t>(prompt.size() + generated.size() - 1);
      s.table_from = kBlocksPerSequence;
    }
    return s;
  }
};

class ConstrainedDecoding : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_SHARED_FILE(model_path());
    backend_ = load_backend();
    tokenizer_ = backend_->tokenizer();
    const Vocabulary& v = tokenizer_->vocabulary();
    if (v.valid(v.eos)) ends_.insert(v.eos);
    if (v.valid(v.eot)) ends_.insert(v.eot);
    ASSERT_FALSE(ends_.empty());
    prompt_ = tokenizer_->encode("Once upon a time");
  }

  Driven make(SequenceId id, proto::SamplingParams params) {
    return Driven{.id = id, .prompt = prompt_, .params = std::move(params)};
  }

  // One step for every sequence still going; applies the results. Returns false when none was left.
  bool step(std::vector<Driven*> sequences, std::size_t max_tokens) {
    StepBatch batch;
    std::vector<Driven*> in_step;
    for (Driven* d : sequences) {
      if (d->ended) continue;
      batch.sequences.push_back(d->next());
      in_step.push_back(d);
    }
    if (in_step.empty()) return false;
    const StepResult result = backend_->run(batch);
    EXPECT_EQ(result.sampled.size(), in_step.size());
    for (std::size_t i = 0; i < in_step.size() && i < result.sampled.size(); ++i) {
      Driven& d = *in_step[i];
      const SampledToken& t = result.sampled[i];
      EXPECT_EQ(t.sequence, d.id);
      d.started = true;
      if (!t.error.empty()) {
        d.ended = true;
        d.error = t.error;
        backend_->release(d.id);
        continue;
      }
      if (ends_.count(t.token) != 0) {
        d.ended = d.ended_by_end = true;
        backend_->release(d.id);
        continue;
      }
      d.generated.push_back(t.token);
      if (d.generated.size() >= max_tokens || d.prompt.size() + d.generated.size() >= 128) {
        d.ended = true;
        backend_->release(d.id);
      }
    }
    return true;
  }

  void run_to_end(std::vector<Driven*> sequences, std::size_t max_tokens) {
    for (int guard = 0; guard < 200 && step(sequences, max_tokens); ++guard) {
    }
  }

  std::string text(const Driven& d) const { return tokenizer_->decode(d.generated); }

  std::unique_ptr<CpuBackend> backend_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::set<std::int32_t> ends_;
  std::vector<std::int32_t> prompt_;
};

// Whether `text` is a whole sentence of the grammar (or, with `prefix_only`, could still become one).
bool in_grammar(const std::string& grammar_text, const std::string& text, bool prefix_only = false) {
  grammar::GrammarState state(grammar::parse_gbnf(grammar_text));
  if (!state.accept(text)) return false;
  return prefix_only || state.can_end();
}

const std::string kNumberAnswer = R"g(root ::= [0-9]{1,6} " " ("yes" | "no") "."
)g";

TEST_F(ConstrainedDecoding, AConstrainedAndAFreeSequenceShareABatchAndEachKeepsItsOwnRules) {
  const std::regex shape(R"(^[0-9]{1,6} (yes|no)\.$)");
  std::set<std::string> texts;
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    auto params = random_params(seed);
    params.constraint = gbnf(kNumberAnswer);
    Driven constrained = make(1, params);
    Driven free = make(2, random_params(seed + 100));
    run_to_end({&constrained, &free}, 40);
    ASSERT_TRUE(constrained.error.empty()) << constrained.error;
    const std::string t = text(constrained);
    // The grammar is finite and forces its end: the sequence stops with EOS, complete.
    EXPECT_TRUE(constrained.ended_by_end) << "seed " << seed << ": " << t;
    EXPECT_TRUE(std::regex_match(t, shape)) << "seed " << seed << ": \"" << t << "\"";
    EXPECT_TRUE(in_grammar(kNumberAnswer, t)) << t;
    texts.insert(t);

    // The free sequence is the one it would have been alone: the constraint beside it changed nothing.
    Driven alone = make(3, random_params(seed + 100));
    run_to_end({&alone}, 40);
    EXPECT_TRUE(free.error.empty()) << free.error;
    EXPECT_EQ(free.generated, alone.generated) << "seed " << seed;
  }
  EXPECT_GT(texts.size(), 3u) << "the random stream should vary the constrained text";
}

TEST_F(ConstrainedDecoding, GreedyUnderAGrammarPicksTheModelsBestAllowedToken) {
  // Free greedy text of this prompt has spaces and letters; the grammar allows lower-case letters only, so
  // every token is the model's best among those made of them, and the end comes only at the period.
  const std::string grammar = R"g(root ::= [a-z]{1,30} "."
)g";
  auto params = greedy_params();
  params.constraint = gbnf(grammar);
  Driven d = make(1, params);
  run_to_end({&d}, 60);
  ASSERT_TRUE(d.error.empty()) << d.error;
  const std::string t = text(d);
  EXPECT_TRUE(in_grammar(grammar, t, /*prefix_only=*/!d.ended_by_end)) << t;
  EXPECT_TRUE(std::regex_match(t, std::regex(d.ended_by_end ? "^[a-z]{1,30}\\.$" : "^[a-z]{1,30}\\.?$"))) << t;
}

TEST_F(ConstrainedDecoding, EndOfSequenceComesOnlyWhereTheGrammarIsComplete) {
  // Every prefix of the text at which EOS was allowed must be a sentence: drive token by token and check
  // that no sampled end token comes before the grammar can end.
  const std::string grammar = R"g(root ::= "<" [0-9]{2,8} ">"
)g";
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    auto params = random_params(seed);
    params.constraint = gbnf(grammar);
    Driven d = make(1, params);
    run_to_end({&d}, 40);
    ASSERT_TRUE(d.error.empty()) << d.error;
    EXPECT_TRUE(d.ended_by_end) << "seed " << seed;
    const std::string t = text(d);
    EXPECT_TRUE(std::regex_match(t, std::regex("^<[0-9]{2,8}>$"))) << "seed " << seed << ": " << t;
  }
}

TEST_F(ConstrainedDecoding, APreemptedSequenceResumesUnderItsGrammarWhereItWas) {
  // "<" digits ">": if the grammar started again after the preemption, the text would hold a second "<".
  const std::string grammar = R"g(root ::= "<" [0-9]{6,12} ">"
)g";
  int preempted_midway = 0;
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    auto params = random_params(seed);
    params.constraint = gbnf(grammar);
    Driven d = make(1, params);
    Driven free = make(2, random_params(seed));
    // Three steps, then a fresh start with the same parameters: the history computed again.
    for (int i = 0; i < 3; ++i) step({&d, &free}, 40);
    if (!d.ended) {
      ++preempted_midway;
      d.started = false;
      free.started = false;
    }
    run_to_end({&d, &free}, 40);
    ASSERT_TRUE(d.error.empty()) << d.error;
    const std::string t = text(d);
    EXPECT_TRUE(d.ended_by_end) << "seed " << seed << ": " << t;
    EXPECT_TRUE(std::regex_match(t, std::regex("^<[0-9]{6,12}>$"))) << "seed " << seed << ": " << t;
  }
  EXPECT_GT(preempted_midway, 5);
}

TEST_F(ConstrainedDecoding, OtherParametersAtAFreshStartStartTheGrammarAgain) {
  // A begin with different parameters is a new sequence as far as sampling goes: its grammar starts anew.
  const std::string grammar = R"g(root ::= "<" [0-9]{6,12} ">"
)g";
  auto params = greedy_params();
  params.constraint = gbnf(grammar);
  Driven d = make(1, params);
  for (int i = 0; i < 3; ++i) step({&d}, 40);
  ASSERT_FALSE(d.ended);
  ASSERT_EQ(tokenizer_->decode(d.generated).substr(0, 1), "<");
  d.started = false;
  d.params.seed = 7;  // not the same parameters
  const std::size_t before = d.generated.size();
  step({&d}, 40);
  ASSERT_TRUE(d.error.empty()) << d.error;
  ASSERT_EQ(d.generated.size(), before + 1);
  // From a fresh grammar the first token must begin with "<".
  EXPECT_EQ(tokenizer_->decode(std::vector<std::int32_t>{d.generated.back()}).substr(0, 1), "<");
}

// Tokens whose piece contains `byte`.
std::vector<std::int32_t> tokens_with_byte(const Tokenizer& tokenizer, char byte) {
  std::vector<std::int32_t> ids;
  for (std::int32_t id = 0; id < tokenizer.vocabulary().size(); ++id) {
    if (tokenizer.piece(id).find(byte) != std::string::npos) ids.push_back(id);
  }
  return ids;
}

TEST_F(ConstrainedDecoding, ASequenceWhoseGrammarAllowsNoPickableTokenFailsAlone) {
  // Only "x" may come first, and every token that holds an "x" is banned by the request's own logit bias.
  auto params = random_params(5);
  params.constraint = gbnf("root ::= \"x\" [a-z]*\n");
  const auto xs = tokens_with_byte(*tokenizer_, 'x');
  ASSERT_FALSE(xs.empty());
  for (const std::int32_t id : xs) params.logit_bias[id] = -std::numeric_limits<double>::infinity();
  Driven failing = make(1, params);
  Driven free = make(2, random_params(8));
  Driven alone = make(3, random_params(8));
  run_to_end({&failing, &free}, 20);
  run_to_end({&alone}, 20);
  EXPECT_TRUE(failing.generated.empty());
  EXPECT_NE(failing.error.find("sequence 1"), std::string::npos) << failing.error;
  EXPECT_NE(failing.error.find("output constraint"), std::string::npos) << failing.error;
  EXPECT_TRUE(free.error.empty()) << free.error;
  EXPECT_EQ(free.generated, alone.generated);
  EXPECT_EQ(free.generated.size(), 20u);
}

TEST_F(ConstrainedDecoding, ASequenceThatMeetsAGrammarLimitMidwayFailsAlone) {
  // After each "x" the grammar owes one of two four-byte characters (no token may start one: their lead byte
  // is banned), so after k x's it holds 2^(k-1) live stacks, one per sequence of debts: past the 4,096 a
  // state may hold at the twelfth x.
  auto params = random_params(11);
  params.constraint = gbnf("root ::= \"x\" r\n"
                           "r ::= \"x\" r \"\\U0001F600\" | \"x\" r \"\\U0001F601\" | \"\\U0001F602\"\n");
  for (const std::int32_t id : tokens_with_byte(*tokenizer_, '\xF0')) {
    params.logit_bias[id] = -std::numeric_limits<double>::infinity();
  }
  Driven failing = make(1, params);
  Driven free = make(2, greedy_params());
  Driven alone = make(3, greedy_params());
  run_to_end({&failing, &free}, 100);
  run_to_end({&alone}, 100);
  EXPECT_GE(failing.generated.size(), 5u);  // it went some way first
  EXPECT_LE(failing.generated.size(), 12u);
  EXPECT_NE(failing.error.find("sequence 1: the output constraint cannot go on"), std::string::npos) << failing.error;
  EXPECT_NE(failing.error.find("max_stacks"), std::string::npos) << failing.error;
  EXPECT_TRUE(std::regex_match(text(failing), std::regex("^x+$"))) << text(failing);
  EXPECT_TRUE(free.error.empty()) << free.error;
  EXPECT_EQ(free.generated, alone.generated);
  EXPECT_GT(free.generated.size(), 12u);
}

TEST_F(ConstrainedDecoding, AConstraintThatDoesNotCompileFailsOnlyItsSequence) {
  auto params = greedy_params();
  params.constraint = gbnf("root ::= (\"a\"\n");
  Driven failing = make(1, params);
  Driven free = make(2, greedy_params());
  step({&failing, &free}, 20);
  EXPECT_TRUE(failing.ended);
  EXPECT_NE(failing.error.find("sequence 1: the output constraint does not compile: line 2, column 1: expected ')'"), std::string::npos)
      << failing.error;
  EXPECT_TRUE(free.error.empty()) << free.error;
  EXPECT_EQ(free.generated.size(), 1u);
}

TEST_F(ConstrainedDecoding, AJsonObjectConstraintGivesAJsonObject) {
  // The json_object kind (any JSON object): the text so far is always a prefix of one, a complete one when
  // the sequence ends by EOS.
  const std::string json_object = grammar::constraint_gbnf(proto::OutputConstraint{proto::OutputConstraint::Kind::json_object, ""});
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    auto params = random_params(seed);
    params.constraint = proto::OutputConstraint{proto::OutputConstraint::Kind::json_object, ""};
    Driven d = make(1, params);
    run_to_end({&d}, 60);
    ASSERT_TRUE(d.error.empty()) << d.error;
    const std::string t = text(d);
    const auto first = t.find_first_not_of(" \t\n");
    ASSERT_NE(first, std::string::npos) << "no text";
    EXPECT_EQ(t[first], '{') << t;
    EXPECT_TRUE(in_grammar(json_object, t, /*prefix_only=*/!d.ended_by_end)) << "seed " << seed << ": " << t;
  }
}

// ---- ConstraintCache ----

std::shared_ptr<const grammar::TokenTrie> small_trie() {
  return grammar::TokenTrie::build({"a", "b", "ab", "yes", "no", "0", "1"}, {});
}

TEST(ConstraintCache, CompilesEachConstraintOnceAndSharesIt) {
  grammar::ConstraintCache cache(small_trie(), {});
  const auto first = cache.get(gbnf("root ::= \"yes\" | \"no\"\n"));
  const auto again = cache.get(gbnf("root ::= \"yes\" | \"no\"\n"));
  EXPECT_EQ(first.grammar, again.grammar);
  EXPECT_EQ(first.masker, again.masker);
  EXPECT_EQ(cache.compilations(), 1u);
  // The same text under another kind is another constraint (here: not a schema at all, so refused).
  EXPECT_THROW(cache.get(proto::OutputConstraint{proto::OutputConstraint::Kind::json_schema, "root ::= \"yes\" | \"no\"\n"}),
               std::invalid_argument);
  EXPECT_EQ(cache.size(), 1u);
}

TEST(ConstraintCache, AGrammarErrorIsThrownAndNotKept) {
  grammar::ConstraintCache cache(small_trie(), {});
  EXPECT_THROW(cache.get(gbnf("root ::= (")), grammar::GrammarError);
  EXPECT_EQ(cache.size(), 0u);
}

TEST(ConstraintCache, KeepsAtMostItsCapacityDroppingTheLeastRecentlyUsed) {
  grammar::ConstraintCache::Options options;
  options.capacity = 2;
  grammar::ConstraintCache cache(small_trie(), options);
  const auto a = cache.get(gbnf("root ::= \"a\"\n"));
  cache.get(gbnf("root ::= \"b\"\n"));
  cache.get(gbnf("root ::= \"a\"\n"));  // a is now the most recent
  cache.get(gbnf("root ::= \"ab\"\n"));  // drops b
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.compilations(), 3u);
  EXPECT_EQ(cache.get(gbnf("root ::= \"a\"\n")).masker, a.masker);  // still kept
  EXPECT_EQ(cache.compilations(), 3u);
  cache.get(gbnf("root ::= \"b\"\n"));  // compiled again
  EXPECT_EQ(cache.compilations(), 4u);
  // A dropped entry lives on in whoever holds it.
  cache.get(gbnf("root ::= \"0\"\n"));
  cache.get(gbnf("root ::= \"1\"\n"));
  grammar::GrammarState state(a.grammar);
  std::vector<std::uint8_t> mask;
  a.masker->fill(state, -1, mask);
  EXPECT_EQ(mask, (std::vector<std::uint8_t>{1, 0, 0, 0, 0, 0, 0}));  // "ab" would leave a "b"
}

TEST(ConstraintCache, BuildsTheVocabularysTrieOnFirstUse) {
  REQUIRE_SHARED_FILE(model_path());
  auto backend = load_backend();
  grammar::ConstraintCache cache(backend->tokenizer());
  EXPECT_EQ(cache.trie()->vocab_size(), backend->tokenizer()->vocabulary().size());
  EXPECT_EQ(cache.trie(), cache.trie());
  const auto compiled = cache.get(gbnf("root ::= \"yes\"\n"));
  EXPECT_EQ(&compiled.masker->trie(), cache.trie().get());
}

}  // namespace
}  // namespace loom::compute
