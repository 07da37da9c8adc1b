// CPU feature detection against the compiler's own detection and /proc/cpuinfo, and the kernel path choice.
#include "loom/compute/cpu/cpu_features.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "loom/compute/cpu/kernel_path.hpp"

namespace loom::compute {
namespace {

TEST(CpuFeatures, AgreesWithTheCompilerBuiltins) {
  const CpuFeatures& f = cpu_features();
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  // GCC's checks also look at OS support (xgetbv) for the AVX families.
  EXPECT_EQ(f.avx2, static_cast<bool>(__builtin_cpu_supports("avx2")));
  EXPECT_EQ(f.fma, static_cast<bool>(__builtin_cpu_supports("fma")));
  EXPECT_EQ(f.avx512f, static_cast<bool>(__builtin_cpu_supports("avx512f")));
  EXPECT_EQ(f.avx512bw, static_cast<bool>(__builtin_cpu_supports("avx512bw")));
  EXPECT_EQ(f.avx512vnni, static_cast<bool>(__builtin_cpu_supports("avx512vnni")));
#endif
  EXPECT_EQ(&f, &cpu_features()) << "detected once";
  EXPECT_TRUE(!f.avx2 || f.avx);
  EXPECT_TRUE(!f.has_avx512_set() || f.has_avx2_set());
  EXPECT_FALSE(to_string(f).empty());
}

TEST(CpuFeatures, AgreesWithProcCpuinfo) {
  std::ifstream in("/proc/cpuinfo");
  if (!in) GTEST_SKIP() << "no /proc/cpuinfo";
  std::string line, flags;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) == 0) {
      flags = ' ';  // appended piece by piece: "lit" + string trips a false GCC 12 -Wrestrict at -O3
      flags += line.substr(line.find(':') + 1);
      flags += ' ';
      break;
    }
  }
  if (flags.empty()) GTEST_SKIP() << "no flags line";
  const auto has = [&flags](const char* flag) {
    return flags.find(std::string(" ") + flag + " ") != std::string::npos;
  };
  const CpuFeatures& f = cpu_features();
  // The kernel lists only what the OS enabled, as we do.
  EXPECT_EQ(f.avx2, has("avx2"));
  EXPECT_EQ(f.fma, has("fma"));
  EXPECT_EQ(f.f16c, has("f16c"));
  EXPECT_EQ(f.avx512f, has("avx512f"));
  EXPECT_EQ(f.avx512vl, has("avx512vl"));
  EXPECT_EQ(f.avx512vnni, has("avx512_vnni"));
}

TEST(CpuFeaturesKernelPath, DefaultIsTheWidestSupported) {
  EXPECT_TRUE(kernel_path_supported(KernelPath::scalar));
  EXPECT_EQ(kernel_path_supported(KernelPath::avx2), cpu_features().has_avx2_set());
  EXPECT_EQ(kernel_path_supported(KernelPath::avx512), cpu_features().has_avx512_set());
  const char* force = std::getenv("LOOM_FORCE_SCALAR");
  if (force != nullptr && force[0] != '\0' && std::string(force) != "0") {
    EXPECT_EQ(default_kernel_path(), KernelPath::scalar);
  } else if (kernel_path_supported(KernelPath::avx512)) {
    EXPECT_EQ(default_kernel_path(), KernelPath::avx512);
  } else if (kernel_path_supported(KernelPath::avx2)) {
    EXPECT_EQ(default_kernel_path(), KernelPath::avx2);
  } else {
    EXPECT_EQ(default_kernel_path(), KernelPath::scalar);
  }
  EXPECT_EQ(name(KernelPath::scalar), "scalar");
  EXPECT_EQ(name(KernelPath::avx2), "avx2");
  EXPECT_EQ(name(KernelPath::avx512), "avx512");
}

KernelPath widest_supported_up_to(KernelPath cap) {
  for (KernelPath path : {KernelPath::avx512, KernelPath::avx2}) {
    if (path <= cap && kernel_path_supported(path)) return path;
  }
  return KernelPath::scalar;
}

// The environment is read once per process, so each check runs in a fresh one (the "threadsafe"
// death-test style re-executes this binary for just that statement).
void expect_default_path_with(const char* variable, const char* value, KernelPath expected) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv(variable, value, 1);
        std::exit(default_kernel_path() == expected ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "")
      << variable << "=" << value << " should give " << name(expected);
}

TEST(CpuFeaturesKernelPath, ForceScalarEnvironmentVariable) {
  expect_default_path_with("LOOM_FORCE_SCALAR", "1", KernelPath::scalar);
  expect_default_path_with("LOOM_FORCE_SCALAR", "0", widest_supported_up_to(KernelPath::avx512));
}

TEST(CpuFeaturesKernelPath, MaxKernelPathCapsTheDefault) {
  expect_default_path_with("LOOM_MAX_KERNEL_PATH", "scalar", KernelPath::scalar);
  expect_default_path_with("LOOM_MAX_KERNEL_PATH", "avx2", widest_supported_up_to(KernelPath::avx2));
  expect_default_path_with("LOOM_MAX_KERNEL_PATH", "avx512", widest_supported_up_to(KernelPath::avx512));
  // Anything else is ignored: the widest supported.
  expect_default_path_with("LOOM_MAX_KERNEL_PATH", "no-such-path", widest_supported_up_to(KernelPath::avx512));
}

}  // namespace
}  // namespace loom::compute
