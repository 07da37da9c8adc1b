// What the backend and parity tests share: loading a shared model on the Vulkan backend (and on the CPU, the
// same way), and the StepBatch forms of a prefill and a decode step.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "loom/compute/backend.hpp"
#include "loom/compute/cpu/cpu_backend.hpp"
#include "loom/compute/vulkan/vulkan_backend.hpp"
#include "test_files.hpp"

namespace loom::compute::vulkan::testing {

inline LoadOptions shared_model_options(const std::string& file, std::int64_t kv_tokens = 1024) {
  LoadOptions o;
  o.model_path = compute::testing::shared_path("models/" + file);
  o.device = "vulkan";
  o.threads = 2;
  o.kv_tokens = kv_tokens;
  o.max_batch_tokens = 64;
  return o;
}

inline std::vector<BlockId> blocks(BlockId first, std::int64_t count) {
  std::vector<BlockId> ids(static_cast<std::size_t>(count));
  std::iota(ids.begin(), ids.end(), first);
  return ids;
}

// A greedy sequence's first step: its whole prompt and table, sampling its first token.
inline StepSequence greedy_start(SequenceId id, std::vector<std::int32_t> prompt, std::vector<BlockId> table) {
  proto::SamplingParams params;
  params.temperature = 0.0;
  return StepSequence{.sequence = id, .tokens = std::move(prompt), .start = 0, .table_from = 0,
                      .blocks = std::move(table), .sample = true, .begin = SequenceStart{.params = params}};
}

// A held sequence's decode step: one token at `position`, its table unchanged.
inline StepSequence decode(SequenceId id, std::int32_t token, std::int64_t position, std::int64_t table_size) {
  return StepSequence{.sequence = id, .tokens = {token}, .start = position, .table_from = table_size, .sample = true};
}

// logprobs make a sequence's row come back whole; its top logprobs carry the logits' values.
inline StepSequence with_logprobs(StepSequence s) {
  s.begin->params.logprobs = 5;
  return s;
}

// Two prompts, each alone (blocks {2, 0} and {5, 7}), then together in one step with tables out of order and
// scattered over the pool ({9, 3} and {12, 1}): each gets the same token and top logprobs (within 1e-4) as alone.
inline void expect_together_as_alone(Backend& backend, const std::vector<std::int32_t>& first,
                                     const std::vector<std::int32_t>& second) {
  const auto alone = [&](SequenceId id, const std::vector<std::int32_t>& prompt, const std::vector<BlockId>& table) {
    const StepResult r = backend.run(StepBatch{.sequences = {with_logprobs(greedy_start(id, prompt, table))}});
    backend.release(id);
    return r.sampled.at(0);
  };
  const SampledToken a = alone(1, first, {2, 0});
  const SampledToken b = alone(2, second, {5, 7});
  const StepResult both = backend.run(StepBatch{
      .sequences = {with_logprobs(greedy_start(3, first, {9, 3})), with_logprobs(greedy_start(4, second, {12, 1}))}});
  ASSERT_EQ(both.sampled.size(), 2u);
  for (const auto& [together, single] : {std::pair{both.sampled[0], a}, std::pair{both.sampled[1], b}}) {
    EXPECT_EQ(together.token, single.token);
    ASSERT_EQ(together.top.size(), single.top.size());
    for (std::size_t i = 0; i < single.top.size(); ++i) {
      EXPECT_EQ(together.top[i].token, single.top[i].token);
      EXPECT_NEAR(together.top[i].logprob, single.top[i].logprob, 1e-4f);
    }
  }
}

}  // namespace loom::compute::vulkan::testing
