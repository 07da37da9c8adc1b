#include "loom/compute/cpu/cpu_features.hpp"

#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace loom::compute {
namespace {

#if defined(__x86_64__) || defined(__i386__)

struct Regs {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};

Regs cpuid(unsigned leaf, unsigned subleaf) {
  Regs r;
  if (__get_cpuid_count(leaf, subleaf, &r.eax, &r.ebx, &r.ecx, &r.edx) == 0) return Regs{};
  return r;
}

// xgetbv through asm: the intrinsic would need -mxsave on this (generic) translation unit.
std::uint64_t xgetbv0() {
  std::uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<std::uint64_t>(hi) << 32) | lo;
}

bool bit(unsigned value, int n) { return ((value >> n) & 1u) != 0; }

CpuFeatures detect() {
  CpuFeatures f;
  const unsigned max_leaf = __get_cpuid_max(0, nullptr);
  if (max_leaf < 1) return f;
  const Regs l1 = cpuid(1, 0);
  // Without OSXSAVE we may not even ask which register state the OS saves; then no AVX at all.
  if (!bit(l1.ecx, 27)) return f;
  const std::uint64_t xcr0 = xgetbv0();
  const bool os_ymm = (xcr0 & 0x6) == 0x6;              // SSE and AVX state
  const bool os_zmm = os_ymm && (xcr0 & 0xE0) == 0xE0;  // opmask, ZMM upper halves, ZMM16-31
  if (!os_ymm) return f;
  f.avx = bit(l1.ecx, 28);
  f.fma = bit(l1.ecx, 12);
  f.f16c = bit(l1.ecx, 29);
  if (max_leaf >= 7) {
    const Regs l7 = cpuid(7, 0);
    f.avx2 = bit(l7.ebx, 5);
    if (os_zmm) {
      f.avx512f = bit(l7.ebx, 16);
      f.avx512dq = bit(l7.ebx, 17);
      f.avx512bw = bit(l7.ebx, 30);
      f.avx512vl = bit(l7.ebx, 31);
      f.avx512vnni = bit(l7.ecx, 11);
    }
    if (l7.eax >= 1) f.avx_vnni = bit(cpuid(7, 1).eax, 4);
  }
  return f;
}

#else

CpuFeatures detect() { return CpuFeatures{}; }

#endif

}  // namespace

const CpuFeatures& cpu_features() noexcept {
  static const CpuFeatures features = detect();
  return features;
}

std::string to_string(const CpuFeatures& features) {
  std::string out;
  const auto add = [&out](bool present, const char* name) {
    if (!present) return;
    if (!out.empty()) out += ' ';
    out += name;
  };
  add(features.avx, "avx");
  add(features.avx2, "avx2");
  add(features.fma, "fma");
  add(features.f16c, "f16c");
  add(features.avx512f, "avx512f");
  add(features.avx512bw, "avx512bw");
  add(features.avx512vl, "avx512vl");
  add(features.avx512dq, "avx512dq");
  add(features.avx512vnni, "avx512vnni");
  add(features.avx_vnni, "avx_vnni");
  return out.empty() ? std::string("none") : out;
}

}  // namespace loom::compute
