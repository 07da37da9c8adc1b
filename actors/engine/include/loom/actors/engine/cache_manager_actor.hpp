// CacheManagerActor: the one owner of the engine's KV cache bookkeeping (a cache::BlockManager: block
// allocator, page tables, prefix index). The scheduler asks it, once per step, to reserve blocks for the
// whole plan; the answer is all or nothing, so a shortage changes nothing and names how many blocks are
// missing, and the scheduler preempts and replans. Every other change (a step's tokens written, a sequence
// finished or forked) is a message too, so the bookkeeping needs no lock.
//
// Failures are answers, never exceptions across the boundary: an unknown or duplicate sequence id in a
// request comes back as an error string in the result; in a plain message (Commit, Release, Retain) it is
// logged and counted in Stats' `rejected_messages`.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "loom/actors/engine/cache_manager_protocol.hpp"
#include "loom/actors/runtime/actor.hpp"
#include "loom/actors/runtime/reply.hpp"
#include "loom/cache/block_manager.hpp"

namespace loom::actors {

class CacheManagerActor : public Actor<CacheManagerActor, CacheManagerProtocol> {
 public:
  // Throws std::invalid_argument (from spawn) for a pool the BlockManager refuses.
  explicit CacheManagerActor(cache::BlockManagerConfig config);

  void on(Reserve m);
  void on(Commit m);
  void on(Release m);
  void on(Retain m);
  void on(MatchPrefix m);
  void on(Fork m);
  void on(GetCacheStats m);

 private:
  ReserveResult reserve(const std::vector<ReserveItem>& plan);
  void reject(const char* message, cache::SequenceId sequence, const char* why);

  cache::BlockManager blocks_;
  std::uint64_t rejected_messages_ = 0;
};

}  // namespace loom::actors
