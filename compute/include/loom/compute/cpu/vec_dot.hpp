// Dot products of stored weight rows with activation rows: the inner loop every CPU matrix product is built
// on. A weight row stays in its stored type (memory-mapped, never converted); the activation row is first
// converted, once per matrix product, with quantize_row(activation_type(weight_type), ...), so that quantized
// weights are dotted in integer arithmetic against 8-bit activations, the way the reference implementation
// does it (the parity tolerances against its logits assume this).
//
// Decode streams every weight once per step, so these kernels aim at memory bandwidth: the AVX2 ones work on
// whole blocks with integer multiply-adds, convert the f16 scales with F16C and accumulate with FMA, with one
// horizontal sum per row. rows_cols() dots each weight row with several activation rows while the row is hot,
// which is what makes prefill and batched decode cheaper per token than single-row decode.
//
// The AVX2 kernels sum in the reference implementation's order, so their products are bit-identical to its
// (compute/README.md says why that matters): Q8_0 one 8-lane float accumulator per output; Q4_K one float
// FMA per superblock for the scales and one for the mins; Q5_K/Q6_K 8 integer lanes per superblock into an
// 8-lane accumulator (the reference's kernels for these are 256-bit even on AVX-512 machines). F32 takes
// the reference's AVX-512 orders, as pairs of 8-lane registers: a single activation row in four 16-lane
// accumulators over 64-value steps, folded (a0 + a2) + (a1 + a3), summed as a 512-bit horizontal add, then
// the leftovers one by one with each product rounded before the add; a batch (rows_cols with n_cols > 1,
// n a multiple of 16) in one 16-lane accumulator per output. (Not modelled: the reference also needs the
// matrix's row count to be a multiple of 4 for its batch kernel.) The scalar F32, Q8_0 and Q4_0 kernels
// spell out the same orders. Q4_0 takes the order of the reference's repacked Q4_0 kernels: one float
// accumulator per output, per block acc = fma(float(whole-block integer dot), d_w * d_a, acc), the SIMD
// kernels reducing 8 outputs' int32 lanes to block dots with a transpose-add. F16/BF16 differ from it
// anyway (it rounds their activations to F16/BF16; we keep F32) and keep 8-lane orders.
//
// The AVX-512 kernels are the AVX2 ones with VNNI's one-instruction integer multiply-adds (vpdpbusd,
// vpdpwssd) and the same float order, so they give the AVX2 kernels' bits, faster.
//
// With several columns on AVX-512 VNNI, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q4_K, Q5_K and Q6_K rows in
// whole groups of 16 go through a panel GEMM (gemm_avx512.cpp, gemm_small_blocks_avx512.cpp,
// gemm_kquant_avx512.cpp, compute/README.md) that keeps the same
// orders and so the same bits (for the K-quants, those of the AVX2/AVX-512 kernels: their scalar kernels
// keep a plainer float order, equal to a tolerance).
//
// With several columns on AVX2 or AVX-512, F32, F16 and BF16 rows whose length is a whole number of the batch
// order's steps (16 values for F32, 8 for F16/BF16) go through a register-blocked float GEMM (gemm_float.inc,
// compute/README.md): tiles of rows packed to F32 once per panel by the type's weight loader, several rows x
// several columns of accumulators per inner loop, each accumulator one output's batch-order accumulator (on
// AVX-512 a zmm holds F32's 16 lanes, or the 8 lanes of two F16/BF16 rows, one per half, the activations
// broadcast to both halves). So a batch has the same bits as these kernels, at any batch size.
//
// Q4_1, Q5_0, Q5_1 and IQ4_NL (small_blocks.hpp, vec_dot_small_blocks.inc) take the reference's AVX2 orders
// (its references for them come from an AVX2 machine without repacked weights): one 8-lane accumulator per
// output as Q8_0, Q4_1/Q5_1's min terms (m_w times the Q8_1 activations' s) in a scalar sum added after the
// lanes', IQ4_NL against one column in two accumulators (even and odd blocks). Their scalar, AVX2 and
// AVX-512 kernels give the same bits.
//
// Q2_K, Q3_K and IQ4_XS (vec_dot_low_bit_k.inc) keep the reference's AVX2 order: per superblock 8 int32 lanes
// (each 32-value group's scale times its 4-value dots) into an 8-lane float accumulator with one FMA (Q2_K
// adds its mins the same way first); their scalar kernels spell out that order, so all paths give the same
// bits. They have no panel GEMM: batches use the dot kernels' several-column rows on every path.
//
// Supported weight types: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, q2_k, q3_k, q4_k, q5_k, q6_k,
// iq4_xs. Every type has a scalar kernel; AVX2 and AVX-512 kernels cover all of them too. `n` is the row length
// in values and must be a whole number of weight blocks.
#pragma once

