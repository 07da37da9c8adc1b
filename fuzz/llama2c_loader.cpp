// The llama2.c loaders on arbitrary bytes: the checkpoint (Llama2cCheckpoint::open, the model config and the
// weights bound by name) and, on the same bytes, the tokenizer file (Vocabulary::from_llama2c_tokenizer, with a
// vocabulary size taken from the input's last byte, as the checkpoint would give it, then a Tokenizer built
// from it). A damaged file may only be refused with a std::runtime_error (ModelFileError) or, for a vocabulary
// the tokenizer cannot use, std::invalid_argument; a tensor view outside the file is a finding too (the file
// is mapped page-wise, so AddressSanitizer alone would miss a short over-read).
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "fuzz_support.hpp"
#include "tokenizer_checks.hpp"
#include "loom/compute/model/llama2c_checkpoint.hpp"
#include "loom/compute/model/model_loader.hpp"
#include "loom/compute/text/tokenizer.hpp"
#include "loom/compute/text/vocabulary.hpp"

namespace {

using namespace loom::compute;

void check_views_inside(const Llama2cCheckpoint& checkpoint, const std::byte* start, std::size_t size) {
  for (const TensorView& tensor : checkpoint.tensors()) {
    loom::fuzz::check(tensor.data >= start + Llama2cCheckpoint::kHeaderBytes && tensor.data <= start + size &&
                          tensor.bytes <= static_cast<std::uint64_t>(start + size - tensor.data),
                      "a tensor view reaches outside the checkpoint: " + tensor.name);
  }
}

void load_checkpoint(const std::string& path, std::size_t size) {
  try {
    Llama2cCheckpoint checkpoint = Llama2cCheckpoint::open(path);
    const std::byte* start = checkpoint.tensors().empty() ? nullptr : checkpoint.tensors().front().data -
                                                                          Llama2cCheckpoint::kHeaderBytes;
    check_views_inside(checkpoint, start, size);
    const LoadedModel model(std::move(checkpoint));
  } catch (const std::runtime_error&) {
  }
}

void load_tokenizer(const std::string& path, std::int32_t vocab_size) {
  try {
    const Tokenizer tokenizer(Vocabulary::from_llama2c_tokenizer(path, vocab_size));
    loom::fuzz::check_sample_text(tokenizer, "Once upon a time, <s> \xE2\x96\x81 caf\xC3\xA9", {});
  } catch (const std::runtime_error&) {
  } catch (const std::invalid_argument&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static loom::fuzz::InputFile input;
  const std::string& path = input.write(data, size);
  load_checkpoint(path, size);
  if (size > 0) load_tokenizer(path, 3 + data[size - 1] % 64);
  return 0;
}
