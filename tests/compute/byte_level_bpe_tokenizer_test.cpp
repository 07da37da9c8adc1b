// Byte-level BPE through the Tokenizer: conformance with the GPT-2 vectors in ../shared/vocab, agreement with
// a plain GPT-2-style BPE written here, merge order on small hand-made vocabularies, the byte map on decode,
// and the errors for a vocabulary that cannot be used.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "text/pre_tokenizer.hpp"
#include "loom/compute/model/gguf_file.hpp"
#include "loom/compute/text/tokenizer.hpp"
#include "loom/compute/text/vocabulary.hpp"
#include "test_files.hpp"

namespace loom::compute {
namespace {

using testing::shared_path;

// The Vocabulary of a byte-level BPE GGUF, read here from the `tokenizer.ggml.*` keys.
Vocabulary read_bpe_vocabulary(const std::string& path) {
  const GgufFile file = GgufFile::open(path);
  Vocabulary v;
  EXPECT_EQ(file.get_string("tokenizer.ggml.model"), "gpt2");
  v.model = TokenizerModel::byte_level_bpe;
  v.pre = file.find_string("tokenizer.ggml.pre").value_or("default");
  v.tokens = file.get_string_array("tokenizer.ggml.tokens");
  v.scores.assign(v.tokens.size(), 0.0f);
  v.kinds.assign(v.tokens.size(), TokenKind::normal);
  if (file.has("tokenizer.ggml.token_type")) {
    const std::vector<std::int32_t> types = file.get_i32_array("tokenizer.ggml.token_type");
    EXPECT_EQ(types.size(), v.tokens.size());
    for (std::size_t i = 0; i < types.size() && i < v.kinds.size(); ++i) v.kinds[i] = static_cast<TokenKind>(types[i]);
  }
  v.merges = file.get_string_array("tokenizer.ggml.merges");
  if (const auto id = file.find_u32("tokenizer.ggml.bos_token_id")) v.bos = static_cast<std::int32_t>(*id);
  if (const auto id = file.find_u32("tokenizer.ggml.eos_token_id")) v.eos = static_cast<std::int32_t>(*id);
  return v;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The inputs of an .inp file: each one is followed by "\n__ggml_vocab_test__\n".
std::vector<std::string> read_inputs(const std::string& path) {
  const std::string text = read_file(path);
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find(separator, start);
    if (end == std::string::npos) end = text.size();
    inputs.push_back(text.substr(start, end - start));
    start = end + separator.size();
  }
  return inputs;
}

// One list of ids per line of an .out file.
std::vector<std::vector<std::int32_t>> read_expected(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::vector<std::int32_t>> lines;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ids(line);
    std::vector<std::int32_t> expected;
    for (std::int32_t id = 0; ids >> id;) expected.push_back(id);
    lines.push_back(std::move(expected));
  }
  return lines;
}

const Tokenizer& gpt2_tokenizer() {
  static const Tokenizer tokenizer(read_bpe_vocabulary(shared_path("vocab/ggml-vocab-gpt-2.gguf")));
  return tokenizer;
}

constexpr EncodeOptions kPlain{.add_special = false, .parse_special = false};

TEST(ByteLevelBpeTokenizer, Gpt2VocabularyConformance) {
  const std::string base = shared_path("vocab/ggml-vocab-gpt-2.gguf");
  REQUIRE_SHARED_FILE(base);
  REQUIRE_SHARED_FILE(base + ".inp");
  REQUIRE_SHARED_FILE(base + ".out");
  const std::vector<std::string> inputs = read_inputs(base + ".inp");
  const auto expected = read_expected(base + ".out");
  ASSERT_EQ(inputs.size(), expected.size());
  ASSERT_GT(inputs.size(), 40u);
  const Tokenizer& tokenizer = gpt2_tokenizer();
  std::size_t matching = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<std::int32_t> ids = tokenizer.encode(inputs[i], kPlain);
    EXPECT_EQ(ids, expected[i]) << "input " << i << ": \"" << inputs[i] << "\"";
    matching += ids == expected[i];
    EXPECT_EQ(tokenizer.decode(ids), inputs[i]) << "input " << i;
  }
  EXPECT_EQ(matching, inputs.size());
}

