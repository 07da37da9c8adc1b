#include "loom/compute/cpu/kernel_path.hpp"

#include <cstdlib>
#include <cstring>

#include "loom/compute/cpu/cpu_features.hpp"

namespace loom::compute {
namespace {

// LOOM_MAX_KERNEL_PATH's cap; an unset, empty or unknown value caps nothing.
KernelPath widest_allowed() noexcept {
  const char* cap = std::getenv("LOOM_MAX_KERNEL_PATH");
  if (cap == nullptr) return KernelPath::avx512;
  for (KernelPath path : {KernelPath::scalar, KernelPath::avx2, KernelPath::avx512}) {
    if (name(path) == cap) return path;
  }
  return KernelPath::avx512;
}

KernelPath choose_default() noexcept {
  const char* force = std::getenv("LOOM_FORCE_SCALAR");
  if (force != nullptr && force[0] != '\0' && std::strcmp(force, "0") != 0) return KernelPath::scalar;
  const KernelPath cap = widest_allowed();
  for (KernelPath path : {KernelPath::avx512, KernelPath::avx2}) {
    if (path <= cap && kernel_path_supported(path)) return path;
  }
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
