// The host side of the Vulkan matrix products (vulkan_matmul.hpp): checks the shapes, picks the pipelines
// and records the dispatches. The shaders: shaders/quantize_*.comp (activations), shaders/matmul*.comp with
// matmul_body.glsl and dequant_group.glsl (products), shaders/get_rows.comp (embedding lookup).
#include "loom/compute/vulkan/vulkan_matmul.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <stdexcept>
#include <string>

#include "vulkan_matmul_detail.hpp"

namespace loom::compute::vulkan {
namespace {

// Threads per workgroup of every shader here: a power of two (matmul_shmem's tree) within the 128
// invocations every Vulkan device allows, and a whole number of subgroups on common devices (8 to 64).
constexpr std::uint32_t kWorkgroup = 64;
// The matmul tile: weight rows per workgroup, and tokens per workgroup for batches (matmul_body.glsl's
// MAX_ROWS / MAX_TOKENS bound them). Each decoded weight group meets the tile's tokens before the next.
constexpr std::uint32_t kRowsPerTile = 2;
constexpr std::uint32_t kTokensPerTile = 8;

struct MatmulPush {
  std::uint32_t rows, cols, n, row_bytes, tiles_x;
};
struct QuantizePush {
  std::uint32_t n, cols;
};
struct CountPush {
  std::uint32_t count;
};
struct GetRowsPush {
  std::uint32_t rows, cols, row_bytes;
  float scale;
};

std::string type_name(TensorType type) { return std::string(name(type)); }

// Shader sizes are 32-bit: every count and byte offset a shader computes must fit.
std::uint32_t to_u32(std::uint64_t value, const char* what) {
  if (value > std::numeric_limits<std::uint32_t>::max()) {
    throw std::invalid_argument(std::string("vulkan matmul: ") + what + " (" + std::to_string(value) +
                                ") does not fit the shaders' 32-bit indices");
  }
  return static_cast<std::uint32_t>(value);
}

void require_bytes(const BufferRange& range, std::uint64_t bytes, const char* what) {
  if (range.bytes < bytes) {
    throw std::invalid_argument(std::string("vulkan matmul: ") + what + " holds " + std::to_string(range.bytes) +
                                " bytes, needs " + std::to_string(bytes));
  }
}

std::uint64_t row_bytes(const DeviceTensor& w) {
  const auto bytes = tensor_bytes(w.type, static_cast<std::uint64_t>(w.cols));
  if (!bytes) {
    throw std::invalid_argument("vulkan matmul: " + std::to_string(w.cols) + " columns is not a whole number of " +
                                type_name(w.type) + " blocks");
  }
  return *bytes;
}

// The checks every use of a weight tensor needs; returns its row's bytes.
std::uint32_t check_tensor(const DeviceTensor& w, const char* what) {
  if (!supports_weight_type(w.type)) {
    throw std::invalid_argument(std::string("vulkan ") + what + ": weight type " + type_name(w.type) + " is not supported");
  }
  if (w.rows <= 0 || w.cols <= 0) {
    throw std::invalid_argument(std::string("vulkan ") + what + ": empty tensor (" + std::to_string(w.rows) + " x " +
                                std::to_string(w.cols) + ")");
  }
  const std::uint64_t bytes = row_bytes(w);
  const std::uint64_t total = bytes * static_cast<std::uint64_t>(w.rows);
  require_bytes(w.data, total, "the weight buffer");
  to_u32(total, "the weight tensor's bytes");
  to_u32(static_cast<std::uint64_t>(w.rows) * static_cast<std::uint64_t>(w.cols), "the weight tensor's values");
  return static_cast<std::uint32_t>(bytes);
}

// Workgroups for `count` items of `per_group` each, spread over x and a second axis when x would pass the
// device's limit (the shaders rebuild the linear index).
struct Grid {
  std::uint32_t x, wrap;
};

Grid grid_for(const OpContext& op, std::uint64_t groups) {
  const auto& limits = op.pipelines.context().description().max_workgroup_count;
  const std::uint64_t max_x = std::max<std::uint32_t>(1, limits[0]);
  const std::uint64_t x = std::min(std::max<std::uint64_t>(groups, 1), max_x);
  return {static_cast<std::uint32_t>(x), to_u32((groups + x - 1) / x, "the workgroup count")};
}

std::uint64_t values(std::int64_t n, std::int64_t cols) {
  if (n <= 0 || cols <= 0) {
    throw std::invalid_argument("vulkan matmul: " + std::to_string(n) + " rows of " + std::to_string(cols) +
                                " values is empty");
  }
  return static_cast<std::uint64_t>(n) * static_cast<std::uint64_t>(cols);
}

std::int64_t block_values(ActivationFormat format) {
  switch (format) {
    case ActivationFormat::q8_0:
    case ActivationFormat::q8_1:
      return 32;
    case ActivationFormat::q8_k:
      return 256;
    default:
      return 1;
  }
}

}  // namespace

ActivationFormat activation_format(TensorType weight_type) {
  switch (weight_type) {
    case TensorType::f32:
    case TensorType::bf16:
      return ActivationFormat::f32;
    case TensorType::f16:
      return ActivationFormat::f16;
    case TensorType::q8_0:
    case TensorType::q4_0:
    case TensorType::q5_0:
    case TensorType::iq4_nl:
      return ActivationFormat::q8_0;
    case TensorType::q4_1:
    case TensorType::q5_1:
      return ActivationFormat::q8_1;
    case TensorType::q2_k:
    case TensorType::q3_k:
    case TensorType::q4_k:
    case TensorType::q5_k:
    case TensorType::q6_k:
    case TensorType::iq4_xs:
      return ActivationFormat::q8_k;
    default:
      throw std::invalid_argument("vulkan matmul: weight type " + type_name(weight_type) + " is not supported");
  }
}

bool supports_weight_type(TensorType type) noexcept {
  switch (type) {
    case TensorType::f32:
    case TensorType::f16:
    case TensorType::bf16:
    case TensorType::q8_0:
    case TensorType::q4_0:
    case TensorType::q4_1:
    case TensorType::q5_0:
    case TensorType::q5_1:
    case TensorType::iq4_nl:
    case TensorType::q2_k:
    case TensorType::q3_k:
    case TensorType::q4_k:
    case TensorType::q5_k:
    case TensorType::q6_k:
    case TensorType::iq4_xs:
      return true;
    default:
      return false;
  }
}

// quantize_layout.glsl: the quants (one byte per value), then one F32 scale per block, then Q8_1's sums
// (one F32 per block) or Q8_K's bsums (one int32 per 16 values). F16: the rounded values as F32.
std::uint64_t prepared_bytes(ActivationFormat format, std::int64_t n, std::int64_t cols) {
  const std::uint64_t count = values(n, cols);
  switch (format) {
    case ActivationFormat::f32:
      return 0;
    case ActivationFormat::f16:
      return 4 * count;
    case ActivationFormat::q8_0:
      return count + 4 * (count / 32);
    case ActivationFormat::q8_1:
      return count + 8 * (count / 32);
    case ActivationFormat::q8_k:
      return count + 4 * (count / 256) + 4 * (count / 16);
  }
  return 0;
}

void prepare_activations(OpContext& op, ActivationFormat format, const BufferRange& x, const BufferRange& prepared,
                         std::int64_t n, std::int64_t cols) {
  if (n == 0) return;
  const std::uint64_t count = values(n, cols);
  if (format == ActivationFormat::f32) return;
  if (cols % block_values(format) != 0) {
    throw std::invalid_argument("vulkan prepare_activations: " + std::to_string(cols) + " columns is not a whole number of " +
                                std::to_string(block_values(format)) + "-value blocks");
  }
  require_bytes(x, 4 * count, "the activations");
  require_bytes(prepared, prepared_bytes(format, n, cols), "the prepared activations");
  to_u32(count, "the activation count");
  if (format == ActivationFormat::f16) {
    const std::array<std::uint32_t, 1> spec{kWorkgroup};
    const auto& pipeline = op.pipelines.get("quantize_f16", 2, sizeof(CountPush), spec);
    const Grid grid = grid_for(op, (count + kWorkgroup - 1) / kWorkgroup);
    op.recording.dispatch(pipeline, {x, prepared}, CountPush{static_cast<std::uint32_t>(count)}, grid.x, grid.wrap);
    return;
  }
  const QuantizePush push{to_u32(static_cast<std::uint64_t>(n), "n"), to_u32(static_cast<std::uint64_t>(cols), "cols")};
  const std::uint64_t blocks = count / static_cast<std::uint64_t>(block_values(format));
  if (format == ActivationFormat::q8_k) {  // a workgroup per 256-value block
    const Grid grid = grid_for(op, blocks);
    op.recording.dispatch(op.pipelines.get("quantize_q8_k", 2, sizeof(QuantizePush)), {x, prepared}, push, grid.x,
                          grid.wrap);
    return;
  }
  const Grid grid = grid_for(op, (blocks + 7) / 8);  // 8 threads per 32-value block, 8 blocks per workgroup
  const std::array<std::uint32_t, 1> spec{format == ActivationFormat::q8_1 ? 1u : 0u};
  op.recording.dispatch(op.pipelines.get("quantize_q8", 2, sizeof(QuantizePush), spec), {x, prepared}, push, grid.x,
                        grid.wrap);
}

void matmul_prepared(OpContext& op, const DeviceTensor& w, const BufferRange& prepared, const BufferRange& y,
                     std::int64_t n, Barrier barrier) {
  detail::matmul_prepared(op, w, prepared, y, n, detail::Reduction::automatic, barrier);
}

void detail::matmul_prepared(OpContext& op, const DeviceTensor& w, const BufferRange& prepared, const BufferRange& y,
                             std::int64_t n, Reduction reduction, Barrier barrier) {
  if (n == 0) return;
  const std::uint32_t bytes_per_row = check_tensor(w, "matmul");
  const ActivationFormat format = activation_format(w.type);
  const std::uint64_t count = values(n, w.cols);
  require_bytes(prepared, format == ActivationFormat::f32 ? 4 * count : prepared_bytes(format, n, w.cols),
                "the prepared activations");
  require_bytes(y, 4 * values(n, w.rows), "the output");
  to_u32(4 * count, "the activations' bytes");
  to_u32(values(n, w.rows), "the output count");

  const std::uint32_t tokens_per_tile = n == 1 ? 1 : kTokensPerTile;
  // matmul.comp keeps one partial sum per subgroup for at most 16 subgroups: subgroups of 4 threads or more.
  const DeviceDescription& device = op.pipelines.context().description();
  const bool subgroups_usable = device.subgroup_arithmetic && device.subgroup_size >= kWorkgroup / 16;
  const bool subgroups = reduction == Reduction::automatic ? subgroups_usable : reduction == Reduction::subgroup;
  if (subgroups && !subgroups_usable) {
    throw std::invalid_argument("vulkan matmul: this device has no subgroup arithmetic on subgroups of 4 or more");
  }
  const std::array<std::uint32_t, 4> spec{kWorkgroup, static_cast<std::uint32_t>(w.type), kRowsPerTile, tokens_per_tile};
  const auto& pipeline = op.pipelines.get(subgroups ? "matmul" : "matmul_shmem", 3, sizeof(MatmulPush), spec);
  const std::uint64_t tiles = (static_cast<std::uint64_t>(w.rows) + kRowsPerTile - 1) / kRowsPerTile;
  const Grid grid = grid_for(op, tiles);
  const MatmulPush push{static_cast<std::uint32_t>(w.rows), static_cast<std::uint32_t>(w.cols),
                        static_cast<std::uint32_t>(n), bytes_per_row, grid.x};
  const std::uint32_t token_tiles = to_u32((static_cast<std::uint64_t>(n) + tokens_per_tile - 1) / tokens_per_tile,
                                           "the token tiles");
  op.recording.dispatch(pipeline, {w.data, prepared, y}, push, grid.x, token_tiles, grid.wrap, barrier);
}

bool pinned_summation_supported(TensorType type) noexcept {
  // Every quantized weight type; the float types' products are not pinned (compute/README.md).
  return supports_weight_type(type) && type != TensorType::f32 && type != TensorType::f16 && type != TensorType::bf16;
}

void matmul_prepared(OpContext& op, const DeviceTensor& w, const BufferRange& prepared, const BufferRange& y,
                     std::int64_t n, Summation summation, Barrier barrier) {
  if (summation == Summation::fast || !pinned_summation_supported(w.type)) {
    return detail::matmul_prepared(op, w, prepared, y, n, detail::Reduction::automatic, barrier);
  }
  if (n == 0) return;
  const std::uint32_t bytes_per_row = check_tensor(w, "matmul");
  require_bytes(prepared, prepared_bytes(activation_format(w.type), n, w.cols), "the prepared activations");
  require_bytes(y, 4 * values(n, w.rows), "the output");
  to_u32(values(n, w.rows), "the output count");
  const auto& limits = op.pipelines.context().description().max_workgroup_count;
  if (static_cast<std::uint64_t>(n) > limits[1]) {  // one workgroup row per token
    throw std::invalid_argument("vulkan matmul (pinned): " + std::to_string(n) + " tokens at once, the device takes at most " +
                                std::to_string(limits[1]));
  }
  const std::array<std::uint32_t, 2> spec{kWorkgroup, static_cast<std::uint32_t>(w.type)};
  const auto& pipeline = op.pipelines.get("matmul_pinned", 3, sizeof(MatmulPush), spec);
  const Grid grid = grid_for(op, (static_cast<std::uint64_t>(w.rows) + kWorkgroup - 1) / kWorkgroup);
  const MatmulPush push{static_cast<std::uint32_t>(w.rows), static_cast<std::uint32_t>(w.cols),
                        static_cast<std::uint32_t>(n), bytes_per_row, grid.x};
  op.recording.dispatch(pipeline, {w.data, prepared, y}, push, grid.x, static_cast<std::uint32_t>(n), grid.wrap,
                        barrier);
}

void matmul(OpContext& op, const DeviceTensor& w, const BufferRange& x, const BufferRange& y, std::int64_t n,
            const BufferRange& scratch, Summation summation, Barrier barrier) {
  if (n == 0) return;
  const ActivationFormat format = activation_format(w.type);
  if (format == ActivationFormat::f32) return matmul_prepared(op, w, x, y, n, summation, barrier);
  prepare_activations(op, format, x, scratch, n, w.cols);
  matmul_prepared(op, w, scratch, y, n, summation, barrier);
}

void matmul(OpContext& op, const DeviceTensor& w, const BufferRange& x, const BufferRange& y, std::int64_t n,
            const BufferRange& scratch, Barrier barrier) {
  if (n == 0) return;
  const ActivationFormat format = activation_format(w.type);
  if (format == ActivationFormat::f32) return matmul_prepared(op, w, x, y, n, barrier);
  prepare_activations(op, format, x, scratch, n, w.cols);
  matmul_prepared(op, w, scratch, y, n, barrier);
}

void get_rows(OpContext& op, const DeviceTensor& table, const BufferRange& tokens, const BufferRange& out,
              std::int64_t n, float scale) {
  if (n == 0) return;
  const std::uint32_t bytes_per_row = check_tensor(table, "get_rows");
  require_bytes(tokens, 4 * static_cast<std::uint64_t>(std::max<std::int64_t>(n, 0)), "the token ids");
  require_bytes(out, 4 * values(n, table.cols), "the output");
  to_u32(values(n, table.cols), "the output count");
  const auto& limits = op.pipelines.context().description().max_workgroup_count;
  if (static_cast<std::uint64_t>(n) > limits[1]) {
    throw std::invalid_argument("vulkan get_rows: " + std::to_string(n) + " rows at once, the device takes at most " +
                                std::to_string(limits[1]));
  }
  const std::array<std::uint32_t, 2> spec{kWorkgroup, static_cast<std::uint32_t>(table.type)};
  const auto& pipeline = op.pipelines.get("get_rows", 3, sizeof(GetRowsPush), spec);
  const std::uint64_t groups_per_row = (static_cast<std::uint64_t>(table.cols) + 31) / 32;
  const GetRowsPush push{static_cast<std::uint32_t>(table.rows), static_cast<std::uint32_t>(table.cols), bytes_per_row,
                         scale};
  op.recording.dispatch(pipeline, {table.data, tokens, out}, push,
                        static_cast<std::uint32_t>((groups_per_row + kWorkgroup - 1) / kWorkgroup),
                        static_cast<std::uint32_t>(n));
}

}  // namespace loom::compute::vulkan
