#include "loom/compute/model/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <limits>
#include <system_error>
#include <utility>

namespace loom::compute {
namespace {

// generic_category().message is the thread-safe strerror.
[[noreturn]] void fail(const std::string& path, const char* what, int error_number) {
  throw MappedFileError(path, std::string(what) + ": " + std::generic_category().message(error_number), error_number);
}

// Closes the descriptor on every path out of the constructor; the mapping stays valid without it.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

// Opens `path` for reading, refusing anything but a regular file. O_NONBLOCK keeps the open itself from
// waiting for a FIFO's writer (which may never come); on a regular file it changes nothing.
int open_regular_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail(path, "cannot open", errno);
  FdCloser closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail(path, "cannot stat", errno);
  if (!S_ISREG(st.st_mode)) {
    throw MappedFileError(path, std::string("not a regular file: this is ") + kind_of(st.st_mode) +
                                    "; a model is read from a file",
                          0);
  }
  closer.fd = -1;
  return fd;
}

}  // namespace

std::size_t read_file_prefix(const std::string& path, std::span<std::byte> out) {
  const int fd = open_regular_file(path);
  FdCloser closer{fd};
  std::size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::read(fd, out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(path, "cannot read", errno);
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  return got;
}

MappedFileError::MappedFileError(std::string path, std::string detail, int error_number)
    : ModelFileError(std::move(path), std::nullopt, {}, std::move(detail)), error_number_(error_number) {}

MappedFile::MappedFile(std::string path) : path_(std::move(path)) {
  const int fd = open_regular_file(path_);
  FdCloser closer{fd};

  struct stat st {};
  if (::fstat(fd, &st) != 0) fail(path_, "cannot stat", errno);
  if (st.st_size <= 0) throw MappedFileError(path_, "the file is empty", 0);
  if (static_cast<std::uint64_t>(st.st_size) > std::numeric_limits<std::size_t>::max()) {
    throw MappedFileError(path_, "the file is too large to map", EFBIG);
  }

  const auto length = static_cast<std::size_t>(st.st_size);
  void* mapping = ::mmap(nullptr, length, PROT_READ, MAP_PRIVATE, fd, 0);
  if (mapping == MAP_FAILED) fail(path_, "cannot mmap", errno);
  data_ = static_cast<const std::byte*>(mapping);
  size_ = length;
}

MappedFile::~MappedFile() { release(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)), data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void MappedFile::release() noexcept {
  if (data_ != nullptr) {
    // munmap only fails for arguments we never pass; nothing useful to do about it in a destructor.
    ::munmap(const_cast<std::byte*>(data_), static_cast<std::size_t>(size_));
    data_ = nullptr;
    size_ = 0;
  }
}

}  // namespace loom::compute
