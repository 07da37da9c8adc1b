#include "loom/compute/cpu/llama_model.hpp"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "loom/compute/cpu/activations.hpp"
#include "loom/compute/cpu/attention.hpp"
#include "loom/compute/cpu/dequantize.hpp"
#include "loom/compute/cpu/rotary.hpp"
#include "loom/compute/model/half.hpp"
#include "f16_activations.hpp"

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

// phi3 LongRoPE: the short factors while the context this model runs with fits the original one, else the
// long ones (the reference's choice, by its context size); cos and sin scaled by attn_factor either way.
void use_long_rope_factors(const ModelConfig& c, const ModelWeights& w, std::vector<float>& factor, float& scale) {
  if (c.rope_original_context <= 0 || w.rope_factors_short == nullptr || w.rope_factors_long == nullptr) return;
  const TensorView* chosen = c.context_length <= c.rope_original_context ? w.rope_factors_short : w.rope_factors_long;
  for (std::size_t i = 0; i < factor.size(); ++i) factor[i] = f32(chosen)[i];
  scale = c.rope_attn_factor;
}

}  // namespace

// An F16 weight meets its activations rounded to F16, as the reference's F16 dot products convert them (its
// vec_dot type for F16 is F16): each product is then the reference's exactly (two F16 values multiply exactly
// in F32). Measured on ../shared's F16 files: synth11M-f16 0.0014 -> 0.0008 from the reference, gemma's
// prefill from 0.008 to print precision. Eight at a time through F16C on the AVX2 path. Only when every
// weight the activations meet is F16 (a product of several shares them): the other types quantize them their
// own way from F32.
void detail::round_for_f16_weight(float* x, std::int64_t n, std::initializer_list<const TensorView*> weights, KernelPath path) {
  for (const TensorView* weight : weights) {
    if (weight->type != TensorType::f16) return;
  }
  std::uint16_t halves[256];
  for (std::int64_t i = 0; i < n; i += 256) {
    const std::int64_t count = std::min<std::int64_t>(256, n - i);
    store_as_f16(x + i, halves, count, path);
    dequantize_row(TensorType::f16, halves, x + i, count);
  }
}

using detail::round_for_f16_weight;

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
  if (c.rope_freq_base_swa > 0.0f && c.has_sliding_window()) {
    theta_step_swa_ = std::pow(c.rope_freq_base_swa, -2.0f / static_cast<float>(c.head_dim));
  }
  use_long_rope_factors(c, weights_, frequency_factor_, rotation_scale_);
  if (c.experts > 0) experts_ = std::make_unique<ExpertFeedForward>(c, max_batch_);


  const auto b = static_cast<std::size_t>(max_batch_);
  x_.resize(b * c.dim);
  xn_.resize(b * std::max(c.dim, c.q_dim()));
  q_.resize(b * c.q_dim());
  k_.resize(b * c.kv_dim());
  v_.resize(b * c.kv_dim());
  attn_.resize(b * c.q_dim());
  const std::int64_t dense_ffn = c.experts > 0 ? 0 : c.ffn_dim;  // experts keep their own scratch
  gate_.resize(b * dense_ffn);
  up_.resize(b * dense_ffn);
  const std::int64_t group = c.heads / c.kv_heads;
  scores_.resize(static_cast<std::size_t>(pool_.size()) *
                 attention_scratch_floats(c.context_length, c.head_dim, group, attention_tile_queries(group)));
  tile_.resize(b + 1);
  matmul_scratch_.reserve(max_batch_, std::max({c.dim, c.ffn_dim, c.q_dim()}));
  position_.resize(b);
  rotation_.resize(b * static_cast<std::size_t>(c.head_dim));
  if (theta_step_swa_ > 0.0f) rotation_swa_.resize(rotation_.size());
  sequence_of_.resize(b);
  staged_logits_.resize(static_cast<std::size_t>(std::min(kLogitRows, max_batch_) * c.vocab_size));
}

PagedKvCache LlamaModel::make_paged_cache(const KvCacheOptions& options, std::int64_t tokens,
                                          const std::stop_token& stop) const {
  return PagedKvCache::sized(config_.layers, config_.kv_dim(), tokens > 0 ? tokens : config_.context_length, options,
                             stop);
}

