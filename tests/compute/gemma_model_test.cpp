// The gemma family's forward pass against a plain double-precision one written here from the architectures'
// definitions (GeGLU, embeddings x sqrt(dim), queries x 1/sqrt(head size), post-norms, score and logit
// soft-caps, a sliding window shorter than the prompt on gemma2's even layers and on five of gemma3's six,
// gemma3's local rope base), on small synthesized files; each feature is shown to matter (leaving it out of
// the reference moves it far beyond the tolerance). And a sliding-window layer never reads the keys and values
// before its window: NaN there changes no logit bit, while NaN a full layer reads, or one inside the window,
// does. And where the loader puts windows: gemma2's even layers, gemma3's pattern (default, count, flags), a
// Mistral-style llama's every layer (none when the window covers the context; none for qwen2).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "loom/compute/cpu/dequantize.hpp"
#include "loom/compute/cpu/llama_model.hpp"
#include "loom/compute/model/gguf_file.hpp"
#include "loom/compute/model/gguf_writer.hpp"
#include "loom/compute/model/model_file_error.hpp"
#include "loom/compute/model/half.hpp"
#include "loom/compute/model/model_loader.hpp"
#include "loom/compute/model_synth.hpp"
#include "double_reference.hpp"
#include "test_files.hpp"

namespace {

using namespace loom::compute;
using Vec = std::vector<double>;

// The shared double-precision pieces (double_reference.hpp), shaped as this file calls them.
Vec tensor(const GgufFile& file, const std::string& name) { return loom::compute::testing::double_reference::get(file, name); }
Vec matvec(const Vec& w, const Vec& x, std::size_t rows) {
  return loom::compute::testing::double_reference::matvec(w, x, static_cast<std::int64_t>(rows), static_cast<std::int64_t>(x.size()));
}

Vec rmsnorm(const Vec& x, const Vec& w, double eps, std::size_t offset = 0, std::size_t n = 0) {
  n = n ? n : x.size();
  double ss = 0;
  for (std::size_t i = 0; i < n; ++i) ss += x[offset + i] * x[offset + i];
  const double scale = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  Vec y(x);
  for (std::size_t i = 0; i < n; ++i) y[offset + i] = x[offset + i] * scale * w[i];
  return y;
}

double cap(double x, double c) { return c > 0 ? c * std::tanh(x / c) : x; }

// What the reference applies, from the spec and the architectures' definitions (not from the loader), so
// that a feature can be switched off to show that the comparison sees it.
struct Features {
  std::vector<std::int64_t> window;  // per layer, 0: full
  Vec rope_base;                     // per layer
  double attn_cap = 0, final_cap = 0;
  bool post_norms = false, qk_norm = false;
};

Features features_of(const SynthSpec& s) {
  Features f;
  const bool g2 = s.architecture == Architecture::gemma2, g3 = s.architecture == Architecture::gemma3;
  for (std::int64_t l = 0; l < s.layers; ++l) {
    const bool slides = (g2 && l % 2 == 0) || (g3 && (l + 1) % 6 != 0);
    f.window.push_back(slides ? s.sliding_window : 0);
    const double local = s.rope_freq_base_swa > 0 ? s.rope_freq_base_swa : 10000.0;
    f.rope_base.push_back(g3 && slides ? local : s.rope_freq_base);
  }
  f.attn_cap = g2 ? s.attn_softcap : 0.0;
  f.final_cap = g2 ? s.final_softcap : 0.0;
  f.post_norms = g2 || g3;
  f.qk_norm = g3;
  return f;
}

// The textbook forward pass, one token at a time, all in double.
std::vector<Vec> reference_logits(const GgufFile& file, const SynthSpec& s, const Features& f,
                                  const std::vector<std::int32_t>& tokens) {
  const std::size_t dim = s.dim, hd = s.head_dim, heads = s.heads, kvh = s.kv_heads, group = heads / kvh;
  const double eps = s.rms_epsilon;
  const Vec embd = tensor(file, "token_embd.weight");
  const std::size_t vocab = embd.size() / dim;
  std::vector<std::vector<Vec>> keys(s.layers), values(s.layers);
  std::vector<Vec> logits;
  for (std::size_t pos = 0; pos < tokens.size(); ++pos) {
    Vec x(embd.begin() + tokens[pos] * dim, embd.begin() + (tokens[pos] + 1) * dim);
    for (double& v : x) v *= std::sqrt(static_cast<double>(dim));
    for (std::int64_t l = 0; l < s.layers; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      const auto W = [&](const std::string& name) { return tensor(file, p + name); };
      const Vec xn = rmsnorm(x, W("attn_norm.weight"), eps);
      Vec q = matvec(W("attn_q.weight"), xn, heads * hd), k = matvec(W("attn_k.weight"), xn, kvh * hd);
      const Vec v = matvec(W("attn_v.weight"), xn, kvh * hd);
      if (f.qk_norm) {
        for (std::size_t h = 0; h < heads; ++h) q = rmsnorm(q, W("attn_q_norm.weight"), eps, h * hd, hd);
        for (std::size_t h = 0; h < kvh; ++h) k = rmsnorm(k, W("attn_k_norm.weight"), eps, h * hd, hd);
      }
      const auto rotate = [&](Vec& vec, std::size_t n) {  // NeoX: x[i] turns with x[i + hd/2]
        for (std::size_t h = 0; h < n; ++h) {
          for (std::size_t i = 0; i < hd / 2; ++i) {
            const double angle = static_cast<double>(pos) * std::pow(f.rope_base[l], -2.0 * static_cast<double>(i) / static_cast<double>(hd));
            const double a = vec[h * hd + i], b = vec[h * hd + i + hd / 2];
            vec[h * hd + i] = a * std::cos(angle) - b * std::sin(angle);
            vec[h * hd + i + hd / 2] = a * std::sin(angle) + b * std::cos(angle);
          }
        }
      };
      rotate(q, heads);
      rotate(k, kvh);
      keys[l].push_back(k);
      values[l].push_back(v);
      const std::size_t first = f.window[l] > 0 && pos + 1 > static_cast<std::size_t>(f.window[l]) ? pos + 1 - f.window[l] : 0;
      Vec attn(heads * hd, 0.0);
      for (std::size_t h = 0; h < heads; ++h) {
        const std::size_t kv = h / group;
        Vec score;
        double top = -1e300;
        for (std::size_t t = first; t <= pos; ++t) {
          double dot = 0;
          for (std::size_t d = 0; d < hd; ++d) dot += q[h * hd + d] * keys[l][t][kv * hd + d];
          score.push_back(cap(dot / std::sqrt(static_cast<double>(hd)), f.attn_cap));
          top = std::max(top, score.back());
        }
        double sum = 0;
        for (double& e : score) sum += (e = std::exp(e - top));
        for (std::size_t t = first; t <= pos; ++t) {
          for (std::size_t d = 0; d < hd; ++d) attn[h * hd + d] += score[t - first] / sum * values[l][t][kv * hd + d];
        }
      }
      Vec o = matvec(W("attn_output.weight"), attn, dim);
      if (f.post_norms) o = rmsnorm(o, W("post_attention_norm.weight"), eps);
      for (std::size_t i = 0; i < dim; ++i) x[i] += o[i];
      const Vec xf = rmsnorm(x, W("ffn_norm.weight"), eps);
      const Vec g = matvec(W("ffn_gate.weight"), xf, s.ffn_dim), u = matvec(W("ffn_up.weight"), xf, s.ffn_dim);
      Vec hidden(g.size());
      for (std::size_t i = 0; i < g.size(); ++i) {
        const double gelu = 0.5 * g[i] * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g[i] + 0.044715 * g[i] * g[i] * g[i])));
        hidden[i] = gelu * u[i];
      }
      Vec d = matvec(W("ffn_down.weight"), hidden, dim);
      if (f.post_norms) d = rmsnorm(d, W("post_ffw_norm.weight"), eps);
      for (std::size_t i = 0; i < dim; ++i) x[i] += d[i];
    }
    Vec out = matvec(embd, rmsnorm(x, tensor(file, "output_norm.weight"), eps), vocab);  // tied
    for (double& v : out) v = cap(v, f.final_cap);
    logits.push_back(out);
  }
  return logits;
}

