// Vocabulary: the `tokenizer.ggml.*` keys of the shared GGUF vocabularies load as their metadata says; keys
// that are absent take the reference implementation's defaults per model type; the llama2.c tokenizer file
// of aidreams260K holds the same vocabulary as its GGUF conversion; broken GGUF metadata and broken llama2.c
// tokenizer files throw ModelFileError naming the key or the offset.
#include "loom/compute/text/vocabulary.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "loom/compute/model/gguf_file.hpp"
#include "loom/compute/model/gguf_writer.hpp"
#include "loom/compute/model/model_file_error.hpp"
#include "test_files.hpp"

namespace loom::compute {
namespace {

using testing::ScratchDir;
using testing::shared_path;

const std::string kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space

Vocabulary load_gguf(const std::string& path) { return Vocabulary::from_gguf(GgufFile::open(path)); }

// A vocabulary-only GGUF with the given model and tokens, and whatever else `extra` adds.
Vocabulary write_and_load(const ScratchDir& dir, const std::string& model, std::vector<std::string> tokens,
                          const std::function<void(GgufWriter&)>& extra = {}) {
  GgufWriter writer;
  writer.add_string("tokenizer.ggml.model", model);
  writer.add_array("tokenizer.ggml.tokens", std::move(tokens));
  if (extra) extra(writer);
  const std::string path = dir.path("vocab.gguf").string();
  writer.write(path);
  return load_gguf(path);
}

// Tokens a, b, c, ... (n of them): enough ids for the defaults to be in range.
std::vector<std::string> letters(std::size_t n) {
  std::vector<std::string> tokens;
  for (std::size_t i = 0; i < n; ++i) tokens.push_back("t" + std::to_string(i));
  return tokens;
}

// The ModelFileError that `load` throws; fails the test when it throws nothing or something else.
template <class Load>
ModelFileError error_of(Load&& load) {
  try {
    load();
  } catch (const ModelFileError& e) {
    return e;
  }
  ADD_FAILURE() << "expected a ModelFileError";
  return ModelFileError("", std::nullopt, "", "");
}

TEST(Vocabulary, LlamaSpmGgufAsItsMetadataSays) {
  const std::string path = shared_path("vocab/ggml-vocab-llama-spm.gguf");
  REQUIRE_SHARED_FILE(path);
  const Vocabulary v = load_gguf(path);
  EXPECT_EQ(v.model, TokenizerModel::sentencepiece);
  EXPECT_EQ(v.pre, "default");
  ASSERT_EQ(v.size(), 32000);
  ASSERT_EQ(v.scores.size(), 32000u);
  ASSERT_EQ(v.kinds.size(), 32000u);
  EXPECT_EQ(v.tokens[0], "<unk>");
  EXPECT_EQ(v.tokens[1], "<s>");
  EXPECT_EQ(v.tokens[2], "</s>");
  EXPECT_EQ(v.tokens[3], "<0x00>");
  EXPECT_EQ(v.kinds[0], TokenKind::unknown);
  EXPECT_EQ(v.kinds[1], TokenKind::control);
  EXPECT_EQ(v.kinds[3], TokenKind::byte);
  EXPECT_EQ(v.kinds[258], TokenKind::byte);  // <0xFF>
  EXPECT_EQ(v.tokens[258], "<0xFF>");
  EXPECT_EQ(v.kinds[259], TokenKind::normal);
  EXPECT_EQ(v.bos, 1);
  EXPECT_EQ(v.eos, 2);
  EXPECT_EQ(v.unknown, 0);
  EXPECT_EQ(v.eot, Vocabulary::kNone);
  EXPECT_EQ(v.padding, Vocabulary::kNone);
  EXPECT_TRUE(v.add_bos);
  EXPECT_FALSE(v.add_eos);
  EXPECT_TRUE(v.add_space_prefix);  // the file has no add_space_prefix key: the SPM default
  EXPECT_TRUE(v.merges.empty());
  EXPECT_TRUE(v.is_end_of_generation(2));
  EXPECT_FALSE(v.is_end_of_generation(1));
}

TEST(Vocabulary, Gpt2GgufAsItsMetadataSays) {
  const std::string path = shared_path("vocab/ggml-vocab-gpt-2.gguf");
  REQUIRE_SHARED_FILE(path);
  const Vocabulary v = load_gguf(path);
  EXPECT_EQ(v.model, TokenizerModel::byte_level_bpe);
  EXPECT_EQ(v.pre, "gpt-2");
  ASSERT_EQ(v.size(), 50257);
  ASSERT_EQ(v.merges.size(), 50000u);
  EXPECT_EQ(v.merges[0], "\xC4\xA0 t");  // "Ġ t"
  EXPECT_EQ(v.bos, 50256);
  EXPECT_EQ(v.eos, 50256);
  EXPECT_EQ(v.unknown, Vocabulary::kNone);
  EXPECT_FALSE(v.add_bos);  // no add_bos_token key, and "gpt-2" is not a pre-tokenizer that adds BOS
  EXPECT_FALSE(v.add_space_prefix);
  // No eot_token_id key: found by its text.
  EXPECT_EQ(v.tokens[50256], "<|endoftext|>");
  EXPECT_EQ(v.eot, 50256);
  EXPECT_EQ(v.kinds[50256], TokenKind::control);
  // The file has no scores: all 0.
  EXPECT_EQ(v.scores.size(), 50257u);
  EXPECT_EQ(v.scores[100], 0.0f);
}

TEST(Vocabulary, SentencePieceDefaultsWhenKeysAreAbsent) {
  ScratchDir dir("vocab_spm_defaults");
  const Vocabulary v = write_and_load(dir, "llama", letters(5));
  EXPECT_EQ(v.model, TokenizerModel::sentencepiece);
  EXPECT_EQ(v.pre, "default");
  EXPECT_EQ(v.unknown, 0);
  EXPECT_EQ(v.bos, 1);
  EXPECT_EQ(v.eos, 2);
  EXPECT_EQ(v.eot, Vocabulary::kNone);
  EXPECT_EQ(v.padding, Vocabulary::kNone);
  EXPECT_TRUE(v.add_bos);
  EXPECT_FALSE(v.add_eos);
  EXPECT_TRUE(v.add_space_prefix);
  EXPECT_EQ(v.scores, std::vector<float>(5, 0.0f));
  EXPECT_EQ(v.kinds, std::vector<TokenKind>(5, TokenKind::normal));
}

TEST(Vocabulary, ByteLevelBpeDefaultsWhenKeysAreAbsent) {
  ScratchDir dir("vocab_bpe_defaults");
  auto merges = [](const std::string& pre) {
    return [pre](GgufWriter& w) {
      w.add_array("tokenizer.ggml.merges", std::vector<std::string>{"t 1"});
      if (!pre.empty()) w.add_string("tokenizer.ggml.pre", pre);
    };
  };
  const Vocabulary plain = write_and_load(dir, "gpt2", letters(20), merges(""));
  EXPECT_EQ(plain.model, TokenizerModel::byte_level_bpe);
  EXPECT_EQ(plain.merges, std::vector<std::string>{"t 1"});
  EXPECT_EQ(plain.bos, 11);  // the reference's GPT-2 default
  EXPECT_EQ(plain.eos, 11);
  EXPECT_EQ(plain.unknown, Vocabulary::kNone);
  EXPECT_FALSE(plain.add_bos);
  EXPECT_FALSE(plain.add_eos);
  EXPECT_FALSE(plain.add_space_prefix);

  EXPECT_TRUE(write_and_load(dir, "gpt2", letters(20), merges("llama-bpe")).add_bos);
  EXPECT_TRUE(write_and_load(dir, "gpt2", letters(20), merges("tekken")).add_bos);
  EXPECT_FALSE(write_and_load(dir, "gpt2", letters(20), merges("qwen2")).add_bos);
  EXPECT_EQ(write_and_load(dir, "gpt2", letters(20), merges("chatglm-bpe")).bos, Vocabulary::kNone);
  // A vocabulary too small for the default id has none.
  EXPECT_EQ(write_and_load(dir, "gpt2", letters(5), merges("")).eos, Vocabulary::kNone);
}

TEST(Vocabulary, KeysOverrideTheDefaults) {
  ScratchDir dir("vocab_keys");
  const Vocabulary v = write_and_load(dir, "llama", letters(8), [](GgufWriter& w) {
    w.add_string("tokenizer.ggml.pre", "whatever");
    w.add_array("tokenizer.ggml.scores", std::vector<float>{0, -1, -2, -3, -4, -5, -6, -7});
    w.add_array("tokenizer.ggml.token_type", std::vector<std::int32_t>{2, 3, 3, 1, 4, 5, 6, 9});
    w.add_u32("tokenizer.ggml.bos_token_id", 5);
    w.add_u32("tokenizer.ggml.eos_token_id", 6);
    w.add_i32("tokenizer.ggml.eot_token_id", 7);
    w.add_u32("tokenizer.ggml.unknown_token_id", 3);
    w.add_u32("tokenizer.ggml.padding_token_id", 4);
    w.add_bool("tokenizer.ggml.add_bos_token", false);
    w.add_bool("tokenizer.ggml.add_eos_token", true);
    w.add_bool("tokenizer.ggml.add_space_prefix", false);
  });
  EXPECT_EQ(v.pre, "whatever");
  EXPECT_EQ(v.scores, (std::vector<float>{0, -1, -2, -3, -4, -5, -6, -7}));
  EXPECT_EQ(v.kinds, (std::vector<TokenKind>{TokenKind::unknown, TokenKind::control, TokenKind::control,
                                             TokenKind::normal, TokenKind::user_defined, TokenKind::unused,
                                             TokenKind::byte, TokenKind::undefined}));  // 9: not a kind
  EXPECT_EQ(v.bos, 5);
  EXPECT_EQ(v.eos, 6);
  EXPECT_EQ(v.eot, 7);
  EXPECT_EQ(v.unknown, 3);
  EXPECT_EQ(v.padding, 4);
  EXPECT_FALSE(v.add_bos);
  EXPECT_TRUE(v.add_eos);
  EXPECT_FALSE(v.add_space_prefix);
  EXPECT_TRUE(v.is_end_of_generation(6));
  EXPECT_TRUE(v.is_end_of_generation(7));
  EXPECT_FALSE(v.is_end_of_generation(5));
}

// Converters write -1 (as i32, or as u32 4294967295) for a token the model does not have.
TEST(Vocabulary, MinusOneMeansNoSuchToken) {
  ScratchDir dir("vocab_none");
  const Vocabulary v = write_and_load(dir, "llama", letters(5), [](GgufWriter& w) {
    w.add_u32("tokenizer.ggml.padding_token_id", 4294967295u);
    w.add_i32("tokenizer.ggml.unknown_token_id", -1);
    w.add_u32("tokenizer.ggml.eot_token_id", 4294967295u);
  });
  EXPECT_EQ(v.padding, Vocabulary::kNone);
  EXPECT_EQ(v.unknown, Vocabulary::kNone);
  EXPECT_EQ(v.eot, Vocabulary::kNone);
}

TEST(Vocabulary, EndOfTurnFoundByTextPrefersTurnMarkers) {
  ScratchDir dir("vocab_eot");
  // <|endoftext|> comes first by id, but a chat turn ends with <|im_end|>.
  const Vocabulary v = write_and_load(dir, "gpt2", {"a", "b", "<|endoftext|>", "<|im_end|>"}, [](GgufWriter& w) {
    w.add_array("tokenizer.ggml.merges", std::vector<std::string>{"a b"});
    w.add_array("tokenizer.ggml.token_type", std::vector<std::int32_t>{1, 1, 3, 1});
    w.add_u32("tokenizer.ggml.eos_token_id", 2);
  });
  EXPECT_EQ(v.eot, 3);
  EXPECT_EQ(v.kinds[3], TokenKind::control);  // turned into a control token, as the reference does
  EXPECT_TRUE(v.is_end_of_generation(2));
  EXPECT_TRUE(v.is_end_of_generation(3));

  // An explicit key wins, and no text search happens then.
  const Vocabulary keyed = write_and_load(dir, "gpt2", {"a", "b", "<|endoftext|>", "<|im_end|>"}, [](GgufWriter& w) {
    w.add_array("tokenizer.ggml.merges", std::vector<std::string>{"a b"});
    w.add_u32("tokenizer.ggml.eot_token_id", 2);
  });
  EXPECT_EQ(keyed.eot, 2);
  EXPECT_EQ(keyed.kinds[3], TokenKind::normal);
}

TEST(Vocabulary, MissingTokensIsAnError) {
  ScratchDir dir("vocab_no_tokens");
  GgufWriter writer;
  writer.add_string("tokenizer.ggml.model", "llama");
  const std::string path = dir.path("v.gguf").string();
  writer.write(path);
  const ModelFileError e = error_of([&] { load_gguf(path); });
  EXPECT_EQ(e.key(), "tokenizer.ggml.tokens");
  EXPECT_EQ(e.path(), path);
}

TEST(Vocabulary, MissingModelIsAnError) {
  ScratchDir dir("vocab_no_model");
  GgufWriter writer;
  writer.add_array("tokenizer.ggml.tokens", std::vector<std::string>{"a"});
  const std::string path = dir.path("v.gguf").string();
  writer.write(path);
  EXPECT_EQ(error_of([&] { load_gguf(path); }).key(), "tokenizer.ggml.model");
}

TEST(Vocabulary, UnknownModelNameIsAnError) {
  ScratchDir dir("vocab_bad_model");
  const ModelFileError e = error_of([&] { write_and_load(dir, "t5", letters(3)); });
  EXPECT_EQ(e.key(), "tokenizer.ggml.model");
  EXPECT_NE(e.detail().find("\"t5\""), std::string::npos) << e.what();
  EXPECT_TRUE(e.offset().has_value());
}

TEST(Vocabulary, ArrayLengthsMustMatchTheTokens) {
  ScratchDir dir("vocab_lengths");
  const ModelFileError scores = error_of([&] {
    write_and_load(dir, "llama", letters(4), [](GgufWriter& w) {
      w.add_array("tokenizer.ggml.scores", std::vector<float>{0, 0, 0});
    });
  });
  EXPECT_EQ(scores.key(), "tokenizer.ggml.scores");
  EXPECT_NE(scores.detail().find("3 scores for 4 tokens"), std::string::npos) << scores.what();

  const ModelFileError types = error_of([&] {
    write_and_load(dir, "llama", letters(4), [](GgufWriter& w) {
      w.add_array("tokenizer.ggml.token_type", std::vector<std::int32_t>{1, 1, 1, 1, 1});
    });
  });
  EXPECT_EQ(types.key(), "tokenizer.ggml.token_type");

  const ModelFileError wrong_type = error_of([&] {
    write_and_load(dir, "llama", letters(2), [](GgufWriter& w) {
      w.add_array("tokenizer.ggml.scores", std::vector<std::int32_t>{0, 0});
    });
  });
  EXPECT_EQ(wrong_type.key(), "tokenizer.ggml.scores");
}

TEST(Vocabulary, TokenIdsMustBeInRange) {
  ScratchDir dir("vocab_ids");
  for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                          "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id"}) {
    const ModelFileError e = error_of([&] {
      write_and_load(dir, "llama", letters(4), [key](GgufWriter& w) { w.add_u32(key, 4); });
    });
    EXPECT_EQ(e.key(), key);
    EXPECT_NE(e.detail().find("token id 4 is outside the vocabulary (0..3)"), std::string::npos) << e.what();
  }
  const ModelFileError negative = error_of([&] {
    write_and_load(dir, "llama", letters(4), [](GgufWriter& w) { w.add_i32("tokenizer.ggml.bos_token_id", -2); });
  });
  EXPECT_EQ(negative.key(), "tokenizer.ggml.bos_token_id");
  const ModelFileError not_a_number = error_of([&] {
    write_and_load(dir, "llama", letters(4), [](GgufWriter& w) { w.add_string("tokenizer.ggml.eos_token_id", "2"); });
  });
  EXPECT_EQ(not_a_number.key(), "tokenizer.ggml.eos_token_id");
}

