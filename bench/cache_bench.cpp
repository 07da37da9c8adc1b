// Cache bookkeeping throughput, each beside a naive baseline in the same run:
//   - allocate + release of blocks: BlockAllocator's free-list stack vs a std::set of free ids;
//   - longest cached prefix of a 1,024-token prompt among 64 or 1,024 cached conversations (sharing a system
//     prompt): PrefixIndex::match vs comparing the prompt against every cached token sequence.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "loom/cache/block_allocator.hpp"
#include "loom/cache/prefix_index.hpp"

namespace {

using loom::cache::BlockAllocator;
using loom::cache::BlockId;
using loom::cache::PrefixIndex;
using loom::cache::PrefixLink;
using loom::cache::TokenId;

constexpr std::size_t kPoolBlocks = 4096;
constexpr std::size_t kBurst = 64;  // blocks taken and given back per iteration, as a step of a busy batch

void BM_BlockAllocator_AllocateRelease(benchmark::State& state) {
  BlockAllocator allocator(kPoolBlocks, 16);
  std::vector<BlockId> held(kBurst);
  for (std::size_t i = 0; i < kPoolBlocks / 2; ++i) (void)allocator.allocate();  // a half-full pool
  for (auto _ : state) {
    for (auto& block : held) block = *allocator.allocate();
    for (const BlockId block : held) allocator.release(block);
    benchmark::DoNotOptimize(held.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kBurst * 2));
}
BENCHMARK(BM_BlockAllocator_AllocateRelease);

void BM_SetFreeList_AllocateRelease(benchmark::State& state) {
  std::set<BlockId> free_ids;
  for (std::size_t i = kPoolBlocks / 2; i < kPoolBlocks; ++i) free_ids.insert(static_cast<BlockId>(i));
  std::vector<BlockId> held(kBurst);
  for (auto _ : state) {
    for (auto& block : held) {
      block = *free_ids.begin();
      free_ids.erase(free_ids.begin());
    }
    for (const BlockId block : held) free_ids.insert(block);
    benchmark::DoNotOptimize(held.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kBurst * 2));
}
BENCHMARK(BM_SetFreeList_AllocateRelease);

constexpr std::size_t kBlockSize = 16;
constexpr std::size_t kPromptTokens = 1024;
constexpr std::size_t kSharedTokens = 960;  // the query shares its first 960 tokens with one conversation

struct PrefixWorkload {
  std::vector<std::vector<TokenId>> cached;
  std::vector<TokenId> query;
};

PrefixWorkload make_workload(std::size_t conversations) {
  PrefixWorkload w;
  std::mt19937 rng(7);
  std::uniform_int_distribution<TokenId> token(0, 32000);
  // Every conversation starts with the same 64-token system prompt, then diverges.
  std::vector<TokenId> system(64);
  for (TokenId& t : system) t = token(rng);
  for (std::size_t c = 0; c < conversations; ++c) {
    std::vector<TokenId> tokens = system;
    while (tokens.size() < kPromptTokens) tokens.push_back(token(rng));
    w.cached.push_back(std::move(tokens));
  }
  w.query.assign(w.cached[conversations / 2].begin(), w.cached[conversations / 2].begin() + kSharedTokens);
  while (w.query.size() < kPromptTokens) w.query.push_back(token(rng));
  return w;
}

void BM_PrefixIndex_Match(benchmark::State& state) {
  const auto conversations = static_cast<std::size_t>(state.range(0));
  const PrefixWorkload w = make_workload(conversations);
  PrefixIndex index(conversations * kPromptTokens / kBlockSize, kBlockSize);
  BlockId next = 0;
  for (const auto& tokens : w.cached) {
    PrefixLink link;
    for (std::size_t k = 0; k < tokens.size() / kBlockSize; ++k) {
      const auto block = std::span<const TokenId>(tokens).subspan(k * kBlockSize, kBlockSize);
      link = index.insert(link, block, next++).link;  // shared system blocks come back as duplicates
    }
  }
  for (auto _ : state) {
    const auto match = index.match(w.query);
    benchmark::DoNotOptimize(match.tokens);
    if (match.tokens != kSharedTokens) state.SkipWithError("wrong match length");
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_PrefixIndex_Match)->Arg(64)->Arg(1024);

void BM_LinearScan_Match(benchmark::State& state) {
  const PrefixWorkload w = make_workload(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) {
    std::size_t best = 0;
    for (const auto& tokens : w.cached) {
      const auto diverge = std::ranges::mismatch(tokens, w.query).in1 - tokens.begin();
      best = std::max(best, static_cast<std::size_t>(diverge) / kBlockSize * kBlockSize);
    }
    benchmark::DoNotOptimize(best);
    if (best != kSharedTokens) state.SkipWithError("wrong match length");
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_LinearScan_Match)->Arg(64)->Arg(1024);

}  // namespace

BENCHMARK_MAIN();
