// TokenizerEngine (internal): one tokenization algorithm over a Vocabulary. The Tokenizer facade splits the
// input around special tokens and adds BOS/EOS; an engine only sees plain runs of text.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "loom/compute/text/vocabulary.hpp"

namespace loom::compute::detail {

class TokenizerEngine {
 public:
  virtual ~TokenizerEngine() = default;

  // Appends the ids of `text`, a run with no special tokens in it. `after_boundary`: the run starts the
  // input or follows a special token (SentencePiece puts its space prefix there, as the reference does).
  virtual void encode(std::string_view text, bool after_boundary, std::vector<std::int32_t>& out) const = 0;

  // The bytes a normal, byte, unknown or user-defined token stands for.
  virtual std::string piece(std::int32_t id) const = 0;
};

// The engine keeps a reference to `vocabulary`, which must outlive it (the Tokenizer owns both).
std::unique_ptr<TokenizerEngine> make_sentencepiece_engine(const Vocabulary& vocabulary);
// Throws std::invalid_argument for an unknown `vocabulary.pre` or a malformed merge.
std::unique_ptr<TokenizerEngine> make_byte_level_bpe_engine(const Vocabulary& vocabulary);

}  // namespace loom::compute::detail
