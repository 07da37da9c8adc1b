// The prefix-reuse check end to end over the real pieces: the CacheManagerActor plans the blocks,
// the model computes through the paged KV storage with the planned block tables. A second prompt that shares
// its first 960 tokens with a retained 1,000-token conversation computes only its 40 new positions (counted
// by the model, not timed), and its logits equal a full computation of the same prompt.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <random>
#include <vector>

#include <boost/asio/use_future.hpp>

#include "loom/actors/engine/cache_manager_actor.hpp"
#include "loom/cache/block_manager.hpp"
#include "loom/compute/cpu/llama_model.hpp"
#include "loom/compute/cpu/paged_kv_cache.hpp"
#include "loom/compute/cpu/thread_pool.hpp"
#include "loom/compute/model/model_loader.hpp"
#include "loom/compute/model_synth.hpp"
#include "test_support.hpp"

namespace loom::actors {
namespace {

using namespace std::chrono_literals;
namespace asio = boost::asio;
using compute::LlamaModel;

constexpr std::int64_t kReuseBlockSize = 16;
constexpr std::int64_t kBlocks = 128;  // 2,048 token slots
constexpr std::int64_t kPrompt = 1000, kShared = 960;

struct TinyModel {
  std::filesystem::path path;
  std::unique_ptr<compute::LoadedModel> loaded;
  compute::ThreadPool pool{2};
  std::unique_ptr<LlamaModel> model;

  TinyModel() {
    path = std::filesystem::temp_directory_path() / ("loom_prefix_reuse_" + std::to_string(::getpid()) + ".gguf");
    compute::SynthSpec spec;
    spec.dim = 64;
    spec.ffn_dim = 128;
    spec.layers = 2;
    spec.heads = 4;
    spec.kv_heads = 2;
    spec.context_length = 2048;
    spec.vocab_size = 512;
    spec.type = compute::TensorType::q8_0;
    compute::write_synthetic_model(spec, path.string());
    loaded = compute::LoadedModel::open(path.string());
    model = std::make_unique<LlamaModel>(loaded->config(), loaded->weights(), pool, kPrompt);
  }
  ~TinyModel() {
    model.reset();
    loaded.reset();
    std::filesystem::remove(path);
  }
};

// Runs the reserved tokens of a sequence through the model and returns the last position's logits.
std::vector<float> compute_reserved(LlamaModel& model, compute::PagedKvCache& pages, const std::vector<cache::TokenId>& prompt,
                                    const cache::Reservation& reservation, const std::vector<cache::BlockId>& table) {
  const std::vector<std::int32_t> block_table(table.begin(), table.end());
  const std::vector<std::int32_t> tokens(prompt.begin() + static_cast<std::ptrdiff_t>(reservation.first_position), prompt.end());
  std::vector<float> logits(static_cast<std::size_t>(model.config().vocab_size));
  LlamaModel::SequenceStep step;
  step.tokens = tokens;
  step.start = static_cast<std::int64_t>(reservation.first_position);
  step.block_table = block_table;
  step.mode = LlamaModel::Logits::last;
  step.logits = logits.data();
  model.forward({&step, 1}, pages);
  return logits;
}

// The pieces both tests wire together: a cache manager over kBlocks blocks, the tiny model, and the paged
// storage those blocks name.
class PrefixReuse : public ::testing::Test {
 protected:
  PrefixReuse()
      : manager(spawn<CacheManagerActor>(ctx.executor(), {.name = "cache_manager"},
                                         cache::BlockManagerConfig{.block_count = kBlocks, .block_size = kReuseBlockSize})),
        model(*tiny.model),
        pages(model.config().layers, model.config().kv_dim(), kReuseBlockSize, kBlocks) {}
  ~PrefixReuse() override { manager.stop(); }

  ReserveResult reserve(std::vector<ReserveItem> plan) {
    Reserve request{std::move(plan), {}};
    return manager.address().ask(std::move(request), 5s, asio::use_future).get();
  }

