// Prefill tiles (attention.hpp, HeadAttention::queries): a tile of a prompt's consecutive queries attended in
// one call gives every query the bits it gets alone (query i over positions [0, first + i), the tile's span),
// on each kernel path: query counts that are not the tile's, positions that end mid-block and mid-chunk,
// odd block sizes, groups of query heads, F16 and F32 keys and values, and the shapes that fall back to one
// query at a time (a span that is not a multiple of 16, a head size that is not, values in rows); in the
// orders of the reference's AVX-512 and AVX2 builds (LaneWidth), where 8 lanes tile more of these shapes.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "loom/compute/cpu/attention.hpp"
#include "loom/compute/model/half.hpp"

namespace loom::compute {
namespace {

struct TileCase {
  std::int64_t first, queries, head_dim, block_size, group, span;
  TensorType type;
  bool transposed = true;
};

std::string describe(const TileCase& c) {
  return "p" + std::to_string(c.first) + "_q" + std::to_string(c.queries) + "_d" + std::to_string(c.head_dim) + "_b" +
         std::to_string(c.block_size) + "_g" + std::to_string(c.group) + "_s" + std::to_string(c.span) + "_" +
         std::string(name(c.type)) + (c.transposed ? "" : "_rows");
}

// One KV head's blocks, scattered through a pool three times the size needed (a wrong address reads noise):
// keys as rows, values transposed (or rows), every element random.
struct Storage {
  Storage(const TileCase& c, std::mt19937& rng) {
    const std::int64_t last = c.first + c.queries - 1;
    const std::int64_t needed = (last + c.block_size - 1) / c.block_size;
    const auto elements = static_cast<std::size_t>(3 * needed * c.block_size * c.head_dim);
    const std::size_t element = c.type == TensorType::f16 ? 2 : 4;
    keys.resize(elements * element);
    values.resize(elements * element);
    std::normal_distribution<float> g(0.0f, 1.0f);
    for (std::size_t i = 0; i < elements; ++i) put(c, keys, i, g(rng)), put(c, values, i, g(rng));
    table.resize(static_cast<std::size_t>(3 * needed));
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), rng);
  }
  static void put(const TileCase& c, std::vector<std::byte>& to, std::size_t i, float x) {
    if (c.type == TensorType::f16) {
      const std::uint16_t h = float_to_half(x);
      std::memcpy(&to[i * 2], &h, 2);
    } else {
      std::memcpy(&to[i * 4], &x, 4);
    }
  }
  std::vector<std::byte> keys, values;
  std::vector<std::int32_t> table;
};

class PrefillTile : public ::testing::TestWithParam<TileCase> {};

