#include "loom/compute/model_synth.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <stdexcept>
#include <vector>

#include "loom/compute/cpu/quantize.hpp"
#include "loom/compute/model/gguf_file.hpp"
#include "loom/compute/model/gguf_writer.hpp"

namespace loom::compute {
namespace {

// splitmix64: tiny, fast, and the same on every platform, so a seed names one model everywhere.
class Random {
 public:
  explicit Random(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1).
  float uniform() { return static_cast<float>(static_cast<double>(next() >> 11) * 0x1.0p-53 * 2.0 - 1.0); }

 private:
  std::uint64_t state_;
};

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("synthetic model: " + what);
}

class Builder {
 public:
  Builder(GgufWriter& writer, Random& random) : writer_(writer), random_(random) {}

  // A matrix of `rows` x `cols` (GGUF dims {cols, rows}) with values uniform in [-scale, scale]; with
  // count > 0, that many of them in one 3-D tensor (dims {cols, rows, count}: the expert tensors).
  void matrix(const std::string& name, std::int64_t cols, std::int64_t rows, TensorType type, float scale,
              std::int64_t count = 0) {
    const std::int64_t all_rows = rows;
    rows *= std::max<std::int64_t>(count, 1);
    std::vector<float> values(static_cast<std::size_t>(cols * rows));
    for (auto& v : values) v = random_.uniform() * scale;
    const auto row_bytes = tensor_bytes(type, static_cast<std::uint64_t>(cols));
    require(row_bytes.has_value(), name + ": " + std::to_string(cols) + " columns are not a whole number of " +
                                       std::string(compute::name(type)) + " blocks");
    std::vector<std::byte> data(*row_bytes * static_cast<std::size_t>(rows));
    for (std::int64_t r = 0; r < rows; ++r) {
      quantize_row(type, &values[static_cast<std::size_t>(r * cols)], &data[*row_bytes * static_cast<std::size_t>(r)], cols);
    }
    if (count > 0) {
      writer_.add_tensor(name, type, {cols, all_rows, count}, data);
    } else {
      writer_.add_tensor(name, type, {cols, rows}, data);
    }
  }

  // A vector around `center` (norm weights near 1, biases near 0).
  void vector(const std::string& name, std::int64_t n, float center, float spread) {
    std::vector<float> values(static_cast<std::size_t>(n));
    for (auto& v : values) v = center + random_.uniform() * spread;
    writer_.add_f32_tensor(name, {n}, values);
  }

