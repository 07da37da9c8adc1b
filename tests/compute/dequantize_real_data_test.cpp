// Dequantization and dot products on real files: the synth11M GGUFs hold the same random model stored as
// F16, Q8_0, Q4_0, Q4_K_M (Q4_K and Q6_K tensors) and Q6_K. Every quantized tensor must dequantize to the F16
// tensor of the same name within its format's quantization error; a layout mistake (a wrong nibble order,
// a misread scale) gives errors as large as the weights themselves.
//
// The GGUF reader of loom_compute is not used on purpose: a minimal parser lives here, so this test checks
// the block formats independently of the loader.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <ostream>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "loom/compute/cpu/dequantize.hpp"
#include "loom/compute/cpu/quantize.hpp"
#include "loom/compute/cpu/vec_dot.hpp"
#include "loom/compute/model/half.hpp"
#include "loom/compute/model/quant_blocks.hpp"
#include "loom/compute/tensor_type.hpp"

namespace loom::compute {
namespace {

// ---- minimal GGUF (v2/v3) reader: header, key/values (skipped, except general.alignment), tensor infos ----

struct MiniTensor {
  std::uint32_t type = 0;
  std::vector<std::uint64_t> dims;
  std::uint64_t offset = 0;  // from the start of the data section
};

class MiniGguf {
 public:
  explicit MiniGguf(const std::string& path) : path_(path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot open " + path);
    bytes_.assign(std::istreambuf_iterator<char>(in), {});
    if (read<std::uint32_t>() != 0x46554747u) throw std::runtime_error(path + ": not a GGUF file");
    const auto version = read<std::uint32_t>();
    if (version < 2) throw std::runtime_error(path + ": GGUF v1 is not handled here");
    const auto n_tensors = read<std::uint64_t>();
    const auto n_kv = read<std::uint64_t>();
    std::uint64_t alignment = 32;
    for (std::uint64_t i = 0; i < n_kv; ++i) {
      const std::string key = read_string();
      const auto type = read<std::uint32_t>();
      if (key == "general.alignment" && type == 4) {
        alignment = read<std::uint32_t>();
      } else {
        skip_value(type);
      }
    }
    for (std::uint64_t i = 0; i < n_tensors; ++i) {
      const std::string name = read_string();
      MiniTensor t;
      const auto n_dims = read<std::uint32_t>();
      for (std::uint32_t d = 0; d < n_dims; ++d) t.dims.push_back(read<std::uint64_t>());
      t.type = read<std::uint32_t>();
      t.offset = read<std::uint64_t>();
      tensors_[name] = t;
    }
    data_start_ = (pos_ + alignment - 1) / alignment * alignment;
  }

  const std::map<std::string, MiniTensor>& tensors() const { return tensors_; }

  std::uint64_t elements(const MiniTensor& t) const {
    std::uint64_t n = 1;
    for (auto d : t.dims) n *= d;
    return n;
  }

  const std::uint8_t* data(const MiniTensor& t) const {
    const auto type = find_tensor_type(t.type);
    if (type == nullptr) throw std::runtime_error(path_ + ": unknown tensor type");
    const auto size = tensor_bytes(type->type, elements(t));
    if (!size || data_start_ + t.offset + *size > bytes_.size())
      throw std::runtime_error(path_ + ": tensor out of file");
    return bytes_.data() + data_start_ + t.offset;
  }

