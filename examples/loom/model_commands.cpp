#include "model_commands.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <span>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "device_option.hpp"
#include "kv_cache_options.hpp"
#include "loom/compute/devices.hpp"
#ifdef LOOM_HAS_VULKAN
#include "loom/compute/vulkan/vulkan_backend.hpp"
#endif
#include "loom/compute/cpu/llama_model.hpp"
#include "loom/compute/cpu/thread_pool.hpp"
#include "loom/compute/model/model_loader.hpp"
#include "loom/compute/model_synth.hpp"
#include "loom/compute/text/chat_format.hpp"

namespace loom::cli {
namespace {

using namespace loom::compute;

std::vector<std::int32_t> parse_token_list(const std::string& option, const std::string& text) {
  std::vector<std::int32_t> tokens;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    std::int32_t value = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || ec != std::errc{} || end != item.data() + item.size() || value < 0) {
      throw UsageError("option --" + option + " expects comma-separated token ids, got '" + item + "'");
    }
    tokens.push_back(value);
    start = comma + 1;
  }
  return tokens;
}

// The `k` largest logits as [[id, logit], ...], largest first.
nlohmann::json top_k(const float* logits, std::int64_t vocab, int k) {
  std::vector<std::int32_t> ids(static_cast<std::size_t>(vocab));
  std::iota(ids.begin(), ids.end(), 0);
  const auto count = static_cast<std::size_t>(std::min<std::int64_t>(k, vocab));
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(count), ids.end(),
                    [&](std::int32_t a, std::int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  nlohmann::json top = nlohmann::json::array();
  for (std::size_t i = 0; i < count; ++i) top.push_back({ids[i], logits[ids[i]]});
  return top;
}

int default_threads() { return physical_core_count(); }

// What departs from plain Llama, one line each (nothing for a plain model): the gemma family's activation,
// scales, norms and soft-caps, and which layers slide over how many positions.
void print_features(const ModelConfig& c) {
  const auto number = [](double x) {
    char text[32];
    std::snprintf(text, sizeof(text), "%g", x);
    return std::string(text);
  };
  std::vector<std::string> features;
  if (c.ffn_activation == FfnActivation::gelu_tanh) features.emplace_back("GeGLU feed-forward (GELU, tanh form)");
  if (c.embedding_scale != 1.0f) features.push_back("embeddings x " + number(c.embedding_scale));
  if (c.query_scale > 0.0f) features.push_back("queries x " + number(c.query_scale));
  if (c.qk_norm) features.emplace_back("Q/K RMS norms per head");
  if (c.post_norms) features.emplace_back("post-attention and post-feed-forward norms");
  if (c.attn_softcap > 0.0f) features.push_back("attention scores soft-capped at " + number(c.attn_softcap));
  if (c.final_softcap > 0.0f) features.push_back("final logits soft-capped at " + number(c.final_softcap));
  if (c.has_sliding_window()) {
    std::string sliding, full;
    std::int64_t window = 0;
    for (std::int64_t l = 0; l < c.layers; ++l) {
      std::string& list = c.window(l) > 0 ? sliding : full;
      if (!list.empty()) list += ',';
      list += std::to_string(l);
      window = std::max(window, c.window(l));
    }
    features.push_back("sliding window " + std::to_string(window) + " on layers [" + sliding + "], full attention on [" +
                       full + "]" +
                       (c.rope_freq_base_swa > 0.0f ? "; sliding layers rope base " + number(c.rope_freq_base_swa) : ""));
  }
  for (const auto& feature : features) std::printf("feature: %s\n", feature.c_str());
}


// `loom logits`'s forward pass: the logits of `tokens` at positions start.. into `out`, every token's row
// (all) or the last one's.
using ForwardLogits = std::function<void(std::span<const std::int32_t> tokens, std::int64_t start, bool all, float* out)>;

ForwardLogits cpu_forward(const LoadedModel& loaded, int threads, const KvCacheOptions& kv, std::int64_t positions) {
  check_kv_budget(kv, loaded.config());
  auto pool = std::make_unique<ThreadPool>(threads);
  auto model = std::make_shared<LlamaModel>(loaded.config(), loaded.weights(), *pool, 512);
  auto cache = std::make_shared<KvCache>(model->make_cache(0, kv));
  if (positions > cache->context_length()) {
    throw UsageError("--tokens plus the continuation (" + std::to_string(positions) + " positions) exceed the " +
                     std::to_string(cache->context_length()) + " positions that --kv-cache-mb holds");
  }
  return [pool = std::shared_ptr<ThreadPool>(std::move(pool)), model, cache](std::span<const std::int32_t> tokens,
                                                                             std::int64_t start, bool all, float* out) {
    model->forward(tokens, start, *cache, all ? LlamaModel::Logits::all : LlamaModel::Logits::last, out);
  };
}

ForwardLogits vulkan_forward(const std::string& model_path, const DeviceOption& device, const KvCacheOptions& kv,
                             std::int64_t positions, std::size_t prompt) {
#ifdef LOOM_HAS_VULKAN
  LoadOptions options;
  options.model_path = model_path;
  options.device = device.device;
  options.arithmetic = device.arithmetic;
  options.kv = kv;
  options.kv_tokens = kv.budget_bytes > 0 ? 0 : positions;
  options.max_batch_tokens = std::clamp<std::int64_t>(static_cast<std::int64_t>(prompt), 1, LoadOptions::kMaxBatchTokens);
  std::shared_ptr<vulkan::VulkanBackend> backend = vulkan::VulkanBackend::load(options);
  const std::int64_t block_size = backend->info().kv_block_size;
  std::vector<BlockId> table(static_cast<std::size_t>((positions + block_size - 1) / block_size));
  if (static_cast<std::int64_t>(table.size()) > backend->info().kv_blocks) {
    throw UsageError("--tokens plus the continuation (" + std::to_string(positions) +
                     " positions) exceed what --kv-cache-mb holds");
  }
  std::iota(table.begin(), table.end(), 0);
  return [backend, table](std::span<const std::int32_t> tokens, std::int64_t start, bool all, float* out) {
    const std::vector<float> logits = backend->logits(tokens, start, table);
    const std::size_t vocab_size = logits.size() / tokens.size();
    if (all) {
      std::copy(logits.begin(), logits.end(), out);
    } else {
      std::copy(logits.end() - static_cast<std::ptrdiff_t>(vocab_size), logits.end(), out);
    }
  };
#else
  (void)model_path, (void)kv, (void)positions, (void)prompt;
  throw std::runtime_error("device " + device.device + ": " + std::string(kNoVulkanBuild));
#endif
}

}  // namespace

