// Tokenizer: text to token ids and back, for a model's Vocabulary. One type for both algorithms
// (SentencePiece BPE for `tokenizer.ggml.model = llama`, byte-level BPE for `gpt2`); the algorithm is an
// internal detail chosen from the vocabulary. Encoding first splits the text around special tokens
// (user-defined tokens always, control tokens such as `<|im_start|>` and the unknown token only with
// `parse_special`, which chat templates use and user text does not), then runs the model's algorithm on each plain run.
//
// Thread safety: every const member may be called from many threads at once.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "loom/compute/text/vocabulary.hpp"

namespace loom::compute {

namespace detail {
class TokenizerEngine;
}

struct EncodeOptions {
  bool add_special = true;     // BOS / EOS where the vocabulary's add_bos / add_eos ask for them
  bool parse_special = false;  // recognise the text of control tokens in the input
};

struct DecodeOptions {
  bool render_special = false;       // control tokens give their text instead of nothing
  bool strip_leading_space = false;  // SPM: drop the space that add_space_prefix put in front of the text
};

class Tokenizer {
 public:
  // Throws std::invalid_argument when the vocabulary cannot be used (an unknown pre-tokenizer name, a
  // malformed merge, no tokens), naming what is wrong.
  explicit Tokenizer(Vocabulary vocabulary);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  const Vocabulary& vocabulary() const noexcept { return *vocabulary_; }

  std::vector<std::int32_t> encode(std::string_view text, EncodeOptions options = {}) const;

  // The bytes token `id` stands for in text (SPM: U+2581 as a space, <0xNN> as that byte; byte-level BPE:
  // its byte map undone). Control and unknown tokens give "" unless `render_special`. Not always valid UTF-8 on its
  // own: a character may be split over several tokens. Throws std::out_of_range for an id outside the
  // vocabulary.
  std::string piece(std::int32_t id, bool render_special = false) const;

  // The pieces of `ids`, joined.
  std::string decode(std::span<const std::int32_t> ids, DecodeOptions options = {}) const;

 private:
  // On the heap so that its address, which the engine keeps, survives a move of the Tokenizer.
  std::unique_ptr<const Vocabulary> vocabulary_;
  std::vector<std::pair<std::string, std::int32_t>> specials_;  // text of matchable special tokens, longest first
  std::array<bool, 256> special_first_byte_{};                  // bytes that can start one of them
  std::unique_ptr<detail::TokenizerEngine> engine_;
};

// The ids of a prompt to generate after: BOS when the vocabulary asks for it, then the text's ids, never
// EOS (the model continues after a prompt). `parse_special` for text rendered by a chat template, not
// for user text. Shared by the command line and the engine's sessions so both tokenize alike.
std::vector<std::int32_t> encode_prompt(const Tokenizer& tokenizer, std::string_view text, bool parse_special);

}  // namespace loom::compute