double max_difference(const std::vector<float>& logits, const std::vector<Vec>& expected) {
  double worst = 0;
  for (std::size_t pos = 0; pos < expected.size(); ++pos) {
    for (std::size_t v = 0; v < expected[pos].size(); ++v) {
      worst = std::max(worst, std::abs(logits[pos * expected[pos].size() + v] - expected[pos][v]));
    }
  }
  return worst;
}

struct GemmaCase {
  std::string name;
  SynthSpec spec;
  std::int64_t tokens, prefill, max_batch;
  double tolerance;
};

// GELU goes through the reference's F16 table (each result exact to F16, ~5e-4 relative) and keys and values
// through the F16 cache; the F16 case also rounds activations to F16 before its products. Measured: 0.0017
// (gemma) to 0.0041 (gemma3, F16 weights included), logits up to about 5.
constexpr double kTolerance = 8e-3;

SynthSpec gemma_spec(Architecture arch, std::int64_t layers, TensorType type = TensorType::f32) {
  SynthSpec s;
  s.architecture = arch;
  s.dim = 64;
  s.ffn_dim = 96;
  s.layers = layers;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 32;  // not dim / heads, as in the real files
  s.vocab_size = 96;
  s.context_length = 128;
  s.type = type;
  s.seed = 11;
  s.rms_epsilon = 1e-6f;
  return s;
}

