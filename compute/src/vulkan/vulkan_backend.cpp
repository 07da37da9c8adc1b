#include "loom/compute/vulkan/vulkan_backend.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <list>
#include <stdexcept>
#include <string>

#include "loom/compute/backend_loading.hpp"
#include "loom/compute/load_cancelled.hpp"
#include "loom/compute/model/gguf_file.hpp"
#include "loom/compute/model/model_loader.hpp"
#include "loom/compute/step_sampling.hpp"
#include "loom/compute/vulkan/vulkan_context.hpp"
#include "loom/compute/vulkan/vulkan_pipeline.hpp"
#include "vulkan_model.hpp"

namespace loom::compute::vulkan {

namespace {

constexpr std::size_t kRecordingsKept = 8;  // batch shapes whose forward pass stays recorded

struct DevicePlan;

// Where each sampling sequence's logits come back: its row in the step's logits, and how many of the row's best
// values it needs (0: the whole row, read back).
struct RowPlan {
  const StepSequence* sequence = nullptr;
  std::int64_t row = 0;
  std::int32_t best_wanted = 0;
};

std::string gib(std::uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return text;
}

}  // namespace

// Declared in the order they must be made; destroyed in reverse (every buffer before its device).
struct VulkanBackend::State {
  std::unique_ptr<LoadedModel> loaded;
  std::shared_ptr<const Tokenizer> tokenizer;
  ModelConfig config;
  std::unique_ptr<VulkanContext> context;
  std::unique_ptr<PipelineCache> pipelines;
  DeviceWeights weights;
  KvStorage kv;
  StepBuffers buffers;
  std::unique_ptr<RotationTable> rotation;
  std::unique_ptr<StepSampling> sampling;
  std::unique_ptr<CommandRecording> copies;  // a step's block copies, recorded anew when it has any
  struct Recorded {
    StepShape shape;
    std::unique_ptr<CommandRecording> recording;
  };
  std::list<Recorded> recorded;  // most recently used first
  std::int64_t max_batch = 0;
  std::string kv_sizing;
  std::string chat_template_source;
  std::uint64_t recordings_made = 0;
  std::uint64_t positions_computed = 0;
  std::uint64_t whole_rows_read = 0;
  std::uint64_t fence_waits = 0;
  // Scratch of a step.
  std::vector<std::int64_t> positions;
  std::vector<StepSampling::LogitRow> rows;
  std::vector<float> hidden;
  std::deque<std::vector<float>> rows_read;  // whole rows read back on the rare path (read_logits_row)
  std::vector<std::int32_t> candidate_ids;    // the candidate rows' best tokens and logits, kMaxTopK a row
  std::vector<float> candidate_values;
  std::unique_ptr<Uploader> reader;

  // Row `row` of the step's logits, read from the device (best-token rows are not read back otherwise).
  std::span<const float> read_logits_row(std::int64_t row) {
    const auto bytes = static_cast<std::uint64_t>(config.vocab_size) * sizeof(float);
    if (!reader) reader = std::make_unique<Uploader>(*context, bytes);
    std::vector<float>& values = rows_read.emplace_back(static_cast<std::size_t>(config.vocab_size));
    reader->download(buffers.logits.range(static_cast<VkDeviceSize>(row) * bytes, bytes),
                     std::as_writable_bytes(std::span<float>(values)));
    return values;
  }