TEST(Vocabulary, MalformedTokenListsAreErrors) {
  ScratchDir dir("vocab_tokens");
  EXPECT_EQ(error_of([&] { write_and_load(dir, "llama", {}); }).key(), "tokenizer.ggml.tokens");

  const ModelFileError repeated = error_of([&] { write_and_load(dir, "llama", {"a", "b", "a"}); });
  EXPECT_EQ(repeated.key(), "tokenizer.ggml.tokens");
  EXPECT_NE(repeated.detail().find("token 2 \"a\" repeats token 0"), std::string::npos) << repeated.what();

  const ModelFileError too_long = error_of(
      [&] { write_and_load(dir, "llama", {"a", std::string(Vocabulary::kMaxTokenBytes + 1, 'x')}); });
  EXPECT_EQ(too_long.key(), "tokenizer.ggml.tokens");
  EXPECT_NE(too_long.detail().find("token 1 is 65537 bytes"), std::string::npos) << too_long.what();

  // Byte-level BPE cannot work without its merges.
  EXPECT_EQ(error_of([&] { write_and_load(dir, "gpt2", letters(3)); }).key(), "tokenizer.ggml.merges");
}

// ---- llama2.c tokenizer files --------------------------------------------------------------------------

TEST(Vocabulary, Llama2cTokenizerMatchesTheGgufConversion) {
  const std::string tok_path = shared_path("models/aidreams260K.tok512.bin");
  const std::string gguf_path = shared_path("models/aidreams260K.gguf");
  REQUIRE_SHARED_FILE(tok_path);
  REQUIRE_SHARED_FILE(gguf_path);
  const Vocabulary from_tok = Vocabulary::from_llama2c_tokenizer(tok_path, 512);
  const Vocabulary from_gguf = load_gguf(gguf_path);

  EXPECT_EQ(from_tok.model, TokenizerModel::sentencepiece);
  ASSERT_EQ(from_tok.size(), 512);
  EXPECT_EQ(from_tok.tokens[0], "<unk>");
  EXPECT_EQ(from_tok.tokens[1], "<s>");  // stored as "\n<s>\n" by llama2.c's exporter
  EXPECT_EQ(from_tok.tokens[2], "</s>");
  EXPECT_EQ(from_tok.kinds[0], TokenKind::unknown);
  EXPECT_EQ(from_tok.kinds[1], TokenKind::control);
  EXPECT_EQ(from_tok.kinds[2], TokenKind::control);
  EXPECT_EQ(from_tok.tokens[13], "<0x0A>");
  EXPECT_EQ(from_tok.kinds[13], TokenKind::byte);
  EXPECT_EQ(from_tok.tokens[262], kSpace + "a");  // " a" in the file
  EXPECT_EQ(from_tok.unknown, 0);
  EXPECT_EQ(from_tok.bos, 1);
  EXPECT_EQ(from_tok.eos, 2);
  EXPECT_TRUE(from_tok.add_bos);
  EXPECT_FALSE(from_tok.add_eos);
  EXPECT_TRUE(from_tok.add_space_prefix);

  // The GGUF conversion was made from the same SentencePiece model: token for token the same.
  ASSERT_EQ(from_gguf.size(), 512);
  EXPECT_EQ(from_tok.tokens, from_gguf.tokens);
  EXPECT_EQ(from_tok.scores, from_gguf.scores);
  EXPECT_EQ(from_tok.kinds, from_gguf.kinds);
  EXPECT_EQ(from_gguf.padding, Vocabulary::kNone);  // stored as 4294967295
}

