// TensorView: a read-only view of one weight tensor as stored (memory-mapped from a GGUF or llama2.c file),
// in its stored type. Dimensions follow GGUF order: dims[0] is the innermost (contiguous) one, so a matrix
// of `rows` x `cols` has dims {cols, rows} and each row is `row_bytes()` bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "loom/compute/tensor_type.hpp"

namespace loom::compute {

struct TensorView {
  std::string name;
  TensorType type = TensorType::f32;
  std::vector<std::int64_t> dims;  // innermost first; 1 to 4 of them
  const std::byte* data = nullptr;
  std::uint64_t bytes = 0;

  std::int64_t elements() const noexcept {
    std::int64_t n = 1;
    for (auto d : dims) n *= d;
    return n;
  }
  std::int64_t cols() const noexcept { return dims.empty() ? 0 : dims[0]; }
  std::int64_t rows() const noexcept { return cols() == 0 ? 0 : elements() / cols(); }
  std::uint64_t row_bytes() const noexcept { return rows() == 0 ? 0 : bytes / static_cast<std::uint64_t>(rows()); }
  const std::byte* row(std::int64_t r) const noexcept { return data + static_cast<std::uint64_t>(r) * row_bytes(); }
};

}  // namespace loom::compute
