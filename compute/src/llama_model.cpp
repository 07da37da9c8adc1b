#include "loom/compute/llama_model.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "loom/compute/attention.hpp"
#include "loom/compute/dequantize.hpp"
#include "loom/compute/half.hpp"

namespace loom::compute {
namespace {

const float* f32(const TensorView* t) { return reinterpret_cast<const float*>(t->data); }

// out = x / rms(x) * weight, over n values.
void rms_norm(const float* x, const float* weight, float* out, std::int64_t n, float epsilon) {
  double sum = 0.0;
  for (std::int64_t i = 0; i < n; ++i) sum += x[i] * x[i];  // float squares, double sum
  const auto mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + epsilon);
  for (std::int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

void add_bias(float* rows, const TensorView* bias, std::int64_t n, std::int64_t width) {
  if (bias == nullptr) return;
  const float* b = f32(bias);
  for (std::int64_t t = 0; t < n; ++t) {
    for (std::int64_t i = 0; i < width; ++i) rows[t * width + i] += b[i];
  }
}

}  // namespace

LlamaModel::LlamaModel(ModelConfig config, ModelWeights weights, ThreadPool& pool, std::int64_t max_batch)
    : config_(config), weights_(std::move(weights)), pool_(pool), max_batch_(std::max<std::int64_t>(1, max_batch)) {
  const auto& c = config_;
  if (c.head_dim % 2 != 0) throw std::invalid_argument("head dimension must be even, got " + std::to_string(c.head_dim));
  if (c.kv_heads <= 0 || c.heads % c.kv_heads != 0) {
    throw std::invalid_argument("attention heads (" + std::to_string(c.heads) + ") must be a multiple of the KV heads (" +
                                std::to_string(c.kv_heads) + ")");
  }
  const std::int64_t pairs = c.head_dim / 2;
  theta_step_ = std::pow(c.rope_freq_base, -2.0f / static_cast<float>(c.head_dim));
  frequency_factor_.assign(static_cast<std::size_t>(pairs), 1.0f);
  if (weights_.rope_freqs != nullptr) {
    for (std::int64_t i = 0; i < pairs; ++i) frequency_factor_[static_cast<std::size_t>(i)] = f32(weights_.rope_freqs)[i];
  }
  position_scale_ = 1.0f / c.rope_scale;


  const auto b = static_cast<std::size_t>(max_batch_);
  x_.resize(b * c.dim);
  xn_.resize(b * std::max(c.dim, c.q_dim()));
  q_.resize(b * c.q_dim());
  k_.resize(b * c.kv_dim());
  v_.resize(b * c.kv_dim());
  attn_.resize(b * c.q_dim());
  gate_.resize(b * c.ffn_dim);
  up_.resize(b * c.ffn_dim);
  scores_.resize(static_cast<std::size_t>(pool_.size()) * attention_scratch_floats(c.context_length, c.head_dim));
  matmul_scratch_.reserve(max_batch_, std::max({c.dim, c.ffn_dim, c.q_dim()}), pool_.size());
}

KvCache LlamaModel::make_cache(std::int64_t context_length) const {
  return KvCache(config_.layers, context_length > 0 ? context_length : config_.context_length, config_.kv_dim());
}

void LlamaModel::forward(std::span<const std::int32_t> tokens, std::int64_t start, KvCache& cache, Logits mode,
                         float* logits) {
  const auto total = static_cast<std::int64_t>(tokens.size());
  if (cache.context_length() > config_.context_length) {
    throw std::invalid_argument("KV cache of " + std::to_string(cache.context_length()) +
                                " positions exceeds the model's context length " + std::to_string(config_.context_length));
  }
  if (start < 0 || start + total > cache.context_length()) {
    throw std::out_of_range("positions " + std::to_string(start) + ".." + std::to_string(start + total) +
                            " exceed the context length " + std::to_string(cache.context_length()));
  }
  for (auto token : tokens) {
    if (token < 0 || token >= config_.vocab_size) {
      throw std::out_of_range("token id " + std::to_string(token) + " outside the vocabulary [0, " +
                              std::to_string(config_.vocab_size) + ")");
    }
  }
  for (std::int64_t done = 0; done < total; done += max_batch_) {
    const std::int64_t n = std::min(max_batch_, total - done);
    const bool last_chunk = done + n == total;
    Logits chunk_mode = mode == Logits::all ? Logits::all : (last_chunk ? mode : Logits::none);
    float* chunk_logits = mode == Logits::all ? logits + done * config_.vocab_size : logits;
    forward_chunk(tokens.subspan(static_cast<std::size_t>(done), static_cast<std::size_t>(n)), start + done, cache,
                  chunk_mode, chunk_logits);
  }
}

void LlamaModel::forward_chunk(std::span<const std::int32_t> tokens, std::int64_t start, KvCache& cache,
                               Logits mode, float* logits) {
  const auto& c = config_;
  const auto n = static_cast<std::int64_t>(tokens.size());
  const TensorView& embd = *weights_.token_embd;
  for (std::int64_t t = 0; t < n; ++t) dequantize_row(embd.type, embd.row(tokens[t]), &x_[t * c.dim], c.dim);

  for (std::int64_t layer = 0; layer < c.layers; ++layer) {
    const LayerWeights& w = weights_.layers[static_cast<std::size_t>(layer)];

    for (std::int64_t t = 0; t < n; ++t) rms_norm(&x_[t * c.dim], f32(w.attn_norm), &xn_[t * c.dim], c.dim, c.rms_epsilon);
    matmul_many({{w.wq, q_.data()}, {w.wk, k_.data()}, {w.wv, v_.data()}}, xn_.data(), n, pool_, matmul_scratch_);
    add_bias(q_.data(), w.bq, n, c.q_dim());
    add_bias(k_.data(), w.bk, n, c.kv_dim());
    add_bias(v_.data(), w.bv, n, c.kv_dim());
    if (c.qk_norm) {
      for (std::int64_t h = 0; h < n * c.heads; ++h) {
        rms_norm(&q_[h * c.head_dim], f32(w.q_norm), &q_[h * c.head_dim], c.head_dim, c.rms_epsilon);
      }
      for (std::int64_t h = 0; h < n * c.kv_heads; ++h) {
        rms_norm(&k_[h * c.head_dim], f32(w.k_norm), &k_[h * c.head_dim], c.head_dim, c.rms_epsilon);
      }
    }
    rope(q_.data(), c.heads, n, start);
    rope(k_.data(), c.kv_heads, n, start);
    for (std::int64_t t = 0; t < n; ++t) {
      std::uint16_t* key = cache.key(layer, start + t);
      std::uint16_t* value = cache.value(layer, start + t);
      for (std::int64_t i = 0; i < c.kv_dim(); ++i) {
        key[i] = float_to_half(k_[t * c.kv_dim() + i]);
        value[i] = float_to_half(v_[t * c.kv_dim() + i]);
      }
    }
    attention(layer, n, start, cache);
    matmul(*w.wo, attn_.data(), n, xn_.data(), pool_, matmul_scratch_);
    for (std::int64_t i = 0; i < n * c.dim; ++i) x_[i] += xn_[i];

    for (std::int64_t t = 0; t < n; ++t) rms_norm(&x_[t * c.dim], f32(w.ffn_norm), &xn_[t * c.dim], c.dim, c.rms_epsilon);
    matmul_many({{w.gate, gate_.data()}, {w.up, up_.data()}}, xn_.data(), n, pool_, matmul_scratch_);
    for (std::int64_t t = 0; t < n; ++t) swiglu(&gate_[t * c.ffn_dim], &up_[t * c.ffn_dim], c.ffn_dim, kernel_path_);
    matmul(*w.down, gate_.data(), n, xn_.data(), pool_, matmul_scratch_);
    for (std::int64_t i = 0; i < n * c.dim; ++i) x_[i] += xn_[i];
  }

  if (mode == Logits::none) return;
  const std::int64_t first = mode == Logits::all ? 0 : n - 1;
  const std::int64_t rows = n - first;
  for (std::int64_t t = first; t < n; ++t) {
    rms_norm(&x_[t * c.dim], f32(weights_.output_norm), &xn_[(t - first) * c.dim], c.dim, c.rms_epsilon);
  }
  matmul(*weights_.output, xn_.data(), rows, logits, pool_, matmul_scratch_);
}

void LlamaModel::rope(float* vectors, std::int64_t heads, std::int64_t n, std::int64_t start) {
  const auto& c = config_;
  const std::int64_t pairs = c.head_dim / 2;
  for (std::int64_t t = 0; t < n; ++t) {
    // The angle of pair i is position * base^(-2i/head_dim), built by repeated multiplication in float
    // as the reference implementation does, so positions far into the context agree with it to the last
    // bits; then linear scaling and the optional per-pair frequency factors.
    float theta = static_cast<float>(start + t);
    for (std::int64_t i = 0; i < pairs; ++i) {
      const float angle = position_scale_ * (theta / frequency_factor_[static_cast<std::size_t>(i)]);
      theta *= theta_step_;
      const float cos_a = std::cos(angle);
      const float sin_a = std::sin(angle);
      for (std::int64_t h = 0; h < heads; ++h) {
        float* head = vectors + (t * heads + h) * c.head_dim;
        const std::int64_t a = c.rope_style == RopeStyle::adjacent_pairs ? 2 * i : i;
        const std::int64_t b = c.rope_style == RopeStyle::adjacent_pairs ? 2 * i + 1 : i + pairs;
        const float x0 = head[a];
        const float x1 = head[b];
        head[a] = x0 * cos_a - x1 * sin_a;
        head[b] = x0 * sin_a + x1 * cos_a;
      }
    }
  }
}

// One head per task: arithmetic and summation order in attention.hpp. A batch of queries sums in the tiled
// order and a single query in the vector-dot order, as the reference implementation's two kernels do.
void LlamaModel::attention(std::int64_t layer, std::int64_t n, std::int64_t start, KvCache& cache) {
  const auto& c = config_;
  const std::int64_t group = c.heads / c.kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  const std::size_t scratch = attention_scratch_floats(c.context_length, c.head_dim);
  const SumOrder order = n == 1 ? SumOrder::vector_dot : SumOrder::tiled;
  pool_.parallel_for(n * c.heads, [&](std::int64_t task, int thread) {
    const std::int64_t t = task / c.heads;
    const std::int64_t h = task % c.heads;
    const std::int64_t kv_offset = (h / group) * c.head_dim;
    HeadAttention head;
    head.query = &q_[(t * c.heads + h) * c.head_dim];
    head.keys = cache.key(layer, 0) + kv_offset;
    head.values = cache.value(layer, 0) + kv_offset;
    head.stride = static_cast<std::size_t>(c.kv_dim());
    head.positions = start + t + 1;  // causal: positions 0..start+t
    head.head_dim = c.head_dim;
    head.scale = scale;
    head.order = order;
    head.scores = &scores_[static_cast<std::size_t>(thread) * scratch];
    head.out = &attn_[(t * c.heads + h) * c.head_dim];
    attend(head, kernel_path_);
  });
}

}  // namespace loom::compute
