// What the Vulkan ops tests share: host-visible buffers filled from and read back into vectors (so a test
// needs no Uploader), one recording submitted and waited for, and seeded random values.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "loom/compute/vulkan/vulkan_buffer.hpp"
#include "loom/compute/vulkan/vulkan_commands.hpp"
#include "loom/compute/vulkan/vulkan_matmul.hpp"
#include "vulkan_test_device.hpp"

namespace loom::compute::vulkan::testing {

// A host-visible buffer holding `values` (at least 4 bytes).
template <class T>
Buffer buffer_of(const std::vector<T>& values, const char* what = "test buffer") {
  Buffer buffer(*test_device().context, values.size() * sizeof(T), MemoryKind::host_visible, what);
  if (!values.empty()) std::memcpy(buffer.mapped(), values.data(), values.size() * sizeof(T));
  return buffer;
}

template <class T>
std::vector<T> read_back(const Buffer& buffer, std::size_t count) {
  std::vector<T> values(count);
  std::memcpy(values.data(), buffer.mapped(), count * sizeof(T));
  return values;
}

template <class T>
void write(Buffer& buffer, const std::vector<T>& values) {
  std::memcpy(buffer.mapped(), values.data(), values.size() * sizeof(T));
}

inline std::vector<float> random_floats(std::size_t count, float low, float high, std::uint32_t seed) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> distribution(low, high);
  std::vector<float> values(count);
  for (auto& v : values) v = distribution(generator);
  return values;
}

}  // namespace loom::compute::vulkan::testing
