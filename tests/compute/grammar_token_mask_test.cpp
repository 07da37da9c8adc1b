// Token masks: the trie walk gives exactly what trying each token alone gives (copy the state, accept the
// token's bytes, see whether it stays viable), on a hand-made vocabulary and on real ones (the 32,000-token
// Llama SentencePiece vocabulary, GPT-2's byte-level BPE one); EOS only where the grammar may end; special
// tokens never.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <thread>
#include <vector>

#include "grammar_test_grammars.hpp"
#include "loom/compute/grammar/grammar.hpp"
#include "loom/compute/grammar/grammar_state.hpp"
#include "loom/compute/grammar/token_mask.hpp"
#include "loom/compute/grammar/token_masker.hpp"
#include "loom/compute/model/gguf_file.hpp"
#include "loom/compute/text/tokenizer.hpp"
#include "test_files.hpp"

namespace loom::compute::grammar {
namespace {

std::vector<std::uint8_t> brute_force(const GrammarState& state, const TokenTrie& trie, std::int32_t eos) {
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(trie.vocab_size()), 0);
  for (std::int32_t id = 0; id < trie.vocab_size(); ++id) {
    if (trie.in_trie(id)) mask[static_cast<std::size_t>(id)] = state.can_accept(trie.bytes(id)) ? 1 : 0;
  }
  if (eos >= 0) mask[static_cast<std::size_t>(eos)] = state.can_end() ? 1 : 0;
  return mask;
}

std::string differences(const std::vector<std::uint8_t>& got, const std::vector<std::uint8_t>& want,
                        const TokenTrie& trie) {
  std::string out;
  int shown = 0;
  for (std::size_t id = 0; id < got.size() && shown < 10; ++id) {
    if (got[id] != want[id]) {
      out += " id " + std::to_string(id) + " '" + trie.bytes(static_cast<std::int32_t>(id)) + "' got " +
             std::to_string(got[id]) + ";";
      ++shown;
    }
  }
  return out;
}

// The states met along `text` at each of the given byte offsets.
std::vector<GrammarState> states_along(const std::shared_ptr<const Grammar>& g, const std::string& text,
                                       const std::vector<std::size_t>& offsets) {
  std::vector<GrammarState> states;
  for (const std::size_t n : offsets) {
    GrammarState s(g);
    EXPECT_TRUE(s.accept(text.substr(0, n))) << n;
    states.push_back(s);
  }
  return states;
}

TEST(TokenMask, HandMadeVocabularyEqualsBruteForce) {
  const std::vector<std::string> tokens = {
      "<s>", "</s>", "{", "}", "\"", "\"a", "a", "ab", ":", " ", "1", "12", "\xc3", "\xa9", "\xc3\xa9", "true",
      "tr", "ue", "\":", "\"}", "{\"", ", \"", ",", "\n", "  ", "-", "0.", "e+", "[", "]", "null", "\\", "\\u",
      "00e9", "\xe2\x82", "\xac", "\"\xc3", "}\n", "", "a\"", "b\": 1}",
  };
  std::vector<bool> special(tokens.size(), false);
  special[0] = special[1] = true;
  const auto trie = TokenTrie::build(tokens, special);
  EXPECT_FALSE(trie->in_trie(0));
  EXPECT_FALSE(trie->in_trie(38));  // empty text
  const std::int32_t eos = 1;

  const auto g = parse_gbnf(testing::kJsonGrammar);
  const std::string doc = "{\"ab\": [1, -0.5e+2, true, null, \"\xc3\xa9\\u00e9\xe2\x82\xac\"],\n  \"a\": {}}";
  std::vector<std::size_t> offsets;
  for (std::size_t n = 0; n <= doc.size(); ++n) offsets.push_back(n);
  std::vector<std::uint8_t> mask;
  int allowed_somewhere = 0;
  const TokenMasker masker(g, trie);
  const TokenMasker uncached(g, trie, TokenMasker::Options{.max_contexts = 0});
  const TokenMasker tight(g, trie, TokenMasker::Options{.max_bytes = 4096});  // room for a few contexts only
  for (const GrammarState& state : states_along(g, doc, offsets)) {
    allowed_tokens(state, *trie, eos, mask);
    const auto want = brute_force(state, *trie, eos);
    ASSERT_EQ(mask, want) << differences(mask, want, *trie);
    masker.fill(state, eos, mask);
    ASSERT_EQ(mask, want) << "masker:" << differences(mask, want, *trie);
    uncached.fill(state, eos, mask);
    ASSERT_EQ(mask, want) << "uncached masker:" << differences(mask, want, *trie);
    tight.fill(state, eos, mask);
    ASSERT_EQ(mask, want) << "masker over its memory:" << differences(mask, want, *trie);
    EXPECT_EQ(mask[0], 0);
    allowed_somewhere += mask[5] + mask[14] + mask[35];
  }
  EXPECT_GT(allowed_somewhere, 3);  // the check is not vacuous: multi-element and split tokens get through
  EXPECT_GT(masker.cached_contexts(), 3u);
  EXPECT_EQ(uncached.cached_contexts(), 0u);
  EXPECT_LT(tight.cached_contexts(), masker.cached_contexts());
  GrammarState done(g);
  ASSERT_TRUE(done.accept(doc));
  allowed_tokens(done, *trie, eos, mask);
  EXPECT_EQ(mask[static_cast<std::size_t>(eos)], 1);
  EXPECT_EQ(mask[9], 1);   // trailing whitespace is part of the grammar
  EXPECT_EQ(mask[2], 0);
}

TEST(TokenMask, TokenAcrossSeveralElementsAndSplitCharacter) {
  const auto g = parse_gbnf(R"g(root ::= "x" [é€]+ "y")g");
  const std::vector<std::string> tokens = {"x\xc3", "\xa9", "\xa9y", "\xe2\x82\xac\xc3\xa9y", "x\xe2", "x\xc3\xa8", "y"};
  const auto trie = TokenTrie::build(tokens, {});
  GrammarState state(g);
  std::vector<std::uint8_t> mask;
  allowed_tokens(state, *trie, -1, mask);
  EXPECT_EQ(mask, (std::vector<std::uint8_t>{1, 0, 0, 0, 1, 0, 0}));
  ASSERT_TRUE(state.accept(tokens[0]));
  allowed_tokens(state, *trie, -1, mask);
  EXPECT_EQ(mask, (std::vector<std::uint8_t>{0, 1, 1, 0, 0, 0, 0}));  // "\xa9y" finishes é and the whole
  EXPECT_EQ(mask, brute_force(state, *trie, -1));
  ASSERT_TRUE(state.accept(tokens[1]));
  allowed_tokens(state, *trie, -1, mask);
  EXPECT_EQ(mask, (std::vector<std::uint8_t>{0, 0, 0, 1, 0, 0, 1}));
}

void check_real_vocabulary(const std::string& path) {
  REQUIRE_SHARED_FILE(path);
  const Tokenizer tokenizer(Vocabulary::from_gguf(GgufFile::open(path)));
  const auto trie = TokenTrie::from_tokenizer(tokenizer);
  const Vocabulary& v = tokenizer.vocabulary();
  for (std::int32_t id = 0; id < v.size(); ++id) {
    if (v.kinds[static_cast<std::size_t>(id)] == TokenKind::control) {
      EXPECT_FALSE(trie->in_trie(id)) << id;
    }
  }
  const auto g = parse_gbnf(testing::kJsonGrammar);
  const std::string doc = "{\"name\": \"caf\xc3\xa9 \\\"x\\\"\", \"list\": [1, 22.5, -3e4, true],\n \"obj\": {\"k\": null}}";
  // Start, inside a key, after a colon, inside a string, inside a number, after a comma, at a newline, and
  // a UTF-8 character cut after its first byte (inside "café").
  const std::size_t cut = doc.find("\xc3") + 1;
  const auto states = states_along(g, doc, {0, 1, 4, 8, 10, cut, cut + 1, 30, 33, 40, 52, doc.size() - 3, doc.size()});
  std::vector<std::uint8_t> mask;
  const TokenMasker masker(g, trie);
  for (std::size_t i = 0; i < states.size(); ++i) {
    allowed_tokens(states[i], *trie, v.eos, mask);
    const auto want = brute_force(states[i], *trie, v.eos);
    ASSERT_EQ(mask, want) << "state " << i << ":" << differences(mask, want, *trie);
    masker.fill(states[i], v.eos, mask);
    ASSERT_EQ(mask, want) << "masker, state " << i << ":" << differences(mask, want, *trie);
    int count = 0;
    for (const auto m : mask) count += m;
    EXPECT_GT(count, 0) << "state " << i;
  }
}

TEST(TokenMask, LlamaVocabularyEqualsBruteForce) {
  const std::string path = loom::compute::testing::shared_path("models/synth11M-q8_0.gguf");
  check_real_vocabulary(path);
  // SentencePiece specifics: U+2581 is a space, <0x0A> is a newline byte.
  const Tokenizer tokenizer(Vocabulary::from_gguf(GgufFile::open(path)));
  const auto trie = TokenTrie::from_tokenizer(tokenizer);
  const Vocabulary& v = tokenizer.vocabulary();
  int byte_tokens = 0;
  for (std::int32_t id = 0; id < v.size(); ++id) {
    if (v.tokens[static_cast<std::size_t>(id)] == "<0x0A>") {
      EXPECT_EQ(trie->bytes(id), "\n");
      ++byte_tokens;
    }
    if (v.tokens[static_cast<std::size_t>(id)] == "\xe2\x96\x81{") {
      EXPECT_EQ(trie->bytes(id), " {");
    }
  }
  EXPECT_EQ(byte_tokens, 1);
}

// The JSON Schema converter names a string's character (`char`), digit ranges and whitespace as rules of
// their own; the masker looks through such lexical rules to the rule that repeats them. Its masks along a
// document under that grammar still equal brute force at every position.
TEST(TokenMask, LexicalRulesLookedThroughEqualBruteForce) {
  const std::string path = loom::compute::testing::shared_path("models/synth11M-q8_0.gguf");
  REQUIRE_SHARED_FILE(path);
  const Tokenizer tokenizer(Vocabulary::from_gguf(GgufFile::open(path)));
  const auto trie = TokenTrie::from_tokenizer(tokenizer);
  const auto g = parse_gbnf(R"g(root ::= "{" "\"a\":" ws string "," ws "\"n\":" ws digits "," ws "\"t\":" ws "[" (string ("," ws string)*)? "]" "}"
ws ::= " "?
string ::= "\"" char* "\""
char ::= [^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
digits ::= [0-9] | [1-9] [0-9]
)g");
  const std::string doc = "{\"a\": \"caf\xc3\xa9 \\\"x\\\" \\u00e9\", \"n\": 42, \"t\": [\"one two\",\"\"]}";
  std::vector<std::size_t> cuts;
  for (std::size_t i = 0; i <= doc.size(); ++i) cuts.push_back(i);
  const auto states = states_along(g, doc, cuts);
  const TokenMasker masker(g, trie);
  std::vector<std::uint8_t> mask;
  std::vector<std::vector<std::uint8_t>> wanted;
  for (const auto& state : states) wanted.push_back(brute_force(state, *trie, tokenizer.vocabulary().eos));
  for (int pass = 0; pass < 2; ++pass) {  // cold, then warm
    for (std::size_t i = 0; i < states.size(); ++i) {
      const auto& want = wanted[i];
      masker.fill(states[i], tokenizer.vocabulary().eos, mask);
      ASSERT_EQ(mask, want) << "pass " << pass << ", position " << i << ":" << differences(mask, want, *trie);
    }
  }
}

TEST(TokenMask, ByteLevelBpeVocabularyEqualsBruteForce) {
  check_real_vocabulary(loom::compute::testing::shared_path("vocab/ggml-vocab-gpt-2.gguf"));
}

const Tokenizer& synth_llama_tokenizer() {
  static const Tokenizer tokenizer(
      Vocabulary::from_gguf(GgufFile::open(loom::compute::testing::shared_path("models/synth11M-q8_0.gguf"))));
  return tokenizer;
}

// Walks of random allowed tokens (half the time among the short ones, so that structure changes often):
// the masker agrees with the plain walk at every step and with brute force every 16th.
TEST(TokenMask, RandomWalksAgreeOnTheLlamaVocabulary) {
  const auto trie = TokenTrie::from_tokenizer(synth_llama_tokenizer());
  const std::int32_t eos = synth_llama_tokenizer().vocabulary().eos;
  const auto g = parse_gbnf(testing::kJsonGrammar);
  const TokenMasker masker(g, trie);
  std::mt19937_64 rng(21);
  std::vector<std::uint8_t> walked;
  std::vector<std::uint8_t> masked;
  int steps = 0;
  int ended = 0;
  for (int walk = 0; walk < 6; ++walk) {
    GrammarState state(g);
    for (int step = 0; step < 80; ++step, ++steps) {
      allowed_tokens(state, *trie, eos, walked);
      masker.fill(state, eos, masked);
      ASSERT_EQ(masked, walked) << "walk " << walk << " step " << step << ":" << differences(masked, walked, *trie);
      if (steps % 16 == 0) {
        const auto want = brute_force(state, *trie, eos);
        ASSERT_EQ(walked, want) << differences(walked, want, *trie);
      }
      std::vector<std::int32_t> choices;
      std::vector<std::int32_t> short_choices;
      for (std::int32_t id = 0; id < trie->vocab_size(); ++id) {
        if (walked[static_cast<std::size_t>(id)] && id != eos) {
          choices.push_back(id);
          if (trie->bytes(id).size() <= 2) short_choices.push_back(id);
        }
      }
      if (walked[static_cast<std::size_t>(eos)] && rng() % 8 == 0) {
        ++ended;
        break;
      }
      const auto& pool = !short_choices.empty() && rng() % 2 ? short_choices : choices;
      ASSERT_FALSE(pool.empty()) << "a viable state with no allowed token";
      const std::int32_t pick = pool[rng() % pool.size()];
      ASSERT_TRUE(accept_token(state, *trie, pick)) << pick;
    }
  }
  EXPECT_GT(steps, 200);
}

TEST(TokenMask, OneMaskerSharedByThreads) {
  const auto trie = TokenTrie::from_tokenizer(synth_llama_tokenizer());
  const auto g = parse_gbnf(testing::kJsonGrammar);
  const std::string doc = R"({"a": [1, 2, {"b": "text here"}], "c": null, "d": "é"})";
  std::vector<std::size_t> offsets;
  for (std::size_t n = 0; n <= doc.size(); n += 2) offsets.push_back(n);
  const auto states = states_along(g, doc, offsets);
  std::vector<std::vector<std::uint8_t>> want(states.size());
  for (std::size_t i = 0; i < states.size(); ++i) allowed_tokens(states[i], *trie, -1, want[i]);
  const TokenMasker masker(g, trie);
  std::vector<int> wrong(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::uint8_t> mask;
      for (std::size_t k = 0; k < states.size(); ++k) {
        const std::size_t i = (k + static_cast<std::size_t>(t) * 7) % states.size();  // meet contexts in another order
        masker.fill(states[i], -1, mask);
        wrong[static_cast<std::size_t>(t)] += mask != want[i];
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(wrong, std::vector<int>(4, 0));
}

TEST(TokenMask, EndTokensAndAcceptingASampledToken) {
  // ids: 0 "a", 1 <eos> (special), 2 <eot> (special), 3 "b", 4 "ab"
  const auto trie = TokenTrie::build({"a", "<eos>", "<eot>", "b", "ab"}, {false, true, true, false, false});
  const auto g = parse_gbnf(R"g(root ::= "a" "b"?)g");
  const TokenMasker masker(g, trie);
  const std::vector<std::int32_t> ends = {1, 2, 99};  // an id outside the vocabulary is ignored
  GrammarState state(g);
  std::vector<std::uint8_t> mask;
  masker.fill(state, ends, mask);
  EXPECT_EQ(mask, (std::vector<std::uint8_t>{1, 0, 0, 0, 1}));
  EXPECT_FALSE(accept_token(state, *trie, 1));   // special: never through the grammar
  EXPECT_FALSE(accept_token(state, *trie, 3));   // "b" before "a"
  EXPECT_FALSE(accept_token(state, *trie, -1));
  EXPECT_FALSE(accept_token(state, *trie, 5));
  ASSERT_TRUE(accept_token(state, *trie, 0));
  masker.fill(state, ends, mask);
  EXPECT_EQ(mask, (std::vector<std::uint8_t>{0, 1, 1, 1, 0}));  // may end, or take "b"
  allowed_tokens(state, *trie, ends, mask);
  EXPECT_EQ(mask, (std::vector<std::uint8_t>{0, 1, 1, 1, 0}));
  ASSERT_TRUE(accept_token(state, *trie, 3));
  masker.fill(state, ends, mask);
  EXPECT_EQ(mask, (std::vector<std::uint8_t>{0, 1, 1, 0, 0}));  // only the end is left
}

TEST(TokenMask, MaskWorkIsBounded) {
  GrammarLimits little;
  little.max_match_steps = 2000;
  const auto g = parse_gbnf(testing::kJsonGrammar, little);
  GrammarState state(g);
  ASSERT_TRUE(state.accept("{\"a\": \"x"));  // inside a string: nearly every token is allowed
  const auto trie = TokenTrie::from_tokenizer(synth_llama_tokenizer());
  std::vector<std::uint8_t> mask;
  EXPECT_THROW(allowed_tokens(state, *trie, -1, mask), GrammarLimitError);
  const TokenMasker masker(g, trie);
  EXPECT_THROW(masker.fill(state, -1, mask), GrammarLimitError);
}

TEST(TokenMask, MaskerRefusesAStateOfAnotherGrammar) {
  const auto trie = TokenTrie::build({"a", "b"}, {});
  const TokenMasker masker(parse_gbnf("root ::= \"a\""), trie);
  std::vector<std::uint8_t> mask;
  EXPECT_THROW(masker.fill(GrammarState(parse_gbnf("root ::= \"a\"")), -1, mask), std::invalid_argument);
}

}  // namespace
}  // namespace loom::compute::grammar
