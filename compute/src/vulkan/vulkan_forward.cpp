// The forward pass of a step as one recording, in LlamaModel::forward's order (compute/src/cpu/llama_model.cpp):
// everything that changes between steps of the same shape (token ids, positions, slots, block tables, the rows
// that want logits) is read from the host-visible input buffers, so the recording is made once per shape.
#include <cmath>

#include "vulkan_model.hpp"

namespace loom::compute::vulkan {

namespace {

constexpr std::uint64_t kFloat = sizeof(float);

BufferRange rows(const Buffer& buffer, std::int64_t n, std::int64_t width) {
  return buffer.range(0, static_cast<VkDeviceSize>(n * width) * kFloat);
}

// y_i = W_i x for products that share their input x (n rows of `cols`): the activations are prepared once when
// every weight takes them in the same form, else each product prepares its own.
// The products' summation order: the CPU's where the step's arithmetic is pinned (vulkan_matmul.hpp).
Summation summation(const StepBuffers& b) { return b.pinned ? Summation::pinned : Summation::fast; }

void products(OpContext& op, const StepBuffers& b,
              std::initializer_list<std::pair<const DeviceTensor*, BufferRange>> outputs, const BufferRange& x,
              std::int64_t n) {
  const Buffer& prepared = b.prepared;
  const ActivationFormat format = activation_format(outputs.begin()->first->type);
  bool shared = true;
  for (const auto& [w, y] : outputs) shared = shared && activation_format(w->type) == format;
  const std::int64_t cols = outputs.begin()->first->cols;
  if (shared) {
    const BufferRange input =
        format == ActivationFormat::f32 ? x : prepared.range(0, prepared_bytes(format, n, cols));
    prepare_activations(op, format, x, input, n, cols);
    for (const auto& [w, y] : outputs) matmul_prepared(op, *w, input, y, n, summation(b));
    return;
  }
  for (const auto& [w, y] : outputs) matmul(op, *w, x, y, n, prepared.range(), summation(b));
}

// rms_norm and rope, in the CPU's arithmetic where the step buffers say so (vulkan_pinned.hpp).
void norm(OpContext& op, const StepBuffers& b, const BufferRange& x, const BufferRange& weight, const BufferRange& out,
          std::int64_t rows, std::int64_t width, float epsilon) {
  if (b.pinned) return rms_norm_pinned(op, x, weight, out, rows, width, epsilon);
  rms_norm(op, x, weight, out, rows, width, epsilon);
}
void rotate(OpContext& op, const StepBuffers& b, const BufferRange& vectors, const BufferRange& rotation, std::int64_t n,
            std::int64_t heads, std::int64_t head_dim, bool adjacent) {
  if (b.pinned) return rope_pinned(op, vectors, rotation, n, heads, head_dim, adjacent);
  rope(op, vectors, rotation, n, heads, head_dim, adjacent);
}

void record_layer(OpContext& op, const ModelConfig& c, std::int64_t layer, const DeviceLayer& w, const KvStorage& kv,
                  const StepBuffers& b, bool rotation_swa, std::int64_t n) {
  const BufferRange x = rows(b.x, n, c.dim), xn = rows(b.xn, n, c.dim);
  const BufferRange q = rows(b.q, n, c.q_dim()), k = rows(b.k, n, c.kv_dim()), v = rows(b.v, n, c.kv_dim());
  norm(op, b, x, w.attn_norm, xn, n, c.dim, c.rms_epsilon);
  products(op, b, {{&w.wq, q}, {&w.wk, k}, {&w.wv, v}}, xn, n);
  if (w.bq) add_bias(op, q, *w.bq, n, c.q_dim());
  if (w.bk) add_bias(op, k, *w.bk, n, c.kv_dim());
  if (w.bv) add_bias(op, v, *w.bv, n, c.kv_dim());
  if (c.qk_norm) {
    norm(op, b, q, *w.q_norm, q, n * c.heads, c.head_dim, c.rms_epsilon);
    norm(op, b, k, *w.k_norm, k, n * c.kv_heads, c.head_dim, c.rms_epsilon);
  }
  // Sliding-window layers may rotate with their own base (gemma3's local layers).
  const Buffer& rotation_table = rotation_swa && c.window(layer) > 0 ? b.rotation_swa : b.rotation;
  const BufferRange rotation = rotation_table.range(0, static_cast<VkDeviceSize>(n * c.head_dim) * kFloat);
  const bool adjacent = c.rope_style == RopeStyle::adjacent_pairs;
  rotate(op, b, q, rotation, n, c.heads, c.head_dim, adjacent);
  rotate(op, b, k, rotation, n, c.kv_heads, c.head_dim, adjacent);
  if (c.query_scale > 0.0f) scale(op, q, n * c.q_dim(), c.query_scale);  // gemma scales the query, not the scores
  const auto l = static_cast<std::size_t>(layer);
  store_kv(op, kv.layout, k, v, b.slots.range(0, static_cast<VkDeviceSize>(n) * 4), kv.keys[l].range(),
           kv.values[l].range(), n);
  const AttentionShape shape{.n = n,
                             .heads = c.heads,
                             .scale = c.query_scale > 0.0f ? 1.0f : 1.0f / std::sqrt(static_cast<float>(c.head_dim)),
                             .window = c.window(layer),
                             .softcap = c.attn_softcap,
                             .max_positions = c.context_length};
  const BufferRange attn = rows(b.attn, n, c.q_dim());
  const BufferRange token_info = b.token_info.range(0, static_cast<VkDeviceSize>(n) * 16);
  if (b.pinned) {  // the CPU's arithmetic (vulkan_pinned.hpp); scratch sized for the widest step
    attention_pinned(op, kv.layout, shape, b.lanes, q, kv.keys[l].range(), kv.values[l].range(), token_info,
                     b.tables.range(), attn, b.attention_scratch.range());
  } else {
    attention(op, kv.layout, shape, q, kv.keys[l].range(), kv.values[l].range(), token_info, b.tables.range(), attn,
              b.attention_scratch.range());
  }
  matmul(op, w.wo, attn, xn, n, b.prepared.range(), summation(b));
  if (w.post_attn_norm) norm(op, b, xn, *w.post_attn_norm, xn, n, c.dim, c.rms_epsilon);
  add(op, x, xn, n * c.dim);

  norm(op, b, x, w.ffn_norm, xn, n, c.dim, c.rms_epsilon);
  if (w.experts) {  // x += moe(xn): routing, the chosen experts and the weighted sum on the device
    expert_feed_forward(op, *w.experts, xn, x, n, b.experts.range(),
                        b.pinned ? std::optional<LaneWidth>(b.lanes) : std::nullopt);
    return;
  }
  const BufferRange gate = rows(b.gate, n, c.ffn_dim), up = rows(b.up, n, c.ffn_dim);
  products(op, b, {{&w.gate, gate}, {&w.up, up}}, xn, n);
  if (c.ffn_activation == FfnActivation::gelu_tanh) {
    geglu_table(op, gate, up, n * c.ffn_dim, b.gelu_table.range());
  } else if (b.pinned) {
    swiglu_pinned(op, gate, up, n, c.ffn_dim, b.lanes);
  } else {
    swiglu(op, gate, up, n * c.ffn_dim);
  }
  matmul(op, w.down, gate, xn, n, b.prepared.range(), summation(b));
  if (w.post_ffn_norm) norm(op, b, xn, *w.post_ffn_norm, xn, n, c.dim, c.rms_epsilon);
  add(op, x, xn, n * c.dim);
}

// The final norm of the rows that want logits (gathered in logit-row order), the output product and its soft
// cap, the whole rows the host reads back, and the other rows' best candidates.
void record_logits(OpContext& op, const ModelConfig& c, const DeviceWeights& w, const StepBuffers& b,
                   const StepShape& shape) {
  const std::int64_t m = shape.logit_rows;
  const BufferRange gathered = rows(b.xn, m, c.dim);
  gather_rows(op, rows(b.x, shape.tokens, c.dim), b.logit_rows.range(0, static_cast<VkDeviceSize>(m) * 4), gathered, m,
              c.dim);
  norm(op, b, gathered, w.output_norm, gathered, m, c.dim, c.rms_epsilon);
  const BufferRange logits = rows(b.logits, m, c.vocab_size);
  matmul(op, w.output, gathered, logits, m, b.prepared.range(), summation(b));
  if (c.final_softcap > 0.0f) soft_cap(op, logits, m * c.vocab_size, c.final_softcap);
  if (shape.full_rows > 0) {  // a gather (rows 0, 1, ...), not a copy: it stays on the compute stage's barriers
    gather_rows(op, logits, b.identity.range(0, static_cast<VkDeviceSize>(shape.full_rows) * 4),
                rows(b.logits_out, shape.full_rows, c.vocab_size), shape.full_rows, c.vocab_size);
  }
  const std::int64_t candidate_rows = m - shape.full_rows;
  if (candidate_rows > 0) {
    const auto row_bytes = static_cast<VkDeviceSize>(c.vocab_size) * kFloat;
    top_k(op, b.logits.range(static_cast<VkDeviceSize>(shape.full_rows) * row_bytes, candidate_rows * row_bytes),
          candidate_rows, c.vocab_size, shape.candidates,
          b.candidates_out.range(0, static_cast<VkDeviceSize>(candidate_rows * shape.candidates) * 8));
  }
}

}  // namespace

void record_forward(OpContext& op, const ModelConfig& c, const DeviceWeights& w, const KvStorage& kv,
                    const StepBuffers& b, bool rotation_swa, const StepShape& shape) {
  const std::int64_t n = shape.tokens;
  get_rows(op, w.token_embd, b.tokens.range(0, static_cast<VkDeviceSize>(n) * 4), rows(b.x, n, c.dim), n,
           c.embedding_scale);
  for (std::int64_t layer = 0; layer < c.layers; ++layer) {
    record_layer(op, c, layer, w.layers[static_cast<std::size_t>(layer)], kv, b, rotation_swa, n);
  }
  if (shape.hidden) norm(op, b, rows(b.x, n, c.dim), w.output_norm, rows(b.hidden_out, n, c.dim), n, c.dim, c.rms_epsilon);
  if (shape.logit_rows > 0) record_logits(op, c, w, b, shape);
}

}  // namespace loom::compute::vulkan