KvCache LlamaModel::make_cache(std::int64_t context_length, const KvCacheOptions& options) const {
  const std::int64_t context = context_length > 0 ? context_length : config_.context_length;
  return KvCache(make_paged_cache(options, context), context);
}

void LlamaModel::forward(std::span<const std::int32_t> tokens, std::int64_t start, KvCache& cache, Logits mode,
                         float* logits) {
  const auto total = static_cast<std::int64_t>(tokens.size());
  if (start < 0 || start + total > cache.context_length()) {
    throw std::out_of_range("positions " + std::to_string(start) + ".." + std::to_string(start + total) +
                            " exceed the KV cache's context of " + std::to_string(cache.context_length()));
  }
  for (auto token : tokens) {  // all of them before the first chunk runs
    if (token < 0 || token >= config_.vocab_size) {
      throw std::out_of_range("token id " + std::to_string(token) + " outside the vocabulary [0, " +
                              std::to_string(config_.vocab_size) + ")");
    }
  }
  for (std::int64_t done = 0; done < total; done += max_batch_) {
    const std::int64_t n = std::min(max_batch_, total - done);
    const bool last_chunk = done + n == total;
    SequenceStep step;
    step.tokens = tokens.subspan(static_cast<std::size_t>(done), static_cast<std::size_t>(n));
    step.start = start + done;
    step.block_table = cache.block_table();
    step.mode = mode == Logits::all ? Logits::all : (last_chunk ? mode : Logits::none);
    step.logits = mode == Logits::all ? logits + done * config_.vocab_size : logits;
    forward({&step, 1}, cache.pages());
  }
}

void LlamaModel::check_step(std::span<const SequenceStep> steps, const PagedKvCache& cache) const {
  const auto& c = config_;
  if (cache.layers() != c.layers || cache.kv_dim() != c.kv_dim()) {
    throw std::invalid_argument("a KV cache of " + std::to_string(cache.layers()) + " layers x " +
                                std::to_string(cache.kv_dim()) + " does not fit this model's " +
                                std::to_string(c.layers) + " x " + std::to_string(c.kv_dim()));
  }
  if (steps.empty()) throw std::invalid_argument("a step needs at least one sequence");
  std::int64_t total = 0;
  for (std::size_t s = 0; s < steps.size(); ++s) {
    const SequenceStep& step = steps[s];
    const auto n = static_cast<std::int64_t>(step.tokens.size());
    const auto which = [s] { return "sequence " + std::to_string(s) + " of the step"; };  // only on error
    if (n == 0) throw std::invalid_argument(which() + " has no tokens");
    if (step.start < 0 || step.start + n > c.context_length) {
      throw std::out_of_range(which() + ": positions " + std::to_string(step.start) + ".." +
                              std::to_string(step.start + n) + " exceed the context length " +
                              std::to_string(c.context_length));
    }
    for (auto token : step.tokens) {
      if (token < 0 || token >= c.vocab_size) {
        throw std::out_of_range(which() + ": token id " + std::to_string(token) + " outside the vocabulary [0, " +
                                std::to_string(c.vocab_size) + ")");
      }
    }
    if (step.mode != Logits::none && step.logits == nullptr) throw std::invalid_argument(which() + " wants logits but gives no buffer");
    cache.check_table(step.block_table, step.start + n);
    total += n;
  }
  if (total > max_batch_) {
    throw std::invalid_argument("a step of " + std::to_string(total) + " tokens exceeds the batch of " +
                                std::to_string(max_batch_) + " this model was built for");
  }
}

