// Binding the tensors that hold several matrices (phi3's fused attn_qkv / ffn_up, the 3-D MoE expert tensors)
// as row-range views: each view starts where its rows do and spans exactly them; misshapen tensors and
// missing or contradictory expert keys are refused naming the tensor or key.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "loom/compute/model/gguf_writer.hpp"
#include "loom/compute/model/model_file_error.hpp"
#include "loom/compute/model/model_loader.hpp"
#include "loom/compute/model/model_weights.hpp"

namespace {

using namespace loom::compute;

// Fake F32 tensors over one buffer, found by name, as a file's lookup would find them.
class FakeTensors {
 public:
  void add(const std::string& name, std::vector<std::int64_t> dims) {
    TensorView t;
    t.name = name;
    t.type = TensorType::f32;
    t.dims = std::move(dims);
    t.bytes = static_cast<std::uint64_t>(t.elements()) * sizeof(float);
    storage_.emplace_back(t.bytes);
    t.data = storage_.back().data();
    tensors_[name] = t;
  }
  TensorLookup lookup() const {
    return [this](std::string_view name) -> const TensorView* {
      auto it = tensors_.find(std::string(name));
      return it == tensors_.end() ? nullptr : &it->second;
    };
  }
  const TensorView& at(const std::string& name) const { return tensors_.at(name); }
  void retype(const std::string& name, TensorType type) { tensors_.at(name).type = type; }

 private:
  std::map<std::string, TensorView> tensors_;
  std::vector<std::vector<std::byte>> storage_;
};

ModelConfig moe_config() {
  ModelConfig c;
  c.architecture = Architecture::qwen3moe;
  c.vocab_size = 16;
  c.dim = 32;
  c.ffn_dim = 64;
  c.layers = 1;
  c.heads = 2;
  c.kv_heads = 1;
  c.head_dim = 16;
  c.experts = 4;
  c.experts_used = 2;
  c.expert_ffn_dim = 24;
  return c;
}

void add_common(FakeTensors& t, const ModelConfig& c) {
  t.add("token_embd.weight", {c.dim, c.vocab_size});
  t.add("output_norm.weight", {c.dim});
  t.add("blk.0.attn_norm.weight", {c.dim});
  t.add("blk.0.attn_output.weight", {c.q_dim(), c.dim});
  t.add("blk.0.ffn_norm.weight", {c.dim});
}

// Q, K and V as three matrices (every architecture here but phi3, whose test adds its fused one).
void add_separate_qkv(FakeTensors& t, const ModelConfig& c) {
  t.add("blk.0.attn_q.weight", {c.dim, c.q_dim()});
  t.add("blk.0.attn_k.weight", {c.dim, c.kv_dim()});
  t.add("blk.0.attn_v.weight", {c.dim, c.kv_dim()});
}

void add_experts(FakeTensors& t, const ModelConfig& c, std::int64_t down_experts) {
  t.add("blk.0.ffn_gate_inp.weight", {c.dim, c.experts});
  t.add("blk.0.ffn_gate_exps.weight", {c.dim, c.expert_ffn_dim, c.experts});
  t.add("blk.0.ffn_up_exps.weight", {c.dim, c.expert_ffn_dim, c.experts});
  t.add("blk.0.ffn_down_exps.weight", {c.expert_ffn_dim, c.dim, down_experts});
}

TEST(ExpertWeights, EachExpertIsAViewOverItsOwnRows) {
  const ModelConfig c = moe_config();
  FakeTensors t;
  add_common(t, c);
  add_separate_qkv(t, c);
  add_experts(t, c, c.experts);
  const ModelWeights w = bind_weights(c, t.lookup());
  ASSERT_EQ(w.layers[0].experts.size(), 4u);
  const TensorView& gate = t.at("blk.0.ffn_gate_exps.weight");
  const TensorView& down = t.at("blk.0.ffn_down_exps.weight");
  for (std::size_t e = 0; e < 4; ++e) {
    const ExpertWeights& x = w.layers[0].experts[e];
    EXPECT_EQ(x.gate->data, gate.data + e * static_cast<std::size_t>(c.expert_ffn_dim * c.dim) * sizeof(float));
    EXPECT_EQ(x.gate->dims, (std::vector<std::int64_t>{c.dim, c.expert_ffn_dim}));
    EXPECT_EQ(x.gate->bytes, static_cast<std::uint64_t>(c.expert_ffn_dim * c.dim) * sizeof(float));
    EXPECT_EQ(x.down->data, down.data + e * static_cast<std::size_t>(c.dim * c.expert_ffn_dim) * sizeof(float));
    EXPECT_EQ(x.down->dims, (std::vector<std::int64_t>{c.expert_ffn_dim, c.dim}));
  }
  EXPECT_EQ(w.layers[0].gate, nullptr) << "a MoE layer has no dense feed-forward";
  // The views live as long as any copy of the weights.
  const ModelWeights copy = w;
  EXPECT_EQ(copy.layers[0].experts[3].up, w.layers[0].experts[3].up);
}

// The router's logits are computed in F32's order from F32 weights (expert_feed_forward.cpp).
TEST(ExpertWeights, ARouterThatIsNotF32IsRefused) {
  const ModelConfig c = moe_config();
  FakeTensors t;
  add_common(t, c);
  add_separate_qkv(t, c);
  add_experts(t, c, c.experts);
  t.retype("blk.0.ffn_gate_inp.weight", TensorType::f16);
  try {
    (void)bind_weights(c, t.lookup());
    ADD_FAILURE() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("blk.0.ffn_gate_inp.weight: expected type f32, the file has f16"), std::string::npos)
        << e.what();
  }
}

