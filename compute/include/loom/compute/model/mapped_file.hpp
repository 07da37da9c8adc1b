// MappedFile: a whole file mapped read-only into memory, for as long as the object lives. Model weights are
// used in place from such a mapping (no copies, pages loaded on demand and shared with the page cache), so
// the loaders keep their MappedFile for the lifetime of the model. Move-only: the mapping has one owner.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "loom/compute/model/model_file_error.hpp"

namespace loom::compute {

// Opening, sizing or mapping the file failed, or the file is empty (there is nothing to map). A model-file
// error without an offset; `error_number()` is the errno of the failed call, 0 for an empty file.
class MappedFileError : public ModelFileError {
 public:
  MappedFileError(std::string path, std::string detail, int error_number);
  int error_number() const noexcept { return error_number_; }

 private:
  int error_number_;
};

// Reads the first out.size() bytes of `path` (fewer when the file is shorter) and returns how many it read.
// Like MappedFile, refuses anything but a regular file (a directory, a FIFO, a device) before reading.
std::size_t read_file_prefix(const std::string& path, std::span<std::byte> out);

class MappedFile {
 public:
  // Maps all of `path` read-only. Throws MappedFileError naming the path and the system's reason; a path
  // that is not a regular file (a directory, a FIFO, a device) is refused before anything is read.
  explicit MappedFile(std::string path);
  ~MappedFile();

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::byte* data() const noexcept { return data_; }
  std::uint64_t size() const noexcept { return size_; }
  std::span<const std::byte> bytes() const noexcept { return {data_, static_cast<std::size_t>(size_)}; }
  const std::string& path() const noexcept { return path_; }

 private:
  void release() noexcept;

  std::string path_;
  const std::byte* data_ = nullptr;
  std::uint64_t size_ = 0;
};

}  // namespace loom::compute
