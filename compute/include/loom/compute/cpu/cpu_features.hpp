// What the CPU this process runs on can execute, as far as loom's SIMD kernels care: read once with cpuid and
// xgetbv. A feature counts only when the OS also saves the registers it uses (an AVX-512 CPU under an OS or
// hypervisor that does not enable ZMM state reports avx512f = false), so "true" means "safe to run".
#pragma once

#include <string>

namespace loom::compute {

struct CpuFeatures {
  bool avx = false;
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512vnni = false;
  bool avx_vnni = false;

  // The set the *_avx2.cpp kernels are compiled for (-mavx2 -mfma -mf16c).
  bool has_avx2_set() const noexcept { return avx && avx2 && fma && f16c; }
  // The set the *_avx512.cpp kernels are compiled for (F, BW, VL, DQ, VNNI on top of the AVX2 set).
  bool has_avx512_set() const noexcept {
    return has_avx2_set() && avx512f && avx512bw && avx512vl && avx512dq && avx512vnni;
  }
};

// Detected on first use, then cached; thread-safe.
const CpuFeatures& cpu_features() noexcept;

// "avx2 fma f16c ..." listing the features present, for logs and `loom bench` headers.
std::string to_string(const CpuFeatures& features);

}  // namespace loom::compute
