// Which family of CPU kernels to run: portable scalar code, or the AVX2 (+FMA, F16C) or AVX-512 builds. The
// default is the widest path this CPU and OS support (cpu_features.hpp); setting the environment variable
// LOOM_FORCE_SCALAR=1 pins it to scalar and LOOM_MAX_KERNEL_PATH caps it, for debugging and to compare paths
// end to end. Tests ask for a path
// explicitly instead (for example vec_dot_kernel(type, KernelPath::avx2)), so both run in one process.
#pragma once

#include <cstdint>
#include <string_view>

namespace loom::compute {

enum class KernelPath : std::uint8_t { scalar = 0, avx2 = 1, avx512 = 2 };

std::string_view name(KernelPath path) noexcept;

// Whether this CPU and OS can execute code built for `path` (scalar: always).
bool kernel_path_supported(KernelPath path) noexcept;

// The widest supported path, or scalar when LOOM_FORCE_SCALAR is set to anything but "" or "0". With
// LOOM_MAX_KERNEL_PATH=scalar|avx2|avx512, the widest supported path not wider than that (to compare paths
// end to end, e.g. AVX2 against AVX-512 on one machine; any other value is ignored). Decided on the first
// call (the environment is read once) and the same for the life of the process.
KernelPath default_kernel_path() noexcept;

}  // namespace loom::compute