// A weight of a type loom has no kernels for (here i16; q8_K, an activation type, likewise) is refused naming
// the tensor, its type, and every weight type loom computes with, from the type table.
TEST(ExpertWeights, AWeightOfAnUnsupportedTypeIsRefusedWithTheSupportedList) {
  const ModelConfig c = moe_config();
  for (const TensorType bad : {TensorType::i16, TensorType::q8_k}) {
    FakeTensors t;
    add_common(t, c);
    add_separate_qkv(t, c);
    add_experts(t, c, c.experts);
    t.retype("blk.0.attn_k.weight", bad);
    try {
      (void)bind_weights(c, t.lookup());
      ADD_FAILURE() << "expected an error for " << name(bad);
    } catch (const std::runtime_error& e) {
      const std::string expected = "tensor blk.0.attn_k.weight: type " + std::string(name(bad)) +
                                   " is not supported (supported: f32, f16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_K, q3_K, "
                                   "q4_K, q5_K, q6_K, iq4_nl, iq4_xs, bf16)";
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  }
}

TEST(ExpertWeights, AnExpertTensorOfTheWrongShapeIsRefusedByName) {
  const ModelConfig c = moe_config();
  FakeTensors t;
  add_common(t, c);
  add_separate_qkv(t, c);
  add_experts(t, c, 3);  // one expert short
  try {
    (void)bind_weights(c, t.lookup());
    ADD_FAILURE() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("blk.0.ffn_down_exps.weight: expected dimensions [24, 32, 4], the file has [24, 32, 3]"),
              std::string::npos)
        << e.what();
  }
}

// Older Mixtral conversions hold each expert in its own 2-D tensors (blk.N.ffn_gate.E.weight, ...).
TEST(ExpertWeights, PerExpertTensorsOfOlderMixtralFilesAreBoundToo) {
  ModelConfig c = moe_config();
  c.architecture = Architecture::llama;
  FakeTensors t;
  add_common(t, c);
  add_separate_qkv(t, c);
  t.add("blk.0.ffn_gate_inp.weight", {c.dim, c.experts});
  for (int e = 0; e < c.experts; ++e) {
    const std::string which = "." + std::to_string(e) + ".weight";
    t.add("blk.0.ffn_gate" + which, {c.dim, c.expert_ffn_dim});
    t.add("blk.0.ffn_up" + which, {c.dim, c.expert_ffn_dim});
    if (e != 3) t.add("blk.0.ffn_down" + which, {c.expert_ffn_dim, c.dim});
  }
  try {
    (void)bind_weights(c, t.lookup());
    ADD_FAILURE() << "expected an error for the missing expert 3";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("missing tensor blk.0.ffn_down.3.weight"), std::string::npos) << e.what();
  }
  t.add("blk.0.ffn_down.3.weight", {c.expert_ffn_dim, c.dim});
  const ModelWeights w = bind_weights(c, t.lookup());
  ASSERT_EQ(w.layers[0].experts.size(), 4u);
  EXPECT_EQ(w.layers[0].experts[2].up, &t.at("blk.0.ffn_up.2.weight"));
  EXPECT_EQ(w.layers[0].experts[3].down, &t.at("blk.0.ffn_down.3.weight"));
}

