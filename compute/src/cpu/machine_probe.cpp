// Machine probes (machine_probe.hpp): the run-time dispatch to the SIMD loops, the portable loops, and the
// timing (calibrate on one thread, then best of a few rounds on the whole pool).
#include "loom/compute/cpu/machine_probe.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>

#include "loom/compute/cpu/cpu_features.hpp"
#include "machine_probe_kernels.hpp"

namespace loom::compute {
namespace probe {

std::uint64_t int8_dot_scalar(std::int64_t iterations) {
  // Unsigned weights times signed activations (vpdpbusd's operand types), summed in wrapping 32-bit
  // accumulators. The arrays escape through the asm so the loop-invariant sums are recomputed each time.
  std::uint8_t weights[kScalarInt8Chains];
  std::int8_t activations[kScalarInt8Chains];
  for (int k = 0; k < kScalarInt8Chains; ++k) {
    weights[k] = static_cast<std::uint8_t>(k * 7 + 1);
    activations[k] = static_cast<std::int8_t>(k * 5 - 100);
  }
  std::uint32_t acc[16] = {};
  for (std::int64_t i = 0; i < iterations; ++i) {
    asm volatile("" : : "r"(weights), "r"(activations) : "memory");
    for (int k = 0; k < kScalarInt8Chains; ++k) {
      acc[k % 16] += static_cast<std::uint32_t>(weights[k] * static_cast<std::int32_t>(activations[k]));
    }
  }
  std::uint64_t folded = 0;
  for (auto a : acc) folded = folded * 31 + a;
  return folded;
}

std::uint64_t fma_scalar(std::int64_t iterations) {
  // acc = acc * a + b converges to 1: the values stay normal.
  const float a = 0.999f, b = 0.001f;
  float acc[kScalarFmaChains];
  for (auto& v : acc) v = 0.5f;
  for (std::int64_t i = 0; i < iterations; ++i) {
    for (auto& v : acc) v = v * a + b;
  }
  float sum = 0;
  for (auto v : acc) sum += v;
  return static_cast<std::uint64_t>(sum * 1000.0f);
}

}  // namespace probe

namespace {

std::uint64_t stream_read_plain(const std::uint64_t* data, std::size_t words) {
  std::uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  std::size_t i = 0;
  for (; i + 4 <= words; i += 4) a0 ^= data[i], a1 ^= data[i + 1], a2 ^= data[i + 2], a3 ^= data[i + 3];
  for (; i < words; ++i) a0 ^= data[i];
  return a0 ^ a1 ^ a2 ^ a3;
}

using Loop = std::uint64_t (*)(std::int64_t iterations);

struct TimedLoop {
  Loop loop;
  double sequences_per_iteration;
  double ops_per_sequence;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Iterations of `loop` that take about `seconds` on one thread: doubled from a short run until a run is
// long enough (2 ms) to time.
std::int64_t calibrate(Loop loop, double seconds) {
  std::int64_t iterations = 256;
  for (;;) {
    const auto start = std::chrono::steady_clock::now();
    volatile std::uint64_t sink = loop(iterations);
    (void)sink;
    const double took = seconds_since(start);
    if (took >= 0.002 || iterations >= (std::int64_t{1} << 40)) {
      return std::max<std::int64_t>(1, static_cast<std::int64_t>(static_cast<double>(iterations) * seconds / took));
    }
    iterations *= 2;
  }
}

ComputePeak run_peak(ThreadPool& pool, std::string_view instruction, TimedLoop timed, PeakProbeOptions options) {
  // Several tasks per thread, so a thread that loses its core for a moment hands the rest to the others.
  constexpr int kTasksPerThread = 4;
  const int threads = pool.size();
  const std::int64_t tasks = std::int64_t{threads} * kTasksPerThread;
  const std::int64_t per_task = std::max<std::int64_t>(1, calibrate(timed.loop, options.seconds_per_round) / kTasksPerThread);
  std::vector<std::uint64_t> sinks(static_cast<std::size_t>(tasks));
  double best_seconds = 0;
  for (int round = 0; round < std::max(1, options.rounds); ++round) {
    const auto start = std::chrono::steady_clock::now();
    pool.parallel_for(tasks, [&](std::int64_t task) { sinks[static_cast<std::size_t>(task)] = timed.loop(per_task); });
    const double took = seconds_since(start);
    if (round == 0 || took < best_seconds) best_seconds = took;
  }
  volatile std::uint64_t keep = sinks[0];
  (void)keep;
  const double sequences = static_cast<double>(tasks) * static_cast<double>(per_task) * timed.sequences_per_iteration;
  ComputePeak peak;
  peak.instruction = instruction;
  peak.threads = threads;
  peak.instructions_per_second = sequences / best_seconds;
  peak.ops_per_instruction = timed.ops_per_sequence;
  peak.ops_per_second = peak.instructions_per_second * timed.ops_per_sequence;
  return peak;
}

}  // namespace

BandwidthProbe::BandwidthProbe(std::size_t bytes)
    : words_(std::max<std::size_t>(bytes / sizeof(std::uint64_t), 256), 0x0123456789abcdefull) {}

double BandwidthProbe::measure(ThreadPool& pool, int rounds) {
  const std::int64_t chunks = 256;
  const std::size_t per_chunk = words_.size() / chunks;
  std::vector<std::uint64_t> partial(static_cast<std::size_t>(chunks));
  double best = 0;
  for (int round = 0; round < std::max(1, rounds); ++round) {
    const auto start = std::chrono::steady_clock::now();
    pool.parallel_for(chunks, [&](std::int64_t c) {
      partial[static_cast<std::size_t>(c)] = stream_read(words_.data() + static_cast<std::size_t>(c) * per_chunk, per_chunk);
    });
    const double seconds = seconds_since(start);
    volatile std::uint64_t keep = partial[0];
    (void)keep;
    best = std::max(best, static_cast<double>(per_chunk * chunks * sizeof(std::uint64_t)) / seconds);
  }
  return best;
}

std::uint64_t stream_read(const std::uint64_t* data, std::size_t words) {
  static const bool avx2 = cpu_features().has_avx2_set();
  return avx2 ? probe::stream_read_avx2(data, words) : stream_read_plain(data, words);
}

std::string_view name(Int8DotForm form) noexcept {
  switch (form) {
    case Int8DotForm::scalar: return "scalar";
    case Int8DotForm::avx2_maddubs: return "vpmaddubsw+vpmaddwd+vpaddd ymm";
    case Int8DotForm::avx_vnni_256: return "vpdpbusd ymm (AVX-VNNI)";
    case Int8DotForm::avx512_vnni_512: return "vpdpbusd zmm (AVX-512 VNNI)";
  }
  return "unknown";
}

std::string_view name(FmaForm form) noexcept {
  switch (form) {
    case FmaForm::scalar: return "scalar";
    case FmaForm::fma_256: return "vfmadd231ps ymm";
    case FmaForm::avx512_fma_512: return "vfmadd231ps zmm";
  }
  return "unknown";
}

bool supported(Int8DotForm form) noexcept {
  const CpuFeatures& cpu = cpu_features();
  switch (form) {
    case Int8DotForm::scalar: return true;
    case Int8DotForm::avx2_maddubs: return cpu.has_avx2_set();
    case Int8DotForm::avx_vnni_256: return cpu.has_avx2_set() && cpu.avx_vnni;
    case Int8DotForm::avx512_vnni_512: return cpu.has_avx512_set();
  }
  return false;
}

bool supported(FmaForm form) noexcept {
  const CpuFeatures& cpu = cpu_features();
  switch (form) {
    case FmaForm::scalar: return true;
    case FmaForm::fma_256: return cpu.has_avx2_set();
    // Only AVX-512F instructions in that loop, though its file is built for the whole AVX-512 set.
    case FmaForm::avx512_fma_512: return cpu.has_avx2_set() && cpu.avx512f;
  }
  return false;
}

Int8DotForm best_int8_dot_form(KernelPath path) noexcept {
  if (path == KernelPath::avx512 && supported(Int8DotForm::avx512_vnni_512)) return Int8DotForm::avx512_vnni_512;
  if (path >= KernelPath::avx2 && supported(Int8DotForm::avx_vnni_256)) return Int8DotForm::avx_vnni_256;
  if (path >= KernelPath::avx2 && supported(Int8DotForm::avx2_maddubs)) return Int8DotForm::avx2_maddubs;
  return Int8DotForm::scalar;
}

FmaForm best_fma_form(KernelPath path) noexcept {
  if (path == KernelPath::avx512 && supported(FmaForm::avx512_fma_512)) return FmaForm::avx512_fma_512;
  if (path >= KernelPath::avx2 && supported(FmaForm::fma_256)) return FmaForm::fma_256;
  return FmaForm::scalar;
}

ComputePeak probe_int8_peak(ThreadPool& pool, Int8DotForm form, PeakProbeOptions options) {
  if (!supported(form)) throw std::invalid_argument("this CPU cannot run " + std::string(name(form)));
  switch (form) {
    case Int8DotForm::avx512_vnni_512:
      return run_peak(pool, name(form), {probe::int8_dot_avx512_vnni, probe::kAvx512VnniChains, 64}, options);
    case Int8DotForm::avx_vnni_256:
      return run_peak(pool, name(form), {probe::int8_dot_avx_vnni, probe::kAvxVnniChains, 32}, options);
    case Int8DotForm::avx2_maddubs:
      return run_peak(pool, name(form), {probe::int8_dot_avx2_maddubs, probe::kMaddubsChains, 32}, options);
    case Int8DotForm::scalar: break;
  }
  return run_peak(pool, name(form), {probe::int8_dot_scalar, probe::kScalarInt8Chains, 1}, options);
}

ComputePeak probe_fma_peak(ThreadPool& pool, FmaForm form, PeakProbeOptions options) {
  if (!supported(form)) throw std::invalid_argument("this CPU cannot run " + std::string(name(form)));
  switch (form) {
    case FmaForm::avx512_fma_512:
      return run_peak(pool, name(form), {probe::fma_512, probe::kFma512Chains, 32}, options);
    case FmaForm::fma_256:
      return run_peak(pool, name(form), {probe::fma_256, probe::kFma256Chains, 16}, options);
    case FmaForm::scalar: break;
  }
  return run_peak(pool, name(form), {probe::fma_scalar, probe::kScalarFmaChains, 2}, options);
}

}  // namespace loom::compute
