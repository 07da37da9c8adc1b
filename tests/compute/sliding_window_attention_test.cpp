// Sliding-window attention and soft-capped scores (attention.hpp, HeadAttention::window / ::softcap), on every
// kernel path and both orders: each query attends only its own last `window` positions (a double-precision
// computation from the definition), keys and values before the first query's window are never read (NaN
// there changes no bit), a tile still gives every query its bits alone, and scalar and AVX2 agree bit for bit.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "loom/compute/cpu/attention.hpp"
#include "loom/compute/model/half.hpp"

namespace loom::compute {
namespace {

struct WindowCase {
  std::int64_t first, queries, window, head_dim, block_size, group;
  TensorType type;
  SumOrder order;
  float softcap = 0.0f;
  bool transposed = true;
  LaneWidth lanes = LaneWidth::avx512;
};

std::string describe(const WindowCase& c) {
  return "p" + std::to_string(c.first) + "_q" + std::to_string(c.queries) + "_w" + std::to_string(c.window) + "_d" +
         std::to_string(c.head_dim) + "_b" + std::to_string(c.block_size) + "_g" + std::to_string(c.group) + "_" +
         std::string(name(c.type)) + (c.order == SumOrder::tiled ? "_tiled" : "_dot") + (c.softcap > 0 ? "_cap" : "") +
         (c.transposed ? "" : "_rows") + (c.lanes == LaneWidth::avx2 ? "_avx2" : "");
}

// One KV head's blocks in a shuffled table: keys as rows, values transposed or rows.
struct WindowStorage {
  WindowStorage(const WindowCase& c, std::mt19937& rng) : c_(c) {
    const std::int64_t last = c.first + c.queries - 1;
    blocks = (last + c.block_size - 1) / c.block_size;
    const auto elements = static_cast<std::size_t>(blocks * c.block_size * c.head_dim);
    keys.resize(elements * element());
    values.resize(elements * element());
    std::normal_distribution<float> g(0.0f, 1.0f);
    for (std::size_t i = 0; i < elements; ++i) put(keys, i, g(rng)), put(values, i, g(rng));
    table.resize(static_cast<std::size_t>(blocks));
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), rng);
  }
  std::size_t element() const { return c_.type == TensorType::f16 ? 2 : 4; }
  void put(std::vector<std::byte>& to, std::size_t i, float x) const {
    if (c_.type == TensorType::f16) {
      const std::uint16_t h = float_to_half(x);
      std::memcpy(&to[i * 2], &h, 2);
    } else {
      std::memcpy(&to[i * 4], &x, 4);
    }
  }
  float get(const std::vector<std::byte>& from, std::size_t i) const {
    if (c_.type == TensorType::f16) {
      std::uint16_t h;
      std::memcpy(&h, &from[i * 2], 2);
      return half_to_float(h);
    }
    float x;
    std::memcpy(&x, &from[i * 4], 4);
    return x;
  }
  // Element d of position p's key and value.
  std::size_t key_index(std::int64_t p, std::int64_t d) const {
    const auto block = static_cast<std::size_t>(table[static_cast<std::size_t>(p / c_.block_size)]);
    return (block * c_.block_size + static_cast<std::size_t>(p % c_.block_size)) * c_.head_dim + d;
  }
  std::size_t value_index(std::int64_t p, std::int64_t d) const {
    if (!c_.transposed) return key_index(p, d);
    const auto block = static_cast<std::size_t>(table[static_cast<std::size_t>(p / c_.block_size)]);
    return block * c_.block_size * c_.head_dim + static_cast<std::size_t>(d * c_.block_size + p % c_.block_size);
  }
  void poison(std::int64_t p) {
    for (std::int64_t d = 0; d < c_.head_dim; ++d) put(keys, key_index(p, d), NAN), put(values, value_index(p, d), NAN);
  }

  WindowCase c_;
  std::int64_t blocks = 0;
  std::vector<std::byte> keys, values;
  std::vector<std::int32_t> table;
};

class SlidingWindowAttention : public ::testing::TestWithParam<WindowCase> {};

