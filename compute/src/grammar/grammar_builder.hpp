// GrammarBuilder: collects rules (each a list of alternatives, each a list of elements without the end
// marker) and character sets while the parser reads, then checks the whole (every referenced rule defined,
// a root, no left recursion, the limits) and flattens it into a Grammar. Private to the grammar room.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "loom/compute/grammar/grammar.hpp"

namespace loom::compute::grammar {

class GrammarBuilder {
 public:
  using Sequence = std::vector<Element>;
  using Ranges = std::vector<std::pair<char32_t, char32_t>>;

  // A byte offset into the text; turned into a line and column only for an error message, so that
  // building stays linear in the text's size.
  struct Place {
    std::size_t offset = 0;
  };

  GrammarBuilder(std::string_view text, const GrammarLimits& limits) : text_(text), limits_(limits) {}

  // Throws GrammarError with the line and column of `where`.
  [[noreturn]] void fail(Place where, const std::string& message) const;
  // "line L, column C"
  std::string place_words(Place where) const;

  // The index of the named rule, created (undefined) at its first use.
  std::uint32_t rule_named(const std::string& name, Place used_at);
  // Gives a named rule its alternatives; throws GrammarError if it already has them.
  void define(std::uint32_t rule, std::vector<Sequence> alternatives, Place defined_at);
  // A new rule for a group or repetition inside `owner`, with its alternatives.
  std::uint32_t generated(std::uint32_t owner, std::vector<Sequence> alternatives, Place origin);
  // Sets the alternatives of a generated rule (one that refers to itself is created first, then filled).
  void redefine_generated(std::uint32_t rule, std::vector<Sequence> alternatives) {
    rules_[rule].alternatives = std::move(alternatives);
  }
  // The index of a character set made of `ranges` (any order, overlaps allowed), negated if asked.
  std::uint32_t char_set(Ranges ranges, bool negated);
  // Sorted, overlapping and adjacent ranges joined.
  static Ranges merged(Ranges ranges);

  // Counts elements as the parser creates them, so that {m,n} cannot allocate past the limit.
  void count_elements(std::size_t n, Place where);

  std::shared_ptr<const Grammar> finish();

 private:
  struct PendingRule {
    std::string name;
    std::vector<Sequence> alternatives;
    bool defined = false;
    Place defined_at;
    Place first_use;
    std::uint32_t generated_count = 0;
  };

  void check_rule_count(Place where) const;
  void check_left_recursion() const;

  std::string_view text_;
  const GrammarLimits& limits_;
  std::vector<PendingRule> rules_;
  std::unordered_map<std::string, std::uint32_t> by_name_;
  std::vector<CharSet> char_sets_;
  std::map<Ranges, std::uint32_t> set_index_;
  std::size_t element_count_ = 0;
};

}  // namespace loom::compute::grammar
