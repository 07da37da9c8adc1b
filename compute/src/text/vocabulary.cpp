#include "loom/compute/text/vocabulary.hpp"

#include <array>
#include <bit>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <utility>

#include "loom/compute/model/gguf_file.hpp"
#include "loom/compute/model/mapped_file.hpp"
#include "loom/compute/model/model_file_error.hpp"
#include "sentencepiece_text.hpp"

namespace loom::compute {
namespace {

constexpr std::string_view kModelKey = "tokenizer.ggml.model";
constexpr std::string_view kPreKey = "tokenizer.ggml.pre";
constexpr std::string_view kTokensKey = "tokenizer.ggml.tokens";
constexpr std::string_view kScoresKey = "tokenizer.ggml.scores";
constexpr std::string_view kTokenTypeKey = "tokenizer.ggml.token_type";
constexpr std::string_view kMergesKey = "tokenizer.ggml.merges";
constexpr std::string_view kBosKey = "tokenizer.ggml.bos_token_id";
constexpr std::string_view kEosKey = "tokenizer.ggml.eos_token_id";
constexpr std::string_view kEotKey = "tokenizer.ggml.eot_token_id";
constexpr std::string_view kUnknownKey = "tokenizer.ggml.unknown_token_id";
constexpr std::string_view kPaddingKey = "tokenizer.ggml.padding_token_id";
constexpr std::string_view kAddBosKey = "tokenizer.ggml.add_bos_token";
constexpr std::string_view kAddEosKey = "tokenizer.ggml.add_eos_token";
constexpr std::string_view kAddSpacePrefixKey = "tokenizer.ggml.add_space_prefix";

// Texts of end-of-turn tokens, for files that name no `eot_token_id`: the reference implementation looks for
// these and also marks the one it picks as a control token. It takes whichever its hash map yields first; we
// take the first of this list the vocabulary has, so the result is deterministic and an end-of-turn marker
// wins over an end-of-text one (Qwen has both <|im_end|> and <|endoftext|>; chats end with the former).
constexpr std::array<std::string_view, 10> kEndOfTurnTexts{
    "<|eot_id|>",    "<|im_end|>",      "<|end|>", "<end_of_turn>",
    "<|endoftext|>", "<|end_of_text|>", "<EOT>",   "_<EOT>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",  // DeepSeek's <｜end▁of▁sentence｜>
    "<end_of_utterance>",
};

// Pre-tokenizers for which the reference adds BOS to byte-level BPE input when the file does not say.
constexpr std::array<std::string_view, 10> kBpeAddBosPre{"llama3",   "llama-v3", "llama-bpe", "falcon3", "falcon-h1",
                                                         "pixtral",  "midm-2.0", "lfm2",      "tekken",  "chameleon"};

template <std::size_t N>
bool contains(const std::array<std::string_view, N>& list, std::string_view text) {
  for (const auto item : list) {
    if (item == text) return true;
  }
  return false;
}

std::optional<std::uint64_t> key_offset(const GgufFile& file, std::string_view key) {
  for (const auto& entry : file.metadata()) {
    if (entry.key == key) return entry.offset;
  }
  return std::nullopt;
}

[[noreturn]] void fail_key(const GgufFile& file, std::string_view key, std::string detail) {
  throw ModelFileError(file.path(), key_offset(file, key), std::string(key), std::move(detail));
}

std::string count_text(std::size_t n) { return std::to_string(n); }

// A special-token id: `fallback` when the key is absent. Converters write -1, or its u32 form 4294967295, for
// "the model has no such token" (aidreams260K.gguf has padding_token_id = 4294967295), so both mean none.
// Any other value outside the vocabulary is an error (the reference warns and keeps its default instead).
std::int32_t read_token_id(const GgufFile& file, std::string_view key, std::int32_t fallback, std::size_t n_tokens) {
  const GgufValue* value = file.find(key);
  if (value == nullptr) return fallback;
  const auto as_signed = value->as_integer<std::int64_t>();
  const auto as_unsigned = value->as_integer<std::uint64_t>();
  if (!as_signed && !as_unsigned) fail_key(file, key, "expected an integer token id, found " + value->type_name());
  if (as_signed == -1 || as_unsigned == std::numeric_limits<std::uint32_t>::max() ||
      as_unsigned == std::numeric_limits<std::uint64_t>::max()) {
    return Vocabulary::kNone;
  }
  if (!as_signed || *as_signed < 0 || static_cast<std::uint64_t>(*as_signed) >= n_tokens) {
    fail_key(file, key,
             "token id " + (as_signed ? std::to_string(*as_signed) : std::to_string(*as_unsigned)) +
                 " is outside the vocabulary (0.." + count_text(n_tokens - 1) + ")");
  }
  return static_cast<std::int32_t>(*as_signed);
}

std::int32_t default_id(std::int32_t id, std::size_t n_tokens) {
  return id >= 0 && static_cast<std::size_t>(id) < n_tokens ? id : Vocabulary::kNone;
}

TokenKind kind_from_gguf(std::int32_t value) {
  // Values outside the enumeration are read as undefined, as the reference does.
  return value >= 0 && value <= static_cast<std::int32_t>(TokenKind::byte) ? static_cast<TokenKind>(value)
                                                                          : TokenKind::undefined;
}

// The strings of an array key, bounded in count and length; `what` names one item ("token").
const std::vector<std::string>& read_bounded_strings(const GgufFile& file, std::string_view key, const char* what) {
  const auto& items = file.get_string_array(key);
  if (items.size() > Vocabulary::kMaxTokens) {
    fail_key(file, key,
             count_text(items.size()) + " " + what + "s exceed the bound of " + count_text(Vocabulary::kMaxTokens));
  }
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (items[i].size() > Vocabulary::kMaxTokenBytes) {
      fail_key(file, key,
               std::string(what) + " " + count_text(i) + " is " + count_text(items[i].size()) +
                   " bytes, more than the bound of " + count_text(Vocabulary::kMaxTokenBytes));
    }
  }
  return items;
}

}  // namespace

