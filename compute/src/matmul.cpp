#include "loom/compute/matmul.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "loom/compute/quantize.hpp"
#include "loom/compute/vec_dot.hpp"

namespace loom::compute {
namespace {

// Rows per task: enough to amortise the task hand-out, few enough to balance over the threads and to keep
// a chunk of weights in L2 while it meets every token of a batch.
constexpr std::int64_t kRowsPerTask = 16;

std::uint64_t activation_row_bytes(TensorType weight_type, std::int64_t cols) {
  const auto bytes = tensor_bytes(activation_type(weight_type), static_cast<std::uint64_t>(cols));
  if (!bytes) {
    throw std::invalid_argument("matmul: " + std::to_string(cols) + " columns is not a whole number of " +
                                std::string(name(activation_type(weight_type))) + " blocks");
  }
  return *bytes;
}

}  // namespace

void MatmulScratch::reserve(std::int64_t max_tokens, std::int64_t max_cols) {
  // The widest activation type per value is F32 (4 bytes); Q8_K is about 1.14 bytes per value.
  const auto bytes = static_cast<std::size_t>(max_tokens * max_cols) * sizeof(float);
  if (buffer_.size() < bytes) buffer_.resize(bytes);
}

void matmul(const TensorView& w, const float* x, std::int64_t tokens, float* y, ThreadPool& pool,
            MatmulScratch& scratch) {
  const std::int64_t cols = w.cols();
  const std::int64_t rows = w.rows();
  const TensorType act_type = activation_type(w.type);
  const std::uint64_t act_bytes = activation_row_bytes(w.type, cols);

  const std::byte* activations = reinterpret_cast<const std::byte*>(x);
  if (act_type != TensorType::f32) {
    if (act_bytes * static_cast<std::uint64_t>(tokens) > scratch.size()) {
      throw std::logic_error("matmul: scratch too small for " + w.name);
    }
    std::byte* out = scratch.data();
    pool.parallel_for(tokens, [&](std::int64_t t) {
      quantize_row(act_type, x + t * cols, out + static_cast<std::uint64_t>(t) * act_bytes, cols);
    });
    activations = out;
  }

  const VecDotKernel kernel = vec_dot_kernel(w.type);
  const std::int64_t tasks = (rows + kRowsPerTask - 1) / kRowsPerTask;
  const std::uint64_t row_bytes = w.row_bytes();
  pool.parallel_for(tasks, [&](std::int64_t task) {
    const std::int64_t first = task * kRowsPerTask;
    const int n = static_cast<int>(std::min(kRowsPerTask, rows - first));
    // Every token of the batch meets this chunk of rows while it is in cache.
    kernel.rows_cols(w.row(first), row_bytes, n, activations, act_bytes, static_cast<int>(tokens), cols, y + first,
                     static_cast<std::size_t>(rows));
  });
}

}  // namespace loom::compute
