// What the fuzz targets share: where the shared data folder is (vocabularies loaded once at start-up), a
// file holding the current input for readers that only take a path, and a check that stops the run with a
// message when a property of the code under test does not hold (libFuzzer then keeps the input as a crash).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace loom::fuzz {

// `relative` inside the shared data folder: $LOOM_SHARED_DIR when set, else the build's LOOM_SHARED_DIR (the
// checkout's ../shared). Exits with a message naming the path when the file is missing, since a fuzzer
// without its vocabulary would only test the error path.
std::string shared_file(std::string_view relative);

// An in-memory file (memfd) that holds one input at a time, named by a path that open() accepts
// (/proc/self/fd/N), so the model readers (which map a file by its path) read exactly the fuzzer's bytes.
class InputFile {
 public:
  InputFile();
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  // Replaces the file's contents with `data` and returns its path.
  const std::string& write(const std::uint8_t* data, std::size_t size);
  const std::string& path() const noexcept { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

// Prints "fuzz: property failed: WHAT" and aborts: the fuzzer reports a crash and saves the input.
[[noreturn]] void property_failed(std::string_view what);

inline void check(bool holds, std::string_view what) {
  if (!holds) property_failed(what);
}

// Whether `text` is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
bool is_valid_utf8(std::string_view text) noexcept;

}  // namespace loom::fuzz
