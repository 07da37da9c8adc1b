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

// The weight types loom computes with, from the type table (q8_1 and q8_K serve as activations only).
bool is_weight_type(const TensorTypeTraits& t) {
  return t.computable && t.type != TensorType::q8_1 && t.type != TensorType::q8_k;
}

std::string supported_weight_types() {
  std::string list;
  for (std::uint32_t id = 0; id < 64; ++id) {
    const TensorTypeTraits* t = find_tensor_type(id);
    if (t != nullptr && is_weight_type(*t)) list += (list.empty() ? "" : ", ") + std::string(t->name);
  }
  return list;
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
    if (t != nullptr && !is_weight_type(traits(t->type))) {
      throw std::runtime_error("tensor " + name + ": type " + std::string(compute::name(t->type)) +
                               " is not supported (supported: " + supported_weight_types() + ")");
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

namespace {

// A view of rows [first, first + rows) of a checked 2-D or 3-D tensor (3-D flattens its outer dimensions
// into rows), kept in `store`.
const TensorView* row_range(std::deque<TensorView>& store, const TensorView& t, std::int64_t first, std::int64_t rows,
                            const std::string& name) {
  if (first < 0 || rows <= 0 || first + rows > t.rows()) {
    throw std::runtime_error("tensor " + t.name + ": rows " + std::to_string(first) + ".." + std::to_string(first + rows) +
                             " are outside its " + std::to_string(t.rows()));
  }
  TensorView v;
  v.name = name;
  v.type = t.type;
  v.dims = {t.cols(), rows};
  v.data = t.row(first);
  v.bytes = t.row_bytes() * static_cast<std::uint64_t>(rows);
  return &store.emplace_back(std::move(v));
}

// phi3: q, k, v as row ranges of attn_qkv, gate and up of ffn_up; one product still runs them together.
void bind_fused(const ModelConfig& c, const Binder& b, const std::string& p, std::deque<TensorView>& store,
                LayerWeights& l) {
  if (c.fused_qkv) {
    const TensorView* qkv = b.required(p + "attn_qkv.weight", {c.dim, c.q_dim() + 2 * c.kv_dim()});
    l.wq = row_range(store, *qkv, 0, c.q_dim(), p + "attn_qkv.weight[q]");
    l.wk = row_range(store, *qkv, c.q_dim(), c.kv_dim(), p + "attn_qkv.weight[k]");
    l.wv = row_range(store, *qkv, c.q_dim() + c.kv_dim(), c.kv_dim(), p + "attn_qkv.weight[v]");
  }
  if (c.fused_gate_up) {
    const TensorView* up = b.required(p + "ffn_up.weight", {c.dim, 2 * c.ffn_dim});
    l.gate = row_range(store, *up, 0, c.ffn_dim, p + "ffn_up.weight[gate]");
    l.up = row_range(store, *up, c.ffn_dim, c.ffn_dim, p + "ffn_up.weight[up]");
  }
}

// MoE: the router, one view per expert over each 3-D tensor, and the optional shared expert.
void bind_experts(const ModelConfig& c, const Binder& b, const std::string& p, std::deque<TensorView>& store,
                  LayerWeights& l) {
  l.router = b.required(p + "ffn_gate_inp.weight", {c.dim, c.experts});
  if (l.router->type != TensorType::f32) {  // as every converter stores it; the router's order is F32's
    throw std::runtime_error("tensor " + l.router->name + ": expected type f32, the file has " +
                             std::string(compute::name(l.router->type)));
  }
  if (b.optional(p + "ffn_gate_exps.weight", {c.dim, c.expert_ffn_dim, c.experts}) == nullptr &&
      b.optional(p + "ffn_gate.0.weight", {c.dim, c.expert_ffn_dim}) != nullptr) {
    // Older Mixtral conversions store each expert as its own 2-D tensors, blk.N.ffn_{gate,up,down}.E.weight.
    for (std::int64_t e = 0; e < c.experts; ++e) {
      const std::string which = "." + std::to_string(e) + ".weight";
      l.experts.push_back({b.required(p + "ffn_gate" + which, {c.dim, c.expert_ffn_dim}),
                           b.required(p + "ffn_up" + which, {c.dim, c.expert_ffn_dim}),
                           b.required(p + "ffn_down" + which, {c.expert_ffn_dim, c.dim})});
    }
    return;
  }
  const TensorView* gate = b.required(p + "ffn_gate_exps.weight", {c.dim, c.expert_ffn_dim, c.experts});
  const TensorView* up = b.required(p + "ffn_up_exps.weight", {c.dim, c.expert_ffn_dim, c.experts});
  const TensorView* down = b.required(p + "ffn_down_exps.weight", {c.expert_ffn_dim, c.dim, c.experts});
  for (std::int64_t e = 0; e < c.experts; ++e) {
    std::string which = std::to_string(e);  // (not "[" + ...: GCC 12 warns falsely on that concatenation)
    which.insert(which.begin(), '[');
    which.push_back(']');
    l.experts.push_back({row_range(store, *gate, e * c.expert_ffn_dim, c.expert_ffn_dim, gate->name + which),
                         row_range(store, *up, e * c.expert_ffn_dim, c.expert_ffn_dim, up->name + which),
                         row_range(store, *down, e * c.dim, c.dim, down->name + which)});
  }
  if (c.shared_expert_ffn_dim > 0) {
    const std::int64_t h = c.shared_expert_ffn_dim;
    l.shared_expert = {b.required(p + "ffn_gate_shexp.weight", {c.dim, h}), b.required(p + "ffn_up_shexp.weight", {c.dim, h}),
                       b.required(p + "ffn_down_shexp.weight", {h, c.dim})};
    l.shared_expert_gate = b.optional(p + "ffn_gate_inp_shexp.weight", {c.dim});
  }
}

}  // namespace

ModelWeights bind_weights(const ModelConfig& c, const TensorLookup& find) {
  const Binder b(find);
  ModelWeights w;
  w.token_embd = b.required("token_embd.weight", {c.dim, c.vocab_size});
  w.output_norm = b.f32_vector("output_norm.weight", c.dim, true);
  w.output = b.optional("output.weight", {c.dim, c.vocab_size});
  if (w.output == nullptr) w.output = w.token_embd;  // tied embeddings
  w.rope_freqs = b.f32_vector("rope_freqs.weight", c.head_dim / 2, false);
  w.rope_factors_long = b.f32_vector("rope_factors_long.weight", c.head_dim / 2, c.rope_original_context > 0);
  w.rope_factors_short = b.f32_vector("rope_factors_short.weight", c.head_dim / 2, c.rope_original_context > 0);
  w.derived = std::make_shared<std::deque<TensorView>>();
  auto& store = *w.derived;

  for (std::int64_t i = 0; i < c.layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LayerWeights l;
    l.attn_norm = b.f32_vector(p + "attn_norm.weight", c.dim, true);
    bind_fused(c, b, p, store, l);
    if (!c.fused_qkv) {
      l.wq = b.required(p + "attn_q.weight", {c.dim, c.q_dim()});
      l.wk = b.required(p + "attn_k.weight", {c.dim, c.kv_dim()});
      l.wv = b.required(p + "attn_v.weight", {c.dim, c.kv_dim()});
    }
    l.wo = b.required(p + "attn_output.weight", {c.q_dim(), c.dim});
    l.bq = b.f32_vector(p + "attn_q.bias", c.q_dim(), c.qkv_bias);
    l.bk = b.f32_vector(p + "attn_k.bias", c.kv_dim(), c.qkv_bias);
    l.bv = b.f32_vector(p + "attn_v.bias", c.kv_dim(), c.qkv_bias);
    l.q_norm = b.f32_vector(p + "attn_q_norm.weight", c.head_dim, c.qk_norm);
    l.k_norm = b.f32_vector(p + "attn_k_norm.weight", c.head_dim, c.qk_norm);
    l.ffn_norm = b.f32_vector(p + "ffn_norm.weight", c.dim, true);
    if (c.experts > 0) {
      bind_experts(c, b, p, store, l);
    } else {
      if (!c.fused_gate_up) {
        l.gate = b.required(p + "ffn_gate.weight", {c.dim, c.ffn_dim});
        l.up = b.required(p + "ffn_up.weight", {c.dim, c.ffn_dim});
      }
      l.down = b.required(p + "ffn_down.weight", {c.ffn_dim, c.dim});
    }
    if (c.post_norms) {
      l.post_attn_norm = b.f32_vector(p + "post_attention_norm.weight", c.dim, true);
      l.post_ffn_norm = b.f32_vector(p + "post_ffw_norm.weight", c.dim, true);
    }
    w.layers.push_back(l);
  }
  return w;
}

}  // namespace loom::compute
