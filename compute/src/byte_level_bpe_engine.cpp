// Placeholder until the byte_level_bpe engine lands (issue 4, being written on a branch); nothing calls it yet.
#include <stdexcept>

#include "tokenizer_engine.hpp"

namespace loom::compute::detail {

std::unique_ptr<TokenizerEngine> make_byte_level_bpe_engine(const Vocabulary&) {
  throw std::logic_error("the byte_level_bpe tokenizer is not built yet");
}

}  // namespace loom::compute::detail
