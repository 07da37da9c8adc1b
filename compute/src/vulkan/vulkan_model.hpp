// The Vulkan backend's model on the device (private to src/vulkan): its weights uploaded once, the paged KV
// storage per layer, the buffers of a step (activations on the device, inputs and outputs host-visible), the
// rotary table the host computes per step, and the recording of a forward pass for one batch shape. The
// forward pass follows LlamaModel::forward (compute/src/cpu/llama_model.cpp) op for op.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <span>
#include <stop_token>
#include <vector>

#include "loom/compute/model/model_weights.hpp"
#include "loom/compute/model_config.hpp"
#include "loom/compute/vulkan/vulkan_buffer.hpp"
#include "loom/compute/vulkan/vulkan_commands.hpp"
#include "loom/compute/vulkan/vulkan_experts.hpp"
#include "loom/compute/vulkan/vulkan_matmul.hpp"
#include "loom/compute/vulkan/vulkan_ops.hpp"
#include "loom/compute/vulkan/vulkan_pinned.hpp"

namespace spdlog {
class logger;
}

namespace loom::compute::vulkan {

// The backend's log ("vulkan", on stderr, at the default logger's level when first used): the load's
// progress lines.
spdlog::logger& logger();

// One layer's tensors on the device; the optional ones are absent where the model has none. A layer with
// experts (vulkan_experts.hpp) has no dense gate, up and down (empty tensors).
struct DeviceLayer {
  BufferRange attn_norm, ffn_norm;
  DeviceTensor wq, wk, wv, wo, gate, up, down;
  std::optional<BufferRange> bq, bk, bv, q_norm, k_norm, post_attn_norm, post_ffn_norm;
  std::optional<DeviceExperts> experts;
};

struct DeviceWeights {
  std::vector<Buffer> buffers;  // one per distinct tensor the model uses
  DeviceTensor token_embd, output;
  BufferRange output_norm;
  std::vector<DeviceLayer> layers;
  std::uint64_t bytes = 0;
};

// The bytes upload_weights() will put on the device.
std::uint64_t weight_bytes(const ModelWeights& weights);
// Uploads every tensor `weights` names once (a tied output shares the embedding's buffer; a layer's experts as
// upload_experts() places them, with `config`'s routing), logging progress
// every tenth of the bytes. Throws DeviceMemoryError when the device runs out of memory, LoadCancelled when
// `stop` is requested between tensors, std::invalid_argument for a tensor type the shaders do not take.
DeviceWeights upload_weights(VulkanContext& context, Uploader& uploader, const ModelConfig& config,
                             const ModelWeights& weights, const std::stop_token& stop);

// The KV blocks of every layer: keys and values in KvLayout order, `blocks` blocks each.
struct KvStorage {
  KvLayout layout;
  std::int64_t blocks = 0;
  std::vector<Buffer> keys, values;  // per layer
  std::uint64_t block_bytes() const;  // one block of one layer's keys (or values)
  std::uint64_t bytes() const { return block_bytes() * 2 * keys.size() * static_cast<std::uint64_t>(blocks); }
};
KvStorage allocate_kv(VulkanContext& context, const ModelConfig& config, TensorType type, std::int64_t block_size,
                      std::int64_t blocks);
std::uint64_t kv_bytes(const ModelConfig& config, TensorType type, std::int64_t block_size, std::int64_t blocks);

// What a recording depends on: the step's tokens, the rows that want logits (the first `full` of them read
// back whole, every one's best token through top_k), and whether the final hidden states come back.
struct StepShape {
  std::int64_t tokens = 0;
  std::int64_t logit_rows = 0;  // rows [0, full_rows) are read back whole, the others as their best candidates
  std::int64_t full_rows = 0;
  std::int64_t candidates = 1;  // per candidate row: 1 (only greedy rows) or kMaxTopK
  bool hidden = false;
  auto operator<=>(const StepShape&) const = default;
};

// The buffers of a step, sized for `max_batch` tokens (and as many logit rows).
struct StepBuffers {
  // Device-local activations.
  Buffer x, xn, q, k, v, attn, gate, up, prepared, attention_scratch, logits;
  Buffer experts;  // the mixture-of-experts feed-forward's scratch (expert_scratch_bytes; 4 bytes without)
  // Host-visible inputs: token ids, rotary tables (cos, sin per pair), KV slots, attention's token info, the
  // block tables of the step's sequences, the token index of each logit row.
  Buffer tokens, rotation, rotation_swa, slots, token_info, tables, logit_rows;
  Buffer identity;  // 0, 1, 2, ...: gathers whole logit rows into logits_out
  // Host-visible outputs: whole logit rows, the other rows' best (token, logit) pairs (up to kMaxTopK of
  // each), the final hidden states.
  Buffer logits_out, candidates_out, hidden_out;
  std::int64_t max_batch = 0;
  std::int64_t max_table_entries = 0;
  // The CPU's pinned arithmetic (vulkan_pinned.hpp) for attention and SwiGLU, in `lanes`' orders, and its
  // products' summation orders (Summation::pinned); off (the online-softmax attention, the device's exp, the
  // tiled products) where the device lacks shaderFloat64. GeGLU always reads
  // the CPU's table (gelu_table, device-local, for gelu models).
  bool pinned = false;
  LaneWidth lanes = LaneWidth::avx512;
  Buffer gelu_table;
};
// `pinned`: the step starts in the pinned arithmetic, its attention scratch sized for it (else for the online
// attention; VulkanBackend::set_pinned_arithmetic grows it when asked later).
StepBuffers allocate_step_buffers(VulkanContext& context, const ModelConfig& config, const DeviceWeights& weights,
                                  const KvLayout& layout, std::int64_t max_batch, std::int64_t max_table_entries,
                                  bool pinned);

// The cosine and sine of each rotary pair's angle per position, exactly as LlamaModel::rotation_angles
// computes them (repeated multiplication in float, linear scaling, llama3 frequency factors or LongRoPE's,
// attn_factor), with the sliding-window layers' own base where the model has one.
class RotationTable {
 public:
  RotationTable(const ModelConfig& config, const ModelWeights& weights);
  bool has_swa() const noexcept { return theta_step_swa_ > 0.0f; }
  // positions.size() rows of head_dim / 2 (cos, sin) pairs.
  void fill(std::span<const std::int64_t> positions, bool swa, float* out) const;

 private:
  std::int64_t pairs_ = 0;
  float theta_step_ = 1.0f;
  float position_scale_ = 1.0f;
  float theta_step_swa_ = 0.0f;
  std::vector<float> frequency_factor_;
  float rotation_scale_ = 1.0f;
};

// Records the forward pass of a step of `shape` into op.recording (begin() and end() are the caller's).
void record_forward(OpContext& op, const ModelConfig& config, const DeviceWeights& weights, const KvStorage& kv,
                    const StepBuffers& buffers, bool rotation_swa, const StepShape& shape);

}  // namespace loom::compute::vulkan