 private:
  GgufWriter& writer_;
  Random& random_;
};

// phi3's fused Q|K|V, in place of attn_q/k/v.
void phi3_attention(Builder& b, const SynthSpec& s, const std::string& p, std::int64_t kv_dim, float scale) {
  b.matrix(p + "attn_qkv.weight", s.dim, s.dim + 2 * kv_dim, s.type, scale);
}

// A layer's feed-forward: dense (phi3: gate and up fused in ffn_up), or experts with their router (scaled up
// so that choices have clear margins) and the optional shared expert.
void feed_forward(Builder& b, const SynthSpec& s, const std::string& p, float dim_scale, float ffn_scale,
                  float expert_scale) {
  if (s.experts == 0) {
    if (s.architecture == Architecture::phi3) {
      b.matrix(p + "ffn_up.weight", s.dim, 2 * s.ffn_dim, s.type, dim_scale);
    } else {
      b.matrix(p + "ffn_gate.weight", s.dim, s.ffn_dim, s.type, dim_scale);
      b.matrix(p + "ffn_up.weight", s.dim, s.ffn_dim, s.type, dim_scale);
    }
    b.matrix(p + "ffn_down.weight", s.ffn_dim, s.dim, s.type, ffn_scale);
    return;
  }
  const std::int64_t width = s.expert_ffn_dim > 0 ? s.expert_ffn_dim : s.ffn_dim;
  b.matrix(p + "ffn_gate_inp.weight", s.dim, s.experts, TensorType::f32, 4.0f * dim_scale);
  b.matrix(p + "ffn_gate_exps.weight", s.dim, width, s.type, dim_scale, s.experts);
  b.matrix(p + "ffn_up_exps.weight", s.dim, width, s.type, dim_scale, s.experts);
  b.matrix(p + "ffn_down_exps.weight", width, s.dim, s.type, expert_scale, s.experts);
  if (s.shared_expert_ffn_dim > 0) {
    const std::int64_t h = s.shared_expert_ffn_dim;
    b.vector(p + "ffn_gate_inp_shexp.weight", s.dim, 0.0f, dim_scale);
    b.matrix(p + "ffn_gate_shexp.weight", s.dim, h, s.type, dim_scale);
    b.matrix(p + "ffn_up_shexp.weight", s.dim, h, s.type, dim_scale);
    b.matrix(p + "ffn_down_shexp.weight", h, s.dim, s.type, std::sqrt(3.0f / static_cast<float>(h)));
  }
}

// The metadata of experts and LongRoPE, and LongRoPE's two factor vectors (short near 1, long larger).
void expert_and_long_rope_keys(GgufWriter& writer, Builder& b, const SynthSpec& s, const std::string& arch,
                               std::int64_t head_dim) {
  if (s.experts > 0) {
    writer.add_u32(arch + ".expert_count", static_cast<std::uint32_t>(s.experts));
    writer.add_u32(arch + ".expert_used_count", static_cast<std::uint32_t>(s.experts_used));
    if (s.expert_ffn_dim > 0) writer.add_u32(arch + ".expert_feed_forward_length", static_cast<std::uint32_t>(s.expert_ffn_dim));
    if (s.shared_expert_ffn_dim > 0) {
      writer.add_u32(arch + ".expert_shared_feed_forward_length", static_cast<std::uint32_t>(s.shared_expert_ffn_dim));
    }
  }
  if (s.rope_original_context > 0) {
    writer.add_u32(arch + ".rope.scaling.original_context_length", static_cast<std::uint32_t>(s.rope_original_context));
    writer.add_f32(arch + ".rope.scaling.attn_factor", s.rope_attn_factor);
    b.vector("rope_factors_long.weight", head_dim / 2, 4.0f, 3.0f);
    b.vector("rope_factors_short.weight", head_dim / 2, 1.5f, 0.5f);
  }
}

}  // namespace

namespace {

// A SentencePiece ("llama") vocabulary: <unk> <s> </s>, the 256 byte-fallback tokens, every printable ASCII
// character, and common English words with the word-start marker U+2581 (with every prefix of each, so the
// merges that build a word exist). Scores favour longer pieces. Returns the token count.
std::int64_t add_builtin_vocabulary(GgufWriter& writer) {
  static constexpr const char* kWords[] = {
      "the", "and", "that", "was", "his", "with", "for", "had", "you", "not", "but", "her", "she", "they", "have",
      "what", "were", "there", "one", "all", "when", "from", "said", "this", "would", "could", "time", "little",
      "once", "upon", "day", "sun", "cat", "dog", "tree", "house", "happy", "play", "friend", "went", "saw",
      "big", "small", "good", "very", "like", "went", "home", "water", "light", "story", "world", "model", "token",
      "loom", "random", "weights", "hello", "is", "in", "it", "of", "to", "a", "he", "on", "at", "be", "we", "so"};
  const std::string marker = "\xE2\x96\x81";  // U+2581, SentencePiece's word start
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<std::int32_t> types = {2, 3, 3};  // unknown, control, control
  std::vector<float> scores = {0.0f, 0.0f, 0.0f};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    tokens.emplace_back(name);
    types.push_back(6);  // byte
    scores.push_back(0.0f);
  }
  std::set<std::string> seen;
  const auto piece = [&](const std::string& text) {
    if (!seen.insert(text).second) return;
    tokens.push_back(text);
    types.push_back(1);  // normal
    scores.push_back(-1000.0f + static_cast<float>(text.size()));
  };
  piece(marker);
  for (char c = '!'; c <= '~'; ++c) piece(std::string(1, c));
  for (char c = 'a'; c <= 'z'; ++c) piece(marker + c);
  for (const char* word : kWords) {
    const std::string full = marker + word;
    for (std::size_t n = marker.size() + 1; n <= full.size(); ++n) piece(full.substr(0, n));
  }
  writer.add_string("tokenizer.ggml.model", "llama");
  writer.add_array("tokenizer.ggml.tokens", GgufArray(tokens));
  writer.add_array("tokenizer.ggml.scores", GgufArray(scores));
  writer.add_array("tokenizer.ggml.token_type", GgufArray(types));
  writer.add_u32("tokenizer.ggml.bos_token_id", 1);
  writer.add_u32("tokenizer.ggml.eos_token_id", 2);
  writer.add_u32("tokenizer.ggml.unknown_token_id", 0);
  return static_cast<std::int64_t>(tokens.size());
}

