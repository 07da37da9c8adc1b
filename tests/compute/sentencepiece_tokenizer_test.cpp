// The SentencePiece tokenizer (`tokenizer.ggml.model = llama`) through the Tokenizer facade:
// - conformance: every vector the reference made for the Llama vocabulary, and decode(encode(x)) == x;
// - agreement with a plain quadratic implementation of the same algorithm written here, on varied text;
// - aidreams260K: its GGUF vocabulary and its llama2.c tokenizer give the same ids, and the prompts of the
//   reference runs encode to the reference's prompt tokens;
// - the algorithm's rules on a tiny hand-made vocabulary (score order, leftmost ties, byte fallback,
//   unknown, the space prefix after a special token);
// - the facade: BOS per add_bos, special tokens only with parse_special, pieces, id range.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "loom/compute/model/gguf_file.hpp"
#include "loom/compute/text/tokenizer.hpp"
#include "loom/compute/text/vocabulary.hpp"
#include "test_files.hpp"
#include "vocab_conformance.hpp"

namespace loom::compute {
namespace {

using testing::kLlamaSpmVocab;
using testing::llama_spm_tokenizer;
using testing::shared_path;
using Ids = std::vector<std::int32_t>;

const std::string kSpmSpace = "\xE2\x96\x81";  // U+2581

Tokenizer gguf_tokenizer(const std::string& path) { return Tokenizer(Vocabulary::from_gguf(GgufFile::open(path))); }

constexpr EncodeOptions kSpmPlain{.add_special = false, .parse_special = false};

std::string show(const Ids& ids) {
  std::string text;
  for (const auto id : ids) text += std::to_string(id) + " ";
  return text;
}

TEST(SentencePieceTokenizer, ReproducesEveryReferenceVector) {
  const std::string path = shared_path(kLlamaSpmVocab);
  REQUIRE_SHARED_FILE(path);
  REQUIRE_SHARED_FILE(path + ".inp");
  REQUIRE_SHARED_FILE(path + ".out");
  const auto cases = testing::read_conformance_cases(path);
  ASSERT_EQ(cases.size(), 46u) << "the .inp and .out files do not pair up";
  const Tokenizer& tokenizer = llama_spm_tokenizer();
  std::size_t matched = 0;
  for (const auto& c : cases) {
    const Ids ids = tokenizer.encode(c.input, kSpmPlain);
    EXPECT_EQ(ids, c.ids) << "input: \"" << c.input << "\"\n got: " << show(ids) << "\nwant: " << show(c.ids);
    matched += ids == c.ids;
  }
  EXPECT_EQ(matched, cases.size());
}

TEST(SentencePieceTokenizer, DecodeUndoesEncode) {
  const std::string path = shared_path(kLlamaSpmVocab);
  REQUIRE_SHARED_FILE(path);
  const auto cases = testing::read_conformance_cases(path);
  ASSERT_EQ(cases.size(), 46u);
  const Tokenizer& tokenizer = llama_spm_tokenizer();
  for (const auto& c : cases) {
    EXPECT_EQ(tokenizer.decode(tokenizer.encode(c.input, kSpmPlain), {.strip_leading_space = true}), c.input);
    // With BOS in front the result is the same: BOS has no text.
    EXPECT_EQ(tokenizer.decode(tokenizer.encode(c.input), {.strip_leading_space = true}), c.input);
    // Without stripping, the space that add_space_prefix put in front is there (for non-empty input).
    if (!c.input.empty()) {
      EXPECT_EQ(tokenizer.decode(tokenizer.encode(c.input, kSpmPlain)), " " + c.input);
    }
  }
}

// The algorithm written as plainly as possible (`ids`: token text to id): escape, split into UTF-8
// characters, then repeatedly scan every adjacent pair and merge the best-scoring one that is a token (first
// found wins a tie), then look up each symbol or fall back to its bytes.
Ids quadratic_encode(const Vocabulary& v, const std::unordered_map<std::string, std::int32_t>& ids,
                     const std::string& text) {
  std::string escaped = kSpmSpace;
  for (const char c : text) escaped += c == ' ' ? kSpmSpace : std::string(1, c);
  std::vector<std::string> symbols;
  for (std::size_t at = 0; at < escaped.size();) {
    const auto lead = static_cast<unsigned char>(escaped[at]);
    const std::size_t n = lead < 0xC0 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    symbols.push_back(escaped.substr(at, n));
    at += n;
  }
  for (;;) {
    std::size_t best = symbols.size();
    float best_score = 0;
    for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
      const auto found = ids.find(symbols[i] + symbols[i + 1]);
      if (found == ids.end()) continue;
      const float score = v.scores[static_cast<std::size_t>(found->second)];
      if (best == symbols.size() || score > best_score) {
        best = i;
        best_score = score;
      }
    }
    if (best == symbols.size()) break;
    symbols[best] += symbols[best + 1];
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
  Ids out;
  for (const auto& symbol : symbols) {
    if (const auto found = ids.find(symbol); found != ids.end()) {
      out.push_back(found->second);
      continue;
    }
    for (const char c : symbol) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", static_cast<unsigned char>(c));
      out.push_back(ids.at(name));
    }
  }
  return out;
}

// Random texts from words, spacing, punctuation, digits, accents, CJK, emoji and a rare script: a mix of
// merges and byte fallback.
void expect_agreement_on_random_texts(const Tokenizer& tokenizer, int rounds) {
  const std::vector<std::string> pieces = {"the",  "quick", "tokenizer", "  ",  " ",    "\n",   "\t",   "1234",
                                           "über", "café",  "日本語",    "🦙",  "ខ្មែរ", "!!",   "...",  "don't",
                                           "A",    "zz",    "Ωμέγα",     "<s>", "__",   "\xF0\x9F\x8E\x89", "x"};
  const Vocabulary& v = tokenizer.vocabulary();
  std::unordered_map<std::string, std::int32_t> ids;
  for (std::int32_t id = 0; id < v.size(); ++id) ids[v.tokens[static_cast<std::size_t>(id)]] = id;
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::size_t> pick(0, pieces.size() - 1);
  for (int round = 0; round < rounds; ++round) {
    std::string text;
    const int words = 1 + round % 25;
    for (int w = 0; w < words; ++w) text += pieces[pick(rng)] + (rng() % 3 == 0 ? "" : " ");
    EXPECT_EQ(tokenizer.encode(text, kSpmPlain), quadratic_encode(v, ids, text)) << "\"" << text << "\"";
  }
}

TEST(SentencePieceTokenizer, AgreesWithAPlainImplementation) {
  REQUIRE_SHARED_FILE(shared_path(kLlamaSpmVocab));
  expect_agreement_on_random_texts(llama_spm_tokenizer(), 200);
}

// With tokens that have a space after another character, words are no longer independent (the engine then
// merges the whole run at once); the same plain implementation still agrees.
TEST(SentencePieceTokenizer, AgreesWithAPlainImplementationWhenPiecesSpanWords) {
  REQUIRE_SHARED_FILE(shared_path(kLlamaSpmVocab));
  Vocabulary v = llama_spm_tokenizer().vocabulary();
  for (const std::string& text : {"e" + kSpmSpace, "s" + kSpmSpace + "t", "." + kSpmSpace + kSpmSpace, "k" + kSpmSpace + "t"}) {
    v.tokens.push_back(text);
    v.scores.push_back(0.0f);  // above nearly every Llama score, so these merge early
    v.kinds.push_back(TokenKind::normal);
  }
  const Tokenizer spanning(std::move(v));
  // "e▁" joins "the" to the next word, as the plain implementation also finds.
  const Ids ids = spanning.encode("the quick test", kSpmPlain);
  EXPECT_NE(std::find(ids.begin(), ids.end(), 32000), ids.end()) << show(ids);
  expect_agreement_on_random_texts(spanning, 200);
}

// ---- aidreams260K ----------------------------------------------------------------------------------------

Ids reference_prompt_tokens(const std::string& name) {
  std::ifstream in(shared_path("reference/" + name));
  const auto json = nlohmann::json::parse(in);
  return json.at("prompt_tokens").get<Ids>();
}

TEST(SentencePieceTokenizer, AidreamsGgufAndLlama2cTokenizerAgree) {
  const std::string gguf = shared_path("models/aidreams260K.gguf");
  const std::string tok = shared_path("models/aidreams260K.tok512.bin");
  REQUIRE_SHARED_FILE(gguf);
  REQUIRE_SHARED_FILE(tok);
  const Tokenizer from_gguf = gguf_tokenizer(gguf);
  const Tokenizer from_tok(Vocabulary::from_llama2c_tokenizer(tok, 512));
  for (const std::string text : {"Once upon a time", "The quick brown fox jumps over the lazy dog.", "",
                                 "  two  spaces\nand a line", "Ünïcödé → 日本 🦙", "a", "she said: \"dreams!\""}) {
    const Ids ids = from_gguf.encode(text);
    EXPECT_EQ(from_tok.encode(text), ids) << text;
    EXPECT_EQ(from_tok.decode(ids, {.strip_leading_space = true}), text);
  }
}

TEST(SentencePieceTokenizer, AidreamsPromptsMatchTheReference) {
  const std::string gguf = shared_path("models/aidreams260K.gguf");
  const std::string tok = shared_path("models/aidreams260K.tok512.bin");
  REQUIRE_SHARED_FILE(gguf);
  REQUIRE_SHARED_FILE(tok);
  REQUIRE_SHARED_FILE(shared_path("reference/aidreams260K.once.json"));
  REQUIRE_SHARED_FILE(shared_path("reference/aidreams260K.fox.json"));
  const Tokenizer from_gguf = gguf_tokenizer(gguf);
  const Tokenizer from_tok(Vocabulary::from_llama2c_tokenizer(tok, 512));
  const Ids once = reference_prompt_tokens("aidreams260K.once.json");
  const Ids fox = reference_prompt_tokens("aidreams260K.fox.json");
  ASSERT_EQ(once.front(), 1);
  EXPECT_EQ(from_gguf.encode("Once upon a time"), once);
  EXPECT_EQ(from_tok.encode("Once upon a time"), once);
  EXPECT_EQ(from_gguf.encode("The quick brown fox jumps over the lazy dog."), fox);
  EXPECT_EQ(from_tok.encode("The quick brown fox jumps over the lazy dog."), fox);
}

// ---- the algorithm on a hand-made vocabulary ------------------------------------------------------------

// <unk> <s> </s>, byte tokens for 'a' (0x61) and 0xC3 only, and scored pieces.
Vocabulary tiny_vocabulary() {
  Vocabulary v;
  auto add = [&](std::string text, float score, TokenKind kind) {
    v.tokens.push_back(std::move(text));
    v.scores.push_back(score);
    v.kinds.push_back(kind);
  };
  add("<unk>", 0, TokenKind::unknown);          // 0
  add("<s>", 0, TokenKind::control);            // 1
  add("</s>", 0, TokenKind::control);           // 2
  add("<0x61>", 0, TokenKind::byte);            // 3
  add("<0xC3>", 0, TokenKind::byte);            // 4
  add(kSpmSpace, -1, TokenKind::normal);           // 5
  add("b", -1, TokenKind::normal);              // 6
  add("c", -1, TokenKind::normal);              // 7
  add("bc", -5, TokenKind::normal);             // 8
  add("cb", -3, TokenKind::normal);             // 9
  add(kSpmSpace + "b", -4, TokenKind::normal);     // 10
  add("bb", -2, TokenKind::normal);             // 11
  add("<tag>", 0, TokenKind::user_defined);     // 12
  add(kSpmSpace + kSpmSpace, -9, TokenKind::normal);  // 13
  v.bos = 1;
  v.eos = 2;
  v.unknown = 0;
  v.add_bos = true;
  v.add_space_prefix = true;
  return v;
}

TEST(SentencePieceTokenizer, HighestScoreMergesFirst) {
  const Tokenizer t(tiny_vocabulary());
  // "▁bcb": pairs ▁b (-4), bc (-5), cb (-3). cb wins, leaving ▁ b cb; then ▁b (-4) merges: [▁b, cb].
  EXPECT_EQ(t.encode("bcb", kSpmPlain), (Ids{10, 9}));
  // "▁bc": ▁b (-4) beats bc (-5): [▁b, c].
  EXPECT_EQ(t.encode("bc", kSpmPlain), (Ids{10, 7}));
}

TEST(SentencePieceTokenizer, EqualScoresMergeLeftmostFirst) {
  const Tokenizer t(tiny_vocabulary());
  // "▁bbb": ▁b (-4) loses to both bb pairs (-2, equal); the left one merges: ▁ bb b. Then ▁b is gone (b is
  // now bb, "▁bb" is no token) and "bbb" is no token: [▁, bb, b].
  EXPECT_EQ(t.encode("bbb", kSpmPlain), (Ids{5, 11, 6}));
  // Without the space prefix the same rule gives [bb, b], not [b, bb].
  Vocabulary v = tiny_vocabulary();
  v.add_space_prefix = false;
  EXPECT_EQ(Tokenizer(std::move(v)).encode("bbb", kSpmPlain), (Ids{11, 6}));
}

TEST(SentencePieceTokenizer, UnknownCharactersFallBackToBytesThenUnknown) {
  const Tokenizer t(tiny_vocabulary());
  // 'a' has a byte token; "é" is C3 A9: C3 has a byte token, A9 does not, so it is <unk>.
  EXPECT_EQ(t.encode("a", kSpmPlain), (Ids{5, 3}));
  EXPECT_EQ(t.encode("\xC3\xA9", kSpmPlain), (Ids{5, 4, 0}));
  // Pieces: a byte token is its byte; <unk> is hidden like a control token unless specials are rendered,
  // and its text in the input is matched only with parse_special (as in the reference).
  EXPECT_EQ(t.piece(3), "a");
  EXPECT_EQ(t.piece(4), "\xC3");
  EXPECT_EQ(t.piece(0), "");
  EXPECT_EQ(t.piece(0, true), "<unk>");
  EXPECT_EQ(t.encode("<unk>", {.add_special = false, .parse_special = true}), (Ids{0}));
  EXPECT_NE(t.encode("<unk>", kSpmPlain), (Ids{0}));
}

TEST(SentencePieceTokenizer, SpacePrefixOnlyAtTheStartAndAfterSpecialTokens) {
  const Tokenizer t(tiny_vocabulary());
  // The user-defined <tag> splits the text; the run after it starts with a prefix space again, as the
  // reference does after any special token.
  EXPECT_EQ(t.encode("b<tag>b", kSpmPlain), (Ids{10, 12, 10}));
  EXPECT_EQ(t.encode("<tag>", kSpmPlain), (Ids{12}));
  // " b" is "▁▁b" with the prefix: ▁b (-4) beats ▁▁ (-9), and "▁▁b" is no token: [▁, ▁b].
  EXPECT_EQ(t.encode(" b", kSpmPlain), (Ids{5, 10}));
  // "  " is "▁▁▁": both pairs are ▁▁ (-9), the left one merges: [▁▁, ▁].
  EXPECT_EQ(t.encode("  ", kSpmPlain), (Ids{13, 5}));
  Vocabulary v = tiny_vocabulary();
  v.add_space_prefix = false;
  EXPECT_EQ(Tokenizer(std::move(v)).encode("b b", kSpmPlain), (Ids{6, 10}));
}

TEST(SentencePieceTokenizer, PiecesThatSpanWordsStillMerge) {
  Vocabulary v = tiny_vocabulary();
  v.tokens.push_back("b" + kSpmSpace);  // 14
  v.scores.push_back(-1);
  v.kinds.push_back(TokenKind::normal);
  // "▁b▁b": b▁ (-1) beats both ▁b (-4): ▁ b▁ b, and no longer pair is a token: [▁, b▁, b]. Cutting
  // the text into words before the second ▁ would give [▁b, ▁b] instead.
  EXPECT_EQ(Tokenizer(std::move(v)).encode("b b", kSpmPlain), (Ids{5, 14, 6}));
  EXPECT_EQ(Tokenizer(tiny_vocabulary()).encode("b b", kSpmPlain), (Ids{10, 10}));
}

TEST(SentencePieceTokenizer, VocabularyWithoutAnyFallbackIsRefused) {
  Vocabulary v = tiny_vocabulary();
  v.unknown = Vocabulary::kNone;  // and most bytes have no token
  EXPECT_THROW(Tokenizer(std::move(v)), std::invalid_argument);
  Vocabulary bad_byte = tiny_vocabulary();
  bad_byte.kinds[6] = TokenKind::byte;  // "b" is not <0xNN>
  EXPECT_THROW(Tokenizer(std::move(bad_byte)), std::invalid_argument);
}

// ---- the facade with the Llama vocabulary ----------------------------------------------------------------

TEST(SentencePieceTokenizer, BosFollowsAddBos) {
  REQUIRE_SHARED_FILE(shared_path(kLlamaSpmVocab));
  const Tokenizer& t = llama_spm_tokenizer();
  const Ids plain = t.encode("Hello world", kSpmPlain);
  EXPECT_EQ(plain, (Ids{15043, 3186}));  // from the conformance vectors
  Ids with_bos{1};
  with_bos.insert(with_bos.end(), plain.begin(), plain.end());
  EXPECT_EQ(t.encode("Hello world"), with_bos);
  EXPECT_EQ(t.encode(""), (Ids{1}));
  EXPECT_EQ(t.encode("", kSpmPlain), Ids{});

  Vocabulary no_bos = t.vocabulary();
  no_bos.add_bos = false;
  no_bos.add_eos = true;
  Ids with_eos = plain;
  with_eos.push_back(2);
  EXPECT_EQ(Tokenizer(std::move(no_bos)).encode("Hello world"), with_eos);
}

TEST(SentencePieceTokenizer, APromptGetsBosAsTheVocabularyAsksButNeverEos) {
  REQUIRE_SHARED_FILE(shared_path(kLlamaSpmVocab));
  const Tokenizer& t = llama_spm_tokenizer();
  const Ids plain = t.encode("Hello world", kSpmPlain);
  Ids with_bos{1};
  with_bos.insert(with_bos.end(), plain.begin(), plain.end());
  EXPECT_EQ(encode_prompt(t, "Hello world", false), with_bos);
  EXPECT_EQ(encode_prompt(t, "", false), (Ids{1}));
  // Special-token text is matched only when asked (rendered chat templates ask).
  EXPECT_EQ(encode_prompt(t, "</s>", true), (Ids{1, 2}));
  const Ids literal = encode_prompt(t, "</s>", false);
  EXPECT_EQ(std::count(literal.begin(), literal.end(), 2), 0);

  Vocabulary no_bos = t.vocabulary();
  no_bos.add_bos = false;
  no_bos.add_eos = true;
  const Tokenizer eos_adding(std::move(no_bos));
  EXPECT_EQ(encode_prompt(eos_adding, "Hello world", false), plain);
  EXPECT_EQ(encode_prompt(eos_adding, "", false), Ids{});
}

TEST(SentencePieceTokenizer, ControlTokensAreParsedOnlyWhenAsked) {
  REQUIRE_SHARED_FILE(shared_path(kLlamaSpmVocab));
  const Tokenizer& t = llama_spm_tokenizer();
  const std::string text = "Hello</s>world";
  const Ids literal = t.encode(text, kSpmPlain);
  EXPECT_EQ(std::count(literal.begin(), literal.end(), 2), 0);
  EXPECT_EQ(t.decode(literal, {.strip_leading_space = true}), text);

  const Ids parsed = t.encode(text, {.add_special = false, .parse_special = true});
  // "Hello" as at the start of a text, then </s>, then "world" with a prefix space again.
  Ids expected = t.encode("Hello", kSpmPlain);
  expected.push_back(2);
  const Ids world = t.encode("world", kSpmPlain);
  expected.insert(expected.end(), world.begin(), world.end());
  EXPECT_EQ(parsed, expected);
}

TEST(SentencePieceTokenizer, Pieces) {
  REQUIRE_SHARED_FILE(shared_path(kLlamaSpmVocab));
  const Tokenizer& t = llama_spm_tokenizer();
  EXPECT_EQ(t.piece(15043), " Hello");  // "▁Hello"
  EXPECT_EQ(t.piece(3 + 0x0A), "\n");    // <0x0A>
  EXPECT_EQ(t.piece(1), "");
  EXPECT_EQ(t.piece(2), "");
  EXPECT_EQ(t.piece(1, true), "<s>");
  EXPECT_EQ(t.piece(2, true), "</s>");
  EXPECT_EQ(t.decode(Ids{1, 15043, 2}), " Hello");
  EXPECT_EQ(t.decode(Ids{1, 15043, 2}, {.render_special = true}), "<s> Hello</s>");
  EXPECT_THROW((void)t.piece(32000), std::out_of_range);
  EXPECT_THROW((void)t.piece(-1), std::out_of_range);
  EXPECT_THROW((void)t.decode(Ids{15043, 40000}), std::out_of_range);
}

// Not a timing assertion (the machine is shared); it prints the time so a regression is visible, and it
// checks that a long text round-trips.
TEST(SentencePieceTokenizer, OneMegabyteOfText) {
  REQUIRE_SHARED_FILE(shared_path(kLlamaSpmVocab));
  const Tokenizer& t = llama_spm_tokenizer();
  std::string text;
  const std::string paragraph =
      "It was the best of times, it was the worst of times; über-naïve café owners counted 1234 coins. "
      "日本語のテキストも少し。 Emoji 🦙🎉 and\ttabs\nnew lines.  ";
  while (text.size() < (1u << 20)) text += paragraph;
  const auto start = std::chrono::steady_clock::now();
  const Ids ids = t.encode(text, kSpmPlain);
  const auto encoded = std::chrono::steady_clock::now();
  const std::string back = t.decode(ids, {.strip_leading_space = true});
  const auto decoded = std::chrono::steady_clock::now();
  EXPECT_EQ(back, text);
  const auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  std::printf("encode %zu bytes -> %zu tokens: %.1f ms; decode: %.1f ms\n", text.size(), ids.size(),
              ms(encoded - start), ms(decoded - encoded));
}

}  // namespace
}  // namespace loom::compute
