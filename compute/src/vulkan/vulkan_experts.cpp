// The host side of the Vulkan mixture-of-experts feed-forward (vulkan_experts.hpp): the experts' upload, the
// scratch layout of a step, and the dispatches of shaders/moe_route.comp, matmul_experts*.comp (matmul_body.glsl
// with MATMUL_EXPERTS) and moe_combine.comp, around vulkan_matmul.hpp's products for the router and the
// shared expert.
#include "loom/compute/vulkan/vulkan_experts.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>

#include "loom/compute/vulkan/vulkan_ops.hpp"
#include "loom/compute/vulkan/vulkan_pinned.hpp"
#include "vulkan_experts_detail.hpp"

namespace loom::compute::vulkan {
namespace {

constexpr std::uint32_t kWorkgroup = 64;  // as the matmul shaders' (matmul_body.glsl sizes its sums for 64)
constexpr std::uint32_t kRowsPerTile = 2;
constexpr std::uint64_t kAlignment = 256;  // every device's minStorageBufferOffsetAlignment or a multiple of it
constexpr std::uint32_t kMaxGroups = 65535;

struct ExpertsPush {
  std::uint32_t rows, cols, n, row_bytes, tiles_x, slots, slots_per_input, experts, first_slot;
};
struct RoutePush {
  std::uint32_t n, experts, used, normalize;
};
struct CombinePush {
  std::uint32_t n, dim, used, shared_mode;
};

std::uint32_t to_u32(std::uint64_t value, const char* what) {
  if (value > std::numeric_limits<std::uint32_t>::max()) {
    throw std::invalid_argument(std::string("vulkan experts: ") + what + " (" + std::to_string(value) +
                                ") does not fit the shaders' 32-bit indices");
  }
  return static_cast<std::uint32_t>(value);
}

void require_bytes(const BufferRange& range, std::uint64_t bytes, const char* what) {
  if (range.bytes < bytes) {
    throw std::invalid_argument(std::string("vulkan experts: ") + what + " holds " + std::to_string(range.bytes) +
                                " bytes, needs " + std::to_string(bytes));
  }
}

std::uint64_t floats(std::int64_t rows, std::int64_t width) {
  return 4 * static_cast<std::uint64_t>(rows) * static_cast<std::uint64_t>(width);
}

std::uint64_t aligned(std::uint64_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

// Bytes of `rows` rows of w's input prepared for w (0 for F32 inputs, which are used as they are).
std::uint64_t prepared_for(const DeviceTensor& w, std::int64_t rows) {
  return prepared_bytes(activation_format(w.type), rows, w.cols);
}

// Where a step of n tokens keeps its intermediate values inside the scratch buffer: each part at a 256-byte
// aligned offset, the parts in a fixed order so that a larger n only moves them further out.
struct ScratchLayout {
  struct Part {
    std::uint64_t offset = 0, bytes = 0;
  };
  Part logits, choices, gate, up, out, prepared, shared_gate, shared_up, shared_out, shared_logit;
  std::uint64_t total = 0;

  ScratchLayout(const DeviceExperts& e, std::int64_t n) {
    const std::int64_t slots = n * e.used, dim = e.router.cols, width = e.gate.rows;
    std::uint64_t prepared_max = std::max({prepared_for(e.gate, n), prepared_for(e.up, n), prepared_for(e.down, slots)});
    if (e.shared) {
      const DeviceSharedExpert& s = *e.shared;
      prepared_max = std::max({prepared_max, prepared_for(s.gate, n), prepared_for(s.up, n), prepared_for(s.down, n)});
      if (s.gate_input) prepared_max = std::max(prepared_max, prepared_for(*s.gate_input, n));
    }
    place(logits, floats(n, e.count));
    place(choices, 8 * static_cast<std::uint64_t>(slots));
    place(gate, floats(slots, width));
    place(up, floats(slots, width));
    place(out, floats(slots, dim));
    place(prepared, std::max<std::uint64_t>(prepared_max, 4));
    if (e.shared) {
      place(shared_gate, floats(n, e.shared->gate.rows));
      place(shared_up, floats(n, e.shared->gate.rows));
      place(shared_out, floats(n, dim));
      place(shared_logit, floats(n, 1));
    }
  }

  BufferRange range(const BufferRange& scratch, const Part& part) const { return scratch.sub(part.offset, part.bytes); }

 private:
  void place(Part& part, std::uint64_t bytes) {
    part = {total, bytes};
    total = aligned(total + bytes);
  }
};

// w's products of `rows` rows of x (F32): prepared once into `prepared` (or x itself for F32 weights).
BufferRange prepare_for(OpContext& op, const DeviceTensor& w, const BufferRange& x, const BufferRange& prepared,
                        std::int64_t rows) {
  const ActivationFormat format = activation_format(w.type);
  if (format == ActivationFormat::f32) return x;
  const BufferRange target = prepared.sub(0, prepared_bytes(format, rows, w.cols));
  prepare_activations(op, format, x, target, rows, w.cols);
  return target;
}

// gate, up and down of one SwiGLU expert per slot (shared: the same matrices for every token, slots = n).
// gate = silu(gate) * up over rows of `width`: the CPU's pinned form when lanes are given.
void gated(OpContext& op, const BufferRange& gate, const BufferRange& up, std::int64_t rows, std::int64_t width,
           std::optional<LaneWidth> lanes) {
  if (lanes) return swiglu_pinned(op, gate, up, rows, width, *lanes);
  swiglu(op, gate, up, rows * width);
}

void shared_expert(OpContext& op, const DeviceSharedExpert& s, const BufferRange& xn, std::int64_t n,
                   const ScratchLayout& layout, const BufferRange& scratch, std::optional<LaneWidth> lanes) {
  const BufferRange prepared = layout.range(scratch, layout.prepared);
  const BufferRange gate = layout.range(scratch, layout.shared_gate), up = layout.range(scratch, layout.shared_up);
  const Summation summation = lanes ? Summation::pinned : Summation::fast;  // pinned with the SwiGLU
  matmul(op, s.gate, xn, gate, n, prepared, summation);
  matmul(op, s.up, xn, up, n, prepared, summation);
  if (s.gate_input) matmul(op, *s.gate_input, xn, layout.range(scratch, layout.shared_logit), n, prepared, summation);
  gated(op, gate, up, n, s.gate.rows, lanes);
  matmul(op, s.down, gate, layout.range(scratch, layout.shared_out), n, prepared, summation);
}

}  // namespace

void route_experts(OpContext& op, const BufferRange& logits, std::int64_t n, std::int64_t experts, std::int64_t used,
                   bool normalize, const BufferRange& choices) {
  if (n == 0) return;
  if (n < 0 || experts <= 0 || used <= 0 || used > experts) {
    throw std::invalid_argument("vulkan route_experts: needs 1 <= used (" + std::to_string(used) + ") <= experts (" +
                                std::to_string(experts) + ") and n >= 0");
  }
  require_bytes(logits, floats(n, experts), "the router logits");
  require_bytes(choices, 8 * static_cast<std::uint64_t>(n) * static_cast<std::uint64_t>(used), "the choices");
  to_u32(static_cast<std::uint64_t>(n) * static_cast<std::uint64_t>(experts), "the logit count");
  const std::uint64_t groups = (static_cast<std::uint64_t>(n) + kWorkgroup - 1) / kWorkgroup;
  if (groups > kMaxGroups) throw std::invalid_argument("vulkan route_experts: too many tokens at once");
  const std::array<std::uint32_t, 1> spec{kWorkgroup};
  const auto& pipeline = op.pipelines.get("moe_route", 2, sizeof(RoutePush), spec);
  const RoutePush push{static_cast<std::uint32_t>(n), static_cast<std::uint32_t>(experts),
                       static_cast<std::uint32_t>(used), normalize ? 1u : 0u};
  op.recording.dispatch(pipeline, {logits, choices}, push, static_cast<std::uint32_t>(groups));
}

void matmul_experts_prepared(OpContext& op, const DeviceTensor& w, std::int64_t experts, const BufferRange& choices,
                             const BufferRange& prepared, const BufferRange& y, std::int64_t inputs,
                             std::int64_t slots, Barrier barrier) {
  detail::matmul_experts_prepared(op, w, experts, choices, prepared, y, inputs, slots, detail::Reduction::automatic, 0,
                                  barrier);
}

void detail::matmul_experts_prepared(OpContext& op, const DeviceTensor& w, std::int64_t experts,
                                     const BufferRange& choices, const BufferRange& prepared, const BufferRange& y,
                                     std::int64_t inputs, std::int64_t slots, Reduction reduction,
                                     std::uint32_t max_slots_per_dispatch, Barrier barrier) {
  if (slots == 0) return;
  if (!supports_weight_type(w.type)) {
    throw std::invalid_argument("vulkan matmul_experts: weight type " + std::string(name(w.type)) + " is not supported");
  }
  if (w.rows <= 0 || w.cols <= 0 || experts <= 0 || inputs <= 0 || slots < 0 || slots % inputs != 0) {
    throw std::invalid_argument("vulkan matmul_experts: needs a non-empty tensor, experts > 0 and slots (" +
                                std::to_string(slots) + ") a multiple of the inputs (" + std::to_string(inputs) + ")");
  }
  const auto row_bytes = tensor_bytes(w.type, static_cast<std::uint64_t>(w.cols));
  if (!row_bytes) throw std::invalid_argument("vulkan matmul_experts: a row is not a whole number of blocks");
  const std::uint64_t matrix_rows = static_cast<std::uint64_t>(w.rows) * static_cast<std::uint64_t>(experts);
  require_bytes(w.data, *row_bytes * matrix_rows, "the expert weights");
  to_u32(*row_bytes * matrix_rows, "the expert weights' bytes");
  to_u32(matrix_rows * static_cast<std::uint64_t>(w.cols), "the expert weights' values");
  const ActivationFormat format = activation_format(w.type);
  require_bytes(prepared, format == ActivationFormat::f32 ? floats(inputs, w.cols) : prepared_bytes(format, inputs, w.cols),
                "the prepared activations");
  require_bytes(choices, 8 * static_cast<std::uint64_t>(slots), "the choices");
  require_bytes(y, floats(slots, w.rows), "the output");
  to_u32(floats(slots, w.rows), "the output's bytes");
  to_u32(floats(inputs, w.cols), "the activations' bytes");
  const auto& limits = op.pipelines.context().description().max_workgroup_count;

  const DeviceDescription& device = op.pipelines.context().description();
  const bool subgroups_usable = device.subgroup_arithmetic && device.subgroup_size >= kWorkgroup / 16;
  const bool subgroups = reduction == Reduction::automatic ? subgroups_usable : reduction == Reduction::subgroup;
  if (subgroups && !subgroups_usable) {
    throw std::invalid_argument("vulkan matmul_experts: this device has no subgroup arithmetic on subgroups of 4 or more");
  }
  // One output row per workgroup row (TOKENS = 1): every slot has its own matrix.
  const std::array<std::uint32_t, 4> spec{kWorkgroup, static_cast<std::uint32_t>(w.type), kRowsPerTile, 1};
  const auto& pipeline =
      op.pipelines.get(subgroups ? "matmul_experts" : "matmul_experts_shmem", 4, sizeof(ExpertsPush), spec);
  const std::uint64_t tiles = (static_cast<std::uint64_t>(w.rows) + kRowsPerTile - 1) / kRowsPerTile;
  const std::uint64_t max_x = std::max<std::uint32_t>(1, limits[0]);
  const auto tiles_x = static_cast<std::uint32_t>(std::min(tiles, max_x));
  const std::uint32_t wrap = to_u32((tiles + tiles_x - 1) / tiles_x, "the workgroup count");
  ExpertsPush push{static_cast<std::uint32_t>(w.rows), static_cast<std::uint32_t>(w.cols),
                   static_cast<std::uint32_t>(inputs), static_cast<std::uint32_t>(*row_bytes), tiles_x,
                   static_cast<std::uint32_t>(slots), static_cast<std::uint32_t>(slots / inputs),
                   static_cast<std::uint32_t>(experts), 0};
  // A slot per workgroup row: more slots than the device's y limit (a batch of 65536 tokens x 8 experts) take
  // several dispatches, none of which reads what another writes.
  std::uint32_t max_y = std::max<std::uint32_t>(1, std::min<std::uint32_t>(limits[1], kMaxGroups));
  if (max_slots_per_dispatch > 0) max_y = std::min(max_y, max_slots_per_dispatch);
  while (push.first_slot < push.slots) {
    const std::uint32_t count = std::min(max_y, push.slots - push.first_slot);
    const bool last = push.first_slot + count == push.slots;
    op.recording.dispatch(pipeline, {w.data, prepared, y, choices}, push, tiles_x, count, wrap,
                          last ? barrier : Barrier::none);
    push.first_slot += count;
  }
}

void combine_experts(OpContext& op, const BufferRange& residual, const BufferRange& slot_out, const BufferRange& choices,
                     const std::optional<BufferRange>& shared_out, const std::optional<BufferRange>& shared_gate,
                     std::int64_t n, std::int64_t dim, std::int64_t used) {
  if (n == 0) return;
  if (n < 0 || dim <= 0 || used <= 0) throw std::invalid_argument("vulkan combine_experts: empty shape");
  require_bytes(residual, floats(n, dim), "the residual");
  require_bytes(slot_out, floats(n * used, dim), "the experts' outputs");
  require_bytes(choices, 8 * static_cast<std::uint64_t>(n * used), "the choices");
  if (shared_out) require_bytes(*shared_out, floats(n, dim), "the shared expert's output");
  if (shared_gate) require_bytes(*shared_gate, floats(n, 1), "the shared expert's gate");
  to_u32(floats(n * used, dim), "the experts' outputs' bytes");
  const std::uint32_t mode = !shared_out ? 0u : shared_gate ? 2u : 1u;
  const std::array<std::uint32_t, 1> spec{kWorkgroup};
  const auto& pipeline = op.pipelines.get("moe_combine", 5, sizeof(CombinePush), spec);
  const std::uint64_t groups = std::min<std::uint64_t>((static_cast<std::uint64_t>(n * dim) + kWorkgroup - 1) / kWorkgroup, kMaxGroups);
  const CombinePush push{static_cast<std::uint32_t>(n), static_cast<std::uint32_t>(dim), static_cast<std::uint32_t>(used),
                         mode};
  // Absent inputs are bound to a buffer the shader does not read in that mode.
  op.recording.dispatch(pipeline, {residual, slot_out, choices, shared_out.value_or(slot_out), shared_gate.value_or(choices)},
                        push, static_cast<std::uint32_t>(groups));
}

std::uint64_t expert_scratch_bytes(const DeviceExperts& experts, std::int64_t max_batch) {
  return ScratchLayout(experts, std::max<std::int64_t>(max_batch, 1)).total;
}

void expert_feed_forward(OpContext& op, const DeviceExperts& e, const BufferRange& xn, const BufferRange& residual,
                         std::int64_t n, const BufferRange& scratch, std::optional<LaneWidth> pinned_lanes) {
  if (n == 0) return;
  const ScratchLayout layout(e, n);
  require_bytes(scratch, layout.total, "the scratch");
  const std::int64_t slots = n * e.used, dim = e.router.cols, width = e.gate.rows;
  const BufferRange prepared = layout.range(scratch, layout.prepared);
  const BufferRange logits = layout.range(scratch, layout.logits), choices = layout.range(scratch, layout.choices);
  const BufferRange gate = layout.range(scratch, layout.gate), up = layout.range(scratch, layout.up);
  const BufferRange out = layout.range(scratch, layout.out);

  matmul(op, e.router, xn, logits, n, prepared, pinned_lanes ? Summation::pinned : Summation::fast);
  route_experts(op, logits, n, e.count, e.used, e.normalize, choices);
  // gate and up share their prepared input when they take the same form (always, in the files we know).
  const bool same_form = activation_format(e.gate.type) == activation_format(e.up.type);
  BufferRange input = prepare_for(op, e.gate, xn, prepared, n);
  matmul_experts_prepared(op, e.gate, e.count, choices, input, gate, n, slots, same_form ? Barrier::none : Barrier::after);
  if (!same_form) input = prepare_for(op, e.up, xn, prepared, n);
  matmul_experts_prepared(op, e.up, e.count, choices, input, up, n, slots);
  gated(op, gate, up, slots, width, pinned_lanes);
  input = prepare_for(op, e.down, gate, prepared, slots);
  matmul_experts_prepared(op, e.down, e.count, choices, input, out, slots, slots);

  std::optional<BufferRange> shared_out, shared_gate;
  if (e.shared) {
    shared_expert(op, *e.shared, xn, n, layout, scratch, pinned_lanes);
    shared_out = layout.range(scratch, layout.shared_out);
    if (e.shared->gate_input) shared_gate = layout.range(scratch, layout.shared_logit);
  }
  combine_experts(op, residual, out, choices, shared_out, shared_gate, n, dim, e.used);
}

}  // namespace loom::compute::vulkan
