// The element types a GGUF tensor can have, with their GGML type ids (the numbers stored in the file) and
// block geometry: quantized types store blocks of `block_elements` values in `block_bytes` bytes.
// loom computes with F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and
// IQ4_XS weights (Q8_1 and Q8_K only as activations); the other ids are known so that an error can name them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace loom::compute {

enum class TensorType : std::uint32_t {
  f32 = 0,
  f16 = 1,
  q4_0 = 2,
  q4_1 = 3,
  q5_0 = 6,
  q5_1 = 7,
  q8_0 = 8,
  q8_1 = 9,
  q2_k = 10,
  q3_k = 11,
  q4_k = 12,
  q5_k = 13,
  q6_k = 14,
  q8_k = 15,
  iq4_nl = 20,
  iq4_xs = 23,
  i8 = 24,
  i16 = 25,
  i32 = 26,
  i64 = 27,
  f64 = 28,
  bf16 = 30,
};

struct TensorTypeTraits {
  TensorType type;
  std::string_view name;        // as GGUF tools print it: "f32", "q4_K", ...
  std::size_t block_elements;   // 1 for plain types
  std::size_t block_bytes;
  bool computable;              // loom has kernels for it (as weights or, for q8_1 and q8_k, as activations)
};

// Traits for a raw GGML type id from a file; nullptr when the id is unknown.
const TensorTypeTraits* find_tensor_type(std::uint32_t raw_id) noexcept;
const TensorTypeTraits& traits(TensorType type) noexcept;
inline std::string_view name(TensorType type) noexcept { return traits(type).name; }

// The number of blocks in a row of n values of `type`. Throws std::invalid_argument naming `caller` when
// the type id is unknown or n is negative or not a whole number of blocks. Cheap on the good path: row
// functions call it on every call.
std::int64_t whole_blocks(TensorType type, std::int64_t n, std::string_view caller);

// Bytes taken by `elements` values of `type`, or nullopt when `elements` is not a whole number of blocks
// or the size overflows.
std::optional<std::uint64_t> tensor_bytes(TensorType type, std::uint64_t elements) noexcept;

}  // namespace loom::compute
