// The tokenizer conformance vectors in ../shared/vocab (see its README): `X.gguf.inp` holds the inputs
// separated by "\n__ggml_vocab_test__\n", `X.gguf.out` one line of expected ids per input, made by the
// reference implementation without BOS/EOS and without parsing special tokens. (The README says the last
// input has no separator after it; the files at hand do end with one, and have one .out line fewer than
// the pieces a split gives, so a trailing separator closes the last input rather than starting another.)
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "loom/compute/model/gguf_file.hpp"
#include "loom/compute/text/tokenizer.hpp"
#include "loom/compute/text/vocabulary.hpp"
#include "test_files.hpp"

namespace loom::compute::testing {

struct ConformanceCase {
  std::string input;
  std::vector<std::int32_t> ids;
};

inline std::string read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Empty when the files do not agree on the number of cases (the caller asserts on the count).
inline std::vector<ConformanceCase> read_conformance_cases(const std::string& gguf_path) {
  const std::string inputs = read_whole_file(gguf_path + ".inp");
  const std::string outputs = read_whole_file(gguf_path + ".out");
  static const std::string kSeparator = "\n__ggml_vocab_test__\n";

  std::vector<ConformanceCase> cases;
  for (std::size_t start = 0;;) {
    const std::size_t end = inputs.find(kSeparator, start);
    cases.push_back({inputs.substr(start, end == std::string::npos ? std::string::npos : end - start), {}});
    if (end == std::string::npos) break;
    start = end + kSeparator.size();
    if (start == inputs.size()) break;  // a trailing separator
  }
  std::istringstream lines(outputs);
  std::string line;
  std::size_t index = 0;
  while (std::getline(lines, line)) {
    if (index == cases.size()) return {};
    std::istringstream numbers(line);
    std::int32_t id = 0;
    while (numbers >> id) cases[index].ids.push_back(id);
    ++index;
  }
  if (index != cases.size()) return {};
  return cases;
}

// Llama's SentencePiece vocabulary from ../shared/vocab, loaded once for the suites that share it.
inline const std::string kLlamaSpmVocab = "vocab/ggml-vocab-llama-spm.gguf";
inline const Tokenizer& llama_spm_tokenizer() {
  static const Tokenizer tokenizer(Vocabulary::from_gguf(GgufFile::open(shared_path(kLlamaSpmVocab))));
  return tokenizer;
}

}  // namespace loom::compute::testing