int run_logits(CommandLine& args) {
  const std::string model_path = args.text("model", "");
  const std::string tokens_text = args.text("tokens", "");
  const std::string continue_text = args.text("continue", "");
  const auto greedy = args.integer("greedy", 0, 0, 1'000'000);
  const auto k = static_cast<int>(args.integer("top", 10, 1, 1'000'000));
  const auto threads = static_cast<int>(args.integer("threads", default_threads(), 1, 1024));
  const compute::KvCacheOptions kv = read_kv_cache_options(args);
  const DeviceOption device = read_device(args);
  args.reject_unknown();
  if (model_path.empty()) throw UsageError("logits needs --model PATH");
  if (tokens_text.empty()) throw UsageError("logits needs --tokens ID,ID,...");
  if (!continue_text.empty() && greedy > 0) throw UsageError("use either --continue or --greedy, not both");
  const auto prompt = parse_token_list("tokens", tokens_text);
  const auto forced = continue_text.empty() ? std::vector<std::int32_t>{} : parse_token_list("continue", continue_text);

  auto loaded = LoadedModel::open(model_path);
  const auto& config = loaded->config();
  const auto steps = static_cast<std::int64_t>(forced.empty() ? greedy : static_cast<std::int64_t>(forced.size()));
  if (static_cast<std::int64_t>(prompt.size()) + steps > config.context_length) {
    throw UsageError("--tokens plus the continuation (" + std::to_string(prompt.size() + static_cast<std::size_t>(steps)) +
                     " positions) exceed the model's context length " + std::to_string(config.context_length));
  }
  const std::int64_t positions = static_cast<std::int64_t>(prompt.size()) + steps;
  const std::int64_t vocab = config.vocab_size;
  // Logits of tokens at start, start + 1, ... into `out` (every token's row, or the last token's).
  const ForwardLogits forward =
      device.device == "cpu" ? cpu_forward(*loaded, threads, kv, positions) : vulkan_forward(model_path, device, kv, positions, prompt.size());

  nlohmann::json out;
  out["prompt_tokens"] = prompt;
  std::vector<float> logits(prompt.size() * static_cast<std::size_t>(vocab));
  forward(prompt, 0, true, logits.data());
  auto& prompt_top = out["prompt_top"] = nlohmann::json::array();
  for (std::size_t i = 0; i < prompt.size(); ++i) prompt_top.push_back(top_k(&logits[i * vocab], vocab, k));

  // Teacher forced (--continue) or fed its own argmax (--greedy).
  std::vector<float> step(static_cast<std::size_t>(vocab));
  std::copy_n(&logits[(prompt.size() - 1) * vocab], vocab, step.begin());
  std::vector<std::int32_t> fed;
  auto& continue_top = out["continue_top"] = nlohmann::json::array();
  for (std::int64_t g = 0; g < steps; ++g) {
    const std::int32_t token = forced.empty()
                                   ? static_cast<std::int32_t>(std::max_element(step.begin(), step.end()) - step.begin())
                                   : forced[static_cast<std::size_t>(g)];
    fed.push_back(token);
    forward({&token, 1}, static_cast<std::int64_t>(prompt.size()) + g, false, step.data());
    continue_top.push_back(top_k(step.data(), vocab, k));
  }
  out["continue"] = fed;
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

namespace {

// Experts (count, used per token, widths, shared expert) and LongRoPE, for the architectures that have them.
void print_experts_and_long_rope(const ModelConfig& c) {
  if (c.experts > 0) {
    std::printf("experts: %lld, %lld used per token (%s), expert ffn %lld, shared expert %s\n",
                static_cast<long long>(c.experts), static_cast<long long>(c.experts_used),
                c.expert_weights_norm ? "weights renormalized" : "softmax weights as they are",
                static_cast<long long>(c.expert_ffn_dim),
                c.shared_expert_ffn_dim > 0 ? ("ffn " + std::to_string(c.shared_expert_ffn_dim)).c_str() : "none");
  }
  if (c.rope_original_context > 0) {
    std::printf("LongRoPE: original context %lld, attn factor %g; at context %lld the %s factors apply\n",
                static_cast<long long>(c.rope_original_context), c.rope_attn_factor,
                static_cast<long long>(c.context_length), c.context_length <= c.rope_original_context ? "short" : "long");
  }
}

// The hyperparameters line of `loom info`.
void print_hyperparameters(const ModelConfig& c) {
  std::printf("hyperparameters: vocab %lld, dim %lld, ffn %lld, layers %lld, heads %lld, kv heads %lld, head dim %lld, "
              "context %lld, rms epsilon %g, rope base %g%s\n",
              static_cast<long long>(c.vocab_size), static_cast<long long>(c.dim), static_cast<long long>(c.ffn_dim),
              static_cast<long long>(c.layers), static_cast<long long>(c.heads), static_cast<long long>(c.kv_heads),
              static_cast<long long>(c.head_dim), static_cast<long long>(c.context_length), c.rms_epsilon,
              c.rope_freq_base, c.rope_scale != 1.0f ? (", rope linear scale " + std::to_string(c.rope_scale)).c_str() : "");
}

// The tensors line: total size, then per type its count and size, the types loom has no kernels for marked.
void print_tensor_types(const GgufFile& gguf) {
  std::map<std::string, std::tuple<int, std::uint64_t, bool>> by_type;
  std::uint64_t total = 0;
  for (const auto& t : gguf.tensors()) {
    auto& [count, bytes, computable] = by_type[std::string(name(t.type))];
    ++count;
    bytes += t.bytes;
    computable = traits(t.type).computable;
    total += t.bytes;
  }
  std::printf("tensors: %.1f MiB", static_cast<double>(total) / (1024.0 * 1024.0));
  for (const auto& [type, entry] : by_type) {
    const auto& [count, bytes, computable] = entry;
    std::printf(", %s: %d (%.1f MiB%s)", type.c_str(), count, static_cast<double>(bytes) / (1024.0 * 1024.0),
                computable ? "" : ", not supported");
  }
  std::printf("\n");
}

void print_vocabulary(const GgufFile& gguf) {
  const auto model = gguf.find_string("tokenizer.ggml.model");
  if (!model) return;
  const auto id = [&](const char* key) {
    const auto value = gguf.find_u32(key);
    return value ? std::to_string(*value) : std::string("-");
  };
  std::printf("vocabulary: %s, %zu tokens, bos %s, eos %s\n", model->c_str(),
              gguf.has("tokenizer.ggml.tokens") ? gguf.get_string_array("tokenizer.ggml.tokens").size() : 0,
              id("tokenizer.ggml.bos_token_id").c_str(), id("tokenizer.ggml.eos_token_id").c_str());
}

}  // namespace

// A file loom cannot run is still described (its types, vocabulary and metadata), with the reason it does
// not run: what a user needs to choose another file.
int run_info(CommandLine& args) {
  const std::string model_path = args.text("model", "");
  const bool devices = args.flag("devices");
  args.reject_unknown();
  if (devices) {
    if (!model_path.empty()) throw UsageError("info takes --model PATH or --devices, not both");
    return run_info_devices();
  }
  if (model_path.empty()) throw UsageError("info needs --model PATH");
  if (!GgufFile::has_magic(model_path)) {
    auto loaded = LoadedModel::open(model_path);
    std::printf("model: %s\n", model_path.c_str());
    std::printf("architecture: %s\n", to_string(loaded->config().architecture).c_str());
    print_hyperparameters(loaded->config());
    std::printf("format: llama2.c checkpoint (f32 weights)\nruns: yes\n");
    return 0;
  }
  const GgufFile gguf = GgufFile::open(model_path);
  std::unique_ptr<LoadedModel> loaded;
  std::string why_not;
  try {
    loaded = LoadedModel::open(model_path);
  } catch (const std::exception& e) {
    why_not = e.what();
    if (why_not.starts_with(model_path + ": ")) why_not.erase(0, model_path.size() + 2);  // said on the first line
  }
  std::printf("model: %s\n", model_path.c_str());
  if (loaded) {
    std::printf("architecture: %s\n", to_string(loaded->config().architecture).c_str());
    print_features(loaded->config());
    print_hyperparameters(loaded->config());
    print_experts_and_long_rope(loaded->config());
  } else {
    std::printf("architecture: %s\n", gguf.find_string("general.architecture").value_or("(not set)").c_str());
  }
  std::printf("format: GGUF v%u, alignment %u, %zu tensors, %zu metadata keys\n", gguf.version(), gguf.alignment(),
              gguf.tensors().size(), gguf.metadata().size());
  print_tensor_types(gguf);
  print_vocabulary(gguf);
  std::printf("runs: %s\n", loaded ? "yes" : ("no: " + why_not).c_str());
  std::printf("metadata:\n");
  for (const auto& kv : gguf.metadata()) {
    std::printf("  %s (%s) = %s\n", kv.key.c_str(), std::string(kv.value.type_name()).c_str(), kv.value.summary().c_str());
  }
  return 0;
}

int run_synth(CommandLine& args) {
  SynthSpec spec;
  const std::string arch = args.text("arch", "llama");
  const auto known = supported_architectures();
  const auto found = std::find_if(known.begin(), known.end(), [&](const auto& a) { return a.name == arch; });
  if (found == known.end()) {
    throw UsageError("option --arch expects one of " + supported_architecture_list() + ", got '" + arch + "'");
  }
  spec.architecture = found->architecture;
  // Experts (qwen2moe, qwen3moe need them; llama with them is Mixtral-style) and phi3's LongRoPE.
  spec.experts = args.integer("experts", spec.architecture == Architecture::qwen2moe || spec.architecture == Architecture::qwen3moe ? 4 : 0, 0, 1024);
  spec.experts_used = args.integer("experts-used", 2, 1, 1024);
  spec.expert_ffn_dim = args.integer("expert-ffn", 0, 0, 1 << 20);
  spec.shared_expert_ffn_dim = args.integer("shared-expert-ffn", 0, 0, 1 << 20);
  spec.rope_original_context = args.integer("long-rope-context", 0, 0, 1 << 20);
  spec.dim = args.integer("dim", 64, 2, 65536);
  spec.ffn_dim = args.integer("ffn", 172, 1, 1 << 20);
  spec.layers = args.integer("layers", 2, 1, 1024);
  spec.heads = args.integer("heads", 4, 1, 1024);
  spec.kv_heads = args.integer("kv-heads", spec.heads, 1, 1024);
  spec.context_length = args.integer("context", 256, 1, 1 << 20);
  spec.vocab_size = args.integer("vocab", 512, 1, 1 << 22);
  const std::string type = args.text("type", "f32");
  const std::map<std::string, TensorType> types{{"f32", TensorType::f32}, {"f16", TensorType::f16},
                                                {"bf16", TensorType::bf16}, {"q8_0", TensorType::q8_0},
                                                {"q4_0", TensorType::q4_0}, {"q4_k", TensorType::q4_k},
                                                {"q5_k", TensorType::q5_k}, {"q6_k", TensorType::q6_k},
                                                {"q4_1", TensorType::q4_1}, {"q5_0", TensorType::q5_0},
                                                {"q5_1", TensorType::q5_1}, {"iq4_nl", TensorType::iq4_nl},
                                                {"q2_k", TensorType::q2_k}, {"q3_k", TensorType::q3_k},
                                                {"iq4_xs", TensorType::iq4_xs}};
  if (!types.contains(type)) {
    throw UsageError(
        "option --type expects f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, q2_k, q3_k, q4_k, q5_k, q6_k or "
        "iq4_xs, got '" + type + "'");
  }
  spec.type = types.at(type);
  spec.vocab_from = args.text("vocab-from", "");
  if (const auto template_file = args.text("chat-template-file", ""); !template_file.empty()) {
    spec.chat_template = read_chat_template_file(template_file);
  }
  spec.seed = static_cast<std::uint64_t>(args.integer("seed", 1, 0, INT64_MAX));
  spec.head_dim = args.integer("head-dim", 0, 0, 4096);
  spec.sliding_window = args.integer("sliding-window", 0, 0, 1 << 20);
  spec.attn_softcap = static_cast<float>(args.real("attn-softcap", 0.0, 0.0, 1e6));
  spec.final_softcap = static_cast<float>(args.real("final-softcap", 0.0, 0.0, 1e6));
  spec.rope_freq_base = static_cast<float>(args.real("rope-base", 10000.0, 1.0, 1e12));
  spec.rope_freq_base_swa = static_cast<float>(args.real("rope-base-swa", 0.0, 0.0, 1e12));
  const std::string out = args.text("out", "");
  args.reject_unknown();
  if (out.empty()) throw UsageError("synth needs --out FILE.gguf");
  try {
    write_synthetic_model(spec, out);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  std::fprintf(stderr, "loom: wrote %s\n", out.c_str());
  return 0;
}

}  // namespace loom::cli