// ---- an independent BPE: GPT-2's original formulation over strings -------------------------------------------

// GPT-2's bytes_to_unicode, as its encoder defines it: printable bytes keep their code point, the others get
// 256, 257, ... in byte order. Returned as the UTF-8 text of each byte's character.
std::vector<std::string> bytes_to_unicode() {
  std::vector<int> kept;
  for (int b = '!'; b <= '~'; ++b) kept.push_back(b);
  for (int b = 0xA1; b <= 0xAC; ++b) kept.push_back(b);
  for (int b = 0xAE; b <= 0xFF; ++b) kept.push_back(b);
  std::vector<int> code_point(256, -1);
  for (const int b : kept) code_point[static_cast<std::size_t>(b)] = b;
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    if (code_point[static_cast<std::size_t>(b)] < 0) code_point[static_cast<std::size_t>(b)] = next++;
  }
  std::vector<std::string> text(256);
  for (int b = 0; b < 256; ++b) {
    const int c = code_point[static_cast<std::size_t>(b)];
    std::string& s = text[static_cast<std::size_t>(b)];
    if (c < 0x80) {
      s += static_cast<char>(c);
    } else {
      s += static_cast<char>(0xC0 | (c >> 6));
      s += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return text;
}

// Repeatedly finds the lowest-ranked adjacent pair and merges every occurrence of it, left to right.
class ReferenceBpe {
 public:
  explicit ReferenceBpe(const Vocabulary& v) : byte_text_(bytes_to_unicode()) {
    for (std::size_t i = 0; i < v.merges.size(); ++i) ranks_.emplace(v.merges[i], static_cast<int>(i));
    for (std::size_t i = 0; i < v.tokens.size(); ++i) ids_.emplace(v.tokens[i], static_cast<std::int32_t>(i));
  }

  void encode_piece(std::string_view piece, std::vector<std::int32_t>& out) const {
    std::vector<std::string> word;
    for (const char c : piece) word.push_back(byte_text_[static_cast<unsigned char>(c)]);
    while (word.size() > 1) {
      int best = INT_MAX;
      std::pair<std::string, std::string> best_pair;
      for (std::size_t i = 0; i + 1 < word.size(); ++i) {
        const auto it = ranks_.find(word[i] + " " + word[i + 1]);
        if (it != ranks_.end() && it->second < best) {
          best = it->second;
          best_pair = {word[i], word[i + 1]};
        }
      }
      if (best == INT_MAX) break;
      std::vector<std::string> merged;
      for (std::size_t i = 0; i < word.size();) {
        if (i + 1 < word.size() && word[i] == best_pair.first && word[i + 1] == best_pair.second) {
          merged.push_back(word[i] + word[i + 1]);
          i += 2;
        } else {
          merged.push_back(word[i++]);
        }
      }
      word = std::move(merged);
    }
    for (const std::string& symbol : word) out.push_back(ids_.at(symbol));
  }

 private:
  std::vector<std::string> byte_text_;
  std::map<std::string, int> ranks_;
  std::map<std::string, std::int32_t> ids_;
};

TEST(ByteLevelBpeTokenizer, AgreesWithPlainGpt2Bpe) {
  const std::string base = shared_path("vocab/ggml-vocab-gpt-2.gguf");
  REQUIRE_SHARED_FILE(base);
  const Tokenizer& tokenizer = gpt2_tokenizer();
  const ReferenceBpe reference(tokenizer.vocabulary());
  const detail::PreTokenizer pre_tokenizer("gpt-2");

  std::vector<std::string> texts = read_inputs(base + ".inp");
  texts.push_back("The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor jugs!");
  texts.push_back("int main(int argc, char** argv) {\n    return argc > 1 ? 0 : -1;\n}\n");
  texts.push_back("Überprüfung der Größenordnung; naïve café; Ελληνικά; русский язык; 日本語のテキスト; 한국어");
  texts.push_back("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb");
  std::mt19937 rng(11);
  for (int i = 0; i < 50; ++i) {
    std::string bytes;
    for (int j = 0; j < 40; ++j) bytes += static_cast<char>(rng() % 256);
    texts.push_back(bytes);
  }
  for (const std::string& text : texts) {
    std::vector<std::string_view> pieces;
    pre_tokenizer.split(text, pieces);
    std::vector<std::int32_t> expected;
    for (const std::string_view piece : pieces) reference.encode_piece(piece, expected);
    EXPECT_EQ(tokenizer.encode(text, kPlain), expected) << "\"" << text << "\"";
  }
}

TEST(ByteLevelBpeTokenizer, AnyBytesRoundTrip) {
  REQUIRE_SHARED_FILE(shared_path("vocab/ggml-vocab-gpt-2.gguf"));
  const Tokenizer& tokenizer = gpt2_tokenizer();
  std::string every_byte;
  for (int b = 0; b < 256; ++b) every_byte += static_cast<char>(b);
  EXPECT_EQ(tokenizer.decode(tokenizer.encode(every_byte, kPlain)), every_byte);
  std::mt19937 rng(5);
  for (int round = 0; round < 200; ++round) {
    std::string bytes;
    const int length = static_cast<int>(rng() % 64);
    for (int i = 0; i < length; ++i) bytes += static_cast<char>(rng() % 256);
    ASSERT_EQ(tokenizer.decode(tokenizer.encode(bytes, kPlain)), bytes);
  }
}

TEST(ByteLevelBpeTokenizer, PiecesUndoTheByteMap) {
  REQUIRE_SHARED_FILE(shared_path("vocab/ggml-vocab-gpt-2.gguf"));
  const Tokenizer& tokenizer = gpt2_tokenizer();
  const auto& tokens = tokenizer.vocabulary().tokens;
  const auto id_of = [&](const std::string& text) {
    const auto it = std::find(tokens.begin(), tokens.end(), text);
    EXPECT_NE(it, tokens.end()) << text;
    return static_cast<std::int32_t>(it - tokens.begin());
  };
  // Space is byte 32, the 33rd unprintable byte: U+0100 + 32 = U+0120 "Ġ"; newline (10) is U+010A "Ċ";
  // DEL (127) is the first unprintable after the 33 control bytes and space: U+0121 "ġ"; soft hyphen (173)
  // is the last of all 68: U+0143 "Ń".
  EXPECT_EQ(tokenizer.piece(id_of("\u0120the")), " the");
  EXPECT_EQ(tokenizer.piece(id_of("\u010A")), "\n");
  EXPECT_EQ(tokenizer.piece(id_of("\u0121")), "\x7f");
  EXPECT_EQ(tokenizer.piece(id_of("\u0143")), "\xad");
  EXPECT_EQ(tokenizer.piece(id_of("\u0100")), std::string(1, '\0'));
  // Every byte's token decodes to that byte.
  const std::vector<std::string> byte_text = bytes_to_unicode();
  for (int b = 0; b < 256; ++b) {
    EXPECT_EQ(tokenizer.piece(id_of(byte_text[static_cast<std::size_t>(b)])), std::string(1, static_cast<char>(b)));
  }
}

TEST(ByteLevelBpeTokenizer, EncodesAMegabyteAndOneLongPiece) {
  REQUIRE_SHARED_FILE(shared_path("vocab/ggml-vocab-gpt-2.gguf"));
  const Tokenizer& tokenizer = gpt2_tokenizer();
  const std::string sample = read_file(shared_path("vocab/ggml-vocab-gpt-2.gguf.inp"));
  std::string text;
  while (text.size() < (1u << 20)) text += sample;
  const auto start = std::chrono::steady_clock::now();
  const std::vector<std::int32_t> ids = tokenizer.encode(text, kPlain);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "[ measure  ] " << text.size() << " bytes -> " << ids.size() << " tokens in " << seconds * 1e3
            << " ms\n";
  EXPECT_EQ(tokenizer.decode(ids), text);
  // One piece of 256 KiB (no spaces): merges must not be quadratic in the piece length.
  const std::string long_piece(1u << 18, 'a');
  const auto long_start = std::chrono::steady_clock::now();
  const std::vector<std::int32_t> long_ids = tokenizer.encode(long_piece, kPlain);
  std::cout << "[ measure  ] one piece of " << long_piece.size() << " bytes -> " << long_ids.size() << " tokens in "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - long_start).count() * 1e3 << " ms\n";
  EXPECT_EQ(tokenizer.decode(long_ids), long_piece);
}

