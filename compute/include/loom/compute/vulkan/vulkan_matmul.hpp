// The Vulkan backend's products with weights in their stored type (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0,
// Q5_1, Q2_K..Q6_K, IQ4_NL, IQ4_XS): the shaders read the file's blocks as uploaded, never a converted copy.
// Like the reference implementation (and the CPU backend), a quantized weight meets its activations quantized
// per row block first, Q8_0 for Q8_0/Q4_0/Q5_0/IQ4_NL, Q8_1 for Q4_1/Q5_1, Q8_K for the K-quants and IQ4_XS,
// and F16 weights meet activations rounded to F16: the products then agree with the reference's to within
// summation order. prepare_activations() does that step once for products that share an input (q, k, v).
#pragma once

#include <cstdint>

#include "loom/compute/tensor_type.hpp"
#include "loom/compute/vulkan/vulkan_buffer.hpp"
#include "loom/compute/vulkan/vulkan_commands.hpp"
#include "loom/compute/vulkan/vulkan_pipeline.hpp"

namespace loom::compute::vulkan {

// What an op records into, and where its pipelines come from.
struct OpContext {
  PipelineCache& pipelines;
  CommandRecording& recording;
};

// A weight matrix on the device: `rows` output features of `cols` inputs each, row-major in its stored type
// (a row is cols / block_elements blocks).
struct DeviceTensor {
  TensorType type = TensorType::f32;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  BufferRange data;
};

// The form activations take to meet a weight type.
enum class ActivationFormat { f32, f16, q8_0, q8_1, q8_k };
ActivationFormat activation_format(TensorType weight_type);
// Whether matmul() and get_rows() take this type. Every op below records nothing for n = 0.
bool supports_weight_type(TensorType type) noexcept;

// Bytes of the prepared activations of n rows of `cols` values in `format` (0 for f32: used as they are).
// The layout is the shaders' own (compute/src/vulkan/shaders/quantize_layout.glsl: all the quants, then the
// scales as F32, then Q8_1's sums or Q8_K's bsums), holding the values quantize_row() gives, bit for bit.
std::uint64_t prepared_bytes(ActivationFormat format, std::int64_t n, std::int64_t cols);

// x: n rows of cols F32 values -> prepared: the same in `format` (nothing recorded for f32).
void prepare_activations(OpContext& op, ActivationFormat format, const BufferRange& x, const BufferRange& prepared,
                         std::int64_t n, std::int64_t cols);

// y[t][r] = sum over c of W[r][c] * x[t][c], for t < n and r < w.rows: y is n rows of w.rows F32 values.
// One dispatch: workgroups of 2 weight rows x 1 token (n = 1) or x 8 tokens (batches), each weight group of
// 32 values decoded once per workgroup and met by all its tokens. Throws std::invalid_argument for a type it
// does not take, rows that are not whole blocks, or buffers smaller than the shapes need.
// `prepared` holds x as prepare_activations(activation_format(w.type)) left it (for an f32 format, x itself).
// `barrier`: Barrier::none for a product the next dispatch does not read (q and k before v, recorded back to
// back from one prepared input); the last of them keeps the default.
void matmul_prepared(OpContext& op, const DeviceTensor& w, const BufferRange& prepared, const BufferRange& y,
                     std::int64_t n, Barrier barrier = Barrier::after);

// Both steps: `scratch` must hold prepared_bytes(activation_format(w.type), n, w.cols).
void matmul(OpContext& op, const DeviceTensor& w, const BufferRange& x, const BufferRange& y, std::int64_t n,
            const BufferRange& scratch, Barrier barrier = Barrier::after);

// The order of a product's float additions: the kernels above keep their own (fast), or the CPU backend's
// (pinned: shaders/matmul_pinned.comp, one invocation per output, bit-equal to cpu matmul() for the same
// weights and activations; needs shaderFloat64) for the types pinned_summation_supported() names. A type it
// does not name runs the fast kernels either way.
enum class Summation { fast, pinned };
bool pinned_summation_supported(TensorType type) noexcept;
void matmul_prepared(OpContext& op, const DeviceTensor& w, const BufferRange& prepared, const BufferRange& y,
                     std::int64_t n, Summation summation, Barrier barrier = Barrier::after);
void matmul(OpContext& op, const DeviceTensor& w, const BufferRange& x, const BufferRange& y, std::int64_t n,
            const BufferRange& scratch, Summation summation, Barrier barrier = Barrier::after);

// out[i] = scale * row tokens[i] of `table`, dequantized to F32 (tokens: n int32 ids, each < table.rows; an
// id outside the table gives a row of zeros rather than a read past the buffer), as dequantize_row() does.
void get_rows(OpContext& op, const DeviceTensor& table, const BufferRange& tokens, const BufferRange& out,
              std::int64_t n, float scale = 1.0f);

}  // namespace loom::compute::vulkan