void LlamaModel::forward(std::span<const SequenceStep> steps, PagedKvCache& cache) {
  check_step(steps, cache);
  for (const SequenceStep& step : steps) positions_computed_ += step.tokens.size();
  const auto& c = config_;
  const TensorView& embd = *weights_.token_embd;
  std::int64_t n = 0;
  for (std::size_t s = 0; s < steps.size(); ++s) {
    for (std::size_t i = 0; i < steps[s].tokens.size(); ++i, ++n) {
      position_[static_cast<std::size_t>(n)] = steps[s].start + static_cast<std::int64_t>(i);
      sequence_of_[static_cast<std::size_t>(n)] = static_cast<std::int32_t>(s);
      dequantize_row(embd.type, embd.row(steps[s].tokens[i]), &x_[n * c.dim], c.dim);
    }
  }
  if (c.embedding_scale != 1.0f) {
    for (std::int64_t i = 0; i < n * c.dim; ++i) x_[i] *= c.embedding_scale;
  }

  rotation_angles(n, theta_step_, position_scale_, rotation_.data());
  if (theta_step_swa_ > 0.0f) rotation_angles(n, theta_step_swa_, 1.0f, rotation_swa_.data());

  for (std::int64_t layer = 0; layer < c.layers; ++layer) {
    const LayerWeights& w = weights_.layers[static_cast<std::size_t>(layer)];

    for (std::int64_t t = 0; t < n; ++t) rms_norm(&x_[t * c.dim], f32(w.attn_norm), &xn_[t * c.dim], c.dim, c.rms_epsilon);
    round_for_f16_weight(xn_.data(), n * c.dim, {w.wq, w.wk, w.wv}, kernel_path_);
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
    // Sliding-window layers may rotate with their own base (gemma3's local layers).
    const float* rotation = theta_step_swa_ > 0.0f && c.window(layer) > 0 ? rotation_swa_.data() : rotation_.data();
    rope(q_.data(), c.heads, n, rotation);
    rope(k_.data(), c.kv_heads, n, rotation);
    if (c.query_scale > 0.0f) {  // gemma: the query is scaled, not the scores (ModelConfig::query_scale)
      for (std::int64_t i = 0; i < n * c.q_dim(); ++i) q_[i] *= c.query_scale;
    }
    store_keys_values(layer, n, steps, cache);
    attention(layer, n, steps, cache);
    round_for_f16_weight(attn_.data(), n * c.q_dim(), {w.wo}, kernel_path_);
    matmul(*w.wo, attn_.data(), n, xn_.data(), pool_, matmul_scratch_);
    post_norm(w.post_attn_norm, n);
    for (std::int64_t i = 0; i < n * c.dim; ++i) x_[i] += xn_[i];

    for (std::int64_t t = 0; t < n; ++t) rms_norm(&x_[t * c.dim], f32(w.ffn_norm), &xn_[t * c.dim], c.dim, c.rms_epsilon);
    if (experts_) {
      experts_->forward(w, xn_.data(), n, x_.data(), pool_, kernel_path_, reference_lanes_);
      continue;
    }
    round_for_f16_weight(xn_.data(), n * c.dim, {w.gate, w.up}, kernel_path_);
    matmul_many({{w.gate, gate_.data()}, {w.up, up_.data()}}, xn_.data(), n, pool_, matmul_scratch_);
    for (std::int64_t t = 0; t < n; ++t) {
      if (c.ffn_activation == FfnActivation::gelu_tanh) {
        geglu(&gate_[t * c.ffn_dim], &up_[t * c.ffn_dim], c.ffn_dim, kernel_path_);
      } else {
        swiglu(&gate_[t * c.ffn_dim], &up_[t * c.ffn_dim], c.ffn_dim, kernel_path_, reference_lanes_);
      }
    }
    round_for_f16_weight(gate_.data(), n * c.ffn_dim, {w.down}, kernel_path_);
    matmul(*w.down, gate_.data(), n, xn_.data(), pool_, matmul_scratch_);
    post_norm(w.post_ffn_norm, n);
    for (std::int64_t i = 0; i < n * c.dim; ++i) x_[i] += xn_[i];
  }
  output_hidden(steps);
  output_logits(steps);
}

// The final norm of every token of the sequences that want their hidden states, straight into their buffers.
void LlamaModel::output_hidden(std::span<const SequenceStep> steps) {
  const auto& c = config_;
  std::int64_t t = 0;
  for (const SequenceStep& step : steps) {
    const auto count = static_cast<std::int64_t>(step.tokens.size());
    for (std::int64_t i = 0; step.hidden != nullptr && i < count; ++i) {
      rms_norm(&x_[(t + i) * c.dim], f32(weights_.output_norm), step.hidden + i * c.dim, c.dim, c.rms_epsilon);
    }
    t += count;
  }
}

