// PagedKvCache: sizing from a budget or a token count, block copies for copy-on-write, and bounds checks of
// block ids and tables.
#include "loom/compute/cpu/paged_kv_cache.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "loom/compute/cpu/kv_cache.hpp"

namespace loom::compute {
namespace {

TEST(PagedKvCache, BlockBytesCountKAndVOfEveryLayer) {
  // 2 (K and V) x 3 layers x 8 values x 16 slots x 2 bytes (F16) = 1536; F32 twice that.
  EXPECT_EQ(PagedKvCache::bytes_per_block(3, 8, 16, TensorType::f16), 1536u);
  EXPECT_EQ(PagedKvCache::bytes_per_block(3, 8, 16, TensorType::f32), 3072u);
}

TEST(PagedKvCache, SizedFromABudgetTakesTheWholeBlocksItHolds) {
  compute::KvCacheOptions options;
  options.block_size = 16;
  options.budget_bytes = 10 * 1536 + 1535;  // one byte short of 11 blocks
  const auto f16 = PagedKvCache::sized(3, 8, 0, options);
  EXPECT_EQ(f16.blocks(), 10);
  EXPECT_EQ(f16.bytes(), 10u * 1536u);
  options.type = TensorType::f32;
  EXPECT_EQ(PagedKvCache::sized(3, 8, 0, options).blocks(), 5);  // 3072 bytes a block
  options.budget_bytes = 3071;
  EXPECT_THROW(PagedKvCache::sized(3, 8, 0, options), std::invalid_argument);
}

TEST(PagedKvCache, SizedFromATokenCountRoundsUpToWholeBlocks) {
  compute::KvCacheOptions options;
  options.block_size = 16;
  EXPECT_EQ(PagedKvCache::sized(1, 8, 33, options).blocks(), 3);  // 16 + 16 + 1
  EXPECT_EQ(PagedKvCache::sized(1, 8, 32, options).blocks(), 2);
  options.block_size = 1;
  EXPECT_EQ(PagedKvCache::sized(1, 8, 33, options).blocks(), 33);
  EXPECT_THROW(PagedKvCache::sized(1, 8, 0, options), std::invalid_argument);
}

TEST(PagedKvCache, RejectsImpossibleShapes) {
  EXPECT_THROW(PagedKvCache(1, 8, 0, 4), std::invalid_argument);
  EXPECT_THROW(PagedKvCache(1, 8, PagedKvCache::kMaxBlockSize + 1, 4), std::invalid_argument);
  EXPECT_THROW(PagedKvCache(1, 8, 16, 0), std::invalid_argument);
  EXPECT_THROW(PagedKvCache(0, 8, 16, 4), std::invalid_argument);
  EXPECT_THROW(PagedKvCache(1, 8, 16, 4, TensorType::q8_0), std::invalid_argument);
}

// Fills every byte of K and V with a value that names (K or V, layer, byte position in the layer).
void fill(PagedKvCache& cache, std::vector<std::uint8_t>& expected_keys, std::vector<std::uint8_t>& expected_values) {
  const std::size_t layer_bytes = static_cast<std::size_t>(cache.blocks() * cache.block_size() * cache.kv_dim()) *
                                  cache.element_bytes();
  expected_keys.clear();
  expected_values.clear();
  for (std::int64_t layer = 0; layer < cache.layers(); ++layer) {
    auto* k = static_cast<std::uint8_t*>(cache.keys(layer));
    auto* v = static_cast<std::uint8_t*>(cache.values(layer));
    for (std::size_t i = 0; i < layer_bytes; ++i) {
      k[i] = static_cast<std::uint8_t>(i * 7 + static_cast<std::size_t>(layer) * 31);
      v[i] = static_cast<std::uint8_t>(i * 5 + static_cast<std::size_t>(layer) * 17 + 1);
      expected_keys.push_back(k[i]);
      expected_values.push_back(v[i]);
    }
  }
}

TEST(PagedKvCache, CopyBlockCopiesKeysAndValuesOfEveryLayerAndNothingElse) {
  for (TensorType type : {TensorType::f16, TensorType::f32}) {
    PagedKvCache cache(3, 4, 2, 5, type);
    std::vector<std::uint8_t> keys, values;
    fill(cache, keys, values);
    cache.copy_block(1, 3);
    // The model of the copy: in each layer, block 3's bytes become block 1's.
    const std::size_t block_bytes = 2 * 4 * cache.element_bytes();
    const std::size_t layer_bytes = 5 * block_bytes;
    for (std::size_t layer = 0; layer < 3; ++layer) {
      for (std::size_t i = 0; i < block_bytes; ++i) {
        keys[layer * layer_bytes + 3 * block_bytes + i] = keys[layer * layer_bytes + 1 * block_bytes + i];
        values[layer * layer_bytes + 3 * block_bytes + i] = values[layer * layer_bytes + 1 * block_bytes + i];
      }
    }
    for (std::int64_t layer = 0; layer < 3; ++layer) {
      const auto offset = static_cast<std::size_t>(layer) * layer_bytes;
      EXPECT_EQ(std::memcmp(cache.keys(layer), keys.data() + offset, layer_bytes), 0) << "keys of layer " << layer;
      EXPECT_EQ(std::memcmp(cache.values(layer), values.data() + offset, layer_bytes), 0) << "values of layer " << layer;
    }
  }
}

TEST(PagedKvCache, BlockIdsOutsideThePoolAreErrors) {
  PagedKvCache cache(1, 4, 2, 5);
  EXPECT_THROW(cache.copy_block(5, 0), std::out_of_range);
  EXPECT_THROW(cache.copy_block(0, 5), std::out_of_range);
  EXPECT_THROW(cache.copy_block(-1, 0), std::out_of_range);
  const std::vector<std::int32_t> table{4, 0, 2};
  EXPECT_NO_THROW(cache.check_table(table, 6));
  EXPECT_THROW(cache.check_table(table, 7), std::out_of_range);  // 7 positions need 4 blocks of 2
  const std::vector<std::int32_t> bad{4, 5};
  EXPECT_NO_THROW(cache.check_table(bad, 2));  // only the blocks the positions use are looked at
  EXPECT_THROW(cache.check_table(bad, 3), std::out_of_range);
  const std::vector<std::int32_t> negative{-1};
  EXPECT_THROW(cache.check_table(negative, 1), std::out_of_range);
}

TEST(KvCache, OwnsAContiguousTableAndHoldsWhatItsPoolHolds) {
  KvCache cache(PagedKvCache(2, 8, 16, 3), 40);
  EXPECT_EQ(cache.context_length(), 40);
  EXPECT_EQ(cache.block_table().size(), 3u);
  EXPECT_EQ(cache.block_table()[2], 2);
  KvCache small(PagedKvCache(2, 8, 16, 3), 100);
  EXPECT_EQ(small.context_length(), 48);  // the pool's 3 x 16 slots
  EXPECT_THROW(KvCache(PagedKvCache(2, 8, 16, 3), 0), std::invalid_argument);
}

}  // namespace
}  // namespace loom::compute