// Defaults when a key is absent follow the reference GGUF implementation (llama.cpp's vocabulary loader):
// - "llama" (SentencePiece): bos 1, eos 2, unknown 0, add_bos true, add_eos false, add_space_prefix true.
// - "gpt2" (byte-level BPE): bos = eos = 11 (a GPT-2-era default it keeps), no unknown, add_space_prefix
//   false, add_eos false, add_bos false except for the pre-tokenizers in kBpeAddBosPre (llama3, tekken, ...);
//   "chatglm-bpe" / "glm4" have no BOS. The merges are required.
// - scores 0 and kind normal where the file has no scores / token types; eot found by text (kEndOfTurnTexts).
// Keys that are present override these. Unlike the reference, an id outside the vocabulary is an error.
Vocabulary Vocabulary::from_gguf(const GgufFile& file) {
  Vocabulary v;
  const std::string& model_name = file.get_string(kModelKey);
  if (model_name == "llama") {
    v.model = TokenizerModel::sentencepiece;
  } else if (model_name == "gpt2") {
    v.model = TokenizerModel::byte_level_bpe;
  } else {
    fail_key(file, kModelKey,
             "unsupported tokenizer model \"" + model_name + "\" (supported: \"llama\" = SentencePiece, \"gpt2\" = "
             "byte-level BPE)");
  }
  v.pre = file.find_string(kPreKey).value_or("default");

  v.tokens = read_bounded_strings(file, kTokensKey, "token");
  const std::size_t n = v.tokens.size();
  if (n == 0) fail_key(file, kTokensKey, "the vocabulary has no tokens");

  if (file.has(kScoresKey)) {
    const auto scores = file.get_f32_array(kScoresKey);
    if (scores.size() != n) {
      fail_key(file, kScoresKey, count_text(scores.size()) + " scores for " + count_text(n) + " tokens");
    }
    v.scores.assign(scores.begin(), scores.end());
  } else {
    v.scores.assign(n, 0.0f);
  }

  if (file.has(kTokenTypeKey)) {
    const auto types = file.get_i32_array(kTokenTypeKey);
    if (types.size() != n) {
      fail_key(file, kTokenTypeKey, count_text(types.size()) + " token types for " + count_text(n) + " tokens");
    }
    v.kinds.reserve(n);
    for (const std::int32_t type : types) v.kinds.push_back(kind_from_gguf(type));
  } else {
    v.kinds.assign(n, TokenKind::normal);
  }

  // The reference refuses a vocabulary in which two tokens have the same text (encoding would be ambiguous).
  // Empty tokens are exempt: it renames them, and no text encodes to them.
  {
    std::unordered_map<std::string_view, std::size_t> first_id;
    first_id.reserve(n);
    for (std::size_t id = 0; id < n; ++id) {
      if (v.tokens[id].empty()) continue;
      const auto [it, inserted] = first_id.emplace(v.tokens[id], id);
      if (!inserted) {
        fail_key(file, kTokensKey,
                 "token " + count_text(id) + " \"" + v.tokens[id] + "\" repeats token " + count_text(it->second));
      }
    }
  }

  if (v.model == TokenizerModel::sentencepiece) {
    v.bos = default_id(1, n);
    v.eos = default_id(2, n);
    v.unknown = default_id(0, n);
    v.add_bos = true;
    v.add_space_prefix = true;
  } else {
    v.merges = read_bounded_strings(file, kMergesKey, "merge");
    const bool no_bos = v.pre == "chatglm-bpe" || v.pre == "glm4";
    v.bos = no_bos ? kNone : default_id(11, n);
    v.eos = default_id(11, n);
    v.add_bos = contains(kBpeAddBosPre, v.pre);
    v.add_space_prefix = false;
  }
  v.add_eos = false;

  v.bos = read_token_id(file, kBosKey, v.bos, n);
  v.eos = read_token_id(file, kEosKey, v.eos, n);
  v.eot = read_token_id(file, kEotKey, kNone, n);
  v.unknown = read_token_id(file, kUnknownKey, v.unknown, n);
  v.padding = read_token_id(file, kPaddingKey, kNone, n);
  v.add_bos = file.find_bool(kAddBosKey).value_or(v.add_bos);
  v.add_eos = file.find_bool(kAddEosKey).value_or(v.add_eos);
  v.add_space_prefix = file.find_bool(kAddSpacePrefixKey).value_or(v.add_space_prefix);

  if (!file.has(kEotKey)) {
    for (const auto text : kEndOfTurnTexts) {
      for (std::size_t id = 0; id < n && v.eot == kNone; ++id) {
        if (v.tokens[id] == text) v.eot = static_cast<std::int32_t>(id);
      }
      if (v.eot != kNone) {
        // As the reference does: an end-of-turn marker is never text, whatever the file says.
        v.kinds[static_cast<std::size_t>(v.eot)] = TokenKind::control;
        break;
      }
    }
  }
  return v;
}