TEST(FusedWeights, Phi3QkvAndGateUpAreRowRangesOfTheFusedTensors) {
  ModelConfig c = moe_config();
  c.architecture = Architecture::phi3;
  c.experts = 0;
  c.fused_qkv = c.fused_gate_up = true;
  FakeTensors t;
  add_common(t, c);
  t.add("blk.0.attn_qkv.weight", {c.dim, c.q_dim() + 2 * c.kv_dim()});
  t.add("blk.0.ffn_up.weight", {c.dim, 2 * c.ffn_dim});
  t.add("blk.0.ffn_down.weight", {c.ffn_dim, c.dim});
  const ModelWeights w = bind_weights(c, t.lookup());
  const auto row = static_cast<std::size_t>(c.dim) * sizeof(float);
  const TensorView& qkv = t.at("blk.0.attn_qkv.weight");
  EXPECT_EQ(w.layers[0].wq->data, qkv.data);
  EXPECT_EQ(w.layers[0].wk->data, qkv.data + static_cast<std::size_t>(c.q_dim()) * row);
  EXPECT_EQ(w.layers[0].wv->data, qkv.data + static_cast<std::size_t>(c.q_dim() + c.kv_dim()) * row);
  EXPECT_EQ(w.layers[0].wv->rows(), c.kv_dim());
  const TensorView& up = t.at("blk.0.ffn_up.weight");
  EXPECT_EQ(w.layers[0].gate->data, up.data);
  EXPECT_EQ(w.layers[0].up->data, up.data + static_cast<std::size_t>(c.ffn_dim) * row);
  EXPECT_EQ(w.layers[0].up->rows(), c.ffn_dim);

  FakeTensors short_qkv;
  add_common(short_qkv, c);
  short_qkv.add("blk.0.attn_qkv.weight", {c.dim, c.q_dim() + c.kv_dim()});  // no v rows
  short_qkv.add("blk.0.ffn_up.weight", {c.dim, 2 * c.ffn_dim});
  short_qkv.add("blk.0.ffn_down.weight", {c.ffn_dim, c.dim});
  EXPECT_THROW((void)bind_weights(c, short_qkv.lookup()), std::runtime_error);
}

// read_model_config's expert keys: a qwen3moe without experts, or using more than it has, is refused naming
// the key.
std::string config_error(const std::string& arch, std::optional<std::uint32_t> experts, std::uint32_t used) {
  GgufWriter writer;
  writer.add_string("general.architecture", arch);
  for (const char* key : {"embedding_length", "feed_forward_length", "block_count", "attention.head_count", "context_length"}) {
    writer.add_u32(arch + "." + key, 32);
  }
  if (experts) writer.add_u32(arch + ".expert_count", *experts);
  writer.add_u32(arch + ".expert_used_count", used);
  std::vector<float> embd(32 * 8, 0.0f);
  writer.add_f32_tensor("token_embd.weight", {32, 8}, embd);
  const auto path = (std::filesystem::temp_directory_path() / ("loom_test_expert_keys_" + arch + ".gguf")).string();
  writer.write(path);
  const GgufFile file = GgufFile::open(path);
  std::filesystem::remove(path);
  try {
    const ModelConfig c = read_model_config(file);
    return "no error: " + std::to_string(c.experts) + " experts";
  } catch (const ModelFileError& e) {
    return e.what();
  }
}

TEST(ExpertKeys, ContradictoryOrMissingExpertCountsAreRefusedByKey) {
  EXPECT_NE(config_error("qwen3moe", std::nullopt, 2).find("qwen3moe.expert_count"), std::string::npos);
  EXPECT_NE(config_error("qwen3moe", 4, 5).find("qwen3moe.expert_used_count"), std::string::npos);
  EXPECT_EQ(config_error("llama", 4, 2), "no error: 4 experts");
}

}  // namespace