// ---- small hand-made vocabularies -------------------------------------------------------------------------------

Vocabulary tiny_vocabulary(std::vector<std::string> tokens, std::vector<std::string> merges, std::string pre = "gpt-2") {
  Vocabulary v;
  v.model = TokenizerModel::byte_level_bpe;
  v.pre = std::move(pre);
  v.tokens = std::move(tokens);
  v.scores.assign(v.tokens.size(), 0.0f);
  v.kinds.assign(v.tokens.size(), TokenKind::normal);
  v.merges = std::move(merges);
  return v;
}

std::vector<std::string> token_texts(const Tokenizer& tokenizer, const std::vector<std::int32_t>& ids) {
  std::vector<std::string> texts;
  for (const std::int32_t id : ids) texts.push_back(tokenizer.vocabulary().tokens[static_cast<std::size_t>(id)]);
  return texts;
}

TEST(ByteLevelBpeTokenizer, LowestRankMergesFirst) {
  // "abc": with "b c" ranked first, b+c merge and "a bc" is no rule: [a, bc]. Ranked the other way: [ab, c].
  const Tokenizer bc_first(tiny_vocabulary({"a", "b", "c", "ab", "bc"}, {"b c", "a b"}));
  EXPECT_EQ(token_texts(bc_first, bc_first.encode("abc", kPlain)), (std::vector<std::string>{"a", "bc"}));
  const Tokenizer ab_first(tiny_vocabulary({"a", "b", "c", "ab", "bc"}, {"a b", "b c"}));
  EXPECT_EQ(token_texts(ab_first, ab_first.encode("abc", kPlain)), (std::vector<std::string>{"ab", "c"}));
}

