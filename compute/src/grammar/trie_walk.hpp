// walk_trie: the depth-first walk of a TokenTrie along a set of grammar stacks that allowed_tokens and the
// TokenMasker share. Each edge's byte goes through the UTF-8 decoder: a finished code point advances the
// stacks, a begun one only checks that some stack could still take it; a branch whose stacks die is left.
// For each node reached alive, on_node(node index, depth, stacks) decides whether to go below it (and may
// edit the stacks first). Private to the grammar room.
#pragma once

#include <vector>

#include "loom/compute/grammar/token_mask.hpp"
#include "stack_arena.hpp"

namespace loom::compute::grammar::detail {

template <class OnNode>
void walk_trie(StackArena& arena, const TokenTrie& trie, const std::vector<StackId>& start, Utf8Decoder decoder,
               OnNode&& on_node) {
  struct Frame {
    std::uint32_t node;
    std::uint32_t next_child;
    Utf8Decoder decoder;
  };
  // sets[d]: the live stacks after the first d bytes of the current path. Kept between calls (no
  // allocation once warm); a walk never re-enters itself on one thread.
  thread_local std::vector<std::vector<StackId>> sets;
  thread_local std::vector<Frame> frames;
  if (sets.empty()) sets.resize(1);
  sets[0] = start;
  frames.clear();
  const auto& nodes = trie.nodes();
  frames.push_back(Frame{0, 0, decoder});
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
    const std::size_t depth = frames.size();
    if (sets.size() <= depth) sets.resize(depth + 1);
    const std::vector<StackId>& current = sets[depth - 1];
    std::vector<StackId>& next = sets[depth];
    switch (next_decoder.feed(child.byte)) {
      case Utf8Decoder::Result::invalid:
        continue;
      case Utf8Decoder::Result::partial:
        if (!arena.accepts_some(current, next_decoder.range_lo(), next_decoder.range_hi())) continue;
        next = current;
        break;
      case Utf8Decoder::Result::complete:
        arena.advance(current, next_decoder.value, next);
        if (next.empty()) continue;
        break;
    }
    if (on_node(child_index, depth, next) && child.child_count > 0 && !next.empty()) {
      frames.push_back(Frame{child_index, 0, next_decoder});
    }
  }
}

}  // namespace loom::compute::grammar::detail
