// The byte-level BPE tokenizer (tokenizer.ggml.model = gpt2) with the GPT-2 vocabulary from ../shared
// (vocab/ggml-vocab-gpt-2.gguf, loaded once), under every pre-tokenizer loom knows (the input's first byte
// picks one; the rest is the text), on arbitrary bytes (tokenizer_checks.hpp). Byte-level BPE promises
// decode(encode(text)) == text for any bytes: the pre-tokenizers keep invalid UTF-8 in their pieces and
// every byte has a token.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "fuzz_support.hpp"
#include "loom/compute/model/gguf_file.hpp"
#include "loom/compute/text/tokenizer.hpp"
#include "loom/compute/text/vocabulary.hpp"
#include "tokenizer_checks.hpp"

namespace {

using namespace loom::compute;

// compute/README.md lists them: the names tokenizer.ggml.pre may hold.
constexpr std::string_view kPreTokenizers[] = {"default",  "gpt-2",     "mpt",     "llama-bpe", "qwen2",  "deepseek-llm",
                                               "deepseek-coder", "falcon", "starcoder", "refact", "smollm", "gpt-4o"};

const std::vector<Tokenizer>& tokenizers() {
  static const std::vector<Tokenizer> all = [] {
    const Vocabulary gpt2 = Vocabulary::from_gguf(GgufFile::open(loom::fuzz::shared_file("vocab/ggml-vocab-gpt-2.gguf")));
    std::vector<Tokenizer> built;
    for (const std::string_view pre : kPreTokenizers) {
      Vocabulary vocabulary = gpt2;
      vocabulary.pre = std::string(pre);
      built.emplace_back(std::move(vocabulary));
    }
    return built;
  }();
  return all;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)tokenizers();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const Tokenizer& tokenizer = tokenizers()[data[0] % tokenizers().size()];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  loom::fuzz::check_tokenizer(tokenizer, text, /*round_trips=*/true, {});
  return 0;
}
