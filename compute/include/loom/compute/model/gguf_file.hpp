// GgufFile: a GGUF model file (versions 2 and 3), memory-mapped and parsed: its metadata (model
// hyper-parameters, tokenizer) and its tensors as views into the mapping. The file stays mapped for the
// lifetime of the object and the weights are used in place, so a GgufFile must outlive every TensorView
// taken from it (moving the GgufFile keeps the views valid; the mapping does not move).
//
// Parsing trusts nothing in the file: every count, length, offset and dimension is checked against the file
// size before it is used, so a truncated or damaged file gives a ModelFileError naming the offset or key and
// what was expected there, never a crash or a huge allocation.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "loom/compute/model/gguf_value.hpp"
#include "loom/compute/model/mapped_file.hpp"
#include "loom/compute/model/model_file_error.hpp"
#include "loom/compute/model/tensor_view.hpp"

namespace loom::compute {

struct GgufKeyValue {
  std::string key;
  GgufValue value;
  std::uint64_t offset = 0;  // where the entry (its key) starts in the file
};

class GgufFile {
 public:
  static constexpr std::uint32_t kDefaultAlignment = 32;
  static constexpr std::string_view kAlignmentKey = "general.alignment";

  // Maps and parses `path`. Throws ModelFileError (MappedFileError when the file cannot be mapped).
  static GgufFile open(std::string path);

  // Whether the file starts with the GGUF magic (how loaders tell GGUF from llama2.c files). Throws
  // ModelFileError when the file cannot be opened or is not a regular file (a directory, a FIFO, a device).
  static bool has_magic(const std::string& path);

  GgufFile(GgufFile&&) noexcept = default;
  GgufFile& operator=(GgufFile&&) noexcept = default;
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  std::uint32_t version() const noexcept { return version_; }
  const std::string& path() const noexcept { return file_.path(); }
  std::uint64_t file_size() const noexcept { return file_.size(); }
  std::uint32_t alignment() const noexcept { return alignment_; }
  // Start of the tensor data section; tensor offsets in the file are relative to it. For a file without
  // tensors (a vocabulary-only GGUF) this may lie past the end of the file.
  std::uint64_t data_offset() const noexcept { return data_offset_; }

  // ---- metadata -------------------------------------------------------------------------------------
  // Every entry in file order, e.g. for `loom info`: key, value.type_name(), value.summary().
  const std::vector<GgufKeyValue>& metadata() const noexcept { return metadata_; }
  bool has(std::string_view key) const noexcept { return find(key) != nullptr; }
  const GgufValue* find(std::string_view key) const noexcept;
  // The value of `key`; throws ModelFileError naming the key when it is missing.
  const GgufValue& get(std::string_view key) const;

  // Typed getters: throw ModelFileError naming the key, the expected and the stored type when the key is
  // missing or holds something else. Integer getters accept any integer type whose value fits (writers
  // differ: a count may be stored as i32 or u64); get_f32 accepts f32 and f64.
  const std::string& get_string(std::string_view key) const;
  std::uint32_t get_u32(std::string_view key) const;
  std::int32_t get_i32(std::string_view key) const;
  std::uint64_t get_u64(std::string_view key) const;
  std::int64_t get_i64(std::string_view key) const;
  float get_f32(std::string_view key) const;
  bool get_bool(std::string_view key) const;
  const GgufArray& get_array(std::string_view key) const;
  const std::vector<std::string>& get_string_array(std::string_view key) const;
  std::span<const float> get_f32_array(std::string_view key) const;
  // Any integer array whose elements all fit in i32 (token types are i32 in some files, u32 in others).
  std::vector<std::int32_t> get_i32_array(std::string_view key) const;

  // For keys with defaults: nullopt when the key is absent; still throws when it is present with a type
  // that does not fit, since silently falling back to a default would hide a broken file.
  std::optional<std::string> find_string(std::string_view key) const;
  std::optional<std::uint32_t> find_u32(std::string_view key) const;
  std::optional<std::int32_t> find_i32(std::string_view key) const;
  std::optional<std::uint64_t> find_u64(std::string_view key) const;
  std::optional<float> find_f32(std::string_view key) const;
  std::optional<bool> find_bool(std::string_view key) const;

  // ---- tensors --------------------------------------------------------------------------------------
  // In file order; `data` points into the mapping, `bytes` is the stored size.
  const std::vector<TensorView>& tensors() const noexcept { return tensors_; }
  const TensorView* find_tensor(std::string_view name) const noexcept;
  // Throws ModelFileError naming the tensor when it is missing.
  const TensorView& get_tensor(std::string_view name) const;
  // Where a tensor of this file starts, as a byte offset in the file.
  std::uint64_t file_offset(const TensorView& tensor) const noexcept {
    return static_cast<std::uint64_t>(tensor.data - file_.data());
  }

 private:
  explicit GgufFile(MappedFile file) : file_(std::move(file)) {}
  void parse();
  [[noreturn]] void fail_key(std::string_view key, std::string detail) const;
  template <class T>
  T get_integer(std::string_view key, GgufValueType expected) const;
  template <class T>
  std::optional<T> find_integer(std::string_view key, GgufValueType expected) const;

  MappedFile file_;
  std::uint32_t version_ = 0;
  std::uint32_t alignment_ = kDefaultAlignment;
  std::uint64_t data_offset_ = 0;
  std::vector<GgufKeyValue> metadata_;
  std::map<std::string, std::size_t, std::less<>> metadata_index_;
  std::vector<TensorView> tensors_;
  std::map<std::string, std::size_t, std::less<>> tensor_index_;
};

}  // namespace loom::compute
