// The CacheManagerActor's messages (cache_manager_actor.hpp has the actor): reserve blocks for a step,
// commit, release, retain, match a prefix, fork, stats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "loom/actors/runtime/reply.hpp"
#include "loom/cache/block_manager.hpp"

namespace loom::actors {

// One sequence's share of a step: a new sequence (its whole prompt; a cached prefix is reused) or more
// tokens for a sequence the cache already holds (decode, or the next chunk of a long prompt).
struct ReserveItem {
  cache::SequenceId sequence = 0;
  std::vector<cache::TokenId> tokens;
  bool new_sequence = false;
  bool reuse_prefix = true;  // a new sequence may start from a cached prefix (not an embedding: it pools every position)
};

struct ReserveResult {
  bool reserved = false;
  std::size_t missing_blocks = 0;  // when not reserved for want of blocks: how many more the plan needs
  std::string error;               // when not reserved because the plan itself is wrong (an unknown id, ...)
  // When reserved, one per item, in order: where its tokens go, the copy to do first, and its block table
  // after the reservation (what the backend's attention reads through).
  std::vector<cache::Reservation> reservations;
  std::vector<std::vector<cache::BlockId>> block_tables;
};

struct CacheManagerStats {
  cache::CacheStats cache;
  std::uint64_t rejected_messages = 0;  // Commit/Release/Retain naming an unknown sequence
};

// Reserve blocks for every item of a step, all or nothing.
struct Reserve {
  std::vector<ReserveItem> plan;
  Reply<ReserveResult> reply;
};
// The backend has written K/V for positions [0, computed_tokens): full blocks among them become
// matchable prefixes.
struct Commit {
  cache::SequenceId sequence = 0;
  std::size_t computed_tokens = 0;
};
// The sequence is gone (finished, cancelled, preempted): its blocks are released; committed full blocks stay
// cached as prefixes until the space is needed.
struct Release {
  cache::SequenceId sequence = 0;
};
// A finished conversation whose next turn will come: commit what was computed, then release, so its
// blocks stay cached for the next turn's prompt.
struct Retain {
  cache::SequenceId sequence = 0;
  std::size_t computed_tokens = 0;
};
// The longest cached prefix of `tokens` (whole blocks). A query: nothing changes.
struct MatchPrefix {
  std::vector<cache::TokenId> tokens;
  Reply<cache::PrefixMatch> reply;
};
// `child` (a new id) shares every block of `parent` (parallel samples of one prompt). Empty error = done.
struct Fork {
  cache::SequenceId parent = 0;
  cache::SequenceId child = 0;
  Reply<std::string> reply;
};
struct GetCacheStats {
  Reply<CacheManagerStats> reply;
};

using CacheManagerProtocol = std::variant<Reserve, Commit, Release, Retain, MatchPrefix, Fork, GetCacheStats>;

}  // namespace loom::actors
