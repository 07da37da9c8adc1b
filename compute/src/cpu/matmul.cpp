#include "loom/compute/cpu/matmul.hpp"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>

#include "loom/compute/cpu/quantize.hpp"
#include "loom/compute/cpu/vec_dot.hpp"

namespace loom::compute {
namespace {

// Rows per task: one task is one contiguous stream of weights, long enough for the hardware prefetcher to
// ramp up (32 rows cost decode 10-25%), few enough to balance over the threads and to keep a chunk of
// weights in L2 while it meets every token of a batch.
constexpr std::int64_t kRowsPerTask = 128;
constexpr std::size_t kMaxProducts = 4;

std::uint64_t activation_row_bytes(TensorType act_type, std::int64_t cols) {
  const auto bytes = tensor_bytes(act_type, static_cast<std::uint64_t>(cols));
  if (!bytes) {
    throw std::invalid_argument("matmul: " + std::to_string(cols) + " columns is not a whole number of " +
                                std::string(name(act_type)) + " blocks");
  }
  return *bytes;
}

struct Prepared {
  const TensorView* weight = nullptr;
  float* out = nullptr;
  VecDotKernel kernel;
  const std::byte* activations = nullptr;
  std::uint64_t activation_bytes = 0;  // per token
  std::int64_t first_task = 0;
};

}  // namespace

void MatmulScratch::reserve(std::int64_t max_tokens, std::int64_t max_cols) {
  // Room for three converted activation types side by side (a product group may mix Q8_0, Q8_1 and Q8_K
  // weights, as the K-quant recipes' fallbacks to Q5_0/Q5_1/IQ4_NL do); each takes at most ~1.14 bytes per
  // value, so 4 bytes per value is plenty.
  const auto bytes = static_cast<std::size_t>(max_tokens * max_cols) * sizeof(float);
  if (buffer_.size() < bytes) buffer_.resize(bytes);
}

void matmul_many(std::initializer_list<MatmulProduct> products, const float* x, std::int64_t tokens,
                 ThreadPool& pool, MatmulScratch& scratch) {
  if (products.size() == 0 || products.size() > kMaxProducts) {
    throw std::invalid_argument("matmul_many takes 1 to 4 products, got " + std::to_string(products.size()));
  }
  const std::int64_t cols = products.begin()->weight->cols();
  std::array<Prepared, kMaxProducts> prepared;
  std::array<TensorType, 3> converted_types{};
  std::array<const std::byte*, 3> converted{};
  std::size_t n_converted = 0;
  std::size_t scratch_used = 0;
  std::int64_t tasks = 0;

  std::size_t i = 0;
  for (const auto& product : products) {
    Prepared& p = prepared[i++];
    const TensorView& w = *product.weight;
    if (w.cols() != cols) throw std::invalid_argument("matmul_many: " + w.name + " has another input width");
    p.weight = &w;
    p.out = product.out;
    p.first_task = tasks;
    p.kernel = vec_dot_kernel(w.type);
    const TensorType act_type = p.kernel.activation_type();
    p.activation_bytes = activation_row_bytes(act_type, cols);
    if (act_type == TensorType::f32) {
      p.activations = reinterpret_cast<const std::byte*>(x);
    } else {
      // Convert once per activation type, whichever product asks first.
      std::size_t k = 0;
      while (k < n_converted && converted_types[k] != act_type) ++k;
      if (k == n_converted) {
        if (n_converted == converted.size()) throw std::logic_error("matmul_many: more than three activation types");
        const std::uint64_t bytes = p.activation_bytes * static_cast<std::uint64_t>(tokens);
        if (scratch_used + bytes > scratch.size()) throw std::logic_error("matmul: scratch too small for " + w.name);
        std::byte* out = scratch.data() + scratch_used;
        scratch_used += bytes;
        const std::uint64_t row = p.activation_bytes;
        pool.parallel_for(tokens, [&](std::int64_t t) {
          quantize_row(act_type, x + t * cols, out + static_cast<std::uint64_t>(t) * row, cols);
        });
        converted_types[k] = act_type;
        converted[k] = out;
        ++n_converted;
      }
      p.activations = converted[k];
    }
    tasks += (w.rows() + kRowsPerTask - 1) / kRowsPerTask;
  }
  const std::size_t count = products.size();
  std::uint64_t weight_bytes = 0;
  for (const auto& product : products) weight_bytes += product.weight->bytes;

  // Every token meets every weight byte: that product is the job's size.
  pool.parallel_for(tasks, weight_bytes * static_cast<std::uint64_t>(tokens), [&](std::int64_t task) {
    std::size_t k = count - 1;
    while (prepared[k].first_task > task) --k;
    const Prepared& p = prepared[k];
    const std::int64_t rows = p.weight->rows();
    const std::int64_t first = (task - p.first_task) * kRowsPerTask;
    const int n = static_cast<int>(std::min(kRowsPerTask, rows - first));
    // Every token of the batch meets this chunk of rows while it is in cache.
    p.kernel.rows_cols(p.weight->row(first), p.weight->row_bytes(), n, p.activations, p.activation_bytes,
                       static_cast<int>(tokens), cols, p.out + first, static_cast<std::size_t>(rows));
  });
}

}  // namespace loom::compute
