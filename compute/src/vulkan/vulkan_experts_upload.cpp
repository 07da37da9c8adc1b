// A layer's router and experts onto the device (vulkan_experts.hpp, upload_experts): each of the experts'
// gate, up and down matrices into one buffer, expert after expert, the form the expert-indexed product reads
// (matmul_body.glsl: expert e's rows start at e * rows).
#include <span>
#include <stdexcept>
#include <string>

#include "loom/compute/vulkan/vulkan_experts.hpp"

namespace loom::compute::vulkan {
namespace {

void require_supported(const TensorView& t) {
  if (!supports_weight_type(t.type)) {
    throw std::invalid_argument("tensor " + t.name + " is stored as " + std::string(name(t.type)) +
                                ", which the Vulkan backend does not take; use --device cpu");
  }
}

// One tensor on its own buffer.
DeviceTensor upload_matrix(VulkanContext& context, Uploader& uploader, const TensorView& t, std::vector<Buffer>& owner) {
  require_supported(t);
  Buffer& buffer = owner.emplace_back(context, t.bytes, MemoryKind::device_local, "weights " + t.name);
  uploader.upload(buffer.range(), std::span<const std::byte>(t.data, t.bytes));
  return DeviceTensor{.type = t.type, .rows = t.rows(), .cols = t.cols(), .data = buffer.range()};
}

// The same matrix of every expert (`pick` chooses gate, up or down) into one buffer, expert after expert.
template <class Pick>
DeviceTensor upload_stacked(VulkanContext& context, Uploader& uploader, const std::vector<ExpertWeights>& experts,
                            Pick pick, std::vector<Buffer>& owner) {
  const TensorView& first = *pick(experts.front());
  require_supported(first);
  for (const ExpertWeights& e : experts) {
    const TensorView& t = *pick(e);
    if (t.type != first.type || t.rows() != first.rows() || t.cols() != first.cols() || t.bytes != first.bytes) {
      throw std::invalid_argument("tensor " + t.name + " differs in type or shape from " + first.name +
                                  "; the Vulkan backend needs every expert alike");
    }
  }
  Buffer& buffer = owner.emplace_back(context, first.bytes * experts.size(), MemoryKind::device_local, "weights " + first.name);
  for (std::size_t e = 0; e < experts.size(); ++e) {
    const TensorView& t = *pick(experts[e]);
    uploader.upload(buffer.range(e * first.bytes, first.bytes), std::span<const std::byte>(t.data, t.bytes));
  }
  return DeviceTensor{.type = first.type, .rows = first.rows(), .cols = first.cols(), .data = buffer.range()};
}

}  // namespace

std::uint64_t expert_weight_bytes(const LayerWeights& layer) {
  std::uint64_t bytes = layer.router != nullptr ? layer.router->bytes : 0;
  for (const ExpertWeights& e : layer.experts) bytes += e.gate->bytes + e.up->bytes + e.down->bytes;
  const ExpertWeights& s = layer.shared_expert;
  if (s.gate != nullptr) bytes += s.gate->bytes + s.up->bytes + s.down->bytes;
  if (layer.shared_expert_gate != nullptr) bytes += layer.shared_expert_gate->bytes;
  return bytes;
}

DeviceExperts upload_experts(VulkanContext& context, Uploader& uploader, const ModelConfig& config,
                             const LayerWeights& layer, std::vector<Buffer>& owner) {
  if (layer.router == nullptr || layer.experts.empty() ||
      static_cast<std::int64_t>(layer.experts.size()) != config.experts) {
    throw std::invalid_argument("upload_experts: the layer has no router or not config.experts experts");
  }
  if (layer.router->type != TensorType::f32) {
    throw std::invalid_argument("tensor " + layer.router->name + " must be f32 for the Vulkan backend");
  }
  DeviceExperts device;
  device.count = config.experts;
  device.used = config.experts_used;
  device.normalize = config.expert_weights_norm;
  device.router = upload_matrix(context, uploader, *layer.router, owner);
  device.gate = upload_stacked(context, uploader, layer.experts, [](const ExpertWeights& e) { return e.gate; }, owner);
  device.up = upload_stacked(context, uploader, layer.experts, [](const ExpertWeights& e) { return e.up; }, owner);
  device.down = upload_stacked(context, uploader, layer.experts, [](const ExpertWeights& e) { return e.down; }, owner);
  const ExpertWeights& s = layer.shared_expert;
  if (s.gate != nullptr) {
    DeviceSharedExpert shared{.gate = upload_matrix(context, uploader, *s.gate, owner),
                              .up = upload_matrix(context, uploader, *s.up, owner),
                              .down = upload_matrix(context, uploader, *s.down, owner),
                              .gate_input = std::nullopt};
    if (layer.shared_expert_gate != nullptr) {
      shared.gate_input = upload_matrix(context, uploader, *layer.shared_expert_gate, owner);
    }
    device.shared = shared;
  }
  return device;
}

}  // namespace loom::compute::vulkan
