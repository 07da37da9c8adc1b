#include "stack_arena.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

namespace loom::compute::grammar::detail {

namespace {

constexpr StackId kFree = -2;
// Expansion steps allowed for one advance: a grammar of nullable rules referring to each other can have
// exponentially many ways to expand; this turns that into an error instead of a hang.
constexpr std::size_t kMaxExpansionSteps = 1u << 20;

std::size_t hash_of(std::uint32_t position, StackId parent) {
  std::uint64_t h = (std::uint64_t{position} << 32) ^ static_cast<std::uint32_t>(parent);
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return static_cast<std::size_t>(h);
}

}  // namespace

StackArena::StackArena(const Grammar& grammar) : grammar_(&grammar) {
  table_.assign(1024, kFree);
  mask_ = table_.size() - 1;
  nodes_.reserve(512);
}

void StackArena::clear() {
  steps_ = 0;
  nodes_.clear();
  escape_node_ = kFree;
  std::fill(table_.begin(), table_.end(), kFree);
}

void StackArena::reset(const Grammar& grammar) {
  grammar_ = &grammar;
  steps_ = 0;
  if (table_.size() > 4096) {
    table_.assign(1024, kFree);
    table_.shrink_to_fit();
    mask_ = table_.size() - 1;
    nodes_.clear();
    nodes_.shrink_to_fit();
    nodes_.reserve(512);
    escape_node_ = kFree;
    return;
  }
  clear();
}

void StackArena::grow() {
  std::vector<StackId> bigger(table_.size() * 2, kFree);
  const std::size_t mask = bigger.size() - 1;
  for (std::size_t id = 0; id < nodes_.size(); ++id) {
    std::size_t slot = hash_of(nodes_[id].position, nodes_[id].parent) & mask;
    while (bigger[slot] != kFree) slot = (slot + 1) & mask;
    bigger[slot] = static_cast<StackId>(id);
  }
  table_ = std::move(bigger);
  mask_ = mask;
}

StackId StackArena::escape_node() {
  if (escape_node_ == kFree) escape_node_ = intern(UINT32_MAX, kEmptyStack);
  return escape_node_;
}

StackId StackArena::intern(std::uint32_t position, StackId parent) {
  std::size_t slot = hash_of(position, parent) & mask_;
  while (table_[slot] != kFree) {
    const Node& n = nodes_[static_cast<std::size_t>(table_[slot])];
    if (n.position == position && n.parent == parent) return table_[slot];
    slot = (slot + 1) & mask_;
  }
  const std::uint32_t depth = parent == kEmptyStack ? 1 : node(parent).depth + 1;
  if (depth > grammar_->limits().max_stack_depth) {
    throw GrammarLimitError("grammar stack deeper than " + std::to_string(grammar_->limits().max_stack_depth) +
                            " nested rules (max_stack_depth)");
  }
  const auto id = static_cast<StackId>(nodes_.size());
  nodes_.push_back(Node{position, parent, depth});
  table_[slot] = id;
  if (nodes_.size() * 2 > table_.size()) grow();
  return id;
}

void StackArena::expand(std::uint32_t position, StackId parent, std::vector<StackId>& out) {
  std::size_t steps = 0;
  // Explicit work list instead of recursion: (position, parent) pairs still to expand.
  struct Item {
    std::uint32_t position;
    StackId parent;
  };
  thread_local std::vector<Item> work;
  work.clear();
  work.push_back(Item{position, parent});
  const auto& elements = grammar_->elements();
  const std::uint64_t budget = grammar_->limits().max_match_steps;
  while (!work.empty()) {
    if (++steps > kMaxExpansionSteps) {
      throw GrammarLimitError("grammar expansion took more than " + std::to_string(kMaxExpansionSteps) +
                              " steps for one character (too many ways to match nothing)");
    }
    if (++steps_ > budget) {
      throw GrammarLimitError("grammar matching took more than " + std::to_string(budget) +
                              " expansion steps for one token or mask (max_match_steps)");
    }
    const Item item = work.back();
    work.pop_back();
    const Element& e = elements[item.position];
    switch (e.kind) {
      case ElementKind::end:
        if (item.parent == escape_node_ && item.parent >= 0) {
          out.push_back(kEscaped);
        } else if (item.parent == kEmptyStack) {
          out.push_back(kEmptyStack);
        } else {
          const Node& n = node(item.parent);
          work.push_back(Item{n.position, n.parent});
        }
        break;
      case ElementKind::char_set:
        out.push_back(intern(item.position, item.parent));
        break;
      case ElementKind::rule_ref: {
        const std::uint32_t next = item.position + 1;
        // A reference last in its alternative returns straight to our caller: no frame for it.
        const StackId below = elements[next].kind == ElementKind::end ? item.parent : intern(next, item.parent);
        const auto& alternatives = grammar_->rules()[e.value].alternatives;
        for (auto it = alternatives.rbegin(); it != alternatives.rend(); ++it) work.push_back(Item{*it, below});
        break;
      }
    }
  }
}

void StackArena::initial(std::vector<StackId>& out) {
  out.clear();
  for (const std::uint32_t alt : grammar_->rules()[grammar_->root()].alternatives) expand(alt, kEmptyStack, out);
  normalize(out);
}

void StackArena::advance(const std::vector<StackId>& from, char32_t cp, std::vector<StackId>& out) {
  out.clear();
  for (const StackId s : from) {
    if (s < 0) continue;
    const Node n = node(s);
    if (grammar_->char_set_at(n.position).contains(cp)) expand(n.position + 1, n.parent, out);
  }
  normalize(out);
}

bool StackArena::accepts_some(const std::vector<StackId>& set, char32_t lo, char32_t hi) const {
  for (const StackId s : set) {
    if (s >= 0 && grammar_->char_set_at(node(s).position).intersects(lo, hi)) return true;
  }
  return false;
}

void StackArena::normalize(std::vector<StackId>& set) const {
  std::sort(set.begin(), set.end());
  set.erase(std::unique(set.begin(), set.end()), set.end());
  if (set.size() > grammar_->limits().max_stacks) {
    throw GrammarLimitError("grammar has more than " + std::to_string(grammar_->limits().max_stacks) +
                            " live alternatives at once (max_stacks)");
  }
}

}  // namespace loom::compute::grammar::detail

namespace loom::compute::grammar {

Utf8Decoder::Result Utf8Decoder::feed(std::uint8_t byte) {
  if (needed == 0) {
    lower = 0x80;
    upper = 0xBF;
    if (byte < 0x80) {
      value = byte;
      return Result::complete;
    }
    if (byte >= 0xC2 && byte <= 0xDF) {
      value = byte & 0x1F;
      needed = 1;
    } else if (byte >= 0xE0 && byte <= 0xEF) {
      value = byte & 0x0F;
      needed = 2;
      if (byte == 0xE0) lower = 0xA0;  // no overlongs
      if (byte == 0xED) upper = 0x9F;  // no surrogates
    } else if (byte >= 0xF0 && byte <= 0xF4) {
      value = byte & 0x07;
      needed = 3;
      if (byte == 0xF0) lower = 0x90;
      if (byte == 0xF4) upper = 0x8F;  // nothing past U+10FFFF
    } else {
      return Result::invalid;
    }
    return Result::partial;
  }
  if (byte < lower || byte > upper) return Result::invalid;
  lower = 0x80;
  upper = 0xBF;
  value = (value << 6) | (byte & 0x3F);
  return --needed == 0 ? Result::complete : Result::partial;
}

}  // namespace loom::compute::grammar
