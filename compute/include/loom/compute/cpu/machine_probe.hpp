// Machine probes: what this machine's cores can do at most, measured on the ThreadPool the kernels run on,
// so a kernel's speed can be stated as a fraction of the possible. Two bounds matter for inference:
// - memory bandwidth (decode reads every weight byte once per token): a parallel streaming read of a buffer
//   far larger than the caches (BandwidthProbe);
// - arithmetic (prefill and batched decode reuse each weight for many tokens): the int8 dot-product
//   instruction the quantized kernels are built on (AVX-512 VNNI vpdpbusd on 512-bit registers, else the
//   256-bit AVX-VNNI form, else AVX2 vpmaddubsw + vpmaddwd + vpaddd), and FP32 fused multiply-add (512-bit
//   with AVX-512F, else 256-bit FMA), each from many independent accumulators on every thread, so the
//   figure is the instructions' throughput, not their latency.
// Each probe runs a fraction of a second and keeps the best of a few rounds (on a shared host a
// neighbour's burst only ever lowers a round). Scalar code stands in where the CPU lacks the SIMD forms.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "loom/compute/cpu/kernel_path.hpp"
#include "loom/compute/cpu/thread_pool.hpp"

namespace loom::compute {

// Bytes per second of a parallel read: the buffer split in 256 chunks over the pool (the kernels' own
// task split), each read with 256-bit loads where the CPU has AVX2 and XOR-folded so nothing is optimised
// away. The buffer is allocated (and touched) once, at construction.
class BandwidthProbe {
 public:
  static constexpr std::size_t kDefaultBytes = std::size_t{256} << 20;
  explicit BandwidthProbe(std::size_t bytes = kDefaultBytes);
  // The best of `rounds` passes over the buffer, bytes per second.
  double measure(ThreadPool& pool, int rounds = 3);
  std::size_t bytes() const noexcept { return words_.size() * sizeof(std::uint64_t); }

 private:
  std::vector<std::uint64_t> words_;
};

// Reads `words` 64-bit words as fast as the core can issue loads and returns their XOR (exposed for the
// benchmarks that stream a buffer of their own).
std::uint64_t stream_read(const std::uint64_t* data, std::size_t words);

// The instruction sequences the compute probes time.
enum class Int8DotForm : std::uint8_t { scalar, avx2_maddubs, avx_vnni_256, avx512_vnni_512 };
enum class FmaForm : std::uint8_t { scalar, fma_256, avx512_fma_512 };

// "vpdpbusd zmm", "vfmadd231ps ymm", "scalar", ...
std::string_view name(Int8DotForm form) noexcept;
std::string_view name(FmaForm form) noexcept;

// The int8 form the kernels of `path` can use on this CPU (AVX-VNNI counts for the AVX2 path when present),
// and the FMA form likewise.
Int8DotForm best_int8_dot_form(KernelPath path = default_kernel_path()) noexcept;
FmaForm best_fma_form(KernelPath path = default_kernel_path()) noexcept;
bool supported(Int8DotForm form) noexcept;
bool supported(FmaForm form) noexcept;

struct ComputePeak {
  std::string_view instruction;    // name(form)
  int threads = 0;                 // pool size
  double ops_per_second = 0;       // int8 multiply-adds (MAC/s), or FLOP/s (2 per FMA lane)
  double instructions_per_second = 0;  // the timed instruction sequences per second, all threads together
  double ops_per_instruction = 0;  // MACs (FLOPs) each sequence does: 64 for vpdpbusd zmm, 32 for ymm ...
};

// Many short rounds rather than a few long ones: on a shared host a round is only clean when no neighbour
// takes either core for its whole length, and the best of 40 rounds of 5 ms finds such a window where the
// best of 3 rounds of 50 ms did not (the GEMM benchmarks' best calls then came out above "the peak").
struct PeakProbeOptions {
  double seconds_per_round = 0.005;  // wall time of one round (calibrated from a short first run)
  int rounds = 40;                   // the best is kept
};

// Throws std::invalid_argument for a form this CPU cannot run (supported(form) is false).
ComputePeak probe_int8_peak(ThreadPool& pool, Int8DotForm form = best_int8_dot_form(), PeakProbeOptions options = {});
ComputePeak probe_fma_peak(ThreadPool& pool, FmaForm form = best_fma_form(), PeakProbeOptions options = {});

}  // namespace loom::compute
