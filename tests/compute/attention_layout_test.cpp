// Attention over the forward pass's KV layout: per block, each KV head's key rows and its values transposed
// (attention.hpp, HeadAttention::values_transposed). The layout moves addresses only, so on each kernel path
// a head attended through scattered blocks laid out that way gives the bits of the same keys and values in
// plain rows, for both summation orders, F16 and F32, block sizes that split the 8-position runs or not, and
// lengths that cross the weighted sum's pieces and leave a rest for its double sums. A group of query heads
// attended together gives each the bits it gets alone.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "loom/compute/cpu/attention.hpp"
#include "loom/compute/model/half.hpp"

namespace loom::compute {
namespace {

struct LayoutCase {
  std::int64_t positions, head_dim, block_size, span;
  SumOrder order;
  TensorType type;
};

std::string describe(const LayoutCase& c) {
  return "p" + std::to_string(c.positions) + "_d" + std::to_string(c.head_dim) + "_b" + std::to_string(c.block_size) +
         "_s" + std::to_string(c.span) + (c.order == SumOrder::tiled ? "_tiled_" : "_vector_dot_") + std::string(name(c.type));
}

class TransposedLayout : public ::testing::TestWithParam<LayoutCase> {};

TEST_P(TransposedLayout, GivesTheBitsOfPlainRows) {
  const LayoutCase c = GetParam();
  constexpr std::int64_t kHeads = 2;  // two KV heads per block; we attend with the second
  const std::int64_t kv_dim = kHeads * c.head_dim;
  const std::size_t element = c.type == TensorType::f16 ? 2 : 4;
  std::mt19937 rng(static_cast<unsigned>(c.positions * 31 + c.head_dim * 7 + c.block_size));
  std::normal_distribution<float> g(0.0f, 1.0f);
  const auto put = [&](std::vector<std::byte>& storage, std::size_t index, float x) {
    if (c.type == TensorType::f16) {
      const std::uint16_t h = float_to_half(x);
      std::memcpy(&storage[index * 2], &h, 2);
    } else {
      std::memcpy(&storage[index * 4], &x, 4);
    }
  };
  // Plain rows: position p's head-1 key at p * kv_dim + head_dim.
  const auto rows = static_cast<std::size_t>(c.positions * kv_dim);
  std::vector<std::byte> keys(rows * element), values(rows * element);
  for (std::size_t i = 0; i < rows; ++i) put(keys, i, g(rng)), put(values, i, g(rng));
  std::vector<float> query(static_cast<std::size_t>(c.head_dim));
  for (auto& q : query) q = g(rng);

  // The blocks: a pool three times the blocks needed, NaN elsewhere (a wrong address, or a slot past the
  // sequence's end that is not masked off, turns the output into NaN), the sequence's blocks scattered
  // through it.
  const std::int64_t needed = (c.positions + c.block_size - 1) / c.block_size, pool = 3 * needed;
  const auto pool_elements = static_cast<std::size_t>(pool * c.block_size * kv_dim);
  std::vector<std::byte> block_keys(pool_elements * element), block_values(pool_elements * element);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (std::size_t i = 0; i < pool_elements; ++i) put(block_keys, i, nan), put(block_values, i, nan);
  std::vector<std::int32_t> table(static_cast<std::size_t>(pool));
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  for (std::int64_t p = 0; p < c.positions; ++p) {
    const auto block = static_cast<std::size_t>(table[static_cast<std::size_t>(p / c.block_size)] * c.block_size * kv_dim);
    const auto slot = static_cast<std::size_t>(p % c.block_size);
    for (std::int64_t h = 0; h < kHeads; ++h) {
      for (std::int64_t d = 0; d < c.head_dim; ++d) {
        const auto row_index = static_cast<std::size_t>(p * kv_dim + h * c.head_dim + d);
        const std::size_t key_index = block + (static_cast<std::size_t>(h * c.block_size) + slot) * static_cast<std::size_t>(c.head_dim) + static_cast<std::size_t>(d);
        const std::size_t value_index = block + static_cast<std::size_t>((h * c.head_dim + d) * c.block_size) + slot;
        std::memcpy(&block_keys[key_index * element], &keys[row_index * element], element);
        std::memcpy(&block_values[value_index * element], &values[row_index * element], element);
      }
    }
  }

  for (KernelPath path : {KernelPath::scalar, KernelPath::avx2}) {
    if (!kernel_path_supported(path)) continue;
    std::vector<float> scratch(attention_scratch_floats(std::max(c.span, c.positions), c.head_dim));
    std::vector<float> in_rows(static_cast<std::size_t>(c.head_dim)), in_blocks(in_rows.size());
    HeadAttention head;
    head.query = query.data();
    head.keys = keys.data() + c.head_dim * element;
    head.values = values.data() + c.head_dim * element;
    head.kv_type = c.type;
    head.stride = static_cast<std::size_t>(kv_dim);
    head.positions = c.positions;
    head.head_dim = c.head_dim;
    head.scale = 0.125f;
    head.order = c.order;
    head.span = c.span;
    head.scores = scratch.data();
    head.out = in_rows.data();
    attend(head, path);

    head.keys = block_keys.data() + c.head_dim * c.block_size * element;  // head 1's part of each block
    head.values = block_values.data() + c.head_dim * c.block_size * element;
    head.stride = static_cast<std::size_t>(c.head_dim);
    head.block_table = table.data();
    head.block_size = c.block_size;
    head.block_stride = static_cast<std::size_t>(kv_dim * c.block_size);
    head.values_transposed = true;
    head.out = in_blocks.data();
    attend(head, path);
    for (std::int64_t d = 0; d < c.head_dim; ++d) {
      ASSERT_EQ(std::bit_cast<std::uint32_t>(in_rows[static_cast<std::size_t>(d)]),
                std::bit_cast<std::uint32_t>(in_blocks[static_cast<std::size_t>(d)]))
          << "dim " << d << " on the " << name(path) << " path: " << in_rows[static_cast<std::size_t>(d)] << " vs "
          << in_blocks[static_cast<std::size_t>(d)];
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, TransposedLayout,
    ::testing::Values(
        // Decode (vector_dot): whole 64-position cycles, a rest in double, odd blocks, two chunks of 512.
        LayoutCase{100, 64, 16, 128, SumOrder::vector_dot, TensorType::f16},
        LayoutCase{70, 64, 16, 96, SumOrder::vector_dot, TensorType::f16},     // a rest of 6 past 64
        LayoutCase{1100, 64, 16, 1120, SumOrder::vector_dot, TensorType::f16},  // chunks, rest 12
        LayoutCase{300, 128, 32, 320, SumOrder::vector_dot, TensorType::f16},
        LayoutCase{45, 32, 1, 64, SumOrder::vector_dot, TensorType::f16},
        LayoutCase{130, 20, 3, 160, SumOrder::vector_dot, TensorType::f16},     // dims past the last 8
        LayoutCase{200, 64, 64, 224, SumOrder::vector_dot, TensorType::f32},
        LayoutCase{1, 64, 16, 32, SumOrder::vector_dot, TensorType::f16},
        LayoutCase{21, 64, 16, 32, SumOrder::vector_dot, TensorType::f16},    // all rest, the last run part-filled
        LayoutCase{21, 64, 16, 32, SumOrder::vector_dot, TensorType::f32},
        // Prefill (tiled): 16 lanes, runs split by the block size or by the sequence's end.
        LayoutCase{45, 64, 16, 64, SumOrder::tiled, TensorType::f16},
        LayoutCase{600, 64, 16, 608, SumOrder::tiled, TensorType::f16},
        LayoutCase{33, 32, 4, 64, SumOrder::tiled, TensorType::f16},
        LayoutCase{100, 48, 8, 100, SumOrder::tiled, TensorType::f16},          // unpadded span: vector_dot values
        LayoutCase{77, 64, 16, 96, SumOrder::tiled, TensorType::f32}),
    [](const auto& tested) { return describe(tested.param); });

// A group of query heads attended in one call (HeadAttention::query_heads) gives each head the bits it gets
// alone, in both orders and both layouts.
TEST(GroupedQueries, EachHeadGetsItsBitsAlone) {
  constexpr std::int64_t kGroup = 4, kPositions = 150, kHeadDim = 64, kBlock = 16, kSpan = 160;
  const std::int64_t blocks = (kPositions + kBlock - 1) / kBlock;
  std::mt19937 rng(11);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<std::uint16_t> keys(static_cast<std::size_t>(blocks * kBlock * kHeadDim)), values(keys.size());
  for (auto& k : keys) k = float_to_half(g(rng));
  for (auto& v : values) v = float_to_half(g(rng));
  std::vector<float> queries(static_cast<std::size_t>(kGroup * kHeadDim));
  for (auto& q : queries) q = g(rng);
  std::vector<std::int32_t> table(static_cast<std::size_t>(blocks));
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  for (KernelPath path : {KernelPath::scalar, KernelPath::avx2}) {
    if (!kernel_path_supported(path)) continue;
    for (SumOrder order : {SumOrder::vector_dot, SumOrder::tiled}) {
      for (bool transposed : {false, true}) {
        std::vector<float> scratch(attention_scratch_floats(kSpan, kHeadDim, kGroup));
        std::vector<float> together(queries.size()), alone(queries.size());
        HeadAttention head;
        head.query = queries.data();
        head.keys = keys.data();
        head.values = values.data();
        head.stride = kHeadDim;
        head.block_table = table.data();
        head.block_size = kBlock;
        head.values_transposed = transposed;
        head.positions = kPositions;
        head.head_dim = kHeadDim;
        head.scale = 0.125f;
        head.order = order;
        head.span = kSpan;
        head.scores = scratch.data();
        head.query_heads = kGroup;
        head.out = together.data();
        attend(head, path);
        head.query_heads = 1;
        for (std::int64_t q = 0; q < kGroup; ++q) {
          head.query = queries.data() + q * kHeadDim;
          head.out = alone.data() + q * kHeadDim;
          attend(head, path);
        }
        for (std::size_t i = 0; i < together.size(); ++i) {
          ASSERT_EQ(std::bit_cast<std::uint32_t>(together[i]), std::bit_cast<std::uint32_t>(alone[i]))
              << "head " << i / kHeadDim << " dim " << i % kHeadDim << " on the " << name(path) << " path, "
              << (order == SumOrder::tiled ? "tiled" : "vector_dot") << (transposed ? ", transposed" : ", rows");
        }
      }
    }
  }
}

TEST(TransposedLayout, NeedsABlockTable) {
  std::vector<std::uint16_t> kv(64);
  std::vector<float> query(8), out(8), scratch(attention_scratch_floats(4, 8));
  HeadAttention head;
  head.query = query.data();
  head.keys = kv.data();
  head.values = kv.data();
  head.stride = 8;
  head.positions = 4;
  head.head_dim = 8;
  head.values_transposed = true;
  head.scores = scratch.data();
  head.out = out.data();
  EXPECT_THROW(attend(head), std::invalid_argument);
}

}  // namespace
}  // namespace loom::compute