GemmaCase gemma2_case(std::string name, std::int64_t window, std::int64_t tokens, std::int64_t prefill, TensorType type) {
  GemmaCase c{std::move(name), gemma_spec(Architecture::gemma2, 3, type), tokens, prefill, 16, kTolerance};
  c.spec.sliding_window = window;
  c.spec.attn_softcap = 1.5f;   // scores here reach a few units: the cap bites
  c.spec.final_softcap = 3.0f;  // and so do logits
  return c;
}

GemmaCase gemma3_case(std::string name, float swa_base) {
  GemmaCase c{std::move(name), gemma_spec(Architecture::gemma3, 6), 12, 7, 16, kTolerance};
  c.spec.heads = 2;
  c.spec.kv_heads = 1;
  c.spec.head_dim = 48;
  c.spec.sliding_window = 4;
  c.spec.rope_freq_base = 1e6f;
  c.spec.rope_freq_base_swa = swa_base;
  return c;
}

class GemmaVsDouble : public ::testing::TestWithParam<GemmaCase> {};

TEST_P(GemmaVsDouble, PrefillAndDecodeMatchTheDoublePrecisionReference) {
  const GemmaCase& param = GetParam();
  loom::compute::testing::ScratchDir dir("gemma_" + param.name);
  const std::string path = dir.path("model.gguf").string();
  write_synthetic_model(param.spec, path);
  auto loaded = LoadedModel::open(path);
  const ModelConfig& c = loaded->config();
  ASSERT_EQ(c.architecture, param.spec.architecture);
  ThreadPool pool(2);
  LlamaModel model(c, loaded->weights(), pool, param.max_batch);
  auto cache = model.make_cache();

  std::vector<std::int32_t> tokens;
  for (std::int64_t i = 0; i < param.tokens; ++i) tokens.push_back(static_cast<std::int32_t>((i * 37 + 5) % c.vocab_size));
  const auto prefill = static_cast<std::size_t>(param.prefill);
  std::vector<float> logits(tokens.size() * static_cast<std::size_t>(c.vocab_size));
  model.forward({tokens.data(), prefill}, 0, cache, LlamaModel::Logits::all, logits.data());
  for (std::size_t i = prefill; i < tokens.size(); ++i) {
    model.forward({&tokens[i], 1}, static_cast<std::int64_t>(i), cache, LlamaModel::Logits::last, &logits[i * c.vocab_size]);
  }

  const Features features = features_of(param.spec);
  const double worst = max_difference(logits, reference_logits(*loaded->gguf(), param.spec, features, tokens));
  std::printf("[ gemma ] %s: max |logit - double reference| = %.6f\n", param.name.c_str(), worst);
  EXPECT_LE(worst, param.tolerance);

  // Each feature the case has must matter: the reference without it lies far outside the tolerance.
  const auto without = [&](const char* what, auto change) {
    Features f = features;
    change(f);
    const double apart = max_difference(logits, reference_logits(*loaded->gguf(), param.spec, f, tokens));
    EXPECT_GT(apart, 5 * param.tolerance) << "without " << what << " the reference is only " << apart << " away";
  };
  if (features.attn_cap > 0) without("the attention soft-cap", [](Features& f) { f.attn_cap = 0; });
  if (features.final_cap > 0) without("the final soft-cap", [](Features& f) { f.final_cap = 0; });
  if (features.post_norms) without("post-norms", [](Features& f) { f.post_norms = false; });
  if (param.spec.sliding_window > 0) without("the sliding window", [](Features& f) { std::fill(f.window.begin(), f.window.end(), 0); });
  if (param.spec.architecture == Architecture::gemma3) {
    without("the local rope base", [&](Features& f) { std::fill(f.rope_base.begin(), f.rope_base.end(), param.spec.rope_freq_base); });
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, GemmaVsDouble,
                         ::testing::Values(GemmaCase{"gemma", gemma_spec(Architecture::gemma, 2), 12, 7, 16, kTolerance},
                                           gemma2_case("gemma2", 3, 12, 7, TensorType::f32),
                                           gemma2_case("gemma2_f16", 3, 12, 7, TensorType::f16),
                                           // 90 positions, window 5: windows start past 64 (the kernels'
                                           // later base), prefill in chunks of 16 with tiles.
                                           gemma2_case("gemma2_long", 5, 90, 70, TensorType::f32),
                                           gemma3_case("gemma3", 0.0f),            // local base: the default 10000
                                           gemma3_case("gemma3_swa_base", 500.0f)),  // rope.freq_base_swa written
                         [](const auto& tested) { return tested.param.name; });

// NaN in a sliding layer's keys and values before every window of a step changes no logit bit; the same NaN in
// a full-attention layer, or one position inside the window, poisons the logits (so the poison is seen where
// it is read). Prefill tiles and decode both.
TEST(GemmaSlidingWindow, KeysBeforeTheWindowAreNeverRead) {
  loom::compute::testing::ScratchDir dir("gemma_window");
  const std::string path = dir.path("model.gguf").string();
  GemmaCase c = gemma2_case("window", 4, 0, 0, TensorType::f32);
  write_synthetic_model(c.spec, path);
  auto loaded = LoadedModel::open(path);
  const ModelConfig& config = loaded->config();
  ASSERT_EQ(config.window(0), 4);
  ASSERT_EQ(config.window(1), 0);
  ThreadPool pool(2);
  LlamaModel model(config, loaded->weights(), pool, 16);

  std::vector<std::int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back((i * 29 + 3) % 96);
  const std::vector<std::int32_t> chunk{7, 8, 9, 10, 11, 12};  // positions 40..45, one tile
  const std::int32_t next = 13;                                // position 46, decode
  // Layer `layer`'s key and value of position p set to NaN (F16 cache, blocks of 4: store_keys_values' layout).
  const auto poison = [&](KvCache& cache, std::int64_t layer, std::int64_t p) {
    PagedKvCache& pages = cache.pages();
    const std::int64_t bs = pages.block_size(), width = config.kv_dim(), hd = config.head_dim;
    const std::int64_t block = cache.block_table()[static_cast<std::size_t>(p / bs)], slot = p % bs;
    auto* k = static_cast<std::uint16_t*>(pages.keys(layer)) + block * bs * width;
    auto* v = static_cast<std::uint16_t*>(pages.values(layer)) + block * bs * width;
    for (std::int64_t h = 0; h < config.kv_heads; ++h) {
      for (std::int64_t d = 0; d < hd; ++d) k[(h * bs + slot) * hd + d] = 0x7E00;
    }
    for (std::int64_t i = 0; i < width; ++i) v[i * bs + slot] = 0x7E00;
  };
  // Prefill, poison what `spoil` says, then the tile and the decode step: their logits.
  const auto run = [&](auto spoil) {
    auto cache = model.make_cache(0, {.block_size = 4});
    std::vector<float> logits((chunk.size() + 1) * static_cast<std::size_t>(config.vocab_size));
    model.forward(prompt, 0, cache, LlamaModel::Logits::none, nullptr);
    spoil(cache);
    model.forward(chunk, 40, cache, LlamaModel::Logits::all, logits.data());
    model.forward({&next, 1}, 46, cache, LlamaModel::Logits::last, &logits[chunk.size() * config.vocab_size]);
    return logits;
  };
  const auto clean = run([](KvCache&) {});
  // The tile's first query (40) sees 37..40: everything before 37 is outside every window of these steps.
  const auto outside = run([&](KvCache& cache) {
    for (std::int64_t layer : {0, 2}) {
      for (std::int64_t p = 0; p < 37; ++p) poison(cache, layer, p);
    }
  });
  for (std::size_t i = 0; i < clean.size(); ++i) {
    ASSERT_TRUE(std::isfinite(clean[i]));
    ASSERT_EQ(std::bit_cast<std::uint32_t>(clean[i]), std::bit_cast<std::uint32_t>(outside[i])) << "logit " << i;
  }
  const auto inside = run([&](KvCache& cache) { poison(cache, 0, 37); });
  EXPECT_TRUE(std::isnan(inside[0])) << "position 37 is in the first query's window of layer 0";
  const auto full_layer = run([&](KvCache& cache) { poison(cache, 1, 0); });
  EXPECT_TRUE(std::isnan(full_layer[0])) << "layer 1 attends every position";
}

// The file at `from` with `key` added (or replaced): every other key and tensor copied as they are.
void rewrite_with(const std::string& from, const std::string& to, const std::string& key, GgufValue value) {
  const GgufFile file = GgufFile::open(from);
  GgufWriter writer;
  for (const auto& kv : file.metadata()) {
    if (kv.key != key) writer.add(kv.key, kv.value);
  }
  writer.add(key, std::move(value));
  for (const TensorView& t : file.tensors()) writer.add_tensor(t.name, t.type, t.dims, {t.data, t.bytes});
  writer.write(to);
}

std::vector<std::int64_t> windows_of(const std::string& path) {
  auto loaded = LoadedModel::open(path);
  return loaded->config().layer_window;
}

TEST(SlidingWindowConfig, EachArchitecturePlacesItsWindows) {
  loom::compute::testing::ScratchDir dir("window_config");
  const std::string gemma2 = dir.path("gemma2.gguf").string(), gemma3 = dir.path("gemma3.gguf").string();
  SynthSpec g2 = gemma_spec(Architecture::gemma2, 5);
  g2.sliding_window = 6;
  write_synthetic_model(g2, gemma2);
  EXPECT_EQ(windows_of(gemma2), (std::vector<std::int64_t>{6, 0, 6, 0, 6}));

  SynthSpec g3 = gemma_spec(Architecture::gemma3, 7);
  g3.sliding_window = 5;
  write_synthetic_model(g3, gemma3);
  EXPECT_EQ(windows_of(gemma3), (std::vector<std::int64_t>{5, 5, 5, 5, 5, 0, 5}));  // every sixth layer full
  const std::string counted = dir.path("gemma3_count.gguf").string(), flagged = dir.path("gemma3_flags.gguf").string();
  rewrite_with(gemma3, counted, "gemma3.attention.sliding_window_pattern", GgufValue(std::uint32_t{3}));
  EXPECT_EQ(windows_of(counted), (std::vector<std::int64_t>{5, 5, 0, 5, 5, 0, 5}));
  rewrite_with(gemma3, flagged, "gemma3.attention.sliding_window_pattern",
               GgufValue(std::vector<bool>{true, false, true, false, false, true, true}));
  EXPECT_EQ(windows_of(flagged), (std::vector<std::int64_t>{5, 0, 5, 0, 0, 5, 5}));
  rewrite_with(gemma3, flagged, "gemma3.attention.sliding_window_pattern", GgufValue(std::vector<bool>{true, false}));
  EXPECT_THROW(LoadedModel::open(flagged), ModelFileError);  // one flag per layer, or nothing

  // A Mistral-style llama: every layer, unless the window covers the whole context.
  SynthSpec llama = gemma_spec(Architecture::llama, 3);
  llama.head_dim = 0;
  llama.sliding_window = 4;
  const std::string mistral = dir.path("mistral.gguf").string();
  write_synthetic_model(llama, mistral);
  EXPECT_EQ(windows_of(mistral), (std::vector<std::int64_t>{4, 4, 4}));
  llama.sliding_window = llama.context_length;
  write_synthetic_model(llama, mistral);
  EXPECT_TRUE(windows_of(mistral).empty());
  // Qwen2 files may carry a window their model does not use (use_sliding_window false): ignored.
  llama.architecture = Architecture::qwen2;
  llama.sliding_window = 4;
  write_synthetic_model(llama, mistral);
  EXPECT_TRUE(windows_of(mistral).empty());
}

// A Mistral-style llama attends only its window on every layer: its logits past the window differ from the
// same file without the key, and equal them while the prompt is still inside the window.
TEST(SlidingWindowConfig, MistralStyleLlamaAttendsItsWindow) {
  loom::compute::testing::ScratchDir dir("mistral");
  SynthSpec spec = gemma_spec(Architecture::llama, 2);
  spec.head_dim = 0;
  const std::string plain = dir.path("plain.gguf").string(), windowed = dir.path("windowed.gguf").string();
  write_synthetic_model(spec, plain);
  spec.sliding_window = 4;
  write_synthetic_model(spec, windowed);
  const auto logits = [](const std::string& path) {
    auto loaded = LoadedModel::open(path);
    ThreadPool pool(1);
    LlamaModel model(loaded->config(), loaded->weights(), pool, 16);
    auto cache = model.make_cache();
    const std::vector<std::int32_t> tokens{1, 5, 9, 13, 17, 21, 25, 29};
    std::vector<float> out(tokens.size() * static_cast<std::size_t>(loaded->config().vocab_size));
    model.forward(tokens, 0, cache, LlamaModel::Logits::all, out.data());
    return std::pair{out, loaded->config().vocab_size};
  };
  const auto [a, vocab] = logits(plain);
  const auto [b, unused] = logits(windowed);
  for (std::int64_t i = 0; i < 4 * vocab; ++i) ASSERT_EQ(a[i], b[i]) << "positions 0..3 lie inside the window";
  double apart = 0;
  for (std::size_t i = 4 * vocab; i < a.size(); ++i) apart = std::max(apart, static_cast<double>(std::abs(a[i] - b[i])));
  EXPECT_GT(apart, 0.05) << "positions 4..7 see only their last four";
}

TEST(SlidingWindowConfig, AnUnknownArchitectureNamesEverySupportedOne) {
  loom::compute::testing::ScratchDir dir("unknown_arch");
  SynthSpec spec = gemma_spec(Architecture::llama, 1);
  spec.head_dim = 0;
  const std::string path = dir.path("plain.gguf").string(), unknown = dir.path("unknown.gguf").string();
  write_synthetic_model(spec, path);
  rewrite_with(path, unknown, "general.architecture", GgufValue("mamba"));
  try {
    LoadedModel::open(unknown);
    FAIL() << "an unknown architecture loaded";
  } catch (const ModelFileError& e) {
    const std::string message = e.what();
    for (const auto& a : supported_architectures()) EXPECT_NE(message.find(std::string(a.name)), std::string::npos) << message;
    EXPECT_NE(message.find("mamba"), std::string::npos) << message;
  }
}

// Sequences with windows share a step as they share one without: a prefill and a decode of two gemma3
// sequences in one step (and then two decodes) give each the bits it gets alone. Q8_0 weights sum in one
// order whatever the batch (vec_dot.hpp), so the comparison is exact.
TEST(GemmaSlidingWindow, AMixedStepGivesEachSequenceItsLogitsAlone) {
  loom::compute::testing::ScratchDir dir("gemma_mixed");
  const std::string path = dir.path("model.gguf").string();
  GemmaCase g = gemma3_case("mixed", 0.0f);
  g.spec.type = TensorType::q8_0;
  write_synthetic_model(g.spec, path);
  auto loaded = LoadedModel::open(path);
  const ModelConfig& c = loaded->config();
  const auto vocab = static_cast<std::size_t>(c.vocab_size);
  ThreadPool pool(2);
  LlamaModel model(c, loaded->weights(), pool, 64);
  using Step = LlamaModel::SequenceStep;
  std::vector<std::int32_t> a, b;
  for (int i = 0; i < 30; ++i) a.push_back((i * 13 + 2) % 96);
  for (int i = 0; i < 12; ++i) b.push_back((i * 29 + 5) % 96);
  const std::int32_t a_next = 8, b_next = 60, b_last = 33;

  const auto alone = [&](const std::vector<std::int32_t>& prompt, const std::vector<std::int32_t>& decode) {
    auto cache = model.make_cache(64, {.block_size = 4});
    std::vector<float> logits((prompt.size() + decode.size()) * vocab);
    model.forward(prompt, 0, cache, LlamaModel::Logits::all, logits.data());
    for (std::size_t i = 0; i < decode.size(); ++i) {
      model.forward({&decode[i], 1}, static_cast<std::int64_t>(prompt.size() + i), cache, LlamaModel::Logits::last,
                    &logits[(prompt.size() + i) * vocab]);
    }
    return logits;
  };
  const auto want_a = alone(a, {a_next});
  const auto want_b = alone(b, {b_next, b_last});

  PagedKvCache pages = model.make_paged_cache({.block_size = 4}, 128);
  std::vector<std::int32_t> table_a(16), table_b(16);
  for (int i = 0; i < 16; ++i) table_a[i] = 2 * i + 1, table_b[i] = 2 * i;  // interleaved blocks
  std::vector<float> b_prefill(b.size() * vocab), got_a(a.size() * vocab), got_b(vocab), next_a(vocab), next_b(vocab);
  Step first{b, 0, table_b, b_prefill.data(), LlamaModel::Logits::all};
  model.forward({&first, 1}, pages);
  const std::vector<Step> mixed{{a, 0, table_a, got_a.data(), LlamaModel::Logits::all},
                                {{&b_next, 1}, 12, table_b, got_b.data(), LlamaModel::Logits::last}};
  model.forward(mixed, pages);
  const std::vector<Step> decode{{{&a_next, 1}, 30, table_a, next_a.data(), LlamaModel::Logits::last},
                                 {{&b_last, 1}, 13, table_b, next_b.data(), LlamaModel::Logits::last}};
  model.forward(decode, pages);
  const auto same = [](const float* want, const float* got, std::size_t n, const char* what) {
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(std::bit_cast<std::uint32_t>(want[i]), std::bit_cast<std::uint32_t>(got[i])) << what << ", logit " << i;
  };
  same(want_a.data(), got_a.data(), a.size() * vocab, "A's prefill in a mixed step");
  same(&want_b[12 * vocab], got_b.data(), vocab, "B's decode in a mixed step");
  same(&want_a[30 * vocab], next_a.data(), vocab, "A's decode");
  same(&want_b[13 * vocab], next_b.data(), vocab, "B's second decode");
}

}  // namespace
