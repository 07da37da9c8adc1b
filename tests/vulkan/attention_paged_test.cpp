// Paged attention on the device against a double-precision attention written here: one step that mixes a
// prefill chunk of one sequence with decode tokens of three others (one at position 0, one with a context of
// 1000 positions), every sequence's blocks scattered ({7, 2, 9}, a shuffled run of 63 blocks), every unused
// slot of the storage filled with noise that a causal or windowed query must not see. Cases: F16 and F32 KV,
// grouped-query heads (1, 2, 3, 4 and 12 query heads per KV head), a sliding window, soft-capped scores, a head_dim larger than the workgroup, positions
// split into parts (attention_splits()) and not. Then the
// same recording is submitted again after the host moved a token's position, as a decode step does.
// Bound: 1e-5 absolute on outputs that are averages of values in [-1, 1] (F32 dot products of up to 256
// terms and the device's exp; lavapipe: 1.5e-6 at most). The F16 cases round the query to F16 as the op is
// specified to (the CPU's F16 dot product), so that rounding is part of the definition, not an error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "loom/compute/model/half.hpp"
#include "loom/compute/vulkan/vulkan_ops.hpp"
#include "ops_test_support.hpp"

namespace loom::compute::vulkan {
namespace {

using testing::buffer_of;
using testing::random_floats;
using testing::read_back;

struct Case {
  TensorType type = TensorType::f16;
  std::int64_t head_dim = 64;
  std::int64_t heads = 4;
  std::int64_t kv_heads = 2;
  std::int64_t window = 0;
  float softcap = 0.0f;
  std::int64_t max_positions = 1024;
  std::int64_t splits = 1;  // what attention_splits() gives for the step's shape: the test runs that path
};

struct Sequence {
  std::vector<std::int32_t> table;
  std::vector<std::int32_t> positions;  // of its tokens in this step
};

constexpr std::int64_t kBlockSize = 16;
constexpr std::int64_t kBlocks = 80;

std::vector<Sequence> step_sequences() {
  std::vector<std::int32_t> long_table(63);
  std::iota(long_table.begin(), long_table.end(), 12);  // blocks 12..74, shuffled
  std::shuffle(long_table.begin(), long_table.end(), std::mt19937(5));
  std::vector<std::int32_t> prefill(14);
  std::iota(prefill.begin(), prefill.end(), 20);  // positions 20..33 of a prompt whose first 20 are stored
  return {{{3, 0, 5}, {40}}, {{7, 2, 9}, prefill}, {long_table, {999}}, {{11}, {0}}};
}

// The storage as the shader reads it, and the same values as floats for the reference.
struct Storage {
  std::vector<std::uint8_t> bytes;
  std::vector<float> decoded;
};

Storage make_storage(const Case& c, std::uint32_t seed) {
  const std::size_t count = kBlocks * c.kv_heads * kBlockSize * c.head_dim;
  Storage s{{}, random_floats(count, -1.0f, 1.0f, seed)};
  if (c.type == TensorType::f16) {
    s.bytes.resize(count * 2);
    for (std::size_t i = 0; i < count; ++i) {
      const std::uint16_t h = float_to_half(s.decoded[i]);
      s.decoded[i] = half_to_float(h);
      std::memcpy(&s.bytes[i * 2], &h, 2);
    }
  } else {
    s.bytes.resize(count * 4);
    std::memcpy(s.bytes.data(), s.decoded.data(), count * 4);
  }
  return s;
}

// The definition: softmax over the visible positions of scale * q . k (capped), in double.
std::vector<double> reference(const Case& c, float scale, const std::vector<float>& q, const Storage& keys,
                              const Storage& values, const std::vector<std::int32_t>& info,
                              const std::vector<std::int32_t>& tables) {
  const std::size_t n = info.size() / 4, d_count = c.head_dim;
  std::vector<double> out(n * c.heads * d_count);
  for (std::size_t t = 0; t < n; ++t) {
    const std::int64_t position = info[t * 4], first = c.window > 0 ? std::max<std::int64_t>(0, position - c.window + 1) : 0;
    for (std::int64_t h = 0; h < c.heads; ++h) {
      const std::int64_t kv_head = h / (c.heads / c.kv_heads);
      const float* query = &q[(t * c.heads + h) * d_count];
      std::vector<double> scores;
      std::vector<std::size_t> rows;
      for (std::int64_t p = first; p <= position; ++p) {
        const std::int64_t block = tables[info[t * 4 + 1] + p / kBlockSize];
        const std::size_t row = ((block * c.kv_heads + kv_head) * kBlockSize + p % kBlockSize) * d_count;
        double dot = 0.0;
        for (std::size_t d = 0; d < d_count; ++d) {
          const double qd = c.type == TensorType::f16 ? half_to_float(float_to_half(query[d])) : query[d];
          dot += qd * keys.decoded[row + d];
        }
        double score = dot * scale;
        if (c.softcap > 0.0f) score = c.softcap * std::tanh(score / c.softcap);
        scores.push_back(score);
        rows.push_back(row);
      }
      const double top = *std::max_element(scores.begin(), scores.end());
      double sum = 0.0;
      for (auto& s : scores) sum += (s = std::exp(s - top));
      for (std::size_t i = 0; i < scores.size(); ++i) {
        for (std::size_t d = 0; d < d_count; ++d) {
          out[(t * c.heads + h) * d_count + d] += scores[i] / sum * values.decoded[rows[i] + d];
        }
      }
    }
  }
  return out;
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5) << "at " << i;
}

void check_attention(const Case& c) {
  auto& device = testing::test_device();
  std::vector<std::int32_t> info, tables;
  for (const auto& sequence : step_sequences()) {
    const auto table_start = static_cast<std::int32_t>(tables.size());
    tables.insert(tables.end(), sequence.table.begin(), sequence.table.end());
    for (const std::int32_t position : sequence.positions) info.insert(info.end(), {position, table_start, 0, 0});
  }
  const std::int64_t n = static_cast<std::int64_t>(info.size() / 4);
  const KvLayout layout{c.type, kBlockSize, c.kv_heads, c.head_dim};
  const AttentionShape shape{n,        c.heads, 1.0f / std::sqrt(static_cast<float>(c.head_dim)),
                             c.window, c.softcap, c.max_positions};
  ASSERT_EQ(attention_splits(shape, layout), c.splits);
  const auto q = random_floats(n * c.heads * c.head_dim, -8.0f, 8.0f, 71);
  const Storage keys = make_storage(c, 72), values = make_storage(c, 73);
  auto q_buffer = buffer_of(q), key_buffer = buffer_of(keys.bytes), value_buffer = buffer_of(values.bytes);
  auto info_buffer = buffer_of(info), table_buffer = buffer_of(tables);
  auto out_buffer = buffer_of(std::vector<float>(q.size()));
  auto scratch = buffer_of(std::vector<std::uint8_t>(std::max<std::uint64_t>(4, attention_scratch_bytes(shape, layout))));

  CommandRecording recording(*device.context);
  recording.begin();
  OpContext op{*device.pipelines, recording};
  attention(op, layout, shape, q_buffer.range(), key_buffer.range(), value_buffer.range(), info_buffer.range(),
            table_buffer.range(), out_buffer.range(), scratch.range());
  recording.end();
  recording.submit_and_wait();
  expect_close(read_back<float>(out_buffer, q.size()), reference(c, shape.scale, q, keys, values, info, tables));

  // The next decode step: the first token (position 40) moves to 41; same recording, new token_info.
  info[0] = 41;
  testing::write(info_buffer, info);
  recording.submit_and_wait();
  expect_close(read_back<float>(out_buffer, q.size()), reference(c, shape.scale, q, keys, values, info, tables));
}

// 17 tokens x 2 groups of 2 heads: few enough that the 1024 positions are split into 4 parts of 256 (the long
// sequence's 1000 positions span them all; the others' fall in the first).
TEST(VulkanAttention, F16KvGroupedQueryHeadsPrefillAndDecodeInOneStepSplit) {
  LOOM_REQUIRE_VULKAN();
  check_attention({TensorType::f16, 64, 4, 2, 0, 0.0f, 1024, 4});
}

// With a window of 24 most parts are empty for most tokens.
TEST(VulkanAttention, F32KvSlidingWindowAndSoftCapSplit) {
  LOOM_REQUIRE_VULKAN();
  check_attention({TensorType::f32, 64, 4, 2, 24, 2.0f, 1024, 4});
}

// 17 tokens x 16 groups of 4 heads fill a device: one workgroup per (token, group) walks its whole context.
TEST(VulkanAttention, F32KvFourQueryHeadsPerKvHeadUnsplit) {
  LOOM_REQUIRE_VULKAN();
  check_attention({TensorType::f32, 64, 64, 16, 0, 0.0f, 1024, 1});
}

// Twelve query heads per KV head: two workgroups of six heads each read it.
TEST(VulkanAttention, F32KvTwelveQueryHeadsPerKvHeadInTwoWorkgroups) {
  LOOM_REQUIRE_VULKAN();
  check_attention({TensorType::f32, 64, 12, 1, 0, 0.0f, 1024, 4});
}

// No grouping: each query head its own KV head.
TEST(VulkanAttention, F16KvOneQueryHeadPerKvHead) {
  LOOM_REQUIRE_VULKAN();
  check_attention({TensorType::f16, 64, 2, 2, 0, 0.0f, 1024, 4});
}

// head_dim 256: two dimensions per invocation; 16 parts of 256 positions over a 4096 context.
TEST(VulkanAttention, F16KvHeadDim256OneKvHeadForAll) {
  LOOM_REQUIRE_VULKAN();
  check_attention({TensorType::f16, 256, 3, 1, 300, 0.0f, 4096, 16});
}

// A backend sizes the scratch once, for its widest step: that must hold any narrower step's parts, although
// fewer tokens split into more parts.
TEST(VulkanAttention, ScratchForTheWidestStepServesEveryNarrowerOne) {
  const KvLayout layout{TensorType::f16, 16, 8, 128};
  const AttentionShape widest{64, 32, 1.0f, 0, 0.0f, 4096};
  const std::uint64_t sized = attention_scratch_bytes(widest, layout);
  for (std::int64_t n = 1; n <= widest.n; ++n) {
    AttentionShape step = widest;
    step.n = n;
    const std::int64_t splits = attention_splits(step, layout);
    const std::uint64_t parts = static_cast<std::uint64_t>(n * step.heads * splits * (128 + 2)) * 4;
    EXPECT_GE(sized, splits > 1 ? parts : 0) << n;
    EXPECT_LE(attention_scratch_bytes(step, layout), sized) << n;
  }
  // 32 heads over 8 KV heads: 8 workgroups of 4 heads a token. One token: 16 parts of 256 positions (the
  // shortest part); 8 tokens: 4 parts (256 workgroups); 32 tokens fill the 256 unsplit.
  EXPECT_EQ(attention_splits({1, 32, 1.0f, 0, 0.0f, 4096}, layout), 16);
  EXPECT_EQ(attention_splits({8, 32, 1.0f, 0, 0.0f, 4096}, layout), 4);
  EXPECT_EQ(attention_splits({32, 32, 1.0f, 0, 0.0f, 4096}, layout), 1);
  EXPECT_EQ(attention_scratch_bytes({64, 32, 1.0f, 0, 0.0f, 256}, layout), 0u);  // too short a context to split
}

TEST(VulkanAttention, RejectsShapesTheShaderCannotTake) {
  LOOM_REQUIRE_VULKAN();
  auto& device = testing::test_device();
  CommandRecording recording(*device.context);
  recording.begin();
  OpContext op{*device.pipelines, recording};
  auto buffer = buffer_of(std::vector<float>(1024));
  const auto r = buffer.range();
  const AttentionShape shape{1, 3, 1.0f, 0, 0.0f, 16};
  EXPECT_THROW(attention(op, {TensorType::f16, 16, 2, 8}, shape, r, r, r, r, r, r, r), std::invalid_argument);  // 3 % 2
  EXPECT_THROW(attention(op, {TensorType::q8_0, 16, 1, 8}, shape, r, r, r, r, r, r, r), std::invalid_argument);
  EXPECT_THROW(attention(op, {TensorType::f16, 16, 1, 1024}, shape, r, r, r, r, r, r, r), std::invalid_argument);
}

}  // namespace
}  // namespace loom::compute::vulkan