namespace {

static_assert(std::endian::native == std::endian::little, "llama2.c tokenizer files are read as little-endian");

[[noreturn]] void fail_at(const std::string& path, std::uint64_t offset, std::string detail) {
  throw ModelFileError(path, offset, {}, std::move(detail));
}

}  // namespace

Vocabulary Vocabulary::from_llama2c_tokenizer(const std::string& path, std::int32_t vocab_size) {
  // Ids 0..2 are the special tokens, so a smaller vocabulary cannot be a llama2.c one.
  if (vocab_size < 3 || static_cast<std::size_t>(vocab_size) > kMaxTokens) {
    throw ModelFileError(path, std::nullopt, "vocab_size",
                         "vocabulary size " + std::to_string(vocab_size) + " is outside 3.." +
                             count_text(kMaxTokens));
  }
  // MappedFile refuses an empty file without an offset; say where the data should have started instead.
  std::error_code size_error;
  if (std::filesystem::file_size(path, size_error) == 0 && !size_error) {
    fail_at(path, 0, "the file is empty; expected int32 max_token_length");
  }
  const MappedFile file(path);
  const std::uint64_t size = file.size();
  const auto* bytes = reinterpret_cast<const char*>(file.data());
  auto read_i32 = [&](std::uint64_t at) {
    std::int32_t value = 0;
    std::memcpy(&value, bytes + at, sizeof value);
    return value;
  };

  if (size < 4) fail_at(path, 0, "the file has " + count_text(size) + " bytes; expected int32 max_token_length");
  const std::int32_t max_token_length = read_i32(0);
  if (max_token_length < 0 || static_cast<std::size_t>(max_token_length) > kMaxTokenBytes) {
    fail_at(path, 0,
            "max_token_length " + std::to_string(max_token_length) + " is outside 0.." + count_text(kMaxTokenBytes));
  }

  Vocabulary v;
  v.model = TokenizerModel::sentencepiece;
  v.tokens.reserve(static_cast<std::size_t>(vocab_size));
  v.scores.reserve(static_cast<std::size_t>(vocab_size));
  v.kinds.reserve(static_cast<std::size_t>(vocab_size));
  std::uint64_t at = 4;
  for (std::int32_t id = 0; id < vocab_size; ++id) {
    if (size - at < 8) {
      fail_at(path, at,
              "the file ends before token " + std::to_string(id) + " of " + std::to_string(vocab_size) +
                  " (expected f32 score and int32 length)");
    }
    float score = 0;
    std::memcpy(&score, bytes + at, sizeof score);
    const std::int32_t length = read_i32(at + 4);
    if (length < 0 || length > max_token_length) {
      fail_at(path, at + 4,
              "token " + std::to_string(id) + " has length " + std::to_string(length) + ", outside 0.." +
                  std::to_string(max_token_length) + " (max_token_length)");
    }
    at += 8;
    if (size - at < static_cast<std::uint64_t>(length)) {
      fail_at(path, at,
              "token " + std::to_string(id) + " needs " + std::to_string(length) + " bytes but the file has " +
                  count_text(size - at) + " left");
    }
    std::string_view text(bytes + at, static_cast<std::size_t>(length));
    at += static_cast<std::uint64_t>(length);

    // llama2.c's exporter writes "\n<s>\n" and "\n</s>\n" for BOS and EOS, and a plain space where the
    // SentencePiece piece has U+2581; restore the SentencePiece spelling so both formats tokenize alike.
    std::string token;
    TokenKind kind = TokenKind::normal;
    if (id <= 2) {
      static constexpr std::array<std::string_view, 3> kSpecialTexts{"<unk>", "<s>", "</s>"};
      token = kSpecialTexts[static_cast<std::size_t>(id)];
      kind = id == 0 ? TokenKind::unknown : TokenKind::control;
    } else if (detail::parse_byte_piece(text)) {
      token = text;
      kind = TokenKind::byte;
    } else {
      token.reserve(text.size());
      for (const char c : text) {
        if (c == ' ') {
          token += detail::kSentencePieceSpace;
        } else {
          token += c;
        }
      }
    }
    v.tokens.push_back(std::move(token));
    v.scores.push_back(score);
    v.kinds.push_back(kind);
  }
  if (at != size) {
    fail_at(path, at,
            count_text(size - at) + " bytes follow the last of the " + std::to_string(vocab_size) +
                " tokens (is the tokenizer for another model?)");
  }

  v.unknown = 0;
  v.bos = 1;
  v.eos = 2;
  v.add_bos = true;
  v.add_eos = false;
  v.add_space_prefix = true;
  return v;
}

}  // namespace loom::compute
