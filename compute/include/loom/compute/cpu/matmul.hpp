// Matrix products of stored weights with F32 activations: y[t] = W · x[t] for each of `tokens` rows of x.
// W stays in its stored type; the activations are converted once per call to the type the weight's dot
// kernel wants (vec_dot.hpp: F32 for float weights, Q8_0 / Q8_1 / Q8_K for quantized ones) and the weight rows
// are split among the pool's threads. For a batch of tokens each chunk of weight rows is dotted with every
// token while it is hot in cache, so prefill reads the weights once per chunk, not once per token.
//
// matmul_many runs several products of the same input as one parallel job (Q, K and V; gate and up): one
// activation conversion and one fork-join instead of three, which matters when a decode step is a few
// milliseconds and each fork-join costs microseconds.
//
// Every weight type stays on our kernels at every batch size, so a token's outputs have the same bits
// whatever batch it is in: with several tokens the kernels are register-blocked matrix-matrix products
// (the float GEMM and the AVX-512 panel GEMM, vec_dot.hpp) in the one-column kernels' batch orders. F16/BF16
// prefill used to go to OpenBLAS sgemm (rows widened to F32 first); the float GEMM is faster on every shape
// bench/README.md measures, and its results no longer depend on the batch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "loom/compute/cpu/thread_pool.hpp"
#include "loom/compute/model/tensor_view.hpp"

namespace loom::compute {

// Scratch for activations converted to a kernel's input type. Sized once (at model load) for the largest
// matrix and batch, so products allocate nothing.
class MatmulScratch {
 public:
  void reserve(std::int64_t max_tokens, std::int64_t max_cols);
  std::byte* data() noexcept { return buffer_.data(); }
  std::size_t size() const noexcept { return buffer_.size(); }

 private:
  std::vector<std::byte> buffer_;
};

struct MatmulProduct {
  const TensorView* weight;
  float* out;  // [tokens][weight->rows()]
};

// x: [tokens][cols] row-major, the same cols for every weight. At most 4 products.
void matmul_many(std::initializer_list<MatmulProduct> products, const float* x, std::int64_t tokens,
                 ThreadPool& pool, MatmulScratch& scratch);

inline void matmul(const TensorView& w, const float* x, std::int64_t tokens, float* y, ThreadPool& pool,
                   MatmulScratch& scratch) {
  matmul_many({{&w, y}}, x, tokens, pool, scratch);
}

}  // namespace loom::compute
