#include "loom/compute/grammar/grammar_state.hpp"

#include <algorithm>
#include <stdexcept>

#include "stack_arena.hpp"

namespace loom::compute::grammar {

namespace detail {

void load_stacks(const GrammarState& state, StackArena& arena, std::vector<StackId>& out) {
  out.clear();
  std::uint32_t begin = 0;
  for (const std::uint32_t end : state.ends()) {
    StackId id = kEmptyStack;
    for (std::uint32_t i = begin; i < end; ++i) id = arena.intern(state.positions()[i], id);
    out.push_back(id);
    begin = end;
  }
  arena.normalize(out);
}

namespace {

void store_stacks(const StackArena& arena, const std::vector<StackId>& set, std::vector<std::uint32_t>& positions,
                  std::vector<std::uint32_t>& ends) {
  // In a canonical order (by positions, bottom to top), not by arena id: ids depend on the order in which
  // a walk met the stacks, and the same set must give the same state however the bytes were split.
  thread_local std::vector<std::vector<std::uint32_t>> stacks;
  stacks.resize(set.size());
  for (std::size_t i = 0; i < set.size(); ++i) {
    stacks[i].clear();
    for (StackId id = set[i]; id != kEmptyStack; id = arena.node(id).parent) stacks[i].push_back(arena.node(id).position);
    std::reverse(stacks[i].begin(), stacks[i].end());
  }
  std::sort(stacks.begin(), stacks.end());
  positions.clear();
  ends.clear();
  for (const auto& stack : stacks) {
    positions.insert(positions.end(), stack.begin(), stack.end());
    ends.push_back(static_cast<std::uint32_t>(positions.size()));
  }
}

}  // namespace
}  // namespace detail

GrammarState::GrammarState(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  if (!grammar_) throw std::invalid_argument("GrammarState needs a grammar");
  detail::StackArena arena(*grammar_);
  std::vector<detail::StackId> set;
  arena.initial(set);
  detail::store_stacks(arena, set, positions_, ends_);
}

bool GrammarState::accept(std::string_view bytes) {
  if (bytes.empty()) return true;
  // Per-thread scratch, reset rather than made anew: accept() runs once per sampled token of every
  // constrained sequence, on the backend's step thread.
  thread_local detail::StackArena arena(*grammar_);
  thread_local std::vector<detail::StackId> set;
  thread_local std::vector<detail::StackId> next;
  arena.reset(*grammar_);
  detail::load_stacks(*this, arena, set);
  Utf8Decoder decoder = partial_;
  for (const char c : bytes) {
    switch (decoder.feed(static_cast<std::uint8_t>(c))) {
      case Utf8Decoder::Result::invalid:
        return false;
      case Utf8Decoder::Result::partial:
        if (!arena.accepts_some(set, decoder.range_lo(), decoder.range_hi())) return false;
        break;
      case Utf8Decoder::Result::complete:
        arena.advance(set, decoder.value, next);
        if (next.empty()) return false;
        set.swap(next);
        break;
    }
  }
  detail::store_stacks(arena, set, positions_, ends_);
  partial_ = decoder;
  return true;
}

bool GrammarState::can_accept(std::string_view bytes) const {
  GrammarState copy = *this;
  return copy.accept(bytes);
}

bool GrammarState::can_end() const noexcept {
  if (partial_.needed != 0) return false;
  std::uint32_t begin = 0;
  for (const std::uint32_t end : ends_) {
    if (end == begin) return true;
    begin = end;
  }
  return false;
}

bool GrammarState::can_continue() const noexcept {
  std::uint32_t begin = 0;
  for (const std::uint32_t end : ends_) {
    if (end != begin) return true;
    begin = end;
  }
  return false;
}

}  // namespace loom::compute::grammar
