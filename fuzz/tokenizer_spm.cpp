// The SentencePiece tokenizer (tokenizer.ggml.model = llama) with the Llama vocabulary from ../shared
// (vocab/ggml-vocab-llama-spm.gguf, loaded once), on arbitrary bytes (tokenizer_checks.hpp). The round trip
// decode(encode(text), strip_leading_space) == text is what the tokenizer promises for valid UTF-8 text
// that has no U+2581 (the character SentencePiece writes for a space, which decodes to a space).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_support.hpp"
#include "loom/compute/model/gguf_file.hpp"
#include "loom/compute/text/tokenizer.hpp"
#include "loom/compute/text/vocabulary.hpp"
#include "tokenizer_checks.hpp"

namespace {

using namespace loom::compute;

const Tokenizer& llama_tokenizer() {
  static const Tokenizer tokenizer(
      Vocabulary::from_gguf(GgufFile::open(loom::fuzz::shared_file("vocab/ggml-vocab-llama-spm.gguf"))));
  return tokenizer;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)llama_tokenizer();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const bool round_trips = loom::fuzz::is_valid_utf8(text) && text.find("\xE2\x96\x81") == std::string_view::npos;
  loom::fuzz::check_tokenizer(llama_tokenizer(), text, round_trips, {.strip_leading_space = true});
  return 0;
}
