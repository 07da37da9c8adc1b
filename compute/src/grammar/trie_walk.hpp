// walk_trie: the depth-first walk of a TokenTrie along a set of grammar stacks that allowed_tokens and the
// TokenMasker share. Each edge's byte goes through the UTF-8 decoder: a finished code point advances the
// stacks, a begun one only checks that some stack could still take it; a branch whose stacks die is left.
// For each node reached alive, on_node(node index, depth, escaped) decides whether to go below it; `escaped`
// says that some alternative returned below the stacks given (kEscaped, TokenMasker's contexts), which the
// walk strips from the set (it goes below only while other stacks live).
//
// Sets of stacks are interned (one id per distinct set) and each step (set, code point) -> set is
// remembered for the walk, so the many trie nodes that repeat a step (inside a JSON string every character
// leads back to the same set) cost a table lookup instead of an advance. Private to the grammar room.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "loom/compute/grammar/token_mask.hpp"
#include "stack_arena.hpp"

namespace loom::compute::grammar::detail {

class InternedSets {
 public:
  void clear() {
    sets_.clear();
    index_.clear();
    steps_.clear();
    partials_.clear();
  }
  std::int32_t intern(const std::vector<StackId>& set) {
    std::string key(reinterpret_cast<const char*>(set.data()), set.size() * sizeof(StackId));
    const auto [it, added] = index_.emplace(std::move(key), static_cast<std::int32_t>(sets_.size()));
    if (added) sets_.push_back(set);
    return it->second;
  }
  const std::vector<StackId>& set(std::int32_t id) const { return sets_[static_cast<std::size_t>(id)]; }

  // The set after `id` takes code point `cp` (kEscaped stripped, reported by `escaped`); -1 when none lives.
  std::int32_t step(StackArena& arena, std::int32_t id, char32_t cp, bool& escaped) {
    const std::uint64_t key = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(id)) << 21) | cp;
    if (auto it = steps_.find(key); it != steps_.end()) {
      escaped = it->second & 1;
      return it->second >> 1;
    }
    arena.advance(sets_[static_cast<std::size_t>(id)], cp, scratch_);
    escaped = !scratch_.empty() && scratch_.front() == kEscaped;
    if (escaped) scratch_.erase(scratch_.begin());
    const std::int32_t next = scratch_.empty() ? -1 : intern(scratch_);
    steps_.emplace(key, next * 2 + (escaped ? 1 : 0));
    return next;
  }
  // Whether some stack of set `id` accepts a code point in [lo, hi].
  bool accepts_some(const StackArena& arena, std::int32_t id, char32_t lo, char32_t hi) {
    if (id >= (1 << 22)) return arena.accepts_some(sets_[static_cast<std::size_t>(id)], lo, hi);  // past the key's bits
    const std::uint64_t key = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(id)) << 42) |
                              (static_cast<std::uint64_t>(lo) << 21) | hi;
    if (auto it = partials_.find(key); it != partials_.end()) return it->second;
    const bool result = arena.accepts_some(sets_[static_cast<std::size_t>(id)], lo, hi);
    partials_.emplace(key, result);
    return result;
  }

 private:
  std::vector<std::vector<StackId>> sets_;
  std::unordered_map<std::string, std::int32_t> index_;
  std::unordered_map<std::uint64_t, std::int32_t> steps_;
  std::unordered_map<std::uint64_t, bool> partials_;
  std::vector<StackId> scratch_;
};

template <class OnNode>
void walk_trie(StackArena& arena, const TokenTrie& trie, const std::vector<StackId>& start, Utf8Decoder decoder,
               OnNode&& on_node) {
  struct Frame {
    std::uint32_t node;
    std::uint32_t next_child;
    std::int32_t set;  // interned: the live stacks after this node's bytes
    Utf8Decoder decoder;
  };
  // Kept between calls (no allocation once warm); a walk never re-enters itself on one thread.
  thread_local InternedSets sets;
  thread_local std::vector<Frame> frames;
  sets.clear();
  frames.clear();
  const auto& nodes = trie.nodes();
  frames.push_back(Frame{0, 0, sets.intern(start), decoder});
  while (!frames.empty()) {
    Frame& top = frames.back();
    const TokenTrie::Node& parent = nodes[top.node];
    if (top.next_child == parent.child_count) {
      frames.pop_back();
      continue;
    }
    const std::uint32_t child_index = parent.first_child + top.next_child++;
    const TokenTrie::Node& child = nodes[child_index];
    Utf8Decoder next_decoder = top.decoder;
    const std::int32_t current = top.set;
    std::int32_t next = -1;
    bool escaped = false;
    switch (next_decoder.feed(child.byte)) {
      case Utf8Decoder::Result::invalid:
        continue;
      case Utf8Decoder::Result::partial:
        if (!sets.accepts_some(arena, current, next_decoder.range_lo(), next_decoder.range_hi())) continue;
        next = current;
        break;
      case Utf8Decoder::Result::complete:
        next = sets.step(arena, current, next_decoder.value, escaped);
        if (next < 0 && !escaped) continue;
        break;
    }
    const std::size_t depth = frames.size();
    if (on_node(child_index, depth, escaped) && next >= 0 && child.child_count > 0) {
      frames.push_back(Frame{child_index, 0, next, next_decoder});
    }
  }
}

}  // namespace loom::compute::grammar::detail
