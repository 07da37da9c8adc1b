#include "vulkan_model.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>

#include "loom/compute/cpu/paged_kv_cache.hpp"
#include "loom/compute/load_cancelled.hpp"

namespace loom::compute::vulkan {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kGiB = 1024.0 * kMiB;

const float* f32(const TensorView* t) { return reinterpret_cast<const float*>(t->data); }

// Every tensor the forward pass reads, each once, in the order the layers use them.
std::vector<const TensorView*> used_tensors(const ModelWeights& w) {
  std::vector<const TensorView*> all{w.token_embd, w.output_norm, w.output};
  for (const LayerWeights& l : w.layers) {
    for (const TensorView* t : {l.attn_norm, l.wq, l.wk, l.wv, l.wo, l.bq, l.bk, l.bv, l.q_norm, l.k_norm, l.ffn_norm,
                                l.gate, l.up, l.down, l.post_attn_norm, l.post_ffn_norm}) {
      all.push_back(t);
    }
  }
  std::vector<const TensorView*> distinct;
  for (const TensorView* t : all) {
    if (t != nullptr && std::find(distinct.begin(), distinct.end(), t) == distinct.end()) distinct.push_back(t);
  }
  return distinct;
}

// Logs "uploading weights 1.2/4.4 GiB" each time another tenth of the bytes is on the device.
class UploadProgress {
 public:
  explicit UploadProgress(std::uint64_t total) : total_(total) {}
  void add(std::uint64_t bytes) {
    done_ += bytes;
    const auto tenth = total_ == 0 ? 10 : static_cast<int>(done_ * 10 / total_);
    if (tenth <= logged_) return;
    logged_ = tenth;
    if (total_ >= (std::uint64_t{1} << 30)) {
      logger().info("uploading weights {:.1f}/{:.1f} GiB", static_cast<double>(done_) / kGiB, static_cast<double>(total_) / kGiB);
    } else {
      logger().info("uploading weights {:.1f}/{:.1f} MiB", static_cast<double>(done_) / kMiB, static_cast<double>(total_) / kMiB);
    }
  }

 private:
  std::uint64_t total_;
  std::uint64_t done_ = 0;
  int logged_ = 0;
};

}  // namespace

spdlog::logger& logger() {
  static const std::shared_ptr<spdlog::logger> instance = [] {
    if (auto existing = spdlog::get("vulkan")) return existing;
    auto created = spdlog::stderr_color_mt("vulkan");
    created->set_level(spdlog::default_logger()->level());
    return created;
  }();
  return *instance;
}

std::uint64_t weight_bytes(const ModelWeights& weights) {
  std::uint64_t bytes = 0;
  for (const TensorView* t : used_tensors(weights)) bytes += t->bytes;
  for (const LayerWeights& l : weights.layers) bytes += expert_weight_bytes(l);
  return bytes;
}

DeviceWeights upload_weights(VulkanContext& context, Uploader& uploader, const ModelConfig& config,
                             const ModelWeights& weights, const std::stop_token& stop) {
  DeviceWeights device;
  const std::vector<const TensorView*> tensors = used_tensors(weights);
  device.bytes = weight_bytes(weights);
  UploadProgress progress(device.bytes);
  std::map<const TensorView*, BufferRange> placed;
  device.buffers.reserve(tensors.size());
  for (const TensorView* t : tensors) {
    throw_if_stopped(stop, "part of the weights were uploaded");
    Buffer& buffer = device.buffers.emplace_back(context, t->bytes, MemoryKind::device_local, "weights " + t->name);
    uploader.upload(buffer.range(), std::span<const std::byte>(t->data, t->bytes));
    placed.emplace(t, buffer.range());
    progress.add(t->bytes);
  }
  const auto vector = [&](const TensorView* t) -> BufferRange {
    if (t->type != TensorType::f32) {
      throw std::invalid_argument("tensor " + t->name + " is " + std::string(name(t->type)) + "; the Vulkan backend takes norms and biases in f32");
    }
    return placed.at(t);
  };
  const auto optional = [&](const TensorView* t) -> std::optional<BufferRange> {
    if (t == nullptr) return std::nullopt;
    return vector(t);
  };
  const auto matrix = [&](const TensorView* t) -> DeviceTensor {
    if (t == nullptr) return DeviceTensor{};  // a layer with experts has no dense feed-forward
    if (!supports_weight_type(t->type)) {
      throw std::invalid_argument("tensor " + t->name + " is stored as " + std::string(name(t->type)) +
                                  ", which the Vulkan backend does not take; use --device cpu");
    }
    return DeviceTensor{.type = t->type, .rows = t->rows(), .cols = t->cols(), .data = placed.at(t)};
  };
  device.token_embd = matrix(weights.token_embd);
  device.output = matrix(weights.output);
  device.output_norm = vector(weights.output_norm);
  for (const LayerWeights& l : weights.layers) {
    device.layers.push_back(DeviceLayer{.attn_norm = vector(l.attn_norm),
                                        .ffn_norm = vector(l.ffn_norm),
                                        .wq = matrix(l.wq),
                                        .wk = matrix(l.wk),
                                        .wv = matrix(l.wv),
                                        .wo = matrix(l.wo),
                                        .gate = matrix(l.gate),
                                        .up = matrix(l.up),
                                        .down = matrix(l.down),
                                        .bq = optional(l.bq),
                                        .bk = optional(l.bk),
                                        .bv = optional(l.bv),
                                        .q_norm = optional(l.q_norm),
                                        .k_norm = optional(l.k_norm),
                                        .post_attn_norm = optional(l.post_attn_norm),
                                        .post_ffn_norm = optional(l.post_ffn_norm)});
    if (l.router != nullptr) {
      throw_if_stopped(stop, "part of the weights were uploaded");
      device.layers.back().experts = upload_experts(context, uploader, config, l, device.buffers);
      progress.add(expert_weight_bytes(l));
    }
  }
  return device;
}

