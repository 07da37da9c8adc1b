// Grammar: a GBNF grammar compiled into the flat form the constraint engine runs on. parse_gbnf() reads the
// text (rules `name ::= ...`, alternatives, groups, `?` `*` `+` `{m,n}`, string literals, character classes,
// `.`, comments) and lowers it: every group and repetition becomes a generated rule, every literal a run of
// one-code-point character sets, so that the compiled form has only three kinds of element: a character set
// that matches one code point, a reference to a rule, and the end of an alternative. The result is immutable
// and shared (std::shared_ptr<const Grammar>) by every sequence that decodes under it; a sequence's progress
// lives in a GrammarState (grammar_state.hpp).
//
// Everything a client controls is bounded (GrammarLimits): the text's size, the number of rules and elements
// after repetitions are expanded, repetition counts, nesting depth, and at run time the number and depth of
// live stacks and the work of one accept or one mask. A grammar over a limit is refused with a GrammarError
// naming the limit (at run time, GrammarLimitError); a grammar whose recognizer would not terminate (left
// recursion, a repetition of something that can match nothing) is refused at parse time, never found out
// while decoding.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace loom::compute::grammar {

// A grammar that cannot be compiled. line and column are 1-based (column counts bytes); both 0 when the
// error has no place in the text (a limit on the whole grammar, a missing root). what() starts with the
// place: "line 3, column 14: expected ')' to close the group opened at line 3, column 5".
class GrammarError : public std::invalid_argument {
 public:
  GrammarError(int line, int column, const std::string& message);
  int line() const noexcept { return line_; }
  int column() const noexcept { return column_; }
  // The message without the place.
  const std::string& message() const noexcept { return message_; }

 private:
  int line_;
  int column_;
  std::string message_;
};

// A run-time bound exceeded while matching (too many live stacks, a stack too deep): the sequence cannot go
// on under its grammar. Distinct from a rejected token, which is a plain `false`.
class GrammarLimitError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct GrammarLimits {
  std::size_t max_text_bytes = 256 * 1024;
  std::size_t max_rules = 4096;         // after groups and repetitions became rules of their own
  std::size_t max_elements = 200'000;   // after {m,n} were expanded
  std::uint32_t max_repetition = 1000;  // m and n of {m,n}
  std::uint32_t max_nesting = 64;       // groups within groups
  std::size_t max_stacks = 4096;        // live alternative stacks of one state
  std::uint32_t max_stack_depth = 1024; // nested rules open at once (e.g. "((((..." in a recursive grammar)
  // Expansion steps in one accept() or one mask (a whole trie walk on 151,936 tokens under a JSON grammar
  // takes under 250,000): about half a second at worst.
  std::uint64_t max_match_steps = std::uint64_t{1} << 22;
};

enum class ElementKind : std::uint8_t {
  end,        // end of an alternative: return to the rule that referred to this one
  rule_ref,   // value: index of the rule
  char_set,   // value: index of the CharSet; matches one code point
};

struct Element {
  ElementKind kind;
  std::uint32_t value;
};

// A set of code points: sorted, disjoint, non-adjacent ranges (negation already applied), with a bitmap for
// ASCII so that the common case is one bit test.
struct CharSet {
  std::vector<std::pair<char32_t, char32_t>> ranges;
  std::array<std::uint64_t, 2> ascii{};

  bool contains(char32_t cp) const noexcept {
    if (cp < 128) return (ascii[cp >> 6] >> (cp & 63)) & 1u;
    return contains_slow(cp);
  }
  // Whether some code point in [lo, hi] is in the set.
  bool intersects(char32_t lo, char32_t hi) const noexcept;
  bool contains_slow(char32_t cp) const noexcept;
};

struct Rule {
  std::string name;                        // generated rules: "<rule>#<n>"
  std::vector<std::uint32_t> alternatives; // index of each alternative's first element
  bool generated = false;                  // made for a group or repetition, not named in the text
};

class Grammar {
 public:
  const std::vector<Element>& elements() const noexcept { return elements_; }
  const std::vector<Rule>& rules() const noexcept { return rules_; }
  const std::vector<CharSet>& char_sets() const noexcept { return char_sets_; }
  std::uint32_t root() const noexcept { return root_; }
  const GrammarLimits& limits() const noexcept { return limits_; }
  const CharSet& char_set_at(std::uint32_t position) const noexcept {
    return char_sets_[elements_[position].value];
  }
  // The rule whose alternative holds the element at `position`.
  std::uint32_t rule_at(std::uint32_t position) const noexcept { return rule_of_element_[position]; }

 private:
  friend class GrammarBuilder;
  std::vector<Element> elements_;
  std::vector<Rule> rules_;
  std::vector<CharSet> char_sets_;
  std::vector<std::uint32_t> rule_of_element_;
  std::uint32_t root_ = 0;
  GrammarLimits limits_;
};

// Parses and compiles GBNF text; `root` is the start rule. Throws GrammarError (syntax, an undefined or
// twice-defined rule, no root, left recursion, a limit exceeded).
std::shared_ptr<const Grammar> parse_gbnf(std::string_view text, const GrammarLimits& limits = {});

// `text` as a GBNF string literal (quotes included), escaped as parse_gbnf() reads it back: for grammars
// written in code (the JSON Schema converter, the tool-call grammar).
std::string gbnf_literal(std::string_view text);

}  // namespace loom::compute::grammar
