// Mixture-of-experts decode: bytes of weights read per decoded token against the model's total and active
// parameter bytes, and the time per token against a baseline from the same run: the same model with every
// expert used (experts_used = experts), which reads all of them. The first shows that a step reads only the
// experts its token chose; the second what that buys in time. Models: ../shared's synth-qwen3moe-q8_0 (4
// experts, top 2) and a synthesized bigger qwen3moe (dim 1024, 8 layers, 32 experts of 768, top 4, Q8_0),
// written once to the temp folder.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "loom/compute/cpu/cpu_features.hpp"
#include "loom/compute/cpu/llama_model.hpp"
#include "loom/compute/cpu/thread_pool.hpp"
#include "loom/compute/model/model_loader.hpp"
#include "loom/compute/model_synth.hpp"

namespace {

using namespace loom::compute;

ThreadPool& pool() {
  static ThreadPool instance([] {
    if (const char* env = std::getenv("LOOM_BENCH_THREADS")) return std::max(1, std::atoi(env));
    return physical_core_count();
  }());
  return instance;
}

std::string model_path(const std::string& which) {
  if (which == "shared") {
    const char* dir = std::getenv("LOOM_SHARED_DIR");
    return std::string(dir != nullptr ? dir : LOOM_DEFAULT_SHARED_DIR) + "/models/synth-qwen3moe-q8_0.gguf";
  }
  const auto path = std::filesystem::temp_directory_path() / "loom_bench_qwen3moe_1024x32.gguf";
  if (!std::filesystem::exists(path)) {
    SynthSpec spec;
    spec.architecture = Architecture::qwen3moe;
    spec.dim = 1024;
    spec.ffn_dim = 768;
    spec.layers = 8;
    spec.heads = 16;
    spec.kv_heads = 4;
    spec.context_length = 256;
    spec.vocab_size = 4096;
    spec.type = TensorType::q8_0;
    spec.experts = 32;
    spec.experts_used = 4;
    spec.expert_ffn_dim = 768;
    write_synthetic_model(spec, path.string());
  }
  return path.string();
}

bool is_expert_tensor(const std::string& name) { return name.find("_exps.") != std::string::npos; }

// Arg 0: the model as it is (top-k experts); Arg 1: the baseline, every expert used.
void BM_MoeDecode(benchmark::State& state, std::string which) {
  auto loaded = LoadedModel::open(model_path(which));
  ModelConfig config = loaded->config();
  if (state.range(0) == 1) config.experts_used = config.experts;
  LlamaModel model(config, loaded->weights(), pool(), 1);
  auto cache = model.make_cache(256);
  std::vector<float> logits(static_cast<std::size_t>(config.vocab_size));
  std::vector<double> seconds;
  std::int64_t position = 0;
  std::uint64_t expert_bytes = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    const auto token = static_cast<std::int32_t>((position * 37 + 11) % config.vocab_size);
    const std::uint64_t before = model.expert_bytes_read();
    model.forward({&token, 1}, position, cache, LlamaModel::Logits::last, logits.data());
    expert_bytes += model.expert_bytes_read() - before;
    position = (position + 1) % 64;
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  // Everything but the expert tensors is read whole by every token (the embedding: one row); the experts
  // as the counter says (router included: it is not an expert tensor, so subtract it from the dense part).
  std::uint64_t dense = 0, experts = 0, routers = 0, embedding_row = 0;
  for (const auto& t : loaded->gguf()->tensors()) {
    if (t.name == "token_embd.weight") {
      embedding_row = t.row_bytes();
    } else if (is_expert_tensor(t.name)) {
      experts += t.bytes;
    } else {
      dense += t.bytes;
      if (t.name.find("ffn_gate_inp.") != std::string::npos) routers += t.bytes;
    }
  }
  const double per_token = static_cast<double>(dense - routers + embedding_row) +
                           static_cast<double>(expert_bytes) / static_cast<double>(state.iterations());
  const double total = static_cast<double>(dense + experts + loaded->gguf()->get_tensor("token_embd.weight").bytes);
  const double active = static_cast<double>(dense + embedding_row) +
                        static_cast<double>(experts) * static_cast<double>(loaded->config().experts_used) /
                            static_cast<double>(loaded->config().experts);
  std::nth_element(seconds.begin(), seconds.begin() + static_cast<std::ptrdiff_t>(seconds.size() / 2), seconds.end());
  state.counters["ms_median"] = seconds[seconds.size() / 2] * 1e3;
  state.counters["read_MB_per_token"] = per_token / 1e6;
  state.counters["total_MB"] = total / 1e6;
  state.counters["active_MB"] = active / 1e6;
  state.counters["read_of_active"] = per_token / active;
  state.counters["read_of_total"] = per_token / total;
}

BENCHMARK_CAPTURE(BM_MoeDecode, synth_qwen3moe_q8_0, std::string("shared"))->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_MoeDecode, qwen3moe_1024x32_top4_q8_0, std::string("big"))->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