// A llama2.c tokenizer file: int32 max_token_length, then per token f32 score, int32 length, bytes.
struct TokFile {
  std::vector<std::byte> bytes;
  void i32(std::int32_t v) { append(&v, 4); }
  void f32(float v) { append(&v, 4); }
  void text(const std::string& s) { append(s.data(), s.size()); }
  void token(float score, const std::string& s) {
    f32(score);
    i32(static_cast<std::int32_t>(s.size()));
    text(s);
  }
  void append(const void* data, std::size_t n) {
    const auto* p = static_cast<const std::byte*>(data);
    bytes.insert(bytes.end(), p, p + n);
  }
};

// A valid 4-token file of 55 bytes; the offsets the corruption test relies on are spelled out.
TokFile small_tok_file() {
  TokFile f;
  f.i32(6);                // offset 0: max_token_length
  f.token(0, "<unk>");     // offset 4: score, 8: length, 12..16: text
  f.token(0, "\n<s>\n");   // offset 17
  f.token(0, "\n</s>\n");  // offset 30
  f.token(-1.5f, " hi");   // offset 44: score, 48: length, 52..54: text
  return f;
}

TEST(Vocabulary, SmallLlama2cTokenizerFile) {
  ScratchDir dir("tok_small");
  const std::string path = dir.write("t.bin", small_tok_file().bytes);
  const Vocabulary v = Vocabulary::from_llama2c_tokenizer(path, 4);
  EXPECT_EQ(v.tokens, (std::vector<std::string>{"<unk>", "<s>", "</s>", kSpace + "hi"}));
  EXPECT_EQ(v.scores, (std::vector<float>{0, 0, 0, -1.5f}));
}

