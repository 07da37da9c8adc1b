#include "loom/compute/kernel_path.hpp"

#include <cstdlib>
#include <cstring>

#include "loom/compute/cpu_features.hpp"

namespace loom::compute {
namespace {

KernelPath choose_default() noexcept {
  const char* force = std::getenv("LOOM_FORCE_SCALAR");
  if (force != nullptr && force[0] != '\0' && std::strcmp(force, "0") != 0) return KernelPath::scalar;
  if (kernel_path_supported(KernelPath::avx512)) return KernelPath::avx512;
  if (kernel_path_supported(KernelPath::avx2)) return KernelPath::avx2;
  return KernelPath::scalar;
}

}  // namespace

std::string_view name(KernelPath path) noexcept {
  switch (path) {
    case KernelPath::scalar:
      return "scalar";
    case KernelPath::avx2:
      return "avx2";
    case KernelPath::avx512:
      return "avx512";
  }
  return "unknown";
}

bool kernel_path_supported(KernelPath path) noexcept {
  switch (path) {
    case KernelPath::scalar:
      return true;
    case KernelPath::avx2:
      return cpu_features().has_avx2_set();
    case KernelPath::avx512:
      return cpu_features().has_avx512_set();
  }
  return false;
}

KernelPath default_kernel_path() noexcept {
  static const KernelPath path = choose_default();
  return path;
}

}  // namespace loom::compute