  CommandRecording& recording_for(const StepShape& shape);
  // The step's logits as StepSampling takes them (rows, in batch order), from what the step read back.
  void read_rows(std::span<const RowPlan> plans, const StepShape& shape);
  void allocate(const DevicePlan& plan, const std::stop_token& stop);
  // Grows the block tables' buffer to hold `entries` (the recordings, which bind the old one, are dropped).
  void ensure_table_entries(std::int64_t entries) {
    if (entries <= buffers.max_table_entries) return;
    const std::int64_t grown = std::max(entries, 2 * buffers.max_table_entries);
    recorded.clear();
    buffers.tables = Buffer(*context, static_cast<std::uint64_t>(grown) * sizeof(std::int32_t), MemoryKind::host_visible,
                            "block tables");
    buffers.max_table_entries = grown;
  }
  void write_rotation() {
    rotation->fill(positions, false, static_cast<float*>(buffers.rotation.mapped()));
    if (rotation->has_swa()) rotation->fill(positions, true, static_cast<float*>(buffers.rotation_swa.mapped()));
  }
  // Records the step's block copies (copy-on-write of shared blocks); false when it has none.
  bool record_block_copies(const std::vector<BlockCopy>& copies);
  // The step's recording, after its block copies in the same submission when it has any: one fence wait.
  void submit_step(const StepShape& shape, bool after_copies) {
    CommandRecording& forward = recording_for(shape);
    if (after_copies) {
      forward.submit_after_and_wait(*copies);
    } else {
      forward.submit_and_wait();
    }
    ++fence_waits;
  }
};

CommandRecording& VulkanBackend::State::recording_for(const StepShape& shape) {
  for (auto it = recorded.begin(); it != recorded.end(); ++it) {
    if (it->shape == shape) {
      recorded.splice(recorded.begin(), recorded, it);
      return *recorded.front().recording;
    }
  }
  if (recorded.size() >= kRecordingsKept) recorded.pop_back();
  auto recording = std::make_unique<CommandRecording>(*context);
  recording->begin();
  OpContext op{*pipelines, *recording};
  record_forward(op, config, weights, kv, buffers, rotation->has_swa(), shape);
  recording->end();
  ++recordings_made;
  recorded.push_front(Recorded{shape, std::move(recording)});
  return *recorded.front().recording;
}

// Copy-on-write of shared blocks: each layer's keys and values of the block, before the forward pass.
bool VulkanBackend::State::record_block_copies(const std::vector<BlockCopy>& block_copies) {
  if (block_copies.empty()) return false;
  if (!copies) copies = std::make_unique<CommandRecording>(*context);
  copies->begin();
  const std::uint64_t bytes = kv.block_bytes();
  for (const BlockCopy& copy : block_copies) {
    const auto from = static_cast<VkDeviceSize>(copy.source) * bytes;
    const auto to = static_cast<VkDeviceSize>(copy.destination) * bytes;
    for (std::size_t layer = 0; layer < kv.keys.size(); ++layer) {
      copies->copy(kv.keys[layer].range(from, bytes), kv.keys[layer].range(to, bytes), bytes);
      copies->copy(kv.values[layer].range(from, bytes), kv.values[layer].range(to, bytes), bytes);
    }
  }
  copies->end();
  return true;
}

namespace {

// The KV storage the options ask for on this device, and what it and the weights take.
struct DevicePlan {
  LoadOptions sized;  // with kv_auto's budget filled in from the device's memory
  std::int64_t blocks = 0;
  std::uint64_t weight_bytes = 0;
  std::uint64_t kv_bytes = 0;
  std::int64_t table_entries = 0;  // the block tables' first capacity (grown on demand)
  std::uint64_t scratch_bytes = 0;  // the pinned attention's scores for the widest step, kept out of the KV budget
  bool pinned = false;              // the arithmetic the steps start in
};

// The pinned arithmetic reproduces the CPU backend's bits, but it walks each output in the CPU's lane order and
// emulates FMAs in double: on a GPU that would cost most of its speed (and scores scratch of tokens x heads x
// context floats), so a GPU starts with the device's own kernels; a CPU device (lavapipe), where speed is not
// the point and agreement with the CPU backend is, starts pinned. set_pinned_arithmetic() changes it.
bool pinned_by_default(const DeviceDescription& device) { return device.shader_float64 && device.type == "cpu"; }

bool starts_pinned(DeviceArithmetic arithmetic, const DeviceDescription& device) {
  switch (arithmetic) {
    case DeviceArithmetic::automatic: return pinned_by_default(device);
    case DeviceArithmetic::fast: return false;
    case DeviceArithmetic::pinned: break;
  }
  if (!device.shader_float64) {
    throw std::invalid_argument("the pinned arithmetic needs a device with shaderFloat64 (64-bit floats in shaders), "
                                "which " + device.name + " lacks; use the fast arithmetic on it");
  }
  return true;
}

DevicePlan plan_device(const LoadOptions& options, const ModelConfig& config, const ModelWeights& weights,
                       const DeviceDescription& device, std::string& kv_sizing) {
  DevicePlan plan;
  plan.weight_bytes = weight_bytes(weights);
  plan.pinned = starts_pinned(options.arithmetic, device);
  if (plan.pinned) {
    plan.scratch_bytes = attention_pinned_scratch_bytes(
        {.n = options.max_batch_tokens, .heads = config.heads, .max_positions = config.context_length});
  }
  const std::uint64_t available =
      device.device_local_bytes > plan.scratch_bytes ? device.device_local_bytes - plan.scratch_bytes : 0;
  plan.sized = with_kv_sized_from_memory(
      options, config, KvMemoryPlace{.available_bytes = available, .weight_bytes = plan.weight_bytes}, kv_sizing);
  const KvCacheOptions& kv = plan.sized.kv;
  plan.blocks = kv_block_count(plan.sized, config);
  plan.kv_bytes = kv_bytes(config, kv.type, kv.block_size, plan.blocks);
  // A full context's table for every sequence of a step would be up to max_batch * context / block_size entries
  // (GiBs at the largest options): start with what 16 contexts take.
  const std::int64_t per_context = (config.context_length + kv.block_size - 1) / kv.block_size;
  plan.table_entries = std::min(options.max_batch_tokens, std::int64_t{16}) * per_context;
  return plan;
}

std::runtime_error too_little_memory(const DeviceDescription& device, const DevicePlan& plan,
                                     std::uint64_t device_bytes, const std::string& detail) {
  return std::runtime_error("the device " + device.name + " has too little memory for this model: its weights need " +
                            gib(plan.weight_bytes) + " and the KV storage " + gib(plan.kv_bytes) + " (" +
                            gib(plan.weight_bytes + plan.kv_bytes) + " together, with the step's buffers besides: " +
                            gib(plan.scratch_bytes) + " of them attention's scores); the device has " + gib(device_bytes) +
                            detail + ". Give a smaller KV budget (--kv-cache-mb), or use --device cpu");
}

}  // namespace

// Weights, KV storage and the step's buffers on the device; a device without the memory for them is refused
// before anything is allocated where its heap says so, else when an allocation fails.
void VulkanBackend::State::allocate(const DevicePlan& plan, const std::stop_token& stop) {
  const DeviceDescription& device = context->description();
  logger().info("loading on {} ({} device-local, {} arithmetic): weights {}, KV storage {} ({} blocks of {} tokens)",
                device.name, gib(device.device_local_bytes), plan.pinned ? "pinned" : "fast", gib(plan.weight_bytes),
                gib(plan.kv_bytes), plan.blocks, plan.sized.kv.block_size);
  if (device.device_local_bytes > 0 &&
      plan.weight_bytes + plan.kv_bytes + plan.scratch_bytes > device.device_local_bytes) {
    throw too_little_memory(device, plan, device.device_local_bytes, "");
  }
  try {
    Uploader uploader(*context);
    weights = upload_weights(*context, uploader, config, loaded->weights(), stop);
    kv = allocate_kv(*context, config, plan.sized.kv.type, plan.sized.kv.block_size, plan.blocks);
    buffers = allocate_step_buffers(*context, config, weights, kv.layout, max_batch, plan.table_entries, plan.pinned);
    if (config.ffn_activation == FfnActivation::gelu_tanh) {
      const std::vector<std::uint32_t> table = gelu_table_words();
      buffers.gelu_table = Buffer(*context, table.size() * sizeof(std::uint32_t), MemoryKind::device_local, "GELU table");
      uploader.upload(buffers.gelu_table.range(), std::as_bytes(std::span<const std::uint32_t>(table)));
    }
  } catch (const DeviceMemoryError& e) {
    throw too_little_memory(device, plan, e.heap_bytes(), std::string(" (") + e.what() + ")");
  }
}

std::unique_ptr<VulkanBackend> VulkanBackend::load(const LoadOptions& options, std::int64_t context_length) {
  check_load_options(options);
  const std::optional<int> index = parse_device_spec(options.device);
  throw_if_stopped(options.stop, "it began");
  auto state = std::make_unique<State>();
  state->loaded = LoadedModel::open(options.model_path);
  state->config = state->loaded->config();
  if (context_length > 0) state->config.context_length = context_length;
  const ModelConfig& config = state->config;
  throw_if_stopped(options.stop, "the model file was read");
  state->tokenizer = std::make_shared<const Tokenizer>(load_vocabulary(options, *state->loaded));
  throw_if_stopped(options.stop, "the vocabulary was read");
  state->context = VulkanContext::open(index);
  state->pipelines = std::make_unique<PipelineCache>(*state->context);
  state->max_batch = options.max_batch_tokens;
  const DevicePlan plan =
      plan_device(options, config, state->loaded->weights(), state->context->description(), state->kv_sizing);
  state->allocate(plan, options.stop);
  state->rotation = std::make_unique<RotationTable>(config, state->loaded->weights());
  state->sampling = std::make_unique<StepSampling>(config, state->tokenizer,
                                                   StepSampling::Limits{.blocks = plan.blocks,
                                                                        .block_size = plan.sized.kv.block_size,
                                                                        .max_batch_tokens = state->max_batch});
  if (const GgufFile* gguf = state->loaded->gguf()) {
    if (auto source = gguf->find_string("tokenizer.chat_template")) state->chat_template_source = std::string(*source);
  }
  state->hidden.reserve(static_cast<std::size_t>(state->max_batch * config.dim));
  return std::make_unique<VulkanBackend>(std::move(state));
}

namespace {

// One sequence's part of a step as the inputs see it.
struct SequenceView {
  std::span<const std::int32_t> tokens;
  std::int64_t start = 0;
  std::span<const BlockId> table;
};

// The block table entries a step reads: each sequence's up to its last position.
std::int64_t table_entries(std::span<const SequenceView> sequences, std::int64_t block_size) {
  std::int64_t entries = 0;
  for (const SequenceView& s : sequences) {
    entries += (s.start + static_cast<std::int64_t>(s.tokens.size()) + block_size - 1) / block_size;
  }
  return entries;
}

// The step's inputs in the host-visible buffers: token ids, positions (for the rotary table), each token's KV
// slot and attention info (its position, where its sequence's block table starts in `tables`).
void write_inputs(std::span<const SequenceView> sequences, const StepBuffers& b, std::int64_t block_size,
                  std::int64_t context_length, std::vector<std::int64_t>& positions) {
  auto* tokens = static_cast<std::int32_t*>(b.tokens.mapped());
  auto* slots = static_cast<std::int32_t*>(b.slots.mapped());
  auto* info = static_cast<std::int32_t*>(b.token_info.mapped());
  auto* tables = static_cast<std::int32_t*>(b.tables.mapped());
  positions.clear();
  std::int64_t entries = 0;
  for (const SequenceView& s : sequences) {
    const auto end = s.start + static_cast<std::int64_t>(s.tokens.size());
    const std::int64_t used = (end + block_size - 1) / block_size;  // the table entries the step reads
    if (entries + used > b.max_table_entries) throw std::invalid_argument("the step's block tables exceed their buffer");
    if (static_cast<std::int64_t>(positions.size() + s.tokens.size()) > b.max_batch) {
      throw std::invalid_argument("a step of more than " + std::to_string(b.max_batch) + " tokens");
    }
    std::copy_n(s.table.begin(), used, tables + entries);
    for (std::size_t j = 0; j < s.tokens.size(); ++j) {
      const std::int64_t p = s.start + static_cast<std::int64_t>(j);
      const auto t = static_cast<std::int64_t>(positions.size());
      tokens[t] = s.tokens[j];
      slots[t] = static_cast<std::int32_t>(s.table[static_cast<std::size_t>(p / block_size)] * block_size + p % block_size);
      info[4 * t] = static_cast<std::int32_t>(p);
      info[4 * t + 1] = static_cast<std::int32_t>(entries);
      // The pinned attention's reference span and order, as LlamaModel::attention sets them.
      info[4 * t + 2] = static_cast<std::int32_t>(reference_span(end, context_length));
      info[4 * t + 3] = s.tokens.size() > 1 ? 1 : 0;
      positions.push_back(p);
    }
    entries += used;
  }
}

// The logit row of each sequence that samples, in batch order: those that need their whole row first (read back
// whole), then those whose token depends only on the row's best few (their best kMaxTopK come back, or only the
// best one when every such row is greedy). Fills shape.logit_rows, full_rows and candidates.
std::vector<RowPlan> write_logit_rows(const StepBatch& batch, const StepSampling& sampling, const StepBuffers& b,
                                      StepShape& shape) {
  std::vector<RowPlan> plans;
  std::vector<std::int64_t> last_token;
  std::int64_t t = 0;
  shape.full_rows = 0;
  shape.candidates = 1;
  for (const StepSequence& s : batch.sequences) {
    t += static_cast<std::int64_t>(s.tokens.size());
    if (!s.sample || s.embed) continue;
    std::int32_t wanted = sampling.best_logits_wanted(s);
    if (wanted > kMaxTopK) wanted = 0;  // more than the device selects: the whole row
    if (wanted == 0) ++shape.full_rows;
    if (wanted > 1) shape.candidates = kMaxTopK;  // one size for every sampled row: fewer recorded shapes
    plans.push_back(RowPlan{.sequence = &s, .best_wanted = wanted});
    last_token.push_back(t - 1);
  }
  shape.logit_rows = static_cast<std::int64_t>(plans.size());
  auto* rows = static_cast<std::int32_t*>(b.logit_rows.mapped());
  std::int64_t next_full = 0, next_best = shape.full_rows;
  for (std::size_t i = 0; i < plans.size(); ++i) {
    plans[i].row = plans[i].best_wanted == 0 ? next_full++ : next_best++;
    rows[plans[i].row] = static_cast<std::int32_t>(last_token[i]);
  }
  return plans;
}

}  // namespace

void VulkanBackend::State::read_rows(std::span<const RowPlan> plans, const StepShape& shape) {
  const auto vocab = static_cast<std::size_t>(config.vocab_size);
  const auto k = static_cast<std::size_t>(shape.candidates);
  const auto* logits = static_cast<const float*>(buffers.logits_out.mapped());
  const auto* pairs = static_cast<const std::byte*>(buffers.candidates_out.mapped());
  const std::size_t candidate_rows = plans.size() - static_cast<std::size_t>(shape.full_rows);
  candidate_ids.resize(candidate_rows * k);  // sized before any span into them is taken
  candidate_values.resize(candidate_rows * k);
  for (std::size_t i = 0; i < candidate_rows * k; ++i) {
    std::memcpy(&candidate_ids[i], pairs + 8 * i, 4);
    std::memcpy(&candidate_values[i], pairs + 8 * i + 4, 4);
  }
  rows.clear();
  rows_read.clear();
  for (const RowPlan& plan : plans) {
    if (plan.best_wanted == 0) {
      ++whole_rows_read;
      rows.push_back(StepSampling::LogitRow{.logits = std::span<const float>(logits + static_cast<std::size_t>(plan.row) * vocab, vocab)});
      continue;
    }
    // The row's best `best_wanted` (of the k read back), all the sequence's token depends on.
    const std::size_t first = (static_cast<std::size_t>(plan.row - shape.full_rows)) * k;
    const auto wanted = static_cast<std::size_t>(plan.best_wanted);
    const std::span<const float> values(candidate_values.data() + first, wanted);
    if (sampling->best_logits_suffice(*plan.sequence, values)) {
      rows.push_back(StepSampling::LogitRow{.ids = std::span<const std::int32_t>(candidate_ids.data() + first, wanted),
                                            .values = values});
      continue;
    }
    // NaN or infinite logits among the best: the whole row, read from the device, lets the sampler decide as the
    // CPU's would (it skips NaN; it fails the sequence when nothing is left).
    ++whole_rows_read;
    rows.push_back(StepSampling::LogitRow{.logits = read_logits_row(plan.row)});
  }
}

StepResult VulkanBackend::run(const StepBatch& batch) {
  State& s = *state_;
  s.sampling->check(batch);
  const std::vector<const HeldSequences::Sequence*> held = s.sampling->begin(batch);
  const bool copies = s.record_block_copies(batch.copies);
  std::vector<SequenceView> views;
  for (std::size_t i = 0; i < batch.sequences.size(); ++i) {
    views.push_back(SequenceView{batch.sequences[i].tokens, batch.sequences[i].start, held[i]->table});
  }
  s.ensure_table_entries(table_entries(views, s.kv.layout.block_size));
  write_inputs(views, s.buffers, s.kv.layout.block_size, s.config.context_length, s.positions);
  s.write_rotation();
  StepShape shape{.tokens = static_cast<std::int64_t>(s.positions.size())};
  const std::vector<RowPlan> plans = write_logit_rows(batch, *s.sampling, s.buffers, shape);
  shape.hidden = std::any_of(batch.sequences.begin(), batch.sequences.end(), [](const StepSequence& q) { return q.embed; });
  s.submit_step(shape, copies);
  s.positions_computed += static_cast<std::uint64_t>(shape.tokens);
  s.read_rows(plans, shape);
  s.hidden.clear();
  if (shape.hidden) {
    const auto dim = static_cast<std::size_t>(s.config.dim);
    const auto* hidden = static_cast<const float*>(s.buffers.hidden_out.mapped());
    std::size_t t = 0;
    for (const StepSequence& q : batch.sequences) {
      if (q.embed) s.hidden.insert(s.hidden.end(), hidden + t * dim, hidden + (t + q.tokens.size()) * dim);
      t += q.tokens.size();
    }
  }
  return s.sampling->finish(batch, s.rows, s.hidden.data());
}

std::vector<float> VulkanBackend::logits(std::span<const std::int32_t> tokens, std::int64_t start,
                                         std::span<const BlockId> table) {
  State& s = *state_;
  const auto n = static_cast<std::int64_t>(tokens.size());
  const std::int64_t block_size = s.kv.layout.block_size;
  if (n == 0 || start < 0 || start + n > s.config.context_length) throw std::out_of_range("logits: positions out of range");
  if (static_cast<std::int64_t>(table.size()) * block_size < start + n) throw std::invalid_argument("logits: the block table is too short");
  for (const BlockId block : table) {
    if (block < 0 || block >= s.kv.blocks) throw std::out_of_range("logits: block " + std::to_string(block) + " is outside the pool");
  }
  for (const std::int32_t token : tokens) {
    if (token < 0 || token >= s.config.vocab_size) throw std::out_of_range("logits: token id " + std::to_string(token) + " is outside the vocabulary");
  }
  const SequenceView view{tokens, start, table};
  s.ensure_table_entries(table_entries({&view, 1}, block_size));
  write_inputs({&view, 1}, s.buffers, block_size, s.config.context_length, s.positions);
  s.write_rotation();
  auto* rows = static_cast<std::int32_t*>(s.buffers.logit_rows.mapped());
  for (std::int64_t i = 0; i < n; ++i) rows[i] = static_cast<std::int32_t>(i);
  s.submit_step(StepShape{.tokens = n, .logit_rows = n, .full_rows = n}, false);
  s.positions_computed += static_cast<std::uint64_t>(n);
  const auto* out = static_cast<const float*>(s.buffers.logits_out.mapped());
  return std::vector<float>(out, out + n * s.config.vocab_size);
}

VulkanBackend::VulkanBackend(std::unique_ptr<State> state) : state_(std::move(state)) {}
VulkanBackend::~VulkanBackend() = default;

BackendInfo VulkanBackend::info() const {
  ModelTensorSummary tensors;
  for (const TensorView& t : state_->loaded->tensors()) {
    tensors.parameters += static_cast<std::uint64_t>(t.elements());
    tensors.bytes += t.bytes;
    ++tensors.types[std::string(name(t.type))];
  }
  return BackendInfo{.config = state_->config,
                     .kv_block_size = state_->kv.layout.block_size,
                     .kv_blocks = state_->kv.blocks,
                     .kv_bytes = state_->kv.bytes(),
                     .max_batch_tokens = state_->max_batch,
                     .kv_sizing = state_->kv_sizing,
                     .chat_template_source = state_->chat_template_source,
                     .tensors = std::move(tensors),
                     .device = state_->context->description().name + (state_->buffers.pinned ? ", pinned" : ", fast") +
                               " arithmetic"};
}

std::shared_ptr<const Tokenizer> VulkanBackend::tokenizer() const { return state_->tokenizer; }
void VulkanBackend::release(SequenceId sequence) { state_->sampling->release(sequence); }
const DeviceDescription& VulkanBackend::device() const noexcept { return state_->context->description(); }
std::uint64_t VulkanBackend::recordings_made() const noexcept { return state_->recordings_made; }

LaneWidth VulkanBackend::reference_lanes() const noexcept { return state_->buffers.lanes; }

void VulkanBackend::set_reference_lanes(LaneWidth lanes) {
  if (lanes == state_->buffers.lanes) return;
  state_->buffers.lanes = lanes;
  state_->recorded.clear();  // recorded with the other orders
}

bool VulkanBackend::pinned_arithmetic() const noexcept { return state_->buffers.pinned; }

void VulkanBackend::set_pinned_arithmetic(bool pinned) {
  if (pinned && !pinned_supported(*state_->context)) {
    throw std::invalid_argument("the pinned arithmetic needs a device with shaderFloat64");
  }
  if (pinned == state_->buffers.pinned) return;
  if (pinned) {  // loaded in the fast arithmetic: the scores need room for the widest step
    const std::uint64_t needed = attention_pinned_scratch_bytes(
        {.n = state_->max_batch, .heads = state_->config.heads, .max_positions = state_->config.context_length});
    if (state_->buffers.attention_scratch.size() < needed) {
      state_->buffers.attention_scratch = Buffer(*state_->context, needed, MemoryKind::device_local, "attention scratch");
    }
  }
  state_->buffers.pinned = pinned;
  state_->recorded.clear();
}
std::uint64_t VulkanBackend::positions_computed() const noexcept { return state_->positions_computed; }
std::uint64_t VulkanBackend::whole_rows_read() const noexcept { return state_->whole_rows_read; }
std::uint64_t VulkanBackend::fence_waits() const noexcept { return state_->fence_waits; }

}  // namespace loom::compute::vulkan
