// The pinned attention on the device (vulkan_pinned.hpp) against the CPU's attend() (cpu/attention.hpp), which
// defines the arithmetic: every output must be the same float, bit for bit. One step mixes a decode token at
// position 40 (SumOrder::vector_dot), a prefill chunk at positions 20..33 (SumOrder::tiled, its sequence's
// span), a decode token at position 0, and one at the last position of a context that is not a multiple of 16
// (the softmax's leftover positions through the C library's expf), every sequence's blocks scattered and the
// storage's unused slots filled with noise. Cases: both lane widths, F16 and F32 KV, grouped-query heads, a
// head size that is not a multiple of 16 (the tiled scores fall back to vector_dot), a sliding window, soft-
// capped scores (the device computes the C library's tanhf correctly rounded, in double; glibc 2.36's tanhf
// is off by an ulp for about 14% of inputs, so a capped score can differ in its last bit: the F16
// probabilities of these cases absorb it, an F32 storage would not). The prefill chunk is
// also compared with the CPU's tile of all its queries over transposed values, as the CPU backend runs it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "loom/compute/cpu/attention.hpp"
#include "loom/compute/model/half.hpp"
#include "loom/compute/vulkan/vulkan_pinned.hpp"
#include "ops_test_support.hpp"

namespace loom::compute::vulkan {
// Named, not anonymous: the suite is a unity build and attention_paged_test.cpp / backend_steps_test.cpp use the
// same helper names.
namespace pinned_attention_test {

using testing::buffer_of;
using testing::random_floats;
using testing::read_back;

struct Case {
  TensorType type = TensorType::f16;
  LaneWidth lanes = LaneWidth::avx512;
  std::int64_t head_dim = 64;
  std::int64_t heads = 4;
  std::int64_t kv_heads = 2;
  std::int64_t window = 0;
  float softcap = 0.0f;
};

constexpr std::int64_t kBlockSize = 16;
constexpr std::int64_t kBlocks = 16;
constexpr std::int64_t kContext = 50;  // not a multiple of 16: a span capped at it leaves positions over

struct Sequence {
  std::vector<std::int32_t> table;
  std::vector<std::int32_t> positions;
};

std::vector<Sequence> step_sequences() {
  std::vector<std::int32_t> prefill;
  for (std::int32_t p = 20; p < 34; ++p) prefill.push_back(p);
  return {{{3, 0, 5}, {40}}, {{7, 2, 9}, prefill}, {{11}, {0}}, {{13, 1, 8, 4}, {49}}};
}

// Storage values as the CPU reads them: F16 bits or floats, in the device layout [block][kv_head][slot][dim].
std::vector<float> run_device(const Case& c, const std::vector<float>& q, const std::vector<float>& kv_keys,
                              const std::vector<float>& kv_values, const std::vector<std::int32_t>& info,
                              const std::vector<std::int32_t>& tables, std::int64_t n) {
  const auto storage = [&](const std::vector<float>& x) {
    if (c.type == TensorType::f32) return buffer_of(x);
    std::vector<std::uint16_t> h(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) h[i] = float_to_half(x[i]);
    return buffer_of(h);
  };
  Buffer qb = buffer_of(q), kb = storage(kv_keys), vb = storage(kv_values), ib = buffer_of(info), tb = buffer_of(tables);
  Buffer out = buffer_of(std::vector<float>(static_cast<std::size_t>(n * c.heads * c.head_dim)));
  const KvLayout layout{.type = c.type, .block_size = kBlockSize, .kv_heads = c.kv_heads, .head_dim = c.head_dim};
  const AttentionShape shape{.n = n, .heads = c.heads, .scale = 0.125f, .window = c.window, .softcap = c.softcap,
                             .max_positions = kContext};
  Buffer scratch = buffer_of(std::vector<float>(attention_pinned_scratch_bytes(shape) / 4 + 1));
  testing::run_ops([&](OpContext& op) {
    attention_pinned(op, layout, shape, c.lanes, qb.range(), kb.range(), vb.range(), ib.range(), tb.range(),
                     out.range(), scratch.range());
  });
  return read_back<float>(out, static_cast<std::size_t>(n * c.heads * c.head_dim));
}

void check_case(const Case& c) {
  LOOM_REQUIRE_VULKAN();
  if (!pinned_supported(*testing::test_device().context)) GTEST_SKIP() << "the device has no shaderFloat64";
  const std::vector<Sequence> sequences = step_sequences();
  const std::int64_t storage_floats = kBlocks * c.kv_heads * kBlockSize * c.head_dim;
  std::vector<float> keys = random_floats(static_cast<std::size_t>(storage_floats), -1.0f, 1.0f, 11);
  std::vector<float> values = random_floats(static_cast<std::size_t>(storage_floats), -1.0f, 1.0f, 12);
  if (c.type == TensorType::f16) {  // the CPU reads the same F16 bits the device holds
    for (auto* x : {&keys, &values}) for (float& v : *x) v = half_to_float(float_to_half(v));
  }
  std::vector<std::int32_t> info, tables;
  std::int64_t n = 0;
  for (const Sequence& s : sequences) {
    const std::int64_t span = reference_span(s.positions.back() + 1, kContext);
    for (const std::int32_t p : s.positions) {
      info.insert(info.end(), {p, static_cast<std::int32_t>(tables.size()), static_cast<std::int32_t>(span),
                               s.positions.size() > 1 ? 1 : 0});
      ++n;
    }
    tables.insert(tables.end(), s.table.begin(), s.table.end());
  }
  const std::vector<float> q = random_floats(static_cast<std::size_t>(n * c.heads * c.head_dim), -3.0f, 3.0f, 13);
  const std::vector<float> device = run_device(c, q, keys, values, info, tables, n);

  std::vector<std::uint16_t> keys16(keys.size()), values16(values.size());
  for (std::size_t i = 0; i < keys.size(); ++i) keys16[i] = float_to_half(keys[i]), values16[i] = float_to_half(values[i]);
  const bool f16 = c.type == TensorType::f16;
  const std::int64_t group = c.heads / c.kv_heads;
  std::vector<float> cpu(device.size()), scores(attention_scratch_floats(kContext, c.head_dim, group) + 64);
  std::int64_t t = 0, mismatches = 0;
  for (const Sequence& s : sequences) {
    for (const std::int32_t p : s.positions) {
      for (std::int64_t kvh = 0; kvh < c.kv_heads; ++kvh) {
        const std::size_t head_offset = static_cast<std::size_t>(kvh * kBlockSize * c.head_dim);
        HeadAttention h;
        h.query = &q[static_cast<std::size_t>((t * c.heads + kvh * group) * c.head_dim)];
        h.keys = f16 ? static_cast<const void*>(keys16.data() + head_offset) : keys.data() + head_offset;
        h.values = f16 ? static_cast<const void*>(values16.data() + head_offset) : values.data() + head_offset;
        h.kv_type = c.type;
        h.stride = static_cast<std::size_t>(c.head_dim);
        h.block_table = s.table.data();
        h.block_size = kBlockSize;
        h.block_stride = static_cast<std::size_t>(c.kv_heads * kBlockSize * c.head_dim);
        h.positions = p + 1;
        h.head_dim = c.head_dim;
        h.scale = 0.125f;
        h.query_heads = group;
        h.window = c.window;
        h.softcap = c.softcap;
        h.order = s.positions.size() > 1 ? SumOrder::tiled : SumOrder::vector_dot;
        h.lanes = c.lanes;
        h.span = reference_span(s.positions.back() + 1, kContext);
        h.scores = scores.data();
        h.out = &cpu[static_cast<std::size_t>((t * c.heads + kvh * group) * c.head_dim)];
        attend(h);
      }
      ++t;
    }
  }
  // The prefill chunk again as the CPU backend runs it: one tile of all its queries (queries > 1) over
  // transposed values, the AVX2 tile kernel where it applies; its bits must be the one-by-one ones.
  std::vector<float> values_t(values.size());
  for (std::int64_t b = 0; b < kBlocks * c.kv_heads; ++b) {
    for (std::int64_t slot = 0; slot < kBlockSize; ++slot) {
      for (std::int64_t d = 0; d < c.head_dim; ++d) {
        values_t[static_cast<std::size_t>((b * c.head_dim + d) * kBlockSize + slot)] =
            values[static_cast<std::size_t>((b * kBlockSize + slot) * c.head_dim + d)];
      }
    }
  }
  std::vector<std::uint16_t> values_t16(values_t.size());
  for (std::size_t i = 0; i < values_t.size(); ++i) values_t16[i] = float_to_half(values_t[i]);
  const Sequence& prefill = sequences[1];
  const std::int64_t first_token = static_cast<std::int64_t>(sequences[0].positions.size());
  const auto queries = static_cast<std::int64_t>(prefill.positions.size());
  std::vector<float> tile(static_cast<std::size_t>(queries * c.heads * c.head_dim));
  std::vector<float> tile_scratch(attention_scratch_floats(kContext, c.head_dim, group, queries) + 64);
  for (std::int64_t kvh = 0; kvh < c.kv_heads; ++kvh) {
    const std::size_t head_offset = static_cast<std::size_t>(kvh * kBlockSize * c.head_dim);
    HeadAttention h;
    h.query = &q[static_cast<std::size_t>((first_token * c.heads + kvh * group) * c.head_dim)];
    h.keys = f16 ? static_cast<const void*>(keys16.data() + head_offset) : keys.data() + head_offset;
    h.values = f16 ? static_cast<const void*>(values_t16.data() + head_offset) : values_t.data() + head_offset;
    h.kv_type = c.type;
    h.stride = static_cast<std::size_t>(c.head_dim);
    h.block_table = prefill.table.data();
    h.block_size = kBlockSize;
    h.block_stride = static_cast<std::size_t>(c.kv_heads * kBlockSize * c.head_dim);
    h.values_transposed = true;
    h.positions = prefill.positions.front() + 1;
    h.head_dim = c.head_dim;
    h.scale = 0.125f;
    h.query_heads = group;
    h.queries = queries;
    h.query_stride = static_cast<std::size_t>(c.heads * c.head_dim);
    h.out_stride = static_cast<std::size_t>(c.heads * c.head_dim);
    h.window = c.window;
    h.softcap = c.softcap;
    h.order = SumOrder::tiled;
    h.lanes = c.lanes;
    h.span = reference_span(prefill.positions.back() + 1, kContext);
    h.scores = tile_scratch.data();
    h.out = &tile[static_cast<std::size_t>(kvh * group * c.head_dim)];
    attend(h);
  }
  const std::size_t tile_start = static_cast<std::size_t>(first_token * c.heads * c.head_dim);
  for (std::size_t i = 0; i < tile.size(); ++i) {
    if (std::memcmp(&tile[i], &device[tile_start + i], sizeof(float)) != 0 && ++mismatches <= 5) {
      ADD_FAILURE() << "tile output " << i << ": cpu " << tile[i] << " device " << device[tile_start + i];
    }
  }
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    if (std::memcmp(&cpu[i], &device[i], sizeof(float)) != 0 && ++mismatches <= 5) {
      ADD_FAILURE() << "output " << i << " (token " << i / static_cast<std::size_t>(c.heads * c.head_dim)
                    << "): cpu " << cpu[i] << " device " << device[i];
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(AttentionPinnedTest, F16Avx512OrdersEqualTheCpu) { check_case({}); }
TEST(AttentionPinnedTest, F16Avx2OrdersEqualTheCpu) { check_case({.lanes = LaneWidth::avx2}); }
TEST(AttentionPinnedTest, F32BothOrdersEqualTheCpu) {
  check_case({.type = TensorType::f32});
  check_case({.type = TensorType::f32, .lanes = LaneWidth::avx2});
}
// 40 is not a multiple of 16: the tiled scores fall back to vector_dot (for 8 lanes it is an ordinary size;
// one pipeline fewer to compile).
TEST(AttentionPinnedTest, HeadSizeOffTheLanesEqualsTheCpu) { check_case({.head_dim = 40, .heads = 3, .kv_heads = 1}); }
TEST(AttentionPinnedTest, SlidingWindowEqualsTheCpu) {
  check_case({.window = 24});
  check_case({.lanes = LaneWidth::avx2, .window = 9});
}
TEST(AttentionPinnedTest, SoftCappedScoresEqualTheCpu) {
  check_case({.softcap = 2.0f});
  check_case({.lanes = LaneWidth::avx2, .softcap = 2.0f});
}

}  // namespace pinned_attention_test
}  // namespace loom::compute::vulkan
