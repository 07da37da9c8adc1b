// A plain double-precision forward pass for the tests of phi3 (fused tensors, LongRoPE) and the
// mixture-of-experts models: one token at a time, every tensor dequantized to doubles, written from the
// definitions rather than from loom's code, so that the forward pass is checked against something
// independent of it. Records which experts each (layer, token) chose, for tests that need the routing, and
// the final normed hidden states, for the embedding tests' pooling.
#pragma once

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "loom/compute/cpu/dequantize.hpp"
#include "loom/compute/model/gguf_file.hpp"
#include "loom/compute/model_config.hpp"

namespace loom::compute::testing {

using Vec = std::vector<double>;

struct DoubleForward {
  std::vector<Vec> logits;                          // per token
  std::vector<Vec> hidden;                          // per token: the final hidden state after the output norm
  std::vector<std::vector<std::vector<int>>> chosen;  // [layer][token]: experts, highest probability first
};

namespace double_reference {

inline Vec get(const GgufFile& file, const std::string& name) {
  const TensorView& t = file.get_tensor(name);
  std::vector<float> row(static_cast<std::size_t>(t.cols()));
  Vec out;
  for (std::int64_t r = 0; r < t.rows(); ++r) {
    dequantize_row(t.type, t.row(r), row.data(), t.cols());
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

// y = W[first_row .. first_row + rows) x
inline Vec matvec(const Vec& w, const Vec& x, std::int64_t rows, std::int64_t cols, std::int64_t first_row = 0) {
  Vec y(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (std::int64_t c = 0; c < cols; ++c) s += w[(first_row + r) * cols + c] * x[c];
    y[r] = s;
  }
  return y;
}

inline Vec rmsnorm(const Vec& x, const double* w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double scale = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  Vec y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = x[i] * scale * w[i];
  return y;
}

// SwiGLU feed-forward with gate rows [g0, g0 + h) and up rows [u0, u0 + h) (fused tensors share one matrix).
inline Vec swiglu_ffn(const Vec& gate, std::int64_t g0, const Vec& up, std::int64_t u0, const Vec& down, std::int64_t d0,
                      const Vec& x, std::int64_t h, std::int64_t dim) {
  const Vec g = matvec(gate, x, h, dim, g0);
  const Vec u = matvec(up, x, h, dim, u0);
  Vec hidden(static_cast<std::size_t>(h));
  for (std::int64_t i = 0; i < h; ++i) hidden[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
  // down is [dim][h] per expert: its rows d0 .. d0 + dim.
  return matvec(down, hidden, dim, h, d0);
}

}  // namespace double_reference

// The forward pass of `tokens` at positions 0, 1, ...; `context` is the context the model runs at (LongRoPE's
// choice of factors).
inline DoubleForward double_forward(const GgufFile& file, const ModelConfig& c, const std::vector<std::int32_t>& tokens,
                                    std::int64_t context) {
  using namespace double_reference;
  const std::int64_t hd = c.head_dim, kvd = c.kv_dim(), group = c.heads / c.kv_heads;
  std::vector<std::vector<Vec>> keys(c.layers), values(c.layers);
  const Vec embd = get(file, "token_embd.weight");
  const Vec out_norm = get(file, "output_norm.weight");
  const Vec out = file.find_tensor("output.weight") != nullptr ? get(file, "output.weight") : embd;
  Vec factors(static_cast<std::size_t>(hd / 2), 1.0);
  double rotation_scale = 1.0;
  if (c.rope_original_context > 0) {
    factors = get(file, context <= c.rope_original_context ? "rope_factors_short.weight" : "rope_factors_long.weight");
    rotation_scale = c.rope_attn_factor;
  }
  DoubleForward result;
  result.chosen.resize(static_cast<std::size_t>(c.layers));
  for (std::size_t pos = 0; pos < tokens.size(); ++pos) {
    Vec x(embd.begin() + tokens[pos] * c.dim, embd.begin() + (tokens[pos] + 1) * c.dim);
    for (std::int64_t l = 0; l < c.layers; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      const Vec xn = rmsnorm(x, get(file, p + "attn_norm.weight").data(), c.rms_epsilon);
      Vec q, k, v;
      if (c.fused_qkv) {
        const Vec qkv = get(file, p + "attn_qkv.weight");
        q = matvec(qkv, xn, c.q_dim(), c.dim, 0);
        k = matvec(qkv, xn, kvd, c.dim, c.q_dim());
        v = matvec(qkv, xn, kvd, c.dim, c.q_dim() + kvd);
      } else {
        q = matvec(get(file, p + "attn_q.weight"), xn, c.q_dim(), c.dim);
        k = matvec(get(file, p + "attn_k.weight"), xn, kvd, c.dim);
        v = matvec(get(file, p + "attn_v.weight"), xn, kvd, c.dim);
      }
      if (c.qkv_bias) {
        const Vec bq = get(file, p + "attn_q.bias"), bk = get(file, p + "attn_k.bias"), bv = get(file, p + "attn_v.bias");
        for (std::size_t i = 0; i < q.size(); ++i) q[i] += bq[i];
        for (std::size_t i = 0; i < k.size(); ++i) k[i] += bk[i], v[i] += bv[i];
      }
      if (c.qk_norm) {
        const Vec qn = get(file, p + "attn_q_norm.weight"), kn = get(file, p + "attn_k_norm.weight");
        auto norm_heads = [&](Vec& vec, std::int64_t heads, const Vec& w) {
          for (std::int64_t h = 0; h < heads; ++h) {
            Vec head(vec.begin() + h * hd, vec.begin() + (h + 1) * hd);
            head = rmsnorm(head, w.data(), c.rms_epsilon);
            std::copy(head.begin(), head.end(), vec.begin() + h * hd);
          }
        };
        norm_heads(q, c.heads, qn);
        norm_heads(k, c.kv_heads, kn);
      }
      // Pair i turns by pos * base^(-2i/hd) / factor_i; LongRoPE scales cos and sin by its attn_factor.
      auto rotate = [&](Vec& vec, std::int64_t heads) {
        for (std::int64_t h = 0; h < heads; ++h) {
          for (std::int64_t i = 0; i < hd / 2; ++i) {
            const double freq = std::pow(static_cast<double>(c.rope_freq_base), -2.0 * static_cast<double>(i) / static_cast<double>(hd));
            const double angle = static_cast<double>(pos) * freq / factors[i];
            const double cs = std::cos(angle) * rotation_scale, sn = std::sin(angle) * rotation_scale;
            const std::int64_t a = c.rope_style == RopeStyle::adjacent_pairs ? 2 * i : i;
            const std::int64_t b = c.rope_style == RopeStyle::adjacent_pairs ? 2 * i + 1 : i + hd / 2;
            const double x0 = vec[h * hd + a], x1 = vec[h * hd + b];
            vec[h * hd + a] = x0 * cs - x1 * sn;
            vec[h * hd + b] = x0 * sn + x1 * cs;
          }
        }
      };
      rotate(q, c.heads);
      rotate(k, c.kv_heads);
      keys[l].push_back(k);
      values[l].push_back(v);
      Vec attn(static_cast<std::size_t>(c.q_dim()), 0.0);
      for (std::int64_t h = 0; h < c.heads; ++h) {
        const std::int64_t kvh = h / group;
        Vec scores(pos + 1);
        double mx = -1e300;
        for (std::size_t t = 0; t <= pos; ++t) {
          double s = 0;
          for (std::int64_t d = 0; d < hd; ++d) s += q[h * hd + d] * keys[l][t][kvh * hd + d];
          scores[t] = s / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, scores[t]);
        }
        double sum = 0;
        for (auto& s : scores) sum += (s = std::exp(s - mx));
        for (std::size_t t = 0; t <= pos; ++t) {
          for (std::int64_t d = 0; d < hd; ++d) attn[h * hd + d] += scores[t] / sum * values[l][t][kvh * hd + d];
        }
      }
      const Vec o = matvec(get(file, p + "attn_output.weight"), attn, c.dim, c.q_dim());
      for (std::int64_t i = 0; i < c.dim; ++i) x[i] += o[i];
      const Vec xf = rmsnorm(x, get(file, p + "ffn_norm.weight").data(), c.rms_epsilon);
      Vec ffn(static_cast<std::size_t>(c.dim), 0.0);
      if (c.experts == 0) {
        const Vec up = get(file, p + "ffn_up.weight");
        const Vec gate = c.fused_gate_up ? up : get(file, p + "ffn_gate.weight");
        ffn = swiglu_ffn(gate, 0, up, c.fused_gate_up ? c.ffn_dim : 0, get(file, p + "ffn_down.weight"), 0, xf, c.ffn_dim, c.dim);
      } else {
        // Softmax over every expert, the top experts_used (ties to the lower index), optionally renormalized.
        const Vec logits = matvec(get(file, p + "ffn_gate_inp.weight"), xf, c.experts, c.dim);
        const double mx = *std::max_element(logits.begin(), logits.end());
        Vec prob(logits.size());
        double total = 0;
        for (std::size_t e = 0; e < prob.size(); ++e) total += (prob[e] = std::exp(logits[e] - mx));
        for (double& pr : prob) pr /= total;
        std::vector<int> order(prob.size());
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return prob[a] > prob[b]; });
        order.resize(static_cast<std::size_t>(c.experts_used));
        result.chosen[l].push_back(order);
        double chosen_sum = 0;
        for (int e : order) chosen_sum += prob[e];
        const Vec gate = get(file, p + "ffn_gate_exps.weight"), up = get(file, p + "ffn_up_exps.weight");
        const Vec down = get(file, p + "ffn_down_exps.weight");
        const std::int64_t h = c.expert_ffn_dim;
        for (int e : order) {
          const double w = c.expert_weights_norm ? prob[e] / chosen_sum : prob[e];
          const Vec y = swiglu_ffn(gate, e * h, up, e * h, down, e * c.dim, xf, h, c.dim);
          for (std::int64_t i = 0; i < c.dim; ++i) ffn[i] += w * y[i];
        }
        if (c.shared_expert_ffn_dim > 0) {
          const Vec y = swiglu_ffn(get(file, p + "ffn_gate_shexp.weight"), 0, get(file, p + "ffn_up_shexp.weight"), 0,
                                   get(file, p + "ffn_down_shexp.weight"), 0, xf, c.shared_expert_ffn_dim, c.dim);
          const double g = matvec(get(file, p + "ffn_gate_inp_shexp.weight"), xf, 1, c.dim)[0];
          const double sigmoid = 1.0 / (1.0 + std::exp(-g));
          for (std::int64_t i = 0; i < c.dim; ++i) ffn[i] += sigmoid * y[i];
        }
      }
      for (std::int64_t i = 0; i < c.dim; ++i) x[i] += ffn[i];
    }
    result.hidden.push_back(rmsnorm(x, out_norm.data(), c.rms_epsilon));
    result.logits.push_back(matvec(out, result.hidden.back(), c.vocab_size, c.dim));
  }
  return result;
}

}  // namespace loom::compute::testing
