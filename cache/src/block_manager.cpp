#include "loom/cache/block_manager.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <unordered_set>

namespace loom::cache {

BlockManager::BlockManager(const BlockManagerConfig& config)
    : allocator_(config.block_count, config.block_size), index_(config.block_count, config.block_size, config.hash) {}

BlockManager::Sequence& BlockManager::find(SequenceId id, const char* operation) {
  const auto it = sequences_.find(id);
  if (it == sequences_.end()) {
    throw std::invalid_argument(std::string("BlockManager::") + operation + ": unknown sequence " +
                                std::to_string(id));
  }
  return it->second;
}

const BlockManager::Sequence& BlockManager::find(SequenceId id, const char* operation) const {
  return const_cast<BlockManager*>(this)->find(id, operation);
}

void BlockManager::check_length(SequenceId id, std::size_t tokens, const char* operation) const {
  if (tokens > max_sequence_tokens()) {
    throw std::invalid_argument(std::string("BlockManager::") + operation + ": sequence " + std::to_string(id) +
                                " would hold " + std::to_string(tokens) + " tokens, more than the " +
                                std::to_string(max_sequence_tokens()) + " slots of the whole cache");
  }
}

PrefixMatch BlockManager::reusable_prefix(std::span<const TokenId> prompt) const {
  if (prompt.empty()) return {};
  return index_.match(prompt.first(prompt.size() - 1));
}

std::size_t BlockManager::cached_among(std::span<const BlockId> blocks) const {
  return static_cast<std::size_t>(std::ranges::count_if(
      blocks, [this](BlockId block) { return allocator_.state(block) == BlockState::cached; }));
}

void BlockManager::make_free(std::size_t blocks) {
  while (allocator_.free_count() < blocks) {
    const std::optional<BlockId> victim = allocator_.evict_lru();
    if (!victim) throw std::logic_error("BlockManager: asked to free more blocks than are available");
    index_.erase(*victim);
    ++evicted_blocks_;
  }
}

Reservation BlockManager::shortage(std::size_t missing_blocks) {
  Reservation reservation;
  reservation.missing_blocks = missing_blocks;
  return reservation;
}

Reservation BlockManager::from_append(AppendResult&& appended) {
  Reservation reservation;
  reservation.first_position = appended.first_position;
  reservation.copy = appended.copy;
  reservation.slots = std::move(appended.slots);
  return reservation;
}

std::size_t BlockManager::create_cost(std::span<const TokenId> prompt, bool reuse_prefix) const {
  const PrefixMatch reused = reuse_prefix ? reusable_prefix(prompt) : PrefixMatch{};
  const std::size_t rest = prompt.size() - reused.tokens;
  return cached_among(reused.blocks) + (rest + block_size() - 1) / block_size();
}

std::size_t BlockManager::append_cost(SequenceId id, std::size_t new_tokens) const {
  return find(id, "append_cost").table.blocks_needed(new_tokens, allocator_);
}

Reservation BlockManager::create_sequence(SequenceId id, std::span<const TokenId> prompt, bool reuse_prefix) {
  if (sequences_.contains(id)) {
    throw std::invalid_argument("BlockManager::create_sequence: sequence " + std::to_string(id) +
                                " already exists");
  }
  check_length(id, prompt.size(), "create_sequence");
  const PrefixMatch reused = reuse_prefix ? reusable_prefix(prompt) : PrefixMatch{};
  const std::size_t rest = prompt.size() - reused.tokens;
  const std::size_t new_blocks = (rest + block_size() - 1) / block_size();
  const std::size_t needed = cached_among(reused.blocks) + new_blocks;
  if (needed > available_blocks()) return shortage(needed - available_blocks());

  // Retain the reused blocks before evicting anything, so that eviction cannot take them.
  PageTable table(block_size());
  table.append_full_blocks(reused.blocks, allocator_);
  make_free(new_blocks);
  Reservation reservation = from_append(std::move(*table.append(rest, allocator_)));
  reservation.reused_tokens = reused.tokens;

  prompt_tokens_requested_ += prompt.size();
  prompt_tokens_reused_ += reused.tokens;
  sequences_.emplace(id, Sequence{.table = std::move(table),
                                  .tokens = std::vector<TokenId>(prompt.begin(), prompt.end()),
                                  .committed_tokens = reused.tokens,
                                  .linked_blocks = reused.blocks.size(),
                                  .link = reused.link,
                                  .chain_broken = false});
  return reservation;
}

Reservation BlockManager::append(SequenceId id, std::span<const TokenId> tokens) {
  Sequence& sequence = find(id, "append");
  check_length(id, sequence.tokens.size() + tokens.size(), "append");
  const std::size_t needed = sequence.table.blocks_needed(tokens.size(), allocator_);
  if (needed > available_blocks()) return shortage(needed - available_blocks());

  make_free(needed);
  Reservation reservation = from_append(std::move(*sequence.table.append(tokens.size(), allocator_)));
  if (reservation.copy) ++copied_blocks_;
  sequence.tokens.insert(sequence.tokens.end(), tokens.begin(), tokens.end());
  return reservation;
}

void BlockManager::commit(SequenceId id, std::size_t computed_tokens) {
  Sequence& sequence = find(id, "commit");
  if (computed_tokens > sequence.tokens.size()) {
    throw std::invalid_argument("BlockManager::commit: sequence " + std::to_string(id) + " has " +
                                std::to_string(sequence.tokens.size()) + " tokens, not " +
                                std::to_string(computed_tokens));
  }
  sequence.committed_tokens = std::max(sequence.committed_tokens, computed_tokens);
  const std::size_t b = block_size();
  const std::span<const TokenId> tokens(sequence.tokens);
  while (!sequence.chain_broken && (sequence.linked_blocks + 1) * b <= sequence.committed_tokens) {
    const std::size_t k = sequence.linked_blocks;
    const BlockId block = sequence.table.blocks()[k];
    const InsertResult result = index_.insert(sequence.link, tokens.subspan(k * b, b), block);
    switch (result.outcome) {
      case InsertOutcome::inserted:
        allocator_.mark_registered(block);
        sequence.link = result.link;
        break;
      case InsertOutcome::duplicate:  // equal K/V already registered (maybe this very block): chain through it
        sequence.link = result.link;
        break;
      case InsertOutcome::collision:
        sequence.chain_broken = true;
        break;
    }
    ++sequence.linked_blocks;
  }
}

void BlockManager::fork(SequenceId parent, SequenceId child) {
  if (sequences_.contains(child)) {
    throw std::invalid_argument("BlockManager::fork: sequence " + std::to_string(child) + " already exists");
  }
  const Sequence& source = find(parent, "fork");
  sequences_.emplace(child, Sequence{.table = source.table.fork(allocator_),
                                     .tokens = source.tokens,
                                     .committed_tokens = source.committed_tokens,
                                     .linked_blocks = source.linked_blocks,
                                     .link = source.link,
                                     .chain_broken = source.chain_broken});
}

void BlockManager::release(SequenceId id) {
  Sequence& sequence = find(id, "release");
  sequence.table.release(allocator_);
  sequences_.erase(id);
}

PrefixMatch BlockManager::match_prefix(std::span<const TokenId> tokens) const { return index_.match(tokens); }

std::size_t BlockManager::evict_cached(std::size_t count) {
  const std::size_t evictable = std::min(count, allocator_.cached_count());
  make_free(allocator_.free_count() + evictable);
  return evictable;
}

std::size_t BlockManager::token_count(SequenceId id) const { return find(id, "token_count").tokens.size(); }

std::vector<BlockId> BlockManager::block_table(SequenceId id) const {
  return find(id, "block_table").table.blocks();
}

std::vector<SequenceId> BlockManager::sequence_ids() const {
  std::vector<SequenceId> ids;
  ids.reserve(sequences_.size());
  for (const auto& [id, sequence] : sequences_) ids.push_back(id);
  std::ranges::sort(ids);
  return ids;
}

CacheStats BlockManager::stats() const {
  CacheStats stats;
  stats.block_size = block_size();
  stats.total_blocks = allocator_.block_count();
  stats.used_blocks = allocator_.used_count();
  stats.cached_blocks = allocator_.cached_count();
  stats.free_blocks = allocator_.free_count();
  stats.sequences = sequences_.size();
  // Forked sequences share a partly filled last block until one writes; count each such block once.
  std::unordered_set<BlockId> counted;
  for (const auto& [id, sequence] : sequences_) {
    const std::size_t unused = sequence.table.unused_slots();
    if (unused > 0 && counted.insert(sequence.table.blocks().back()).second) stats.wasted_slots += unused;
  }
  stats.prompt_tokens_requested = prompt_tokens_requested_;
  stats.prompt_tokens_reused = prompt_tokens_reused_;
  stats.evicted_blocks = evicted_blocks_;
  stats.copied_blocks = copied_blocks_;
  return stats;
}

}  // namespace loom::cache