TEST(Vocabulary, CorruptLlama2cTokenizerFilesNameTheOffset) {
  ScratchDir dir("tok_corrupt");
  const TokFile good = small_tok_file();
  ASSERT_EQ(good.bytes.size(), 55u);
  auto load = [&](const std::vector<std::byte>& bytes, std::int32_t vocab_size = 4) {
    const std::string path = dir.write("t.bin", bytes);
    return error_of([&] { Vocabulary::from_llama2c_tokenizer(path, vocab_size); });
  };
  auto cut = [&](std::size_t n) { return std::vector<std::byte>(good.bytes.begin(), good.bytes.begin() + n); };
  auto with_i32_at = [&](std::size_t offset, std::int32_t value) {
    std::vector<std::byte> bytes = good.bytes;
    std::memcpy(bytes.data() + offset, &value, 4);
    return bytes;
  };

  EXPECT_EQ(load(cut(0)).offset(), 0u);   // empty
  EXPECT_EQ(load(cut(2)).offset(), 0u);   // not even max_token_length
  EXPECT_EQ(load(cut(4)).offset(), 4u);   // ends before token 0
  EXPECT_EQ(load(cut(48)).offset(), 44u);  // token 3's length is missing
  const ModelFileError short_text = load(cut(53));  // token 3's 3 bytes start at 52, only 1 is there
  EXPECT_EQ(short_text.offset(), 52u);
  EXPECT_NE(short_text.detail().find("token 3 needs 3 bytes"), std::string::npos) << short_text.what();

  std::vector<std::byte> trailing = good.bytes;
  trailing.push_back(std::byte{0});
  EXPECT_EQ(load(trailing).offset(), 55u);
  // More tokens than the checkpoint's vocabulary: the rest is trailing data.
  EXPECT_EQ(load(good.bytes, 3).offset(), 44u);
  // Fewer tokens than the checkpoint's vocabulary.
  EXPECT_EQ(load(good.bytes, 5).offset(), 55u);

  const ModelFileError negative = load(with_i32_at(48, -1));
  EXPECT_EQ(negative.offset(), 48u);
  EXPECT_NE(negative.detail().find("token 3 has length -1"), std::string::npos) << negative.what();
  EXPECT_EQ(load(with_i32_at(8, 7)).offset(), 8u);  // token 0 longer than max_token_length 6
  EXPECT_EQ(load(with_i32_at(0, 1 << 30)).offset(), 0u);  // max_token_length beyond the bound
  EXPECT_EQ(load(with_i32_at(0, -3)).offset(), 0u);

  // The vocabulary size comes from the checkpoint; ids 0..2 must exist.
  EXPECT_EQ(load(good.bytes, 2).key(), "vocab_size");
  EXPECT_THROW(Vocabulary::from_llama2c_tokenizer(dir.path("missing.bin").string(), 4), ModelFileError);
}

}  // namespace
}  // namespace loom::compute
