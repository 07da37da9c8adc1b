// The Vulkan backend's mixture-of-experts feed-forward (qwen2moe, qwen3moe, Mixtral-style llama), the device
// form of the CPU's ExpertFeedForward (compute/include/loom/compute/cpu/expert_feed_forward.hpp): the F32
// router product, a softmax and top-`used` choice per token on the device (ties to the lower index, weights
// renormalized where the config says), each chosen expert's SwiGLU products through an expert-indexed matmul
// that reads only the chosen experts' rows, and each token's weighted outputs added to the residual in its
// choice order, plus qwen2moe's shared expert behind its sigmoid gate. The choices never leave the device, so
// a step's recording stays valid whatever its tokens pick.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "loom/compute/cpu/attention.hpp"
#include "loom/compute/model/model_weights.hpp"
#include "loom/compute/model_config.hpp"
#include "loom/compute/vulkan/vulkan_buffer.hpp"
#include "loom/compute/vulkan/vulkan_matmul.hpp"

namespace loom::compute::vulkan {

// One always-on SwiGLU expert (qwen2moe's *_shexp), with its optional [dim] gate vector (a 1-row product).
struct DeviceSharedExpert {
  DeviceTensor gate, up, down;
  std::optional<DeviceTensor> gate_input;
};

// One layer's experts on the device. gate, up and down have one expert's shape (rows x cols) and data holding
// `count` such matrices back to back in expert order.
struct DeviceExperts {
  std::int64_t count = 0;
  std::int64_t used = 0;
  bool normalize = true;
  DeviceTensor router;  // F32 [count][dim]
  DeviceTensor gate, up, down;
  std::optional<DeviceSharedExpert> shared;
};

// The device bytes upload_experts() puts there for one layer (router, experts, shared expert).
std::uint64_t expert_weight_bytes(const LayerWeights& layer);
// Uploads a layer's router and experts (each of gate/up/down into one buffer, expert after expert, whether the
// file stores them as a 3-D tensor or as one tensor per expert); the buffers are appended to `owner`, which
// must outlive the result. Throws std::invalid_argument for a type the products do not take, experts of
// mixed types, or a router that is not F32.
DeviceExperts upload_experts(VulkanContext& context, Uploader& uploader, const ModelConfig& config,
                             const LayerWeights& layer, std::vector<Buffer>& owner);

// logits: n rows of `experts` F32 router logits, left holding the probabilities (chosen ones -1). choices:
// n rows of `used` (int32 expert, float weight) pairs, highest weight first, ties to the lower expert.
void route_experts(OpContext& op, const BufferRange& logits, std::int64_t n, std::int64_t experts, std::int64_t used,
                   bool normalize, const BufferRange& choices);

// The expert-indexed product: y[s] = W[expert of choices[s]] . prepared[s / (slots / inputs)] for s < slots,
// with w one expert's shape over `experts` matrices, prepared holding `inputs` rows as prepare_activations
// (activation_format(w.type)) left them. Each slot reads its own expert's rows only.
void matmul_experts_prepared(OpContext& op, const DeviceTensor& w, std::int64_t experts, const BufferRange& choices,
                             const BufferRange& prepared, const BufferRange& y, std::int64_t inputs,
                             std::int64_t slots, Barrier barrier = Barrier::after);

// residual[t] += sum over k of slot_out[t * used + k] * weight(t, k) in choice order, then + shared_out[t]
// (times sigmoid(shared_gate[t]) when gated). shared_out / shared_gate: absent when there is no shared
// expert / gate.
void combine_experts(OpContext& op, const BufferRange& residual, const BufferRange& slot_out, const BufferRange& choices,
                     const std::optional<BufferRange>& shared_out, const std::optional<BufferRange>& shared_gate,
                     std::int64_t n, std::int64_t dim, std::int64_t used);

// The bytes of scratch expert_feed_forward() needs for steps of up to max_batch tokens.
std::uint64_t expert_scratch_bytes(const DeviceExperts& experts, std::int64_t max_batch);

// residual[t] += moe(xn[t]) for t < n (both n rows of dim = experts.router.cols F32 values). `scratch` holds
// expert_scratch_bytes(experts, max_batch) bytes for some max_batch >= n. `pinned_lanes`: the experts' SwiGLU
// in the CPU's pinned form for those lanes (swiglu_pinned, vulkan_pinned.hpp), else the device's exp.
void expert_feed_forward(OpContext& op, const DeviceExperts& experts, const BufferRange& xn,
                         const BufferRange& residual, std::int64_t n, const BufferRange& scratch,
                         std::optional<LaneWidth> pinned_lanes = std::nullopt);

}  // namespace loom::compute::vulkan