std::uint64_t KvStorage::block_bytes() const {
  const std::uint64_t element = layout.type == TensorType::f16 ? 2 : 4;
  return static_cast<std::uint64_t>(layout.block_size * layout.kv_heads * layout.head_dim) * element;
}

std::uint64_t kv_bytes(const ModelConfig& config, TensorType type, std::int64_t block_size, std::int64_t blocks) {
  return PagedKvCache::bytes_per_block(config.layers, config.kv_dim(), block_size, type) *
         static_cast<std::uint64_t>(blocks);
}

KvStorage allocate_kv(VulkanContext& context, const ModelConfig& config, TensorType type, std::int64_t block_size,
                      std::int64_t blocks) {
  if (type != TensorType::f16 && type != TensorType::f32) {
    throw std::invalid_argument("the KV storage is f16 or f32, not " + std::string(name(type)));
  }
  KvStorage kv;
  kv.layout = KvLayout{.type = type, .block_size = block_size, .kv_heads = config.kv_heads, .head_dim = config.head_dim};
  kv.blocks = blocks;
  const std::uint64_t bytes = kv.block_bytes() * static_cast<std::uint64_t>(blocks);
  for (std::int64_t layer = 0; layer < config.layers; ++layer) {
    kv.keys.emplace_back(context, bytes, MemoryKind::device_local, "KV blocks (keys of layer " + std::to_string(layer) + ")");
    kv.values.emplace_back(context, bytes, MemoryKind::device_local, "KV blocks (values of layer " + std::to_string(layer) + ")");
  }
  return kv;
}

