#include "loom/compute/cpu/rotary.hpp"

#include "rotary_kernel.hpp"

namespace loom::compute {
namespace detail {
void rotate_pairs_avx2(float* heads, std::int64_t n_heads, std::int64_t head_dim, const float* rotation, bool adjacent);
}  // namespace detail

void rotate_pairs(float* heads, std::int64_t n_heads, std::int64_t head_dim, const float* rotation, bool adjacent,
                  KernelPath path) {
  if (path >= KernelPath::avx2 && kernel_path_supported(KernelPath::avx2)) {
    return detail::rotate_pairs_avx2(heads, n_heads, head_dim, rotation, adjacent);
  }
  detail::rotate_pairs_kernel(heads, n_heads, head_dim, rotation, adjacent);
}

}  // namespace loom::compute