TEST_P(PrefillTile, GivesEachQueryItsBitsAlone) {
  const TileCase c = GetParam();
  std::mt19937 rng(static_cast<unsigned>(c.first * 131 + c.queries * 17 + c.head_dim + c.group));
  const Storage s(c, rng);
  // Query rows and outputs with gaps between queries (strides wider than the group's rows).
  const auto query_stride = static_cast<std::size_t>(c.group * c.head_dim + 8);
  const auto out_stride = static_cast<std::size_t>(c.group * c.head_dim + 24);
  std::vector<float> queries(query_stride * static_cast<std::size_t>(c.queries));
  std::normal_distribution<float> g(0.0f, 2.0f);
  for (auto& q : queries) q = g(rng);
  HeadAttention head;
  head.keys = s.keys.data();
  head.values = s.values.data();
  head.kv_type = c.type;
  head.stride = static_cast<std::size_t>(c.head_dim);
  head.block_table = s.table.data();
  head.block_size = c.block_size;
  head.values_transposed = c.transposed;
  head.head_dim = c.head_dim;
  head.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  head.query_heads = c.group;
  head.order = SumOrder::tiled;
  head.span = c.span;
  for (const auto& [path, lanes] : {std::pair{KernelPath::scalar, LaneWidth::avx512}, std::pair{KernelPath::avx2, LaneWidth::avx512},
                                    std::pair{KernelPath::scalar, LaneWidth::avx2}, std::pair{KernelPath::avx2, LaneWidth::avx2}}) {
    if (!kernel_path_supported(path)) continue;
    head.lanes = lanes;
    // The tile, its scratch full of NaNs (a part read before it is written shows).
    std::vector<float> scratch(attention_scratch_floats(c.span, c.head_dim, c.group, c.queries), NAN);
    std::vector<float> tiled(out_stride * static_cast<std::size_t>(c.queries), 0.0f), alone(tiled.size(), 0.0f);
    HeadAttention tile = head;
    tile.query = queries.data();
    tile.positions = c.first;
    tile.queries = c.queries;
    tile.query_stride = query_stride;
    tile.out_stride = out_stride;
    tile.scores = scratch.data();
    tile.out = tiled.data();
    attend(tile, path);
    std::vector<float> own(attention_scratch_floats(c.span, c.head_dim, c.group));
    for (std::int64_t i = 0; i < c.queries; ++i) {
      HeadAttention one = head;
      one.query = queries.data() + static_cast<std::size_t>(i) * query_stride;
      one.positions = c.first + i;
      one.scores = own.data();
      one.out = alone.data() + static_cast<std::size_t>(i) * out_stride;
      attend(one, path);
    }
    for (std::size_t i = 0; i < tiled.size(); ++i) {
      ASSERT_EQ(std::bit_cast<std::uint32_t>(tiled[i]), std::bit_cast<std::uint32_t>(alone[i]))
          << "query " << i / out_stride << ", head " << i % out_stride / static_cast<std::size_t>(c.head_dim)
          << ", dim " << i % static_cast<std::size_t>(c.head_dim) << " on the " << name(path) << " path, "
          << (lanes == LaneWidth::avx2 ? "AVX2" : "AVX-512") << " orders";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, PrefillTile,
    ::testing::Values(
        TileCase{1, 8, 64, 16, 1, 32, TensorType::f16},       // a prompt's first tile: one position upward
        TileCase{45, 5, 64, 16, 1, 64, TensorType::f16},      // a short last tile, mid-block
        TileCase{100, 7, 64, 3, 2, 128, TensorType::f16},     // odd blocks, a group of two
        TileCase{121, 8, 64, 16, 1, 128, TensorType::f16},    // the last query ends the span
        TileCase{250, 3, 32, 16, 4, 256, TensorType::f32},    // GQA group of four, F32
        TileCase{300, 8, 128, 32, 1, 320, TensorType::f16},   // value chunks of 128 crossed mid-tile
        TileCase{17, 8, 16, 8, 1, 32, TensorType::f32},
        TileCase{600, 8, 64, 16, 1, 608, TensorType::f16},
        TileCase{120, 16, 64, 16, 1, 160, TensorType::f16},   // the model's tile of 16, across a chunk's end
        TileCase{500, 13, 64, 16, 1, 512, TensorType::f16},
        TileCase{700, 2, 64, 64, 8, 704, TensorType::f16},    // a group of eight: tiles of one in the model
        TileCase{130, 6, 64, 16, 1, 136, TensorType::f16},    // span % 16 != 0: one at a time
        TileCase{60, 4, 20, 5, 1, 64, TensorType::f16},       // head size % 16 != 0: one at a time
        TileCase{90, 4, 64, 16, 2, 96, TensorType::f16, false},  // values in rows: one at a time
        TileCase{33, 1, 64, 16, 1, 64, TensorType::f16}),     // one query
    [](const auto& tested) { return describe(tested.param); });

TEST(PrefillTile, SpanMustCoverTheLastQuery) {
  std::vector<std::uint16_t> kv(1024);
  std::vector<float> query(64), out(64), scratch(attention_scratch_floats(32, 16, 1, 4));
  std::vector<std::int32_t> table(4, 0);
  HeadAttention head;
  head.query = query.data();
  head.keys = kv.data();
  head.values = kv.data();
  head.stride = 16;
  head.block_table = table.data();
  head.block_size = 16;
  head.positions = 30;
  head.queries = 4;  // the last attends 33 positions
  head.query_stride = head.out_stride = 16;
  head.head_dim = 16;
  head.order = SumOrder::tiled;
  head.span = 32;
  head.scores = scratch.data();
  head.out = out.data();
  EXPECT_THROW(attend(head), std::invalid_argument);
  head.queries = 0;
  EXPECT_THROW(attend(head), std::invalid_argument);
}

}  // namespace
}  // namespace loom::compute
