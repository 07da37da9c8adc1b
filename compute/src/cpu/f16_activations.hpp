// Internal to loom_compute: activations rounded to F16 where they meet F16 weights, as the reference's F16
// dot products convert them (its vec_dot type for F16 is F16). Shared by the dense forward pass
// (llama_model.cpp) and the experts (expert_feed_forward.cpp).
#pragma once

#include <cstdint>
#include <initializer_list>

#include "loom/compute/cpu/kernel_path.hpp"
#include "loom/compute/model/tensor_view.hpp"

namespace loom::compute::detail {

// Rounds x[0..n) to F16 values (kept as F32) when every one of `weights` is F16; else leaves x alone (the
// other types quantize the activations their own way from F32).
void round_for_f16_weight(float* x, std::int64_t n, std::initializer_list<const TensorView*> weights, KernelPath path);

}  // namespace loom::compute::detail
