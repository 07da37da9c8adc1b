// Llama2cCheckpoint: a llama2.c model checkpoint (the legacy "v0" format: a header of 7 int32 followed by
// f32 weights), memory-mapped, with its weights exposed as TensorViews under the names a GGUF llama file
// uses (`token_embd.weight`, `blk.N.attn_q.weight`, ...) and the same dims, so the same model code runs on
// either file. The checkpoint's matrices are row-major [out][in], which is exactly GGUF's {in, out}; its Q
// and K rows are in the same order as in GGUF llama files (both rotate adjacent pairs in RoPE), so no
// permutation is applied. As with GgufFile, the views point into the mapping and live as long as the object.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "loom/compute/model/mapped_file.hpp"
#include "loom/compute/model/model_file_error.hpp"
#include "loom/compute/model/tensor_view.hpp"

namespace loom::compute {

struct Llama2cConfig {
  std::int32_t dim = 0;         // embedding width
  std::int32_t hidden_dim = 0;  // feed-forward width
  std::int32_t n_layers = 0;
  std::int32_t n_heads = 0;
  std::int32_t n_kv_heads = 0;
  std::int32_t vocab_size = 0;    // always positive here; the header's sign is `shared_classifier`
  std::int32_t seq_len = 0;       // the context length the model was trained for
  bool shared_classifier = true;  // the output projection is the token embedding (no output.weight)

  std::int32_t head_size() const noexcept { return dim / n_heads; }
  std::int32_t kv_dim() const noexcept { return dim / n_heads * n_kv_heads; }
};

class Llama2cCheckpoint {
 public:
  static constexpr std::uint64_t kHeaderBytes = 7 * sizeof(std::int32_t);

  // Maps and checks `path`: positive, consistent dims, and a file size that is exactly what the header's
  // config needs. Throws ModelFileError naming the offset and the field or tensor at fault.
  static Llama2cCheckpoint open(std::string path);

  Llama2cCheckpoint(Llama2cCheckpoint&&) noexcept = default;
  Llama2cCheckpoint& operator=(Llama2cCheckpoint&&) noexcept = default;
  Llama2cCheckpoint(const Llama2cCheckpoint&) = delete;
  Llama2cCheckpoint& operator=(const Llama2cCheckpoint&) = delete;

  const std::string& path() const noexcept { return file_.path(); }
  const Llama2cConfig& config() const noexcept { return config_; }

  // All weights, type f32, in file order: token_embd, then per kind and layer (attn_norm of every layer,
  // then attn_q, ...), output_norm, and output.weight only when the classifier is separate.
  const std::vector<TensorView>& tensors() const noexcept { return tensors_; }
  const TensorView* find_tensor(std::string_view name) const noexcept;
  // Throws ModelFileError naming the tensor when it is missing.
  const TensorView& get_tensor(std::string_view name) const;

 private:
  explicit Llama2cCheckpoint(MappedFile file) : file_(std::move(file)) {}
  void parse();

  MappedFile file_;
  Llama2cConfig config_;
  std::vector<TensorView> tensors_;
  std::map<std::string, std::size_t, std::less<>> index_;
};

}  // namespace loom::compute