// Gemma2/3 normalise a sublayer's output (in xn_) before it joins the residual stream; others have no such norm.
void LlamaModel::post_norm(const TensorView* weight, std::int64_t n) {
  if (weight == nullptr) return;
  const std::int64_t dim = config_.dim;
  for (std::int64_t t = 0; t < n; ++t) rms_norm(&xn_[t * dim], f32(weight), &xn_[t * dim], dim, config_.rms_epsilon);
}

// The final norm of the tokens that want logits, gathered into xn_ in step order, then the output product:
// straight into the caller's buffer when one sequence wants logits (every single-sequence step), else
// through staged_logits_ in groups of rows, one product per group.
void LlamaModel::output_logits(std::span<const SequenceStep> steps) {
  const auto& c = config_;
  std::int64_t rows = 0;
  std::size_t wanting = 0;
  std::int64_t t = 0;
  for (const SequenceStep& step : steps) {
    const auto count = static_cast<std::int64_t>(step.tokens.size());
    const std::int64_t first = step.mode == Logits::all ? 0 : (step.mode == Logits::last ? count - 1 : count);
    for (std::int64_t i = first; i < count; ++i, ++rows) {
      rms_norm(&x_[(t + i) * c.dim], f32(weights_.output_norm), &xn_[rows * c.dim], c.dim, c.rms_epsilon);
    }
    if (first < count) ++wanting;
    t += count;
  }
  if (rows == 0) return;
  round_for_f16_weight(xn_.data(), rows * c.dim, {weights_.output}, kernel_path_);
  if (wanting == 1) {
    for (const SequenceStep& step : steps) {
      if (step.mode != Logits::none) {
        matmul(*weights_.output, xn_.data(), rows, step.logits, pool_, matmul_scratch_);
        soft_cap(step.logits, rows * c.vocab_size, c.final_softcap);
      }
    }
    return;
  }
  const std::int64_t group = std::min(kLogitRows, max_batch_);
  // Walk the sequences' rows alongside the groups: (sequence, row within it) of the next row to copy.
  std::size_t s = 0;
  std::int64_t row_in_sequence = 0;
  auto rows_of = [&](const SequenceStep& step) -> std::int64_t {
    return step.mode == Logits::all ? static_cast<std::int64_t>(step.tokens.size()) : (step.mode == Logits::last ? 1 : 0);
  };
  for (std::int64_t done = 0; done < rows; done += group) {
    const std::int64_t m = std::min(group, rows - done);
    matmul(*weights_.output, &xn_[done * c.dim], m, staged_logits_.data(), pool_, matmul_scratch_);
    soft_cap(staged_logits_.data(), m * c.vocab_size, c.final_softcap);
    for (std::int64_t r = 0; r < m; ++r) {
      while (row_in_sequence == rows_of(steps[s])) {
        ++s;
        row_in_sequence = 0;
      }
      std::copy_n(&staged_logits_[static_cast<std::size_t>(r * c.vocab_size)], c.vocab_size,
                  steps[s].logits + row_in_sequence * c.vocab_size);
      ++row_in_sequence;
    }
  }
}

void LlamaModel::rotation_angles(std::int64_t n, float theta_step, float position_scale, float* out) {
  const std::int64_t pairs = config_.head_dim / 2;
  for (std::int64_t t = 0; t < n; ++t) {
    // The angle of pair i is position * base^(-2i/head_dim), built by repeated multiplication in float
    // as the reference implementation does, so positions far into the context agree with it to the last
    // bits; then linear scaling and the optional per-pair frequency factors.
    float theta = static_cast<float>(position_[static_cast<std::size_t>(t)]);
    float* rotation = out + t * pairs * 2;
    for (std::int64_t i = 0; i < pairs; ++i) {
      const float angle = position_scale * (theta / frequency_factor_[static_cast<std::size_t>(i)]);
      theta *= theta_step;
      rotation[2 * i] = std::cos(angle) * rotation_scale_;  // LongRoPE's attn_factor, else exactly 1
      rotation[2 * i + 1] = std::sin(angle) * rotation_scale_;
    }
  }
}

void LlamaModel::rope(float* vectors, std::int64_t heads, std::int64_t n, const float* rotation) {
  const auto& c = config_;
  const bool adjacent = c.rope_style == RopeStyle::adjacent_pairs;  // llama; qwen2/qwen3 rotate the halves
  for (std::int64_t t = 0; t < n; ++t) {
    rotate_pairs(vectors + t * heads * c.head_dim, heads, c.head_dim, rotation + t * c.head_dim, adjacent, kernel_path_);
  }
}

