// The machine probes (machine_probe.hpp) return real measurements: positive and finite, and the SIMD int8
// form at least as fast as the plain scalar loop (the figure the GEMM benchmarks divide by must not be a
// broken loop's).
#include <gtest/gtest.h>

#include <cmath>

#include "loom/compute/cpu/machine_probe.hpp"
#include "loom/compute/cpu/thread_pool.hpp"

namespace loom::compute {
namespace {

// Short rounds: the test only needs the probes to work, not a careful figure.
constexpr PeakProbeOptions kQuick{0.002, 5};

bool positive_finite(double value) { return std::isfinite(value) && value > 0; }

TEST(MachineProbe, BandwidthIsPositiveAndFinite) {
  ThreadPool pool(2);
  BandwidthProbe probe(std::size_t{16} << 20);
  EXPECT_EQ(probe.bytes(), std::size_t{16} << 20);
  EXPECT_TRUE(positive_finite(probe.measure(pool, 2)));
}

TEST(MachineProbe, StreamReadFoldsEveryWord) {
  std::vector<std::uint64_t> words(1001, 0);
  words[1000] = 0x55;  // past the last whole vector group: the tail loop's word
  words[3] = 0x0f00;
  EXPECT_EQ(stream_read(words.data(), words.size()), 0x0f55u);
}

TEST(MachineProbe, EveryComputeFormThisCpuRunsGivesPositiveFiniteRates) {
  ThreadPool pool(2);
  for (auto form : {Int8DotForm::scalar, Int8DotForm::avx2_maddubs, Int8DotForm::avx_vnni_256, Int8DotForm::avx512_vnni_512}) {
    if (!supported(form)) continue;
    const ComputePeak peak = probe_int8_peak(pool, form, kQuick);
    EXPECT_TRUE(positive_finite(peak.ops_per_second)) << name(form);
    EXPECT_TRUE(positive_finite(peak.instructions_per_second)) << name(form);
    EXPECT_DOUBLE_EQ(peak.ops_per_second, peak.instructions_per_second * peak.ops_per_instruction) << name(form);
    EXPECT_EQ(peak.threads, 2);
    EXPECT_EQ(peak.instruction, name(form));
  }
  for (auto form : {FmaForm::scalar, FmaForm::fma_256, FmaForm::avx512_fma_512}) {
    if (!supported(form)) continue;
    const ComputePeak peak = probe_fma_peak(pool, form, kQuick);
    EXPECT_TRUE(positive_finite(peak.ops_per_second)) << name(form);
    EXPECT_TRUE(positive_finite(peak.instructions_per_second)) << name(form);
  }
}

TEST(MachineProbe, TheBestInt8FormIsAtLeastAsFastAsAPlainScalarLoop) {
  ThreadPool pool(2);
  const double best = probe_int8_peak(pool, best_int8_dot_form(), kQuick).ops_per_second;
  const double scalar = probe_int8_peak(pool, Int8DotForm::scalar, kQuick).ops_per_second;
  EXPECT_GE(best, scalar) << name(best_int8_dot_form());
}

TEST(MachineProbe, TheBestFormsFollowTheKernelPath) {
  EXPECT_EQ(best_int8_dot_form(KernelPath::scalar), Int8DotForm::scalar);
  EXPECT_EQ(best_fma_form(KernelPath::scalar), FmaForm::scalar);
  EXPECT_TRUE(supported(best_int8_dot_form()));
  EXPECT_TRUE(supported(best_fma_form()));
  if (kernel_path_supported(KernelPath::avx512)) {
    EXPECT_EQ(best_int8_dot_form(KernelPath::avx512), Int8DotForm::avx512_vnni_512);
    EXPECT_EQ(best_fma_form(KernelPath::avx512), FmaForm::avx512_fma_512);
  }
}

TEST(MachineProbe, AFormTheCpuCannotRunIsRefused) {
  for (auto form : {Int8DotForm::avx2_maddubs, Int8DotForm::avx_vnni_256, Int8DotForm::avx512_vnni_512}) {
    if (supported(form)) continue;
    ThreadPool pool(1);
    EXPECT_THROW(probe_int8_peak(pool, form, kQuick), std::invalid_argument) << name(form);
  }
}

}  // namespace
}  // namespace loom::compute
