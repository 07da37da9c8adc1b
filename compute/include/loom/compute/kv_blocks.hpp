// The plain names a step speaks in about the paged KV storage: which sequence, which physical block, and
// a block copy (copy-on-write of a shared block). compute's own, so that it depends on nothing else of
// loom's; the cache bookkeeping (loom/cache/block_types.hpp) spells block ids the same way, std::int32_t,
// so an id passes from one to the other unchanged.
#pragma once

#include <cstdint>

namespace loom::compute {

// A sequence the engine runs: the key of its sampler and of its share of a step.
using SequenceId = std::uint64_t;

// A physical block of the KV storage: 0 .. blocks - 1.
using BlockId = std::int32_t;

// Every slot of block `source` is copied into block `destination`, in every layer, K and V.
struct BlockCopy {
  BlockId source = 0;
  BlockId destination = 0;
  friend bool operator==(const BlockCopy&, const BlockCopy&) = default;
};

}  // namespace loom::compute