#include <cstddef>
#include <cstdint>

#include "loom/compute/cpu/kernel_path.hpp"
#include "loom/compute/tensor_type.hpp"

namespace loom::compute {

// The type activations are quantized to before dotting with rows of `weight_type`: f32 for f32/f16/bf16,
// q8_0 for q8_0, q4_0, q5_0 and iq4_nl, q8_1 for q4_1 and q5_1 (its s carries their min term), q8_k for
// q2_k, q3_k, q4_k, q5_k, q6_k and iq4_xs (the reference's pairings). Throws std::invalid_argument for other
// types.
TensorType activation_type(TensorType weight_type);

namespace detail {
// out[c * out_col_stride + r] = dot(weight row r, activation row c) for r < n_rows, c < n_cols.
using VecDotFn = void (*)(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows,
                          const std::byte* activation_rows, std::size_t activation_row_bytes, int n_cols,
                          std::int64_t n, float* out, std::size_t out_col_stride);
}  // namespace detail

// One weight type's dot-product kernel on one code path, resolved once so that a matrix product's inner loop
// pays no dispatch. Cheap to copy. Arguments are checked (n a whole number of blocks, counts not negative)
// and violations throw std::invalid_argument.
class VecDotKernel {
 public:
  TensorType weight_type() const noexcept { return weight_type_; }
  TensorType activation_type() const noexcept { return activation_type_; }
  KernelPath path() const noexcept { return path_; }  // the path that actually runs (see vec_dot_kernel)

  // The dot product of one weight row with one activation row (in activation_type()), each n values long.
  float dot(const void* weight_row, const void* activation_row, std::int64_t n) const;

  // out[r] = dot(weight row r, activation row) for r < n_rows; weight rows are weight_row_bytes apart.
  void rows(const void* weight_rows, std::size_t weight_row_bytes, int n_rows, const void* activation_row,
            std::int64_t n, float* out) const;

  // out[c * out_col_stride + r] = dot(weight row r, activation row c) for r < n_rows and c < n_cols;
  // activation rows are activation_row_bytes apart. Each weight row is read from memory once for all columns.
  void rows_cols(const void* weight_rows, std::size_t weight_row_bytes, int n_rows, const void* activation_rows,
                 std::size_t activation_row_bytes, int n_cols, std::int64_t n, float* out,
                 std::size_t out_col_stride) const;

 private:
  friend VecDotKernel vec_dot_kernel(TensorType weight_type, KernelPath path);
  void check(std::int64_t n, int n_rows, int n_cols) const;

  TensorType weight_type_ = TensorType::f32;
  TensorType activation_type_ = TensorType::f32;
  KernelPath path_ = KernelPath::scalar;
  std::int64_t block_elements_ = 1;
  detail::VecDotFn fn_ = nullptr;
};

// The kernel for `weight_type` on `path`: the widest implementation not wider than `path` (so asking for
// avx512 where a type has only an AVX2 kernel runs AVX2; path() says which). Throws std::invalid_argument when
// the type has no kernels or this CPU cannot run `path` (kernel_path_supported()).
VecDotKernel vec_dot_kernel(TensorType weight_type, KernelPath path);
// The same on default_kernel_path(): the fastest this machine runs, or scalar under LOOM_FORCE_SCALAR=1.
VecDotKernel vec_dot_kernel(TensorType weight_type);

// Conveniences on the default path, for code outside hot loops and for tests.
float vec_dot(TensorType weight_type, const void* weight_row, const void* activation_row, std::int64_t n);
void vec_dot_rows(TensorType weight_type, const void* weight_rows, std::size_t weight_row_bytes, int n_rows,
                  const void* activation_row, std::int64_t n, float* out);
void vec_dot_rows_cols(TensorType weight_type, const void* weight_rows, std::size_t weight_row_bytes, int n_rows,
                       const void* activation_rows, std::size_t activation_row_bytes, int n_cols, std::int64_t n,
                       float* out, std::size_t out_col_stride);

}  // namespace loom::compute
