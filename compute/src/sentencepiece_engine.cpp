// Placeholder until the sentencepiece engine lands (issue 4, being written on a branch); nothing calls it yet.
#include <stdexcept>

#include "tokenizer_engine.hpp"

namespace loom::compute::detail {

std::unique_ptr<TokenizerEngine> make_sentencepiece_engine(const Vocabulary&) {
  throw std::logic_error("the sentencepiece tokenizer is not built yet");
}

}  // namespace loom::compute::detail