 private:
  template <class T>
  T read() {
    if (pos_ + sizeof(T) > bytes_.size()) throw std::runtime_error(path_ + ": truncated at " + std::to_string(pos_));
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string read_string() {
    const auto n = read<std::uint64_t>();
    if (pos_ + n > bytes_.size()) throw std::runtime_error(path_ + ": truncated string at " + std::to_string(pos_));
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  void skip_value(std::uint32_t type) {
    static constexpr std::size_t kScalarSize[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (type == 8) {
      read_string();
    } else if (type == 9) {
      const auto element_type = read<std::uint32_t>();
      const auto count = read<std::uint64_t>();
      for (std::uint64_t i = 0; i < count; ++i) skip_value(element_type);
    } else if (type < 13) {
      pos_ += kScalarSize[type];
    } else {
      throw std::runtime_error(path_ + ": unknown value type " + std::to_string(type));
    }
  }

  std::string path_;
  std::vector<std::uint8_t> bytes_;
  std::size_t pos_ = 0;
  std::uint64_t data_start_ = 0;
  std::map<std::string, MiniTensor> tensors_;
};

std::string model_path(const std::string& file) { return std::string(LOOM_SHARED_DIR) + "/models/" + file; }

// Loads a model file, failing the test (with the path) when it is missing or unreadable.
std::unique_ptr<MiniGguf> open_model(const std::string& file) {
  const std::string path = model_path(file);
  if (!std::filesystem::exists(path)) {
    ADD_FAILURE() << "missing test model " << path;
    return nullptr;
  }
  try {
    return std::make_unique<MiniGguf>(path);
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
    return nullptr;
  }
}

std::vector<float> dequantized(const MiniGguf& file, const MiniTensor& t) {
  const auto n = file.elements(t);
  std::vector<float> out(n);
  dequantize_row(static_cast<TensorType>(t.type), file.data(t), out.data(), static_cast<std::int64_t>(n));
  return out;
}

// Error statistics of one quantized type against F16 over all its tensors in one file.
struct ErrorStats {
  std::size_t tensors = 0;
  double max_abs = 0;  // largest |quantized - f16|
  double err2 = 0, ref2 = 0;
  double max_step_ratio = 0;  // largest |error| / (quantization step of its (sub-)block)
};

// The quantization step of the (sub-)block holding value i, read from the block's own scales: for a
// correctly read layout no value can sit much more than one step from its original.
double step_at(TensorType type, const std::uint8_t* row_data, std::uint64_t i) {
  switch (type) {
    case TensorType::q8_0: {
      const auto* b = reinterpret_cast<const BlockQ8_0*>(row_data) + i / 32;
      return std::fabs(half_to_float(b->d));
    }
    case TensorType::q4_0: {
      const auto* b = reinterpret_cast<const BlockQ4_0*>(row_data) + i / 32;
      return std::fabs(half_to_float(b->d));
    }
    case TensorType::q4_k: {
      const auto* b = reinterpret_cast<const BlockQ4_K*>(row_data) + i / 256;
      return std::fabs(half_to_float(b->d)) * k_scale_min(b->scales, static_cast<int>(i % 256 / 32)).scale;
    }
    case TensorType::q6_k: {
      const auto* b = reinterpret_cast<const BlockQ6_K*>(row_data) + i / 256;
      return std::fabs(half_to_float(b->d) * b->scales[i % 256 / 16]);
    }
    default:
      return 0;
  }
}

struct RealCase {
  const char* file;
  double max_relative_rms;  // rms(error) / rms(f16 weights), per type in that file
  double max_step_ratio;    // largest |error| in quantization steps of the value's block
};

void PrintTo(const RealCase& c, std::ostream* os) { *os << c.file; }

class DequantRealData : public ::testing::TestWithParam<RealCase> {};

TEST_P(DequantRealData, EveryQuantizedTensorMatchesTheF16File) {
  const RealCase& c = GetParam();
  const auto reference = open_model("synth11M-f16.gguf");
  const auto quantized = open_model(c.file);
  ASSERT_TRUE(reference && quantized);
  std::map<TensorType, ErrorStats> stats;
  for (const auto& [name, t] : quantized->tensors()) {
    const auto type = static_cast<TensorType>(t.type);
    if (type == TensorType::f32) continue;  // norms are stored as f32 in every file
    ASSERT_TRUE(type == TensorType::q8_0 || type == TensorType::q4_0 || type == TensorType::q4_k ||
                type == TensorType::q6_k)
        << name << " has type " << t.type;
    const auto it = reference->tensors().find(name);
    ASSERT_NE(it, reference->tensors().end()) << name << " missing from the f16 file";
    ASSERT_EQ(it->second.dims, t.dims) << name;
    ASSERT_EQ(static_cast<TensorType>(it->second.type), TensorType::f16) << name;
    const std::vector<float> q = dequantized(*quantized, t);
    const std::vector<float> f = dequantized(*reference, it->second);
    ErrorStats& s = stats[type];
    ++s.tensors;
    for (std::size_t i = 0; i < q.size(); ++i) {
      const double e = std::fabs(static_cast<double>(q[i]) - f[i]);
      s.max_abs = std::max(s.max_abs, e);
      s.err2 += e * e;
      s.ref2 += static_cast<double>(f[i]) * f[i];
      // The f16 file is itself a rounding of the original weights (relative 2^-11), hence the allowance.
      const double step = step_at(type, quantized->data(t), i);
      const double excess = std::max(0.0, e - std::fabs(f[i]) * 1e-3);
      if (step > 0)
        s.max_step_ratio = std::max(s.max_step_ratio, excess / step);
      else
        ASSERT_LE(excess, 1e-6) << name << " value " << i << ": error with a zero scale";
    }
  }
  ASSERT_FALSE(stats.empty()) << c.file << " has no quantized tensors";
  for (const auto& [type, s] : stats) {
    const double rel = std::sqrt(s.err2 / s.ref2);
    std::printf("  %-22s %-5s tensors %3zu  max|diff| %.6g  relative rms %.5f  max error/step %.3f\n", c.file,
                std::string(name(type)).c_str(), s.tensors, s.max_abs, rel, s.max_step_ratio);
    EXPECT_LT(rel, c.max_relative_rms) << c.file << " " << name(type);
    EXPECT_LT(s.max_step_ratio, c.max_step_ratio) << c.file << " " << name(type);
  }
}

INSTANTIATE_TEST_SUITE_P(Dequant, DequantRealData,
                         ::testing::Values(RealCase{"synth11M-q8_0.gguf", 0.01, 0.51},
                                           RealCase{"synth11M-q4_0.gguf", 0.15, 1.01},
                                           RealCase{"synth11M-q4_k_m.gguf", 0.15, 1.5},
                                           RealCase{"synth11M-q6_k.gguf", 0.04, 1.0}),
                         [](const ::testing::TestParamInfo<RealCase>& case_info) {
                           std::string n = case_info.param.file;
                           n = n.substr(9, n.size() - 9 - 5);  // "synth11M-" ... ".gguf"
                           return n;
                         });

TEST(DequantRealData, MissingFileFailsWithItsPath) {
  EXPECT_FALSE(std::filesystem::exists(model_path("no-such-model.gguf")));
  // open_model() reports through ADD_FAILURE; check the message it would give names the path.
  try {
    MiniGguf missing(model_path("no-such-model.gguf"));
    FAIL() << "opening a missing file must throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-model.gguf"), std::string::npos);
  }
}

// A whole matrix-vector product per format, against the same product with the F16 weights: what the model
// will actually compute, on every kernel path this machine runs.
TEST(VecDotRealData, MatVecOfEveryFormatAgreesWithF16Weights) {
  const auto reference = open_model("synth11M-f16.gguf");
  ASSERT_TRUE(reference);
  std::mt19937 rng(1234);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  for (const auto& [file, tensor, bound] : {std::tuple{"synth11M-q8_0.gguf", "blk.0.ffn_down.weight", 0.01},
                                            std::tuple{"synth11M-q4_0.gguf", "blk.0.ffn_down.weight", 0.15},
                                            std::tuple{"synth11M-q4_k_m.gguf", "blk.0.ffn_down.weight", 0.15},
                                            std::tuple{"synth11M-q4_k_m.gguf", "blk.3.ffn_down.weight", 0.04},
                                            std::tuple{"synth11M-q6_k.gguf", "blk.1.attn_q.weight", 0.04}}) {
    const auto quantized = open_model(file);
    ASSERT_TRUE(quantized);
    const MiniTensor& qt = quantized->tensors().at(tensor);
    const MiniTensor& ft = reference->tensors().at(tensor);
    const auto cols = static_cast<std::int64_t>(qt.dims[0]);
    const int rows = static_cast<int>(qt.dims[1]);
    const auto qtype = static_cast<TensorType>(qt.type);
    std::vector<float> x(cols);
    for (auto& v : x) v = gauss(rng);
    std::vector<std::uint8_t> xq(*tensor_bytes(activation_type(qtype), cols));
    quantize_row(activation_type(qtype), x.data(), xq.data(), cols);
    std::vector<float> yf(rows), yq(rows);
    vec_dot_kernel(TensorType::f16, KernelPath::scalar)
        .rows(reference->data(ft), *tensor_bytes(TensorType::f16, cols), rows, x.data(), cols, yf.data());
    for (KernelPath path : {KernelPath::scalar, KernelPath::avx2}) {
      if (!kernel_path_supported(path)) continue;
      vec_dot_kernel(qtype, path)
          .rows(quantized->data(qt), *tensor_bytes(qtype, cols), rows, xq.data(), cols, yq.data());
      double err2 = 0, ref2 = 0;
      for (int r = 0; r < rows; ++r) {
        err2 += (yq[r] - yf[r]) * static_cast<double>(yq[r] - yf[r]);
        ref2 += yf[r] * static_cast<double>(yf[r]);
      }
      const double rel = std::sqrt(err2 / ref2);
      std::printf("  %-22s %-22s %-6s %-5s relative rms of W x vs f16: %.5f\n", file, tensor,
                  std::string(name(path)).c_str(), std::string(name(qtype)).c_str(), rel);
      EXPECT_LT(rel, bound) << file << " " << tensor << " on " << name(path);
    }
  }
}

}  // namespace
}  // namespace loom::compute
