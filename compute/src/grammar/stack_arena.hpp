// StackArena: the pushdown recognizer's working form. A stack is a chain of nodes (position, parent), the top
// node's position a character set waiting for a code point, the nodes below it the positions to return to.
// Nodes are hash-consed, so two equal stacks are the same node id and a set of stacks is deduplicated by
// sorting ids; chains share their common bottoms. kEmptyStack (-1) is the stack with nothing left: the
// grammar may end there. Scratch memory, reused across calls; private to the grammar room.
#pragma once

#include <cstdint>
#include <vector>

#include "loom/compute/grammar/grammar.hpp"
#include "loom/compute/grammar/grammar_state.hpp"

namespace loom::compute::grammar::detail {

using StackId = std::int32_t;
constexpr StackId kEmptyStack = -1;
// In a set: some alternative returned below the frames the arena was given (escape_node()); see token_masker.
constexpr StackId kEscaped = -3;

class StackArena {
 public:
  struct Node {
    std::uint32_t position;
    StackId parent;
    std::uint32_t depth;
  };

  explicit StackArena(const Grammar& grammar);

  void clear();
  // Empties the arena for another walk under `grammar`, keeping its memory (shrunk back when a big walk
  // grew it, so that a reset stays cheap): a thread's arena is reused from step to step.
  void reset(const Grammar& grammar);
  const Node& node(StackId id) const { return nodes_[static_cast<std::size_t>(id)]; }
  StackId intern(std::uint32_t position, StackId parent);

  // A node standing for "whatever is below": a stack built on it reports kEscaped when it returns into it.
  StackId escape_node();

  // Adds to `out` every stack that `position` (with `parent` below it) expands to: rule references opened,
  // finished alternatives returned from, until each stack's top is a character set (or the stack is empty).
  void expand(std::uint32_t position, StackId parent, std::vector<StackId>& out);
  // The stacks the grammar starts with.
  void initial(std::vector<StackId>& out);
  // The stacks after `from` (deduplicated) consume code point `cp`; `out` is cleared first.
  void advance(const std::vector<StackId>& from, char32_t cp, std::vector<StackId>& out);
  // Whether some stack of `set` accepts a code point in [lo, hi] (a UTF-8 sequence begun but not finished).
  bool accepts_some(const std::vector<StackId>& set, char32_t lo, char32_t hi) const;
  // Sorts and removes duplicates; throws GrammarLimitError past the limit on live stacks.
  void normalize(std::vector<StackId>& set) const;

  const Grammar& grammar() const { return *grammar_; }

 private:
  void grow();

  const Grammar* grammar_;
  std::vector<Node> nodes_;
  std::vector<StackId> table_;  // open addressing over (position, parent); -2 = free
  std::size_t mask_ = 0;
  StackId escape_node_ = -2;
  std::uint64_t steps_ = 0;  // expansion steps since the last clear, against max_match_steps
};

// Loads a state's stacks into the arena (deduplicated ids).
void load_stacks(const GrammarState& state, StackArena& arena, std::vector<StackId>& out);

}  // namespace loom::compute::grammar::detail