TEST_P(SlidingWindowAttention, AttendsOnlyTheWindowAndReadsNothingBeforeIt) {
  const WindowCase c = GetParam();
  std::mt19937 rng(static_cast<unsigned>(c.first * 7 + c.window * 131 + c.head_dim));
  WindowStorage clean(c, rng);
  const std::int64_t rows = c.group * c.head_dim;
  std::vector<float> queries(static_cast<std::size_t>(rows * c.queries));
  std::normal_distribution<float> g(0.0f, 3.0f);  // scores of a few units: the soft-cap bites
  for (auto& q : queries) q = g(rng);
  const std::int64_t last = c.first + c.queries - 1;
  const std::int64_t span = reference_span(last, 1 << 20);

  HeadAttention head;
  head.query = queries.data();
  head.kv_type = c.type;
  head.stride = static_cast<std::size_t>(c.head_dim);
  head.block_size = c.block_size;
  head.values_transposed = c.transposed;
  head.positions = c.first;
  head.queries = c.queries;
  head.query_stride = head.out_stride = static_cast<std::size_t>(rows);
  head.head_dim = c.head_dim;
  head.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  head.query_heads = c.group;
  head.order = c.order;
  head.span = span;
  head.window = c.window;
  head.softcap = c.softcap;
  head.lanes = c.lanes;
  const auto run = [&](const WindowStorage& s, KernelPath path) {
    std::vector<float> scratch(attention_scratch_floats(span, c.head_dim, c.group, c.queries), NAN);
    std::vector<float> out(queries.size(), NAN);
    HeadAttention h = head;
    h.keys = s.keys.data();
    h.values = s.values.data();
    h.block_table = s.table.data();
    h.scores = scratch.data();
    h.out = out.data();
    attend(h, path);
    return out;
  };

  // Nothing before the first query's window may be read: poisoned, it changes no bit.
  WindowStorage poisoned = clean;
  const std::int64_t unseen = window_start(head, c.first);
  ASSERT_GT(unseen, 0) << "the case must have positions outside every window";
  for (std::int64_t p = 0; p < unseen; ++p) poisoned.poison(p);

  std::vector<float> scalar;
  for (KernelPath path : {KernelPath::scalar, KernelPath::avx2}) {
    if (!kernel_path_supported(path)) continue;
    const auto out = run(clean, path);
    const auto out_poisoned = run(poisoned, path);
    for (std::size_t i = 0; i < out.size(); ++i) {
      ASSERT_TRUE(std::isfinite(out[i])) << name(path) << " output " << i;
      ASSERT_EQ(std::bit_cast<std::uint32_t>(out[i]), std::bit_cast<std::uint32_t>(out_poisoned[i]))
          << "output " << i << " changed when positions outside every window held NaN (" << name(path) << ")";
    }
    if (scalar.empty()) {
      scalar = out;
    } else {
      for (std::size_t i = 0; i < out.size(); ++i) {
        ASSERT_EQ(std::bit_cast<std::uint32_t>(out[i]), std::bit_cast<std::uint32_t>(scalar[i])) << "AVX2 vs scalar, output " << i;
      }
    }

    // Against the definition, in double: query i sees positions [n - window, n), n = first + i.
    double worst = 0.0;
    for (std::int64_t i = 0; i < c.queries; ++i) {
      const std::int64_t n = c.first + i;
      const std::int64_t from = std::max<std::int64_t>(0, n - c.window);
      for (std::int64_t gq = 0; gq < c.group; ++gq) {
        const float* q = &queries[static_cast<std::size_t>(i * rows + gq * c.head_dim)];
        std::vector<double> score;
        double top = -INFINITY;
        for (std::int64_t p = from; p < n; ++p) {
          double s = 0.0;
          for (std::int64_t d = 0; d < c.head_dim; ++d) s += static_cast<double>(q[d]) * clean.get(clean.keys, clean.key_index(p, d));
          s *= head.scale;
          if (c.softcap > 0.0f) s = c.softcap * std::tanh(s / c.softcap);
          score.push_back(s);
          top = std::max(top, s);
        }
        double sum = 0.0;
        for (double& s : score) sum += (s = std::exp(s - top));
        for (std::int64_t d = 0; d < c.head_dim; ++d) {
          double expected = 0.0;
          for (std::int64_t p = from; p < n; ++p) {
            expected += score[static_cast<std::size_t>(p - from)] / sum * clean.get(clean.values, clean.value_index(p, d));
          }
          worst = std::max(worst, std::abs(expected - out[static_cast<std::size_t>(i * rows + gq * c.head_dim + d)]));
        }
      }
    }
    // F16 storage rounds the query and the probabilities to F16: about 1e-3 of values of order one.
    EXPECT_LE(worst, c.type == TensorType::f16 ? 1e-2 : 1e-4) << name(path);
  }

  // A tile gives each query the bits it gets alone, windows and all.
  if (c.queries > 1) {
    for (KernelPath path : {KernelPath::scalar, KernelPath::avx2}) {
      if (!kernel_path_supported(path)) continue;
      const auto tiled = run(clean, path);
      std::vector<float> own(attention_scratch_floats(span, c.head_dim, c.group));
      std::vector<float> alone(queries.size());
      for (std::int64_t i = 0; i < c.queries; ++i) {
        HeadAttention one = head;
        one.keys = clean.keys.data();
        one.values = clean.values.data();
        one.block_table = clean.table.data();
        one.query = queries.data() + i * rows;
        one.positions = c.first + i;
        one.queries = 1;
        one.scores = own.data();
        one.out = alone.data() + i * rows;
        attend(one, path);
      }
      for (std::size_t i = 0; i < tiled.size(); ++i) {
        ASSERT_EQ(std::bit_cast<std::uint32_t>(tiled[i]), std::bit_cast<std::uint32_t>(alone[i]))
            << "tile vs alone, output " << i << " on the " << name(path) << " path";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, SlidingWindowAttention,
    ::testing::Values(
        // Decode (one query, the vector_dot order): the window inside the first 64 positions, then past them
        // (the loops start at a later 64-position base), mid-block, odd blocks, values in rows.
        WindowCase{40, 1, 8, 64, 16, 1, TensorType::f16, SumOrder::vector_dot},
        WindowCase{150, 1, 20, 64, 16, 2, TensorType::f16, SumOrder::vector_dot},
        WindowCase{150, 1, 20, 64, 16, 2, TensorType::f16, SumOrder::vector_dot, 2.0f},
        WindowCase{203, 1, 77, 128, 5, 1, TensorType::f16, SumOrder::vector_dot},
        WindowCase{203, 1, 77, 32, 16, 4, TensorType::f32, SumOrder::vector_dot, 1.5f},
        WindowCase{90, 1, 9, 64, 16, 2, TensorType::f16, SumOrder::vector_dot, 0.0f, false},
        WindowCase{70, 1, 3, 20, 3, 1, TensorType::f16, SumOrder::vector_dot},  // head size % 8 != 0
        // Prefill tiles (the tiled order): each query its own window start, which crosses 16-position cycles
        // and blocks within the tile; the first query's base past 64; a group of query heads; F32.
        WindowCase{20, 16, 8, 64, 16, 1, TensorType::f16, SumOrder::tiled},
        WindowCase{150, 16, 20, 64, 16, 1, TensorType::f16, SumOrder::tiled, 3.0f},
        WindowCase{300, 8, 100, 128, 32, 1, TensorType::f16, SumOrder::tiled},  // value chunks of 128
        WindowCase{141, 8, 10, 64, 16, 2, TensorType::f32, SumOrder::tiled},
        WindowCase{141, 5, 10, 64, 7, 1, TensorType::f16, SumOrder::tiled},     // odd blocks
        WindowCase{100, 4, 12, 48, 16, 1, TensorType::f16, SumOrder::tiled, 0.0f, false},  // values in rows
        // The same in the reference's AVX2 orders (8 lanes: 32-position steps for one query, 8-position
        // cycles in a tile).
        WindowCase{40, 1, 8, 64, 16, 1, TensorType::f16, SumOrder::vector_dot, 0.0f, true, LaneWidth::avx2},
        WindowCase{150, 1, 20, 64, 16, 2, TensorType::f16, SumOrder::vector_dot, 2.0f, true, LaneWidth::avx2},
        WindowCase{203, 1, 77, 128, 5, 1, TensorType::f16, SumOrder::vector_dot, 0.0f, true, LaneWidth::avx2},
        WindowCase{90, 1, 9, 64, 16, 2, TensorType::f16, SumOrder::vector_dot, 0.0f, false, LaneWidth::avx2},
        WindowCase{20, 16, 8, 64, 16, 1, TensorType::f16, SumOrder::tiled, 0.0f, true, LaneWidth::avx2},
        WindowCase{150, 16, 20, 64, 16, 1, TensorType::f16, SumOrder::tiled, 3.0f, true, LaneWidth::avx2},
        WindowCase{141, 8, 10, 64, 16, 2, TensorType::f32, SumOrder::tiled, 0.0f, true, LaneWidth::avx2},
        WindowCase{141, 5, 10, 40, 7, 1, TensorType::f16, SumOrder::tiled, 0.0f, true, LaneWidth::avx2},
        WindowCase{100, 4, 12, 48, 16, 1, TensorType::f16, SumOrder::tiled, 0.0f, false, LaneWidth::avx2}),
    [](const auto& tested) { return describe(tested.param); });

TEST(SlidingWindowAttention, RejectsANegativeWindowOrSoftCap) {
  std::vector<std::uint16_t> kv(1024);
  std::vector<float> query(16), out(16), scratch(attention_scratch_floats(32, 16));
  HeadAttention head;
  head.query = query.data();
  head.keys = kv.data();
  head.values = kv.data();
  head.stride = 16;
  head.positions = 8;
  head.head_dim = 16;
  head.scores = scratch.data();
  head.out = out.data();
  head.window = -1;
  EXPECT_THROW(attend(head), std::invalid_argument);
  head.window = 0;
  head.softcap = -1.0f;
  EXPECT_THROW(attend(head), std::invalid_argument);
}

}  // namespace
}  // namespace loom::compute