  testing::RunningContext ctx{1};
  ActorHandle<CacheManagerProtocol> manager;
  TinyModel tiny;
  LlamaModel& model;
  compute::PagedKvCache pages;
};

TEST_F(PrefixReuse, ASharedPrefixIsNotComputedAgainAndGivesTheSameLogits) {
  const auto& c = model.config();

  std::mt19937 random(7);
  std::uniform_int_distribution<cache::TokenId> token(3, 511);
  std::vector<cache::TokenId> first(kPrompt), second(kPrompt);
  for (auto& t : first) t = token(random);
  std::copy_n(first.begin(), kShared, second.begin());
  for (auto i = kShared; i < kPrompt; ++i) second[static_cast<std::size_t>(i)] = token(random);

  // The first conversation: nothing cached, all 1,000 positions computed; then it is retained.
  const auto a = reserve({{1, first, true}});
  ASSERT_TRUE(a.reserved) << a.error;
  EXPECT_EQ(a.reservations[0].reused_tokens, 0u);
  const auto before_a = model.positions_computed();
  compute_reserved(model, pages, first, a.reservations[0], a.block_tables[0]);
  EXPECT_EQ(model.positions_computed() - before_a, static_cast<std::uint64_t>(kPrompt));
  manager.address().tell(Retain{1, static_cast<std::size_t>(kPrompt)});

  // The second prompt shares 960 tokens (60 whole blocks): only its 40 new positions are computed.
  const auto b = reserve({{2, second, true}});
  ASSERT_TRUE(b.reserved) << b.error;
  EXPECT_EQ(b.reservations[0].reused_tokens, static_cast<std::size_t>(kShared));
  EXPECT_EQ(b.reservations[0].first_position, static_cast<std::size_t>(kShared));
  const auto before_b = model.positions_computed();
  const auto reused = compute_reserved(model, pages, second, b.reservations[0], b.block_tables[0]);
  EXPECT_EQ(model.positions_computed() - before_b, static_cast<std::uint64_t>(kPrompt - kShared));

  // The same prompt computed from scratch in a cache of its own gives the same logits.
  compute::PagedKvCache fresh_pages(c.layers, c.kv_dim(), kReuseBlockSize, kBlocks);
  cache::Reservation whole;
  std::vector<cache::BlockId> contiguous;
  for (cache::BlockId b_id = 0; b_id < static_cast<cache::BlockId>(kPrompt / kReuseBlockSize + 1); ++b_id) contiguous.push_back(b_id);
  const auto full = compute_reserved(model, fresh_pages, second, whole, contiguous);
  float worst = 0;
  for (std::size_t i = 0; i < full.size(); ++i) worst = std::max(worst, std::abs(full[i] - reused[i]));
  EXPECT_LE(worst, 1e-5f);

  const auto stats = manager.address().ask(GetCacheStats{}, 5s, asio::use_future).get();
  EXPECT_EQ(stats.cache.prompt_tokens_reused, static_cast<std::uint64_t>(kShared));
}

// Copy-on-write end to end: the cache manager shares a forked sequence's blocks, asks for a copy of the
// shared partial block when the child first writes, the backend copies it, and the child then continues
// exactly as its parent does with the same token.
TEST_F(PrefixReuse, AForkedSequenceWritesIntoItsOwnCopyAndContinuesLikeItsParent) {
  std::vector<cache::TokenId> prompt(20);  // one full block and 4 slots of the next
  for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<cache::TokenId>(10 + 7 * i);
  const auto parent = reserve({{1, prompt, true}});
  ASSERT_TRUE(parent.reserved) << parent.error;
  compute_reserved(model, pages, prompt, parent.reservations[0], parent.block_tables[0]);
  manager.address().tell(Commit{1, prompt.size()});
  Fork fork{1, 2, {}};
  ASSERT_EQ(manager.address().ask(std::move(fork), 5s, asio::use_future).get(), "");

  // Both append the same next token; the child's first write needs its own copy of the shared block.
  auto next = prompt;
  next.push_back(123);
  const auto child = reserve({{2, {123}, false}});
  ASSERT_TRUE(child.reserved) << child.error;
  ASSERT_TRUE(child.reservations[0].copy.has_value());
  pages.copy_block(static_cast<std::int32_t>(child.reservations[0].copy->source),
                   static_cast<std::int32_t>(child.reservations[0].copy->destination));
  const auto child_logits = compute_reserved(model, pages, next, child.reservations[0], child.block_tables[0]);
  const auto parent_next = reserve({{1, {123}, false}});
  ASSERT_TRUE(parent_next.reserved) << parent_next.error;
  EXPECT_FALSE(parent_next.reservations[0].copy.has_value());  // the parent now owns its block alone
  EXPECT_NE(parent_next.block_tables[0].back(), child.block_tables[0].back());
  const auto parent_logits = compute_reserved(model, pages, next, parent_next.reservations[0], parent_next.block_tables[0]);
  EXPECT_EQ(child_logits, parent_logits);
}

}  // namespace
}  // namespace loom::actors
