#include "loom/cache/block_allocator.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace loom::cache {
namespace {

TEST(BlockAllocator, HandsOutEveryBlockOnceThenReportsShortage) {
  BlockAllocator allocator(4, 16);
  std::vector<BlockId> got;
  for (int i = 0; i < 4; ++i) {
    const auto block = allocator.allocate();
    ASSERT_TRUE(block.has_value());
    got.push_back(*block);
  }
  EXPECT_EQ(got, (std::vector<BlockId>{0, 1, 2, 3}));  // a fresh pool hands out ids in order
  EXPECT_FALSE(allocator.allocate().has_value());
  EXPECT_EQ(allocator.used_count(), 4u);
  EXPECT_EQ(allocator.free_count(), 0u);
}

TEST(BlockAllocator, ReleaseAtCountZeroReturnsTheBlockToTheFreeList) {
  BlockAllocator allocator(2, 4);
  const BlockId block = *allocator.allocate();
  allocator.retain(block);
  EXPECT_EQ(allocator.ref_count(block), 2u);
  allocator.release(block);
  EXPECT_EQ(allocator.state(block), BlockState::used);  // one holder left
  allocator.release(block);
  EXPECT_EQ(allocator.state(block), BlockState::free);
  EXPECT_EQ(allocator.free_count(), 2u);
  // The free list is a stack: the block just released is the next one handed out.
  EXPECT_EQ(allocator.allocate(), block);
}

TEST(BlockAllocator, RegisteredBlockIsCachedAtCountZeroAndRevivedByRetain) {
  BlockAllocator allocator(3, 4);
  const BlockId block = *allocator.allocate();
  allocator.mark_registered(block);
  allocator.release(block);
  EXPECT_EQ(allocator.state(block), BlockState::cached);
  EXPECT_EQ(allocator.cached_count(), 1u);
  EXPECT_EQ(allocator.free_count(), 2u);
  allocator.retain(block);
  EXPECT_EQ(allocator.state(block), BlockState::used);
  EXPECT_EQ(allocator.ref_count(block), 1u);
  EXPECT_EQ(allocator.cached_count(), 0u);
  EXPECT_TRUE(allocator.is_registered(block));
}

TEST(BlockAllocator, EvictsLeastRecentlyReleasedFirst) {
  BlockAllocator allocator(4, 4);
  const BlockId a = *allocator.allocate();
  const BlockId b = *allocator.allocate();
  const BlockId c = *allocator.allocate();
  for (const BlockId block : {a, b, c}) allocator.mark_registered(block);
  // Released in the order b, a, c; then a is reused and released again, so the order becomes b, c, a.
  allocator.release(b);
  allocator.release(a);
  allocator.release(c);
  allocator.retain(a);
  allocator.release(a);
  EXPECT_EQ(allocator.cached_blocks_oldest_first(), (std::vector<BlockId>{b, c, a}));
  EXPECT_EQ(allocator.evict_lru(), b);
  EXPECT_EQ(allocator.state(b), BlockState::free);
  EXPECT_FALSE(allocator.is_registered(b));
  EXPECT_EQ(allocator.evict_lru(), c);
  EXPECT_EQ(allocator.evict_lru(), a);
  EXPECT_FALSE(allocator.evict_lru().has_value());
  EXPECT_EQ(allocator.free_count(), 4u);
}

TEST(BlockAllocator, MisuseThrowsNamingTheBlock) {
  BlockAllocator allocator(2, 4);
  EXPECT_THROW(allocator.release(0), std::logic_error);  // free, nobody holds it
  EXPECT_THROW(allocator.retain(1), std::logic_error);
  EXPECT_THROW(allocator.mark_registered(0), std::logic_error);
  try {
    allocator.retain(7);
    FAIL() << "retain of an id past the pool did not throw";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("block 7 is out of range"), std::string::npos) << e.what();
  }
}

TEST(BlockAllocator, RejectsPoolsOutsideTheBounds) {
  EXPECT_THROW(BlockAllocator(0, 16), std::invalid_argument);
  EXPECT_THROW(BlockAllocator(BlockAllocator::kMaxBlocks + 1, 16), std::invalid_argument);
  EXPECT_THROW(BlockAllocator(8, 0), std::invalid_argument);
  EXPECT_THROW(BlockAllocator(8, BlockAllocator::kMaxBlockSize + 1), std::invalid_argument);
  // Each bound alone is met, the product is not: 2^22 blocks of 8 slots is 2^25 > 2^24 slots.
  EXPECT_THROW(BlockAllocator(BlockAllocator::kMaxBlocks, 8), std::invalid_argument);
}

}  // namespace
}  // namespace loom::cache
