#include "loom/compute/held_sequences.hpp"

#include <stdexcept>
#include <string>

namespace loom::compute {

namespace {

[[noreturn]] void refuse(SequenceId id, const std::string& why) {
  throw std::invalid_argument("sequence " + std::to_string(id) + " " + why);
}

}  // namespace

std::size_t payload_bytes(const StepBatch& batch) noexcept {
  std::size_t bytes = batch.copies.size() * sizeof(BlockCopy);
  for (const StepSequence& s : batch.sequences) {
    bytes += sizeof(s) + s.tokens.size() * sizeof(std::int32_t) + s.blocks.size() * sizeof(BlockId);
    bytes += s.forks.size() * sizeof(SequenceFork);  // the bytes their parameters point to are not counted
    if (!s.begin) continue;
    bytes += s.begin->prefix.size() * sizeof(std::int32_t);
    for (const auto& stop : s.begin->params.stop) bytes += stop.size();
    bytes += s.begin->params.stop_token_ids.size() * sizeof(std::int32_t);
    bytes += s.begin->params.logit_bias.size() * (sizeof(std::int32_t) + sizeof(double));
    if (s.begin->params.constraint) bytes += s.begin->params.constraint->text.size();
  }
  return bytes;
}

void HeldSequences::check(const StepSequence& step, std::int64_t block_size) const {
  const Sequence* held = find(step.sequence);
  std::int64_t table_size = 0;  // a start replaces the table whole
  if (step.begin) {
    const auto prefix = static_cast<std::int64_t>(step.begin->prefix.size());
    if (prefix != step.start) {
      refuse(step.sequence, "starts at position " + std::to_string(step.start) + " with a prefix of " +
                                std::to_string(prefix) + " tokens");
    }
  } else if (held == nullptr) {
    refuse(step.sequence, "is not held by the backend: its first step must start it");
  } else {
    const auto positions = static_cast<std::int64_t>(held->tokens.size());
    if (step.start != positions) {
      refuse(step.sequence, "continues at position " + std::to_string(step.start) + " but " +
                                std::to_string(positions) + " positions are computed");
    }
    table_size = static_cast<std::int64_t>(held->table.size());
  }
  if (step.table_from < 0 || step.table_from > table_size) {
    refuse(step.sequence, "changes its block table from entry " + std::to_string(step.table_from) + " of " +
                              std::to_string(table_size));
  }
  const std::int64_t blocks = step.table_from + static_cast<std::int64_t>(step.blocks.size());
  const std::int64_t needed = step.start + static_cast<std::int64_t>(step.tokens.size());
  if (blocks * block_size < needed) {
    refuse(step.sequence, "has a block table of " + std::to_string(blocks) + " blocks for " + std::to_string(needed) +
                              " positions");
  }
}

const HeldSequences::Sequence& HeldSequences::apply(const StepSequence& step) {
  Sequence& held = held_[step.sequence];
  if (step.begin) {
    held.params = step.begin->params;
    held.tokens = step.begin->prefix;
    held.table.clear();
  }
  held.table.resize(static_cast<std::size_t>(step.table_from));
  held.table.insert(held.table.end(), step.blocks.begin(), step.blocks.end());
  held.tokens.insert(held.tokens.end(), step.tokens.begin(), step.tokens.end());
  return held;
}

void HeldSequences::fork(SequenceId parent, const SequenceFork& fork) {
  const Sequence* from = find(parent);
  if (from == nullptr) refuse(parent, "is not held by the backend: nothing to fork");
  if (find(fork.sequence) != nullptr) refuse(fork.sequence, "is already held: a fork needs a new id");
  Sequence copy = *from;
  copy.params = fork.params;
  held_.emplace(fork.sequence, std::move(copy));
}

const HeldSequences::Sequence* HeldSequences::find(SequenceId id) const {
  const auto it = held_.find(id);
  return it == held_.end() ? nullptr : &it->second;
}

}  // namespace loom::compute
