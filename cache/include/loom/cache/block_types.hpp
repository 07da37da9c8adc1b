// The plain values the cache bookkeeping speaks in: block ids, token ids, a token's slot in the KV storage
// and a block copy the backend must perform. They cross actor boundaries inside messages, so they are
// trivially copyable and hold no pointers.
#pragma once

#include <cstdint>

namespace loom::cache {

// A physical block of the KV storage: 0 .. block_count - 1. The backend spells it the same way
// (compute::BlockId, loom/compute/kv_blocks.hpp): one integer type for a block id everywhere.
using BlockId = std::int32_t;

// A token id, as the tokenizers produce it.
using TokenId = std::int32_t;

// Where one token's K/V goes: slot `offset` (0 .. block_size - 1) of physical block `block`.
struct TokenSlot {
  BlockId block = 0;
  std::uint32_t offset = 0;
  friend bool operator==(const TokenSlot&, const TokenSlot&) = default;
};

// Copy-on-write: the backend copies every slot of block `source` into block `destination` (in every layer)
// before it writes the new tokens.
struct BlockCopy {
  BlockId source = 0;
  BlockId destination = 0;
  friend bool operator==(const BlockCopy&, const BlockCopy&) = default;
};

}  // namespace loom::cache