// Each token's key and value go to slot p % B of block table[p / B] of its sequence (B the block size),
// laid out for attention (attention.hpp): a block holds its keys as [kv_head][slot][head_dim], each head's
// rows one after another, and its values transposed, [kv_head * head_dim + d][slot], so that the scores and
// the weighted sum both read a head's block as contiguous runs.
void LlamaModel::store_keys_values(std::int64_t layer, std::int64_t n, std::span<const SequenceStep> steps,
                                   PagedKvCache& cache) {
  const std::int64_t width = config_.kv_dim();
  const std::int64_t head_dim = config_.head_dim;
  const std::int64_t block_size = cache.block_size();
  const bool half_cache = cache.type() == TensorType::f16;
  for (std::int64_t t = 0; t < n; ++t) {
    const std::int64_t p = position_[static_cast<std::size_t>(t)];
    const auto& table = steps[static_cast<std::size_t>(sequence_of_[static_cast<std::size_t>(t)])].block_table;
    const auto block = static_cast<std::size_t>(table[static_cast<std::size_t>(p / block_size)] * block_size * width);
    const auto slot = static_cast<std::size_t>(p % block_size);
    const float* k = &k_[t * width];
    const float* v = &v_[t * width];
    const auto stride = static_cast<std::size_t>(block_size);  // from one dimension's run to the next
    // Head h's key row: after the h heads before it (block_size rows each) and the slots before it.
    const auto key_row = [&](std::int64_t h) { return (static_cast<std::size_t>(h) * stride + slot) * static_cast<std::size_t>(head_dim); };
    if (half_cache) {
      auto* keys = static_cast<std::uint16_t*>(cache.keys(layer)) + block;
      auto* values = static_cast<std::uint16_t*>(cache.values(layer)) + block + slot;
      for (std::int64_t h = 0; h < width / head_dim; ++h) store_as_f16(k + h * head_dim, keys + key_row(h), head_dim, kernel_path_);
      std::uint16_t converted[256];  // the value, converted a piece at a time, then spread over its runs
      for (std::int64_t i0 = 0; i0 < width; i0 += 256) {
        const std::int64_t count = std::min<std::int64_t>(256, width - i0);
        store_as_f16(v + i0, converted, count, kernel_path_);
        for (std::int64_t i = 0; i < count; ++i) values[static_cast<std::size_t>(i0 + i) * stride] = converted[i];
      }
    } else {
      auto* keys = static_cast<float*>(cache.keys(layer)) + block;
      auto* values = static_cast<float*>(cache.values(layer)) + block + slot;
      for (std::int64_t h = 0; h < width / head_dim; ++h) std::copy_n(k + h * head_dim, head_dim, keys + key_row(h));
      for (std::int64_t i = 0; i < width; ++i) values[static_cast<std::size_t>(i) * stride] = v[i];
    }
  }
}

// Splits the step's tokens into attention tiles (tile_): runs of up to `queries` consecutive tokens of one
// sequence at consecutive positions, which attend as one HeadAttention (attention.hpp, "Prefill tiles").
std::int64_t LlamaModel::find_tiles(std::int64_t n, std::int64_t queries) {
  std::int64_t tiles = 0;
  for (std::int64_t t = 0; t < n;) {
    tile_[static_cast<std::size_t>(tiles++)] = t;
    const auto u = static_cast<std::size_t>(t);
    std::int64_t end = t + 1;
    while (end < n && end - t < queries && sequence_of_[static_cast<std::size_t>(end)] == sequence_of_[u] &&
           position_[static_cast<std::size_t>(end)] == position_[static_cast<std::size_t>(end) - 1] + 1) {
      ++end;
    }
    t = end;
  }
  tile_[static_cast<std::size_t>(tiles)] = n;
  return tiles;
}

