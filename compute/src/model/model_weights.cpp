#include "loom/compute/model/model_weights.hpp"

#include <stdexcept>
#include <string>

namespace loom::compute {
namespace {

std::string dims_text(const std::vector<std::int64_t>& dims) {
  std::string text = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) text += (i ? ", " : "") + std::to_string(dims[i]);
  return text + "]";
}

class Binder {
 public:
  explicit Binder(const TensorLookup& find) : find_(find) {}

  const TensorView* optional(const std::string& name, std::vector<std::int64_t> dims) const {
    const TensorView* t = find_(name);
    if (t != nullptr && t->dims != dims) {
      throw std::runtime_error("tensor " + name + ": expected dimensions " + dims_text(dims) + ", the file has " +
                               dims_text(t->dims));
    }
    if (t != nullptr && !traits(t->type).computable) {
      throw std::runtime_error("tensor " + name + ": type " + std::string(compute::name(t->type)) +
                               " is not supported (supported: f32, f16, bf16, q8_0, q4_0, q4_K, q5_K, q6_K)");
    }
    return t;
  }

  const TensorView* required(const std::string& name, std::vector<std::int64_t> dims) const {
    const TensorView* t = optional(name, dims);
    if (t == nullptr) throw std::runtime_error("missing tensor " + name + " with dimensions " + dims_text(dims));
    return t;
  }

  // Norms and biases are added to F32 activations element by element, so they must be stored as F32.
  const TensorView* f32_vector(const std::string& name, std::int64_t n, bool needed) const {
    const TensorView* t = needed ? required(name, {n}) : optional(name, {n});
    if (t != nullptr && t->type != TensorType::f32) {
      throw std::runtime_error("tensor " + name + ": expected type f32, the file has " + std::string(compute::name(t->type)));
    }
    return t;
  }

 private:
  const TensorLookup& find_;
};

}  // namespace

ModelWeights bind_weights(const ModelConfig& c, const TensorLookup& find) {
  const Binder b(find);
  ModelWeights w;
  w.token_embd = b.required("token_embd.weight", {c.dim, c.vocab_size});
  w.output_norm = b.f32_vector("output_norm.weight", c.dim, true);
  w.output = b.optional("output.weight", {c.dim, c.vocab_size});
  if (w.output == nullptr) w.output = w.token_embd;  // tied embeddings
  w.rope_freqs = b.f32_vector("rope_freqs.weight", c.head_dim / 2, false);

  for (std::int64_t i = 0; i < c.layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LayerWeights l;
    l.attn_norm = b.f32_vector(p + "attn_norm.weight", c.dim, true);
    l.wq = b.required(p + "attn_q.weight", {c.dim, c.q_dim()});
    l.wk = b.required(p + "attn_k.weight", {c.dim, c.kv_dim()});
    l.wv = b.required(p + "attn_v.weight", {c.dim, c.kv_dim()});
    l.wo = b.required(p + "attn_output.weight", {c.q_dim(), c.dim});
    l.bq = b.f32_vector(p + "attn_q.bias", c.q_dim(), c.qkv_bias);
    l.bk = b.f32_vector(p + "attn_k.bias", c.kv_dim(), c.qkv_bias);
    l.bv = b.f32_vector(p + "attn_v.bias", c.kv_dim(), c.qkv_bias);
    l.q_norm = b.f32_vector(p + "attn_q_norm.weight", c.head_dim, c.qk_norm);
    l.k_norm = b.f32_vector(p + "attn_k_norm.weight", c.head_dim, c.qk_norm);
    l.ffn_norm = b.f32_vector(p + "ffn_norm.weight", c.dim, true);
    l.gate = b.required(p + "ffn_gate.weight", {c.dim, c.ffn_dim});
    l.up = b.required(p + "ffn_up.weight", {c.dim, c.ffn_dim});
    l.down = b.required(p + "ffn_down.weight", {c.ffn_dim, c.dim});
    if (c.post_norms) {
      l.post_attn_norm = b.f32_vector(p + "post_attention_norm.weight", c.dim, true);
      l.post_ffn_norm = b.f32_vector(p + "post_ffw_norm.weight", c.dim, true);
    }
    w.layers.push_back(l);
  }
  return w;
}

}  // namespace loom::compute