// The metadata of the features beyond Llama's: a head size of its own, the sliding window, the soft-caps and
// the sliding layers' rope base, each written only when the spec asks for it.
void add_feature_keys(GgufWriter& writer, const SynthSpec& s, const std::string& arch) {
  if (s.head_dim > 0) {
    writer.add_u32(arch + ".attention.key_length", static_cast<std::uint32_t>(s.head_dim));
    writer.add_u32(arch + ".attention.value_length", static_cast<std::uint32_t>(s.head_dim));
  }
  if (s.sliding_window > 0) writer.add_u32(arch + ".attention.sliding_window", static_cast<std::uint32_t>(s.sliding_window));
  if (s.attn_softcap > 0.0f) writer.add_f32(arch + ".attn_logit_softcapping", s.attn_softcap);
  if (s.final_softcap > 0.0f) writer.add_f32(arch + ".final_logit_softcapping", s.final_softcap);
  if (s.rope_freq_base_swa > 0.0f) writer.add_f32(arch + ".rope.freq_base_swa", s.rope_freq_base_swa);
}

}  // namespace

void write_synthetic_model(const SynthSpec& s, const std::string& path) {
  require(s.dim > 0 && s.ffn_dim > 0 && s.layers > 0 && s.heads > 0 && s.kv_heads > 0 && s.context_length > 0,
          "dim, ffn, layers, heads, kv-heads and context must be positive");
  require(s.head_dim > 0 || s.dim % s.heads == 0, "dim " + std::to_string(s.dim) + " is not a multiple of heads " + std::to_string(s.heads));
  require(s.heads % s.kv_heads == 0, "heads " + std::to_string(s.heads) + " is not a multiple of kv-heads " +
                                         std::to_string(s.kv_heads));
  require((s.head_dim > 0 ? s.head_dim : s.dim / s.heads) % 2 == 0, "the head dimension must be even");
  require(s.head_dim >= 0 && s.sliding_window >= 0, "head-dim and sliding-window must not be negative");
  require(s.experts == 0 || (s.experts_used >= 1 && s.experts_used <= s.experts),
          "experts used must be between 1 and the expert count");
  require(s.experts > 0 || (s.architecture != Architecture::qwen2moe && s.architecture != Architecture::qwen3moe),
          "a qwen2moe or qwen3moe model needs experts");
  require(s.rope_original_context == 0 || s.architecture == Architecture::phi3, "LongRoPE is written for phi3 only");
  require(s.architecture != Architecture::phi3 || s.head_dim == 0 || s.head_dim * s.heads == s.dim,
          "phi3's fused attention takes head-dim = dim / heads");
  require(s.type == TensorType::f32 || s.type == TensorType::f16 || s.type == TensorType::bf16 ||
              s.type == TensorType::q8_0 || s.type == TensorType::q4_0 || s.type == TensorType::q4_k ||
              s.type == TensorType::q5_k || s.type == TensorType::q6_k || s.type == TensorType::q4_1 ||
              s.type == TensorType::q5_0 || s.type == TensorType::q5_1 || s.type == TensorType::iq4_nl ||
              s.type == TensorType::q2_k || s.type == TensorType::q3_k || s.type == TensorType::iq4_xs,
          "type must be f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, q2_K, q3_K, q4_K, q5_K, q6_K or iq4_xs");

  GgufWriter writer;
  std::int64_t vocab = s.vocab_size;
  if (!s.vocab_from.empty()) {
    const GgufFile vocab_file = GgufFile::open(s.vocab_from);
    vocab = static_cast<std::int64_t>(vocab_file.get_string_array("tokenizer.ggml.tokens").size());
    for (const auto& kv : vocab_file.metadata()) {
      if (kv.key.rfind("tokenizer.", 0) == 0 && !(kv.key == "tokenizer.chat_template" && !s.chat_template.empty())) {
        writer.add(kv.key, kv.value);
      }
    }
  }
  if (s.vocab_from.empty() && s.builtin_vocabulary) vocab = add_builtin_vocabulary(writer);
  if (!s.chat_template.empty()) writer.add_string("tokenizer.chat_template", s.chat_template);
  require(vocab > 0, "the vocabulary must not be empty");

  const std::string arch = to_string(s.architecture);
  const std::int64_t head_dim = s.head_dim > 0 ? s.head_dim : s.dim / s.heads;
  const std::int64_t q_dim = head_dim * s.heads;
  const std::int64_t kv_dim = head_dim * s.kv_heads;
  writer.add_string("general.architecture", arch);
  writer.add_string("general.name", "loom-synth-" + arch);
  writer.add_u32(arch + ".context_length", static_cast<std::uint32_t>(s.context_length));
  writer.add_u32(arch + ".embedding_length", static_cast<std::uint32_t>(s.dim));
  writer.add_u32(arch + ".feed_forward_length", static_cast<std::uint32_t>(s.ffn_dim));
  writer.add_u32(arch + ".block_count", static_cast<std::uint32_t>(s.layers));
  writer.add_u32(arch + ".attention.head_count", static_cast<std::uint32_t>(s.heads));
  writer.add_u32(arch + ".attention.head_count_kv", static_cast<std::uint32_t>(s.kv_heads));
  writer.add_f32(arch + ".attention.layer_norm_rms_epsilon", s.rms_epsilon);
  writer.add_f32(arch + ".rope.freq_base", s.rope_freq_base);
  if (s.vocab_from.empty() && !s.builtin_vocabulary) writer.add_u32(arch + ".vocab_size", static_cast<std::uint32_t>(vocab));
  add_feature_keys(writer, s, arch);

  // Uniform weights scaled by 1/sqrt(fan-in) keep activations of order one through the layers.
  Random random(s.seed);
  Builder b(writer, random);
  const auto scale = [](std::int64_t fan_in) { return std::sqrt(3.0f / static_cast<float>(fan_in)); };
  b.matrix("token_embd.weight", s.dim, vocab, s.type, 1.0f);
  expert_and_long_rope_keys(writer, b, s, arch, head_dim);
  const bool biases = s.architecture == Architecture::qwen2 || s.architecture == Architecture::qwen2moe;
  const bool qk_norms = s.architecture == Architecture::qwen3 || s.architecture == Architecture::qwen3moe ||
                        s.architecture == Architecture::gemma3;
  for (std::int64_t l = 0; l < s.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    b.vector(p + "attn_norm.weight", s.dim, 1.0f, 0.1f);
    if (s.architecture == Architecture::phi3) {
      phi3_attention(b, s, p, kv_dim, scale(s.dim));
    } else {
      b.matrix(p + "attn_q.weight", s.dim, q_dim, s.type, scale(s.dim));
      b.matrix(p + "attn_k.weight", s.dim, kv_dim, s.type, scale(s.dim));
      b.matrix(p + "attn_v.weight", s.dim, kv_dim, s.type, scale(s.dim));
    }
    if (biases) {
      b.vector(p + "attn_q.bias", q_dim, 0.0f, 0.1f);
      b.vector(p + "attn_k.bias", kv_dim, 0.0f, 0.1f);
      b.vector(p + "attn_v.bias", kv_dim, 0.0f, 0.1f);
    }
    if (qk_norms) {
      b.vector(p + "attn_q_norm.weight", head_dim, 1.0f, 0.1f);
      b.vector(p + "attn_k_norm.weight", head_dim, 1.0f, 0.1f);
    }
    b.matrix(p + "attn_output.weight", q_dim, s.dim, s.type, scale(q_dim));
    b.vector(p + "ffn_norm.weight", s.dim, 1.0f, 0.1f);
    feed_forward(b, s, p, scale(s.dim), scale(s.ffn_dim),
                 scale(s.expert_ffn_dim > 0 ? s.expert_ffn_dim : s.ffn_dim));
    if (s.architecture == Architecture::gemma2 || s.architecture == Architecture::gemma3) {
      b.vector(p + "post_attention_norm.weight", s.dim, 1.0f, 0.1f);
      b.vector(p + "post_ffw_norm.weight", s.dim, 1.0f, 0.1f);
    }
  }
  b.vector("output_norm.weight", s.dim, 1.0f, 0.1f);
  if (!is_gemma(s.architecture)) b.matrix("output.weight", s.dim, vocab, s.type, scale(s.dim));  // gemma ties it
  writer.write(path);
}

}  // namespace loom::compute
