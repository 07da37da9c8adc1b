// ModelFileError: why a model file (GGUF, llama2.c checkpoint, tokenizer file) could not be loaded. Every
// loader in loom::compute reports the first problem it finds as one of these, and its message always says
// which file, where in it (byte offset, metadata key or both) and what was expected there, e.g.
// `model.gguf: offset 24: tensor count 9223372036854775807 exceeds what the file can hold (size 1234 bytes)`.
// The parts stay available separately so callers (the CLI, error events) can present them as they like.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

namespace loom::compute {

class ModelFileError : public std::runtime_error {
 public:
  // `key` is a metadata key or tensor name, empty when the problem is not about one; `offset` is the byte
  // offset in the file where the offending item starts. `detail` says what is wrong / what was expected.
  ModelFileError(std::string path, std::optional<std::uint64_t> offset, std::string key, std::string detail);

  const std::string& path() const noexcept;
  std::optional<std::uint64_t> offset() const noexcept;
  const std::string& key() const noexcept;
  const std::string& detail() const noexcept;

 private:
  struct Parts {
    std::string path;
    std::optional<std::uint64_t> offset;
    std::string key;
    std::string detail;
  };
  // Shared so that copying the exception (as throw/catch may) cannot throw.
  std::shared_ptr<const Parts> parts_;
};

}  // namespace loom::compute
