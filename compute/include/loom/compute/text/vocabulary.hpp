// Vocabulary: everything a tokenizer needs to know about a model's tokens, read from GGUF metadata
// (`tokenizer.ggml.*`) or from a llama2.c tokenizer file: the token strings, their scores and kinds, the BPE
// merges, the special token ids and the flags that say when to add them. Plain data; the Tokenizer
// (tokenizer.hpp) builds its lookup structures from it. Works on vocabulary-only GGUF files (no tensors).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace loom::compute {

class GgufFile;

// GGUF `tokenizer.ggml.token_type` values.
enum class TokenKind : std::uint8_t {
  undefined = 0,
  normal = 1,
  unknown = 2,       // <unk>
  control = 3,       // <s>, </s>, <|im_start|>: never produced from plain text; rendered only when asked
  user_defined = 4,  // added pieces matched verbatim in text before the model's own algorithm runs
  unused = 5,
  byte = 6,          // SentencePiece byte fallback <0xNN>
};

// Which algorithm, from `tokenizer.ggml.model`.
enum class TokenizerModel : std::uint8_t {
  sentencepiece,  // "llama": SentencePiece BPE driven by scores, byte fallback
  byte_level_bpe, // "gpt2": byte-level BPE driven by merge ranks, with a pre-tokenizer
};

struct Vocabulary {
  static constexpr std::int32_t kNone = -1;
  // Bounds that a file is checked against before anything is sized from it.
  static constexpr std::size_t kMaxTokens = 1u << 22;
  static constexpr std::size_t kMaxTokenBytes = 1u << 16;

  TokenizerModel model = TokenizerModel::sentencepiece;
  // `tokenizer.ggml.pre` (the pre-tokenizer's name), "default" when absent. Only byte-level BPE uses it.
  std::string pre = "default";

  std::vector<std::string> tokens;  // as stored: SPM pieces use U+2581 for space, BPE pieces the byte map
  std::vector<float> scores;        // one per token (0 where the file has none)
  std::vector<TokenKind> kinds;     // one per token (normal where the file has none)
  std::vector<std::string> merges;  // byte-level BPE: "left right", in rank order

  std::int32_t bos = kNone;
  std::int32_t eos = kNone;
  std::int32_t eot = kNone;  // end of turn (e.g. <|eot_id|>, <|im_end|>), when the file names one
  std::int32_t unknown = kNone;
  std::int32_t padding = kNone;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = true;  // SPM: a space is put in front of the text before encoding

  // Reads the `tokenizer.ggml.*` keys of a GGUF file. Throws ModelFileError naming the key when a required
  // key is missing, an array has the wrong length or type, an id is out of range, or the model is unknown.
  static Vocabulary from_gguf(const GgufFile& file);
  // Reads a llama2.c tokenizer file (int32 max_token_length, then per token: f32 score, int32 length,
  // bytes). `vocab_size` comes from the checkpoint. Ids 0/1/2 are <unk>/<s>/</s>, BOS is added, pieces
  // <0xNN> are byte tokens. Throws ModelFileError naming the offset on a short or inconsistent file.
  static Vocabulary from_llama2c_tokenizer(const std::string& path, std::int32_t vocab_size);

  std::int32_t size() const noexcept { return static_cast<std::int32_t>(tokens.size()); }
  bool valid(std::int32_t id) const noexcept { return id >= 0 && id < size(); }
  // Whether `id` is an end-of-generation token (EOS or EOT).
  bool is_end_of_generation(std::int32_t id) const noexcept { return id != kNone && (id == eos || id == eot); }
};

}  // namespace loom::compute
