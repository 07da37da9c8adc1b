#include "loom/cache/page_table.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace loom::cache {
namespace {

TEST(PageTable, AppendReportsASlotPerTokenAcrossBlocks) {
  BlockAllocator allocator(8, 4);
  PageTable table(4);
  const auto first = table.append(6, allocator);  // 6 tokens, block size 4: blocks 0 and 1
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->first_position, 0u);
  EXPECT_FALSE(first->copy.has_value());
  const std::vector<TokenSlot> expected{{0, 0}, {0, 1}, {0, 2}, {0, 3}, {1, 0}, {1, 1}};
  EXPECT_EQ(first->slots, expected);
  EXPECT_EQ(table.blocks(), (std::vector<BlockId>{0, 1}));
  EXPECT_EQ(table.unused_slots(), 2u);

  const auto second = table.append(3, allocator);  // positions 6, 7 fill block 1; position 8 opens block 2
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->first_position, 6u);
  EXPECT_EQ(second->slots, (std::vector<TokenSlot>{{1, 2}, {1, 3}, {2, 0}}));
  EXPECT_EQ(table.token_count(), 9u);
  EXPECT_EQ(table.slot(8), (TokenSlot{2, 0}));
  EXPECT_THROW((void)table.slot(9), std::out_of_range);
  table.release(allocator);
}

TEST(PageTable, AppendThatDoesNotFitChangesNothing) {
  BlockAllocator allocator(2, 4);
  PageTable table(4);
  ASSERT_TRUE(table.append(5, allocator).has_value());  // 2 blocks, 3 slots left
  EXPECT_EQ(table.blocks_needed(4, allocator), 1u);     // 3 fit in block 1, the 4th needs a third block
  EXPECT_FALSE(table.append(4, allocator).has_value());
  EXPECT_EQ(table.token_count(), 5u);
  EXPECT_EQ(table.blocks().size(), 2u);
  EXPECT_TRUE(table.append(3, allocator).has_value());  // exactly fills what is there
  table.release(allocator);
}

TEST(PageTable, ForkSharesEveryBlock) {
  BlockAllocator allocator(8, 4);
  PageTable parent(4);
  ASSERT_TRUE(parent.append(6, allocator).has_value());
  PageTable child = parent.fork(allocator);
  EXPECT_EQ(child.blocks(), parent.blocks());
  EXPECT_EQ(child.token_count(), 6u);
  for (const BlockId block : parent.blocks()) EXPECT_EQ(allocator.ref_count(block), 2u);
  EXPECT_EQ(allocator.used_count(), 2u);
  child.release(allocator);
  for (const BlockId block : parent.blocks()) EXPECT_EQ(allocator.ref_count(block), 1u);
  parent.release(allocator);
  EXPECT_EQ(allocator.free_count(), 8u);
}

TEST(PageTable, WritingIntoASharedPartialBlockCopiesItFirst) {
  BlockAllocator allocator(8, 4);
  PageTable parent(4);
  ASSERT_TRUE(parent.append(6, allocator).has_value());  // blocks 0 (full) and 1 (2 of 4 slots)
  PageTable child = parent.fork(allocator);

  // The child writes position 6, in shared block 1: it needs a copy of block 1 (its tokens 4 and 5).
  EXPECT_EQ(child.blocks_needed(1, allocator), 1u);
  const auto written = child.append(1, allocator);
  ASSERT_TRUE(written.has_value());
  ASSERT_TRUE(written->copy.has_value());
  EXPECT_EQ(written->copy->source, 1u);
  const BlockId fresh = written->copy->destination;
  EXPECT_EQ(fresh, 2u);
  EXPECT_EQ(written->slots, (std::vector<TokenSlot>{{fresh, 2}}));
  EXPECT_EQ(child.blocks(), (std::vector<BlockId>{0, fresh}));
  EXPECT_EQ(allocator.ref_count(0), 2u);  // the full block stays shared
  EXPECT_EQ(allocator.ref_count(1), 1u);  // only the parent holds the original now

  // The parent is now the sole holder of block 1 and writes in place, without a copy.
  const auto parent_write = parent.append(1, allocator);
  ASSERT_TRUE(parent_write.has_value());
  EXPECT_FALSE(parent_write->copy.has_value());
  EXPECT_EQ(parent_write->slots, (std::vector<TokenSlot>{{1, 2}}));
  child.release(allocator);
  parent.release(allocator);
}

TEST(PageTable, ForkOnABlockBoundaryNeedsNoCopy) {
  BlockAllocator allocator(8, 4);
  PageTable parent(4);
  ASSERT_TRUE(parent.append(8, allocator).has_value());
  PageTable child = parent.fork(allocator);
  const auto written = child.append(1, allocator);  // position 8 opens a new block: nothing shared is written
  ASSERT_TRUE(written.has_value());
  EXPECT_FALSE(written->copy.has_value());
  EXPECT_EQ(written->slots, (std::vector<TokenSlot>{{2, 0}}));
  child.release(allocator);
  parent.release(allocator);
}

TEST(PageTable, AppendFullBlocksRetainsAndRequiresABlockBoundary) {
  BlockAllocator allocator(8, 4);
  PageTable owner(4);
  ASSERT_TRUE(owner.append(8, allocator).has_value());
  PageTable reuser(4);
  reuser.append_full_blocks(owner.blocks(), allocator);
  EXPECT_EQ(reuser.token_count(), 8u);
  EXPECT_EQ(allocator.ref_count(0), 2u);
  ASSERT_TRUE(reuser.append(1, allocator).has_value());
  const std::vector<BlockId> more{0};
  EXPECT_THROW(reuser.append_full_blocks(more, allocator), std::logic_error);  // 9 tokens: mid-block
  const std::vector<BlockId> free_block{7};
  PageTable other(4);
  EXPECT_THROW(other.append_full_blocks(free_block, allocator), std::logic_error);
  EXPECT_TRUE(other.blocks().empty());
  reuser.release(allocator);
  owner.release(allocator);
}

TEST(PageTable, ReleaseDropsTheLastBlockFirst) {
  // Releasing back to front makes a prefix's deeper blocks older in the eviction order.
  BlockAllocator allocator(4, 2);
  PageTable table(2);
  ASSERT_TRUE(table.append(6, allocator).has_value());
  for (const BlockId block : table.blocks()) allocator.mark_registered(block);
  table.release(allocator);
  EXPECT_EQ(allocator.cached_blocks_oldest_first(), (std::vector<BlockId>{2, 1, 0}));
  EXPECT_EQ(table.token_count(), 0u);
}

}  // namespace
}  // namespace loom::cache