TEST(ByteLevelBpeTokenizer, EqualRanksMergeLeftmostFirst) {
  // "aaa" has the pair "a a" twice; the leftmost merges, leaving "aa a", and with "aa a" a rule: [aaa].
  const Tokenizer only_pairs(tiny_vocabulary({"a", "aa"}, {"a a"}));
  EXPECT_EQ(token_texts(only_pairs, only_pairs.encode("aaa", kPlain)), (std::vector<std::string>{"aa", "a"}));
  const Tokenizer with_triple(tiny_vocabulary({"a", "aa", "aaa"}, {"a a", "aa a"}));
  EXPECT_EQ(token_texts(with_triple, with_triple.encode("aaa", kPlain)), (std::vector<std::string>{"aaa"}));
  // "a aa" is the only way to "aaa"; leftmost-first makes "aa a", which it cannot merge.
  const Tokenizer right_triple(tiny_vocabulary({"a", "aa", "aaa"}, {"a a", "a aa"}));
  EXPECT_EQ(token_texts(right_triple, right_triple.encode("aaa", kPlain)), (std::vector<std::string>{"aa", "a"}));
}

TEST(ByteLevelBpeTokenizer, MergesOnlyWithinPieces) {
  // "a 1" is a rule, but the GPT-2 pattern puts letters and digits in separate pieces: "a1" stays [a, 1],
  // while "aa" (one piece) merges.
  const Tokenizer tokenizer(tiny_vocabulary({"a", "1", "a1", "aa"}, {"a 1", "a a"}));
  EXPECT_EQ(token_texts(tokenizer, tokenizer.encode("a1", kPlain)), (std::vector<std::string>{"a", "1"}));
  EXPECT_EQ(token_texts(tokenizer, tokenizer.encode("aa", kPlain)), (std::vector<std::string>{"aa"}));
}

