// Vulkan matrix products on the default device (`--device vulkan`'s choice: the first discrete GPU, else
// lavapipe): a 2048 x 2048 weight in its stored type against n = 1 (decode, memory-bound: reported as the
// weight bytes read per second) and n = 64 (prefill, reported as GFLOP/s, 2 * rows * cols * n per product).
// Each iteration submits one recording of kRepeats products and waits, so the submit and fence cost is
// spread; the activation quantization runs once per recording and is included.
//
//   build/bin/vulkan_matmul_bench
//   build/bin/vulkan_matmul_bench --benchmark_filter='q4_0'
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "loom/compute/cpu/quantize.hpp"
#include "loom/compute/vulkan/vulkan_buffer.hpp"
#include "loom/compute/vulkan/vulkan_commands.hpp"
#include "loom/compute/vulkan/vulkan_context.hpp"
#include "loom/compute/vulkan/vulkan_matmul.hpp"
#include "loom/compute/vulkan/vulkan_pipeline.hpp"

namespace {

using namespace loom::compute;
using namespace loom::compute::vulkan;

constexpr std::int64_t kRows = 2048;
constexpr std::int64_t kCols = 2048;
constexpr int kRepeats = 16;

struct Device {
  std::unique_ptr<VulkanContext> context;
  std::unique_ptr<PipelineCache> pipelines;
};

Device& device() {
  static Device d = [] {
    Device made;
    made.context = VulkanContext::open();
    made.pipelines = std::make_unique<PipelineCache>(*made.context);
    return made;
  }();
  return d;
}

std::vector<float> random_floats(std::size_t count, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> v(count);
  for (float& x : v) x = normal(rng);
  return v;
}

Buffer upload(std::span<const std::byte> bytes, const char* what) {
  Buffer buffer(*device().context, (bytes.size() + 3) / 4 * 4, MemoryKind::device_local, what);
  std::vector<std::byte> padded(buffer.size());
  std::memcpy(padded.data(), bytes.data(), bytes.size());
  Uploader(*device().context).upload(buffer.range(), padded);
  return buffer;
}

void BM_VulkanMatmul(benchmark::State& state, TensorType type) {
  const std::int64_t n = state.range(0);
  Device& d = device();
  const std::uint64_t row_bytes = *tensor_bytes(type, kCols);
  std::vector<std::byte> stored(row_bytes * kRows);
  const auto values = random_floats(static_cast<std::size_t>(kRows * kCols), 1);
  for (std::int64_t r = 0; r < kRows; ++r) quantize_row(type, values.data() + r * kCols, stored.data() + r * row_bytes, kCols);
  Buffer weights = upload(stored, "weights");
  const auto x = random_floats(static_cast<std::size_t>(n * kCols), 2);
  Buffer input = upload(std::as_bytes(std::span<const float>(x)), "x");
  Buffer output(*d.context, 4 * n * kRows, MemoryKind::device_local, "y");
  Buffer scratch(*d.context, std::max<std::uint64_t>(4, prepared_bytes(activation_format(type), n, kCols)),
                 MemoryKind::device_local, "scratch");
  const DeviceTensor tensor{type, kRows, kCols, weights.range()};

  CommandRecording recording(*d.context);
  recording.begin();
  OpContext op{*d.pipelines, recording};
  const ActivationFormat format = activation_format(type);
  prepare_activations(op, format, input.range(), scratch.range(), n, kCols);
  const BufferRange prepared = format == ActivationFormat::f32 ? input.range() : scratch.range();
  for (int i = 0; i < kRepeats; ++i) matmul_prepared(op, tensor, prepared, output.range(), n);
  recording.end();
  recording.submit_and_wait();  // compiles what the driver compiles lazily

  for (auto _ : state) recording.submit_and_wait();
  const double products = static_cast<double>(state.iterations()) * kRepeats;
  state.SetBytesProcessed(static_cast<std::int64_t>(products * static_cast<double>(stored.size())));
  state.counters["GFLOP/s"] = benchmark::Counter(products * 2.0 * kRows * kCols * static_cast<double>(n) * 1e-9,
                                                 benchmark::Counter::kIsRate);
  state.SetLabel(d.context->description().name);
}

BENCHMARK_CAPTURE(BM_VulkanMatmul, q4_0, TensorType::q4_0)->Arg(1)->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_VulkanMatmul, q8_0, TensorType::q8_0)->Arg(1)->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_VulkanMatmul, q4_K, TensorType::q4_k)->Arg(1)->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_VulkanMatmul, q6_K, TensorType::q6_k)->Arg(1)->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_VulkanMatmul, f16, TensorType::f16)->Arg(1)->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
