#include "fuzz_support.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace loom::fuzz {

std::string shared_file(std::string_view relative) {
  const char* from_environment = std::getenv("LOOM_SHARED_DIR");
  const std::string folder = from_environment != nullptr && *from_environment != '\0' ? from_environment
                                                                                     : LOOM_FUZZ_DEFAULT_SHARED_DIR;
  std::string path = folder + "/" + std::string(relative);
  if (!std::filesystem::is_regular_file(path)) {
    std::fprintf(stderr,
                 "fuzz: missing shared file %s\n"
                 "      (the shared data folder sits beside the checkout as ../shared; set LOOM_SHARED_DIR to "
                 "use another)\n",
                 path.c_str());
    std::exit(2);
  }
  return path;
}

InputFile::InputFile() {
  fd_ = ::memfd_create("loom-fuzz-input", MFD_CLOEXEC);
  if (fd_ < 0) {
    std::fprintf(stderr, "fuzz: memfd_create failed: %s\n", std::strerror(errno));
    std::exit(2);
  }
  path_ = "/proc/self/fd/" + std::to_string(fd_);
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

const std::string& InputFile::write(const std::uint8_t* data, std::size_t size) {
  bool ok = ::ftruncate(fd_, 0) == 0;
  for (std::size_t done = 0; ok && done < size;) {
    const ssize_t written = ::pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
    ok = written > 0;
    if (ok) done += static_cast<std::size_t>(written);
  }
  if (!ok) {
    std::fprintf(stderr, "fuzz: cannot write the input file: %s\n", std::strerror(errno));
    std::exit(2);
  }
  return path_;
}

void property_failed(std::string_view what) {
  std::fprintf(stderr, "fuzz: property failed: %.*s\n", static_cast<int>(what.size()), what.data());
  std::abort();
}

bool is_valid_utf8(std::string_view text) noexcept {
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t size = text.size();
  for (std::size_t at = 0; at < size;) {
    const unsigned char lead = bytes[at];
    std::size_t length = 0;
    char32_t code_point = 0;
    char32_t smallest = 0;
    if (lead < 0x80) {
      ++at;
      continue;
    } else if ((lead & 0xE0) == 0xC0) {
      length = 2, code_point = lead & 0x1F, smallest = 0x80;
    } else if ((lead & 0xF0) == 0xE0) {
      length = 3, code_point = lead & 0x0F, smallest = 0x800;
    } else if ((lead & 0xF8) == 0xF0) {
      length = 4, code_point = lead & 0x07, smallest = 0x10000;
    } else {
      return false;
    }
    if (size - at < length) return false;
    for (std::size_t i = 1; i < length; ++i) {
      if ((bytes[at + i] & 0xC0) != 0x80) return false;
      code_point = (code_point << 6) | (bytes[at + i] & 0x3F);
    }
    if (code_point < smallest || code_point > 0x10FFFF || (code_point >= 0xD800 && code_point <= 0xDFFF)) {
      return false;
    }
    at += length;
  }
  return true;
}

}  // namespace loom::fuzz
