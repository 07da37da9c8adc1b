#include "loom/compute/model/llama2c_checkpoint.hpp"

#include <array>
#include <bit>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>

namespace loom::compute {
namespace {

static_assert(std::endian::native == std::endian::little, "llama2.c checkpoints are read as little-endian");

constexpr std::array<const char*, 7> kFieldNames{"dim",        "hidden_dim", "n_layers", "n_heads",
                                                 "n_kv_heads", "vocab_size", "seq_len"};

[[noreturn]] void fail(const std::string& path, std::uint64_t at, std::string_view key, std::string detail) {
  throw ModelFileError(path, at, std::string(key), std::move(detail));
}

std::string text_of(std::uint64_t value) { return std::to_string(value); }

std::optional<std::uint64_t> product(std::initializer_list<std::uint64_t> factors) {
  std::uint64_t result = 1;
  for (const auto f : factors) {
    if (__builtin_mul_overflow(result, f, &result)) return std::nullopt;
  }
  return result;
}

}  // namespace

Llama2cCheckpoint Llama2cCheckpoint::open(std::string path) {
  Llama2cCheckpoint checkpoint(MappedFile(std::move(path)));
  checkpoint.parse();
  return checkpoint;
}

void Llama2cCheckpoint::parse() {
  const std::uint64_t size = file_.size();
  const std::string& file_path = file_.path();

  if (size < kHeaderBytes) {
    fail(file_path, 0, {},
         "the llama2.c header needs " + text_of(kHeaderBytes) + " bytes (7 int32) but the file has only " + text_of(size));
  }
  if (std::memcmp(file_.data(), "GGUF", 4) == 0) {
    fail(file_path, 0, {}, "this is a GGUF file, not a llama2.c checkpoint (open it with GgufFile)");
  }
  std::array<std::int32_t, 7> header{};
  std::memcpy(header.data(), file_.data(), kHeaderBytes);
  for (std::size_t i = 0; i < header.size(); ++i) {
    const bool vocab = i == 5;  // its sign says whether the classifier is shared; only 0 is wrong
    const bool bad = vocab ? (header[i] == 0 || header[i] == std::numeric_limits<std::int32_t>::min()) : header[i] <= 0;
    if (bad) {
      fail(file_path, i * 4, kFieldNames[i],
           std::to_string(header[i]) +
               (vocab ? " (expected a non-zero vocabulary size)" : " (expected a positive number)"));
    }
  }
  config_.dim = header[0];
  config_.hidden_dim = header[1];
  config_.n_layers = header[2];
  config_.n_heads = header[3];
  config_.n_kv_heads = header[4];
  config_.shared_classifier = header[5] > 0;
  config_.vocab_size = header[5] > 0 ? header[5] : -header[5];
  config_.seq_len = header[6];

  const Llama2cConfig& c = config_;
  if (c.dim % c.n_heads != 0) {
    fail(file_path, 12, "n_heads", "dim " + text_of(c.dim) + " is not a multiple of n_heads " + text_of(c.n_heads));
  }
  if (c.n_kv_heads > c.n_heads || c.n_heads % c.n_kv_heads != 0) {
    fail(file_path, 16, "n_kv_heads",
         "n_heads " + text_of(c.n_heads) + " is not a multiple of n_kv_heads " + text_of(c.n_kv_heads));
  }
  if (c.head_size() % 2 != 0) {
    fail(file_path, 12, "n_heads", "head size " + text_of(c.head_size()) + " (dim / n_heads) is odd; RoPE rotates pairs");
  }

  const auto dim = static_cast<std::uint64_t>(c.dim);
  const auto hidden = static_cast<std::uint64_t>(c.hidden_dim);
  const auto layers = static_cast<std::uint64_t>(c.n_layers);
  const auto vocab = static_cast<std::uint64_t>(c.vocab_size);
  const auto kv_dim = static_cast<std::uint64_t>(c.kv_dim());
  const auto half_head = static_cast<std::uint64_t>(c.head_size() / 2);
  const std::string config_text = "dim " + text_of(dim) + ", hidden_dim " + text_of(hidden) + ", n_layers " + text_of(layers) +
                                  ", n_kv_heads " + text_of(c.n_kv_heads) + ", vocab_size " + text_of(vocab) + ", seq_len " +
                                  text_of(c.seq_len);

  std::uint64_t pos = kHeaderBytes;
  // Claims the next array of `floats` f32 values; `what` names it in errors.
  auto claim = [&](std::string_view what, std::optional<std::uint64_t> floats) -> const std::byte* {
    std::uint64_t bytes = 0;
    if (!floats || __builtin_mul_overflow(*floats, sizeof(float), &bytes)) {
      fail(file_path, pos, what, "its size overflows 64 bits (header: " + config_text + ")");
    }
    if (bytes > size - pos) {
      fail(file_path, pos, what,
           "needs " + text_of(bytes) + " bytes but only " + text_of(size - pos) + " remain (file size " + text_of(size) +
               " bytes; header: " + config_text + ")");
    }
    const std::byte* data = file_.data() + pos;
    pos += bytes;
    return data;
  };
  auto add = [&](std::string name, std::vector<std::int64_t> dims, const std::byte* data) {
    std::uint64_t elements = 1;
    for (const auto d : dims) elements *= static_cast<std::uint64_t>(d);  // fits: the array was claimed
    index_.emplace(name, tensors_.size());
    tensors_.push_back(TensorView{std::move(name), TensorType::f32, std::move(dims), data, elements * sizeof(float)});
  };
  const auto d = static_cast<std::int64_t>(dim);
  const auto h = static_cast<std::int64_t>(hidden);
  const auto kv = static_cast<std::int64_t>(kv_dim);
  // One array holding every layer's matrix of `rows` x `cols`, cut into per-layer tensors.
  auto per_layer = [&](const char* kind, std::int64_t cols, std::int64_t rows, bool is_vector) {
    const std::string what = std::string("blk.*.") + kind + ".weight";
    const auto per = static_cast<std::uint64_t>(cols) * static_cast<std::uint64_t>(rows);  // < 2^62
    const std::byte* data = claim(what, product({layers, per}));
    for (std::uint64_t l = 0; l < layers; ++l) {
      std::vector<std::int64_t> dims =
          is_vector ? std::vector<std::int64_t>{cols} : std::vector<std::int64_t>{cols, rows};
      add("blk." + text_of(l) + "." + kind + ".weight", std::move(dims), data + l * per * sizeof(float));
    }
  };

  add("token_embd.weight", {d, static_cast<std::int64_t>(vocab)}, claim("token_embd.weight", product({vocab, dim})));
  per_layer("attn_norm", d, 1, true);
  per_layer("attn_q", d, d, false);
  per_layer("attn_k", d, kv, false);
  per_layer("attn_v", d, kv, false);
  per_layer("attn_output", d, d, false);
  per_layer("ffn_norm", d, 1, true);
  per_layer("ffn_gate", d, h, false);  // w1
  per_layer("ffn_down", h, d, false);  // w2
  per_layer("ffn_up", d, h, false);    // w3
  add("output_norm.weight", {d}, claim("output_norm.weight", dim));
  // Legacy RoPE tables, unused: loom computes the rotation itself.
  const auto freq_floats = product({static_cast<std::uint64_t>(c.seq_len), half_head});
  claim("freq_cis_real", freq_floats);
  claim("freq_cis_imag", freq_floats);
  if (!c.shared_classifier) {
    add("output.weight", {d, static_cast<std::int64_t>(vocab)}, claim("output.weight", product({vocab, dim})));
  }
  if (pos != size) {
    fail(file_path, pos, {},
         text_of(size - pos) + " unexpected bytes after the weights (the header's config accounts for " + text_of(pos) +
             " bytes: " + config_text + (c.shared_classifier ? ", shared classifier" : ", separate classifier") + ")");
  }
}

const TensorView* Llama2cCheckpoint::find_tensor(std::string_view name) const noexcept {
  const auto found = index_.find(name);
  return found == index_.end() ? nullptr : &tensors_[found->second];
}

const TensorView& Llama2cCheckpoint::get_tensor(std::string_view name) const {
  const TensorView* tensor = find_tensor(name);
  if (tensor == nullptr) throw ModelFileError(path(), std::nullopt, std::string(name), "missing tensor");
  return *tensor;
}

}  // namespace loom::compute