// One (tile of tokens, KV head) per task, the KV head's query heads together: arithmetic and summation order in
// attention.hpp. A sequence with several tokens in the step sums in the tiled order and one with a single
// token in the vector-dot order, as the reference implementation's two kernels do for a batch and a decode
// step; the choice is per sequence, so a sequence's attention does not depend on what else is in the step.
void LlamaModel::attention(std::int64_t layer, std::int64_t n, std::span<const SequenceStep> steps,
                           PagedKvCache& cache) {
  const auto& c = config_;
  const std::int64_t group = c.heads / c.kv_heads;
  // Gemma scales its queries instead (forward()); the scores then take a scale of 1.
  const float scale = c.query_scale > 0.0f ? 1.0f : 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  const std::int64_t window = c.window(layer);
  const std::int64_t tile_queries = attention_tile_queries(group);
  const std::size_t scratch = attention_scratch_floats(c.context_length, c.head_dim, group, tile_queries);
  const std::int64_t tiles = find_tiles(n, tile_queries);
  const auto* keys = static_cast<const std::byte*>(cache.keys(layer));
  const auto* values = static_cast<const std::byte*>(cache.values(layer));
  const std::size_t element = cache.element_bytes();
  // Attention is compute (a score, an exp and a multiply-add per key and value element), not a stream, so it
  // is shared by its work rather than by ThreadPool's byte threshold: a decode step of a 12-head model at
  // a few dozen positions is ~10 us alone, during which the other threads would only wait.
  std::int64_t positions = 0;
  for (std::int64_t t = 0; t < n; ++t) positions += position_[static_cast<std::size_t>(t)] + 1;
  const std::int64_t work = positions * c.heads * c.head_dim;
  constexpr std::int64_t kMinSharedWork = 16384;  // ~1 us alone, about twice a fork-join
  // A task is a KV head's group of query heads for one tile of tokens (they read the same keys and values
  // once). Head-major tasks: a thread's consecutive tasks are one head's tiles, one after another, which read
  // the same keys and values (a prompt's stay in its cache while it moves along them), and the threads'
  // contiguous shares of heads carry equal work (token-major shares gave the first thread a prompt's short
  // early rows).
  pool_.parallel_for(tiles * c.kv_heads, work >= kMinSharedWork ? ThreadPool::kMinSharedBytes : 0, [&](std::int64_t task, int thread) {
    const std::int64_t tile = task % tiles;
    const std::int64_t t = tile_[static_cast<std::size_t>(tile)];
    const std::int64_t kv_head = task / tiles;
    const std::int64_t h = kv_head * group;  // the group's first query head
    const SequenceStep& step = steps[static_cast<std::size_t>(sequence_of_[static_cast<std::size_t>(t)])];
    // The KV head's part of each block (store_keys_values): its key rows, and its dimensions' value runs.
    const auto kv_offset = static_cast<std::size_t>(kv_head * c.head_dim * cache.block_size()) * element;
    HeadAttention head;
    head.query = &q_[(t * c.heads + h) * c.head_dim];
    head.query_heads = group;
    head.queries = tile_[static_cast<std::size_t>(tile) + 1] - t;
    head.query_stride = head.out_stride = static_cast<std::size_t>(c.heads * c.head_dim);
    head.keys = keys + kv_offset;
    head.values = values + kv_offset;
    head.kv_type = cache.type();
    head.stride = static_cast<std::size_t>(c.head_dim);
    head.block_table = step.block_table.data();
    head.block_size = cache.block_size();
    head.block_stride = static_cast<std::size_t>(c.kv_dim() * cache.block_size());
    head.values_transposed = true;
    head.positions = position_[static_cast<std::size_t>(t)] + 1;  // causal: positions 0..p (the tile's first)
    head.head_dim = c.head_dim;
    head.scale = scale;
    head.window = window;  // each query of the tile gets its own window start (attention.hpp)
    head.softcap = c.attn_softcap;
    head.order = step.tokens.size() == 1 ? SumOrder::vector_dot : SumOrder::tiled;
    head.lanes = reference_lanes_;
    // The reference's view covers the whole step (its last token's position), padded (attention.hpp).
    head.span = reference_span(step.start + static_cast<std::int64_t>(step.tokens.size()), c.context_length);
    head.scores = &scores_[static_cast<std::size_t>(thread) * scratch];
    head.out = &attn_[(t * c.heads + h) * c.head_dim];
    attend(head, kernel_path_);
  });
}

}  // namespace loom::compute