TEST(ByteLevelBpeTokenizer, Llama3TakesAWholePieceThatIsAToken) {
  // "abc" is a token but no merge builds it: with llama-bpe (ignore_merges) the piece is that token; with
  // gpt-2 the merges decide.
  const std::vector<std::string> tokens = {"a", "b", "c", "ab", "abc"};
  const Tokenizer llama3(tiny_vocabulary(tokens, {"a b"}, "llama-bpe"));
  EXPECT_EQ(token_texts(llama3, llama3.encode("abc", kPlain)), (std::vector<std::string>{"abc"}));
  const Tokenizer gpt2(tiny_vocabulary(tokens, {"a b"}, "gpt-2"));
  EXPECT_EQ(token_texts(gpt2, gpt2.encode("abc", kPlain)), (std::vector<std::string>{"ab", "c"}));
}

TEST(ByteLevelBpeTokenizer, BytesWithoutATokenBecomeUnknownOrAreDropped) {
  // No token for "z": with an unknown token it stands in, without one the byte is left out.
  Vocabulary with_unknown = tiny_vocabulary({"<unk>", "a", "b"}, {});
  with_unknown.unknown = 0;
  with_unknown.kinds[0] = TokenKind::unknown;
  const Tokenizer unknown(std::move(with_unknown));
  EXPECT_EQ(unknown.encode("azb", kPlain), (std::vector<std::int32_t>{1, 0, 2}));
  const Tokenizer dropped(tiny_vocabulary({"a", "b"}, {}));
  EXPECT_EQ(dropped.encode("azb", kPlain), (std::vector<std::int32_t>{0, 1}));
}

TEST(ByteLevelBpeTokenizer, UserDefinedTokensDecodeVerbatim) {
  // A user-defined token is matched in the text as it is, so its piece is its text: the "Ġ" in it stays "Ġ"
  // (undoing the byte map would make it a space).
  Vocabulary v = tiny_vocabulary({"a", "\u0120", "<tool\u0120call>"}, {});
  v.kinds[2] = TokenKind::user_defined;
  const Tokenizer tokenizer(std::move(v));
  const std::vector<std::int32_t> ids = tokenizer.encode("a <tool\u0120call>", kPlain);
  EXPECT_EQ(ids, (std::vector<std::int32_t>{0, 1, 2}));
  EXPECT_EQ(tokenizer.decode(ids), "a <tool\u0120call>");
}

TEST(ByteLevelBpeTokenizer, MalformedMergeNamesItsIndex) {
  for (const std::string bad : {"ab", " a b", "a b ", "a  b", "a b c", ""}) {
    try {
      Tokenizer(tiny_vocabulary({"a", "b", "ab"}, {"a b", bad}));
      ADD_FAILURE() << "no exception for merge \"" << bad << "\"";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("merge 1 "), std::string::npos) << e.what();
    }
  }
}

TEST(ByteLevelBpeTokenizer, UnknownPreTokenizerIsRejected) {
  try {
    Tokenizer(tiny_vocabulary({"a"}, {}, "llama-9000"));
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("llama-9000"), std::string::npos) << message;
    EXPECT_NE(message.find("llama-bpe"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace loom::compute
