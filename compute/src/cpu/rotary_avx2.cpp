// rotary.hpp's rotation compiled with FMA: the same operations as rotary.cpp's, each std::fma one instruction.
#include "rotary_kernel.hpp"

namespace loom::compute::detail {

void rotate_pairs_avx2(float* heads, std::int64_t n_heads, std::int64_t head_dim, const float* rotation, bool adjacent) {
  rotate_pairs_kernel(heads, n_heads, head_dim, rotation, adjacent);
}

}  // namespace loom::compute::detail
