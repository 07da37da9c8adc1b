// HeldSequences: what a backend keeps for each sequence between steps, so that a step carries only what
// changed (backend.hpp's StepSequence): the block table, the tokens at every position computed so far (the
// history the penalties read) and the sampling parameters. Every backend (and every test double of one)
// follows its sequences through one of these, so the rules of a step's changes are written once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "loom/compute/backend.hpp"

namespace loom::compute {

class HeldSequences {
 public:
  struct Sequence {
    std::vector<BlockId> table;         // covers every position computed (and the step's, once applied)
    std::vector<std::int32_t> tokens;   // at positions 0, 1, ...: the prefix, then every step's tokens
    proto::SamplingParams params;
  };

  // Throws std::invalid_argument naming the sequence when `step` does not follow from what is held: a
  // sequence not held without a begin, a begin whose prefix is not `start` tokens, a start other than the
  // positions held, a table_from beyond the held table, or a table that would not cover start +
  // tokens.size() positions of `block_size` slots. The new block ids are the caller's to check against its
  // pool (only step.blocks are new). Changes nothing.
  void check(const StepSequence& step, std::int64_t block_size) const;
  // Applies a checked step: a begin starts the sequence afresh, then the table change, then the tokens.
  const Sequence& apply(const StepSequence& step);

  // A sequence forked from `parent` after its step: its table and history, and the fork's parameters.
  // Throws std::invalid_argument when the parent is not held or the fork's id is.
  void fork(SequenceId parent, const SequenceFork& fork);

  const Sequence* find(SequenceId id) const;
  void release(SequenceId id) { held_.erase(id); }
  std::size_t size() const noexcept { return held_.size(); }

 private:
  std::unordered_map<SequenceId, Sequence> held_;
};

}  // namespace loom::compute
