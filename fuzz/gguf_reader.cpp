// The GGUF reader on arbitrary bytes: GgufFile::open, then what a server does with an opened file before
// any forward pass (the model config, the weights bound by name, the vocabulary and a tokenizer built from
// it, a short text encoded and decoded). A damaged file may only ever be refused with the documented
// exceptions (ModelFileError and the other std::runtime_errors, std::invalid_argument from the tokenizer);
// anything else, or a tensor view that reaches outside the file, is a finding.
//
// The file is memory-mapped, and a mapping is page-sized, so AddressSanitizer cannot see a read a few bytes
// past the end of the file; the views are therefore also checked against the file's size here.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "fuzz_support.hpp"
#include "tokenizer_checks.hpp"
#include "loom/compute/model/gguf_file.hpp"
#include "loom/compute/model/model_loader.hpp"
#include "loom/compute/text/tokenizer.hpp"
#include "loom/compute/text/vocabulary.hpp"

namespace {

using namespace loom::compute;

void check_views_inside(const GgufFile& file) {
  for (const TensorView& tensor : file.tensors()) {
    const std::uint64_t offset = file.file_offset(tensor);
    loom::fuzz::check(offset >= file.data_offset() && offset <= file.file_size() &&
                          tensor.bytes <= file.file_size() - offset,
                      "a tensor view reaches outside the file's data section: " + tensor.name);
  }
}

void use_vocabulary(const GgufFile& file) {
  try {
    const Tokenizer tokenizer(Vocabulary::from_gguf(file));
    loom::fuzz::check_sample_text(tokenizer, "Hello world, <s> \xC3\xA9t\xC3\xA9!",
                                  {.add_special = true, .parse_special = true});
  } catch (const std::runtime_error&) {
    // ModelFileError: the tokenizer metadata is refused.
  } catch (const std::invalid_argument&) {
    // The vocabulary is readable but unusable (a malformed merge, no tokens, a bad byte token).
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static loom::fuzz::InputFile input;
  try {
    GgufFile file = GgufFile::open(input.write(data, size));
    check_views_inside(file);
    use_vocabulary(file);
    const LoadedModel model(std::move(file));
  } catch (const std::runtime_error&) {
    // Refused: a ModelFileError, or bind_weights naming a missing or misshapen tensor.
  }
  return 0;
}
