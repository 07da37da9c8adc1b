// VulkanBackend: the Backend (backend.hpp) that runs the forward pass on a Vulkan device. At load every weight
// tensor is uploaded once to device-local memory in its stored type, and the paged KV storage (per layer, keys
// and values, F16 by default) is allocated on the device, sized like the CPU backend's from LoadOptions (with
// the device's memory where kv_auto sizes it). A step is one submit and one fence wait: the host writes the
// step's inputs (token ids, the rotary table, KV slots, block tables, the rows that want logits) into
// host-visible buffers, resubmits the forward pass recorded for the step's shape (recorded once per shape,
// a few kept), and reads back only what the samplers need: whole logit rows for sequences that need the
// distribution (penalties, a bias, a grammar, logprobs, temperature sampling without top-k), else each row's
// best few, selected on the device: the best token for greedy rows, the best 64 for temperature sampling with
// top_k < 64 (Sampler::sample_best draws from them exactly as from the whole row).
//
// The checks, the sequences held between steps, the samplers, forks and embedding pooling are StepSampling's,
// shared with the CPU backend, so both give the same tokens from the same logits.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "loom/compute/backend.hpp"
#include "loom/compute/cpu/attention.hpp"
#include "loom/compute/text/tokenizer.hpp"

namespace loom::compute::vulkan {

struct DeviceDescription;

class VulkanBackend final : public Backend {
 public:
  // Opens the device options.device names ("vulkan", "vulkan:N"), the model and its vocabulary, uploads the
  // weights and allocates the KV storage. Throws std::invalid_argument for options out of range or a model the
  // backend cannot run (a tensor type without shaders), std::runtime_error for a device
  // that cannot be opened or lacks the memory (saying how much the weights and the KV storage need).
  // `context_length` > 0 runs the model at that context instead of the file's (what phi3's LongRoPE chooses its
  // factors by; the parity tests match references made below the original context).
  static std::unique_ptr<VulkanBackend> load(const LoadOptions& options, std::int64_t context_length = 0);
  ~VulkanBackend() override;

  BackendInfo info() const override;
  std::shared_ptr<const Tokenizer> tokenizer() const override;
  StepResult run(const StepBatch& batch) override;
  void release(SequenceId sequence) override;

  // The logits of every one of `tokens` at positions start, start + 1, ... (tokens.size() rows of vocab_size),
  // keys and values written through `table` as a step writes them; outside the sequences run() holds (use
  // blocks no held sequence uses). For `loom logits --device vulkan` and the parity tests; at most
  // max_batch_tokens tokens.
  std::vector<float> logits(std::span<const std::int32_t> tokens, std::int64_t start, std::span<const BlockId> table);

  // The device it runs on.
  const DeviceDescription& device() const noexcept;
  // Forward passes recorded since the load: one per batch shape while the shape stays in the cache.
  std::uint64_t recordings_made() const noexcept;
  // Whose orders the pinned attention and SwiGLU follow (cpu/attention.hpp's LaneWidth): by default as
  // LlamaModel's, the AVX2 build's where the CPU's default kernel path is AVX2, else the AVX-512 build's. The
  // parity tests set each reference file's. Changing it drops the recorded forward passes.
  LaneWidth reference_lanes() const noexcept;
  void set_reference_lanes(LaneWidth lanes);
  // Whether attention, SwiGLU, the norms, rope and the quantized products run in the CPU's pinned arithmetic
  // (vulkan_pinned.hpp, vulkan_matmul.hpp's Summation::pinned: the CPU backend's bits, at a GPU's FP64 speed;
  // the default on a CPU device such as lavapipe that has shaderFloat64) or as the online-softmax attention, the
  // device's exp and the tiled products (the default on GPUs: last bits apart from the CPU's, which random-weight
  // quantized models turn into logit differences of up to ~0.15). LoadOptions::arithmetic chooses at load (auto:
  // the defaults just named; pinned without shaderFloat64 is refused). Setting true without shaderFloat64 throws;
  // setting it on a backend loaded fast allocates the pinned attention's scratch (tokens x heads x context floats).
  bool pinned_arithmetic() const noexcept;
  void set_pinned_arithmetic(bool pinned);
  // Positions computed since the load.
  std::uint64_t positions_computed() const noexcept;
  // Logit rows run() read back whole since the load (the others came back as their best candidates).
  std::uint64_t whole_rows_read() const noexcept;
  // Fence waits since the load: one per step, its block copies included (and one per logits() call).
  std::uint64_t fence_waits() const noexcept;

  struct State;
  explicit VulkanBackend(std::unique_ptr<State> state);

 private:
  std::unique_ptr<State> state_;
};

}  // namespace loom::compute::vulkan
