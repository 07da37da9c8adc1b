// GgufWriter: builds a GGUF v3 file from metadata and tensors (for `loom synth`, converters and tests). The
// output follows the format exactly as readers expect it: metadata in insertion order, then tensor infos,
// then the data section starting at the next multiple of the alignment, each tensor's data at an aligned
// offset and padded with zeros, so loom and other GGUF implementations both accept it. The alignment is
// `general.alignment` when that key is set (it must be a power of two), else 32.
//
// The writer refuses to build an invalid file (duplicate keys or names, dims that do not match the data),
// throwing std::invalid_argument; failures to write the file throw ModelFileError naming the path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "loom/compute/model/gguf_value.hpp"
#include "loom/compute/tensor_type.hpp"

namespace loom::compute {

class GgufWriter {
 public:
  // Any value, typed as constructed: `add("llama.block_count", std::uint32_t{4})`, a GgufArray, ...
  void add(std::string key, GgufValue value);
  void add_u8(std::string key, std::uint8_t value) { add(std::move(key), value); }
  void add_i8(std::string key, std::int8_t value) { add(std::move(key), value); }
  void add_u16(std::string key, std::uint16_t value) { add(std::move(key), value); }
  void add_i16(std::string key, std::int16_t value) { add(std::move(key), value); }
  void add_u32(std::string key, std::uint32_t value) { add(std::move(key), value); }
  void add_i32(std::string key, std::int32_t value) { add(std::move(key), value); }
  void add_u64(std::string key, std::uint64_t value) { add(std::move(key), value); }
  void add_i64(std::string key, std::int64_t value) { add(std::move(key), value); }
  void add_f32(std::string key, float value) { add(std::move(key), value); }
  void add_f64(std::string key, double value) { add(std::move(key), value); }
  void add_bool(std::string key, bool value) { add(std::move(key), value); }
  void add_string(std::string key, std::string value) { add(std::move(key), GgufValue(std::move(value))); }
  // Arrays of any element type, including strings and nested GgufArrays.
  void add_array(std::string key, GgufArray items) { add(std::move(key), GgufValue(std::move(items))); }
  // Sets general.alignment (u32); must be a power of two.
  void set_alignment(std::uint32_t alignment);
  std::uint32_t alignment() const;

  // A tensor with `dims` innermost first and `data` the raw bytes of its stored type (copied).
  void add_tensor(std::string name, TensorType type, std::vector<std::int64_t> dims, std::span<const std::byte> data);
  void add_f32_tensor(std::string name, std::vector<std::int64_t> dims, std::span<const float> values) {
    add_tensor(std::move(name), TensorType::f32, std::move(dims), std::as_bytes(values));
  }

  // The whole file as bytes.
  std::vector<std::byte> to_bytes() const;
  // Writes the file, replacing any file at `path`.
  void write(const std::string& path) const;

 private:
  struct Entry {
    std::string key;
    GgufValue value;
  };
  struct Tensor {
    std::string name;
    TensorType type;
    std::vector<std::int64_t> dims;
    std::vector<std::byte> data;
  };

  std::vector<std::byte> header() const;  // everything before the data section, padding included

  std::vector<Entry> metadata_;
  std::vector<Tensor> tensors_;
};

}  // namespace loom::compute