StepBuffers allocate_step_buffers(VulkanContext& context, const ModelConfig& c, const DeviceWeights& weights,
                                  const KvLayout& layout, std::int64_t max_batch, std::int64_t max_table_entries,
                                  bool pinned) {
  const auto b = static_cast<std::uint64_t>(max_batch);
  const auto floats = [b](std::int64_t width) { return b * static_cast<std::uint64_t>(width) * sizeof(float); };
  const auto device = [&](std::uint64_t bytes, const char* what) { return Buffer(context, bytes, MemoryKind::device_local, what); };
  const auto host = [&](std::uint64_t bytes, const char* what) { return Buffer(context, bytes, MemoryKind::host_visible, what); };
  // The prepared activations of the largest product: each weight with the width of the input it meets.
  std::uint64_t prepared = 0;
  const auto need = [&](const DeviceTensor& w) {
    if (w.rows == 0) return;  // a layer with experts: no dense feed-forward
    prepared = std::max(prepared, prepared_bytes(activation_format(w.type), max_batch, w.cols));
  };
  need(weights.output);
  for (const DeviceLayer& l : weights.layers) {
    for (const DeviceTensor* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down}) need(*w);
  }
  std::uint64_t experts_scratch = 4;
  for (const DeviceLayer& l : weights.layers) {
    if (l.experts) experts_scratch = std::max(experts_scratch, expert_scratch_bytes(*l.experts, max_batch));
  }
  const AttentionShape widest{.n = max_batch, .heads = c.heads, .max_positions = c.context_length};
  const std::uint64_t pairs_bytes = b * static_cast<std::uint64_t>(c.head_dim) * sizeof(float);
  StepBuffers s{
      .x = device(floats(c.dim), "activations x"),
      .xn = device(floats(std::max(c.dim, c.q_dim())), "activations xn"),
      .q = device(floats(c.q_dim()), "activations q"),
      .k = device(floats(c.kv_dim()), "activations k"),
      .v = device(floats(c.kv_dim()), "activations v"),
      .attn = device(floats(c.q_dim()), "activations attn"),
      .gate = device(floats(c.ffn_dim), "activations gate"),
      .up = device(floats(c.ffn_dim), "activations up"),
      .prepared = device(prepared, "prepared activations"),
      // The pinned attention keeps every (token, head)'s scores; the online one only a long decode's parts.
      .attention_scratch = device(std::max(attention_scratch_bytes(widest, layout),
                                           pinned ? attention_pinned_scratch_bytes(widest) : 0),
                                  "attention scratch"),
      .logits = device(floats(c.vocab_size), "logits"),
      .experts = device(experts_scratch, "experts scratch"),
      .tokens = host(b * sizeof(std::int32_t), "step tokens"),
      .rotation = host(pairs_bytes, "rotary table"),
      .rotation_swa = host(pairs_bytes, "rotary table (sliding-window layers)"),
      .slots = host(b * sizeof(std::int32_t), "KV slots"),
      .token_info = host(b * 4 * sizeof(std::int32_t), "token info"),
      .tables = host(static_cast<std::uint64_t>(max_table_entries) * sizeof(std::int32_t), "block tables"),
      .logit_rows = host(b * sizeof(std::int32_t), "logit rows"),
      .identity = host(b * sizeof(std::int32_t), "row indices"),
      .logits_out = host(floats(c.vocab_size), "logits read back"),
      .candidates_out = host(b * static_cast<std::uint64_t>(kMaxTopK) * 8, "best tokens read back"),
      .hidden_out = host(floats(c.dim), "hidden states read back"),
      .max_batch = max_batch,
      .max_table_entries = max_table_entries};
  auto* identity = static_cast<std::int32_t*>(s.identity.mapped());
  for (std::int64_t i = 0; i < max_batch; ++i) identity[i] = static_cast<std::int32_t>(i);
  s.pinned = pinned;
  s.lanes = default_kernel_path() == KernelPath::avx2 ? LaneWidth::avx2 : LaneWidth::avx512;  // as LlamaModel's
  return s;
}

RotationTable::RotationTable(const ModelConfig& c, const ModelWeights& w) : pairs_(c.head_dim / 2) {
  theta_step_ = std::pow(c.rope_freq_base, -2.0f / static_cast<float>(c.head_dim));
  frequency_factor_.assign(static_cast<std::size_t>(pairs_), 1.0f);
  if (w.rope_freqs != nullptr) {
    for (std::int64_t i = 0; i < pairs_; ++i) frequency_factor_[static_cast<std::size_t>(i)] = f32(w.rope_freqs)[i];
  }
  position_scale_ = 1.0f / c.rope_scale;
  if (c.rope_freq_base_swa > 0.0f && c.has_sliding_window()) {
    theta_step_swa_ = std::pow(c.rope_freq_base_swa, -2.0f / static_cast<float>(c.head_dim));
  }
  // phi3 LongRoPE: the short factors while the context fits the original one, else the long ones.
  if (c.rope_original_context > 0 && w.rope_factors_short != nullptr && w.rope_factors_long != nullptr) {
    const TensorView* chosen = c.context_length <= c.rope_original_context ? w.rope_factors_short : w.rope_factors_long;
    for (std::int64_t i = 0; i < pairs_; ++i) frequency_factor_[static_cast<std::size_t>(i)] = f32(chosen)[i];
    rotation_scale_ = c.rope_attn_factor;
  }
}

void RotationTable::fill(std::span<const std::int64_t> positions, bool swa, float* out) const {
  const float step = swa ? theta_step_swa_ : theta_step_;
  const float position_scale = swa ? 1.0f : position_scale_;
  for (std::size_t t = 0; t < positions.size(); ++t) {
    float theta = static_cast<float>(positions[t]);
    float* rotation = out + static_cast<std::int64_t>(t) * pairs_ * 2;
    for (std::int64_t i = 0; i < pairs_; ++i) {
      const float angle = position_scale * (theta / frequency_factor_[static_cast<std::size_t>(i)]);
      theta *= step;
      rotation[2 * i] = std::cos(angle) * rotation_scale_;
      rotation[2 * i + 1] = std::sin(angle) * rotation_scale_;
    }
  }
}

}  // namespace loom::compute::vulkan
