// What the matmul tests share: random weights quantized by the CPU quantizers, device buffers filled from
// the host and read back, and one recording run to completion around a few ops.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "loom/compute/cpu/quantize.hpp"
#include "loom/compute/tensor_type.hpp"
#include "loom/compute/vulkan/vulkan_buffer.hpp"
#include "loom/compute/vulkan/vulkan_commands.hpp"
#include "loom/compute/vulkan/vulkan_matmul.hpp"
#include "vulkan_test_device.hpp"

namespace loom::compute::vulkan::testing {

inline constexpr TensorType kWeightTypes[] = {
    TensorType::f32,  TensorType::f16,  TensorType::bf16, TensorType::q8_0, TensorType::q4_0,
    TensorType::q4_1, TensorType::q5_0, TensorType::q5_1, TensorType::q2_k, TensorType::q3_k,
    TensorType::q4_k, TensorType::q5_k, TensorType::q6_k, TensorType::iq4_nl, TensorType::iq4_xs};

// Values like a layer's: mostly small, a few larger, with a scale that varies by row, and the odd block
// entirely positive or entirely zero (the quantizers' edge cases).
inline std::vector<float> random_values(std::int64_t rows, std::int64_t cols, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    const float row_scale = 0.02f * static_cast<float>(1 + r % 7);
    for (std::int64_t c = 0; c < cols; ++c) {
      float x = normal(rng) * row_scale;
      if (c % 97 == 5) x *= 8.0f;  // an outlier now and then
      v[static_cast<std::size_t>(r * cols + c)] = x;
    }
  }
  if (rows * cols >= 512) {
    for (int i = 0; i < 32; ++i) v[static_cast<std::size_t>(64 + i)] = 0.0f;
    for (int i = 0; i < 32; ++i) v[static_cast<std::size_t>(128 + i)] = std::abs(v[static_cast<std::size_t>(128 + i)]);
  }
  return v;
}

// rows x cols values stored in `type` by the CPU's quantize_row, row by row (the file's layout).
inline std::vector<std::byte> quantized_rows(TensorType type, const std::vector<float>& values, std::int64_t rows,
                                             std::int64_t cols) {
  const std::uint64_t row_bytes = *tensor_bytes(type, static_cast<std::uint64_t>(cols));
  std::vector<std::byte> bytes(row_bytes * static_cast<std::uint64_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    quantize_row(type, values.data() + r * cols, bytes.data() + static_cast<std::uint64_t>(r) * row_bytes, cols);
  }
  return bytes;
}

// A device-local buffer holding `bytes` (rounded up to whole words, zero padded).
inline Buffer device_buffer(std::span<const std::byte> bytes, const std::string& what) {
  auto& context = *test_device().context;
  const std::uint64_t size = (bytes.size() + 3) / 4 * 4;
  Buffer buffer(context, std::max<std::uint64_t>(size, 4), MemoryKind::device_local, what);
  std::vector<std::byte> padded(buffer.size());
  std::memcpy(padded.data(), bytes.data(), bytes.size());
  Uploader(context, 1 << 20).upload(buffer.range(), padded);
  return buffer;
}

template <class T>
Buffer device_buffer(const std::vector<T>& values, const std::string& what) {
  return device_buffer(std::as_bytes(std::span<const T>(values)), what);
}

inline Buffer empty_buffer(std::uint64_t bytes, const std::string& what) {
  return Buffer(*test_device().context, std::max<std::uint64_t>(bytes, 4), MemoryKind::device_local, what);
}

template <class T>
std::vector<T> download(const BufferRange& range, std::size_t count) {
  std::vector<T> values(count);
  Uploader(*test_device().context, 1 << 20)
      .download(range.sub(0, count * sizeof(T)), std::as_writable_bytes(std::span<T>(values)));
  return values;
}

}  // namespace loom::compute::vulkan::testing
