// The GBNF reader: recursive descent over the text, lowering as it goes (grammar_builder.hpp holds the rules).
//
//   grammar     := (rule | blank line)*
//   rule        := name '::=' alternatives        (ends at the end of its line; a next line that starts
//                                                  with '|' continues it; inside ( ) newlines are spaces)
//   alternatives:= sequence ('|' sequence)*
//   sequence    := (item repeat*)*
//   item        := "literal" | [class] | [^class] | . | name | ( alternatives )
//   repeat      := * | + | ? | {m} | {m,} | {m,n}
#include <cstdint>
#include <string>
#include <string_view>

#include "grammar_builder.hpp"
#include "loom/compute/grammar/grammar.hpp"

namespace loom::compute::grammar {

namespace {

using Sequence = GrammarBuilder::Sequence;
using Place = GrammarBuilder::Place;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

std::string describe(char c) {
  if (c == '\n') return "end of line";
  const auto u = static_cast<unsigned char>(c);
  if (u < 0x20 || u >= 0x7F) {
    static const char* hex = "0123456789abcdef";
    return std::string("byte 0x") + hex[u >> 4] + hex[u & 15];
  }
  return std::string("'") + c + "'";
}

class GbnfParser {
 public:
  GbnfParser(std::string_view text, const GrammarLimits& limits) : text_(text), limits_(limits), builder_(text, limits) {}

  std::shared_ptr<const Grammar> parse() {
    if (text_.size() > limits_.max_text_bytes) {
      throw GrammarError(0, 0, "the grammar text has " + std::to_string(text_.size()) + " bytes, over the limit of " +
                                   std::to_string(limits_.max_text_bytes) + " (max_text_bytes)");
    }
    for (;;) {
      skip_space(true);
      if (at_end()) break;
      parse_rule();
    }
    return builder_.finish();
  }

 private:
  bool at_end() const { return pos_ >= text_.size(); }
  char peek(std::size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0'; }

  Place place_of(std::size_t offset) const { return Place{offset}; }
  std::string place_words(std::size_t offset) const { return builder_.place_words(Place{offset}); }
  [[noreturn]] void fail_at(std::size_t offset, const std::string& message) const { builder_.fail(Place{offset}, message); }
  std::string here_found() const { return at_end() ? "end of text" : describe(peek()); }

  // Spaces, tabs, comments; newlines too when `newlines` (inside groups and between rules).
  void skip_space(bool newlines) {
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    const std::size_t start = pos_;
    while (!at_end() && is_name_char(peek())) ++pos_;
    if (pos_ == start) fail_at(pos_, "expected a rule name, found " + here_found());
    return std::string(text_.substr(start, pos_ - start));
  }

  void parse_rule() {
    const std::size_t start = pos_;
    const std::string name = parse_name();
    skip_space(false);
    if (text_.substr(pos_, 3) != "::=") fail_at(pos_, "expected '::=' after the rule name '" + name + "', found " + here_found());
    pos_ += 3;
    skip_space(true);
    const std::uint32_t rule = builder_.rule_named(name, place_of(start));
    auto alternatives = parse_alternatives(rule, 0, false);
    if (!at_end() && peek() != '\n') {
      if (peek() == ')') fail_at(pos_, "unexpected ')' with no group open");
      fail_at(pos_, "unexpected " + here_found() + " in the definition of rule '" + name + "'");
    }
    builder_.define(rule, std::move(alternatives), place_of(start));
  }

  std::vector<Sequence> parse_alternatives(std::uint32_t owner, std::uint32_t depth, bool nested) {
    std::vector<Sequence> alternatives;
    alternatives.push_back(parse_sequence(owner, depth, nested));
    for (;;) {
      if (!nested && peek() == '\n') {
        // A following line that starts with '|' continues this rule.
        const std::size_t saved = pos_;
        skip_space(true);
        if (peek() != '|') {
          pos_ = saved;
          break;
        }
      }
      if (peek() != '|') break;
      ++pos_;
      skip_space(true);
      alternatives.push_back(parse_sequence(owner, depth, nested));
    }
    return alternatives;
  }

  Sequence parse_sequence(std::uint32_t owner, std::uint32_t depth, bool nested) {
    Sequence sequence;
    std::size_t item_start = 0;  // where the last item's elements begin in `sequence`
    bool have_item = false;
    for (;;) {
      skip_space(nested);
      if (at_end()) break;
      const char c = peek();
      const std::size_t start = pos_;
      if (c == '"') {
        item_start = sequence.size();
        parse_literal(sequence);
      } else if (c == '[') {
        item_start = sequence.size();
        parse_class(sequence);
      } else if (c == '.') {
        ++pos_;
        item_start = sequence.size();
        add_set(sequence, {{0, 0x10FFFF}}, false, start);
      } else if (c == '(') {
        if (depth + 1 > limits_.max_nesting) {
          fail_at(pos_, "groups nested more than " + std::to_string(limits_.max_nesting) + " deep (max_nesting)");
        }
        ++pos_;
        skip_space(true);
        auto alternatives = parse_alternatives(owner, depth + 1, true);
        skip_space(true);
        if (peek() != ')') {
          fail_at(pos_, "expected ')' to close the group opened at " + place_words(start) + ", found " + here_found());
        }
        ++pos_;
        item_start = sequence.size();
        const std::uint32_t rule = builder_.generated(owner, std::move(alternatives), place_of(start));
        builder_.count_elements(1, place_of(start));
        sequence.push_back(Element{ElementKind::rule_ref, rule});
      } else if (is_name_char(c)) {
        const std::string name = parse_name();
        item_start = sequence.size();
        builder_.count_elements(1, place_of(start));
        sequence.push_back(Element{ElementKind::rule_ref, builder_.rule_named(name, place_of(start))});
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (!have_item) fail_at(pos_, std::string("'") + c + "' must follow something to repeat");
        parse_repeat(owner, sequence, item_start);
        continue;  // have_item stays: a repetition can be repeated (and is refused if it can match nothing)
      } else {
        break;
      }
      have_item = true;
    }
    return sequence;
  }

  void add_set(Sequence& sequence, GrammarBuilder::Ranges ranges, bool negated, std::size_t where) {
    builder_.count_elements(1, place_of(where));
    sequence.push_back(Element{ElementKind::char_set, builder_.char_set(std::move(ranges), negated)});
  }

  std::uint32_t hex_digits(std::size_t count, std::size_t escape_start) {
    std::uint32_t value = 0;
    for (std::size_t i = 0; i < count; ++i) {
      const char h = peek();
      int digit = -1;
      if (h >= '0' && h <= '9') digit = h - '0';
      if (h >= 'a' && h <= 'f') digit = h - 'a' + 10;
      if (h >= 'A' && h <= 'F') digit = h - 'A' + 10;
      if (digit < 0) {
        fail_at(pos_, "expected " + std::to_string(count) + " hex digits in the escape at " + place_words(escape_start) +
                          ", found " + here_found());
      }
      value = value * 16 + static_cast<std::uint32_t>(digit);
      ++pos_;
    }
    return value;
  }

  // One character of a literal or class: an escape or a UTF-8 encoded code point.
  char32_t parse_char() {
    const std::size_t start = pos_;
    const auto lead = static_cast<unsigned char>(peek());
    if (lead == '\\') {
      ++pos_;
      const char e = peek();
      ++pos_;
      char32_t cp = 0;
      switch (e) {
        case 'n': return U'\n';
        case 't': return U'\t';
        case 'r': return U'\r';
        case '\\': case '"': case '\'': case '[': case ']': case '-': case '/': case '^': return static_cast<char32_t>(e);
        case 'x': cp = hex_digits(2, start); break;
        case 'u': cp = hex_digits(4, start); break;
        case 'U': cp = hex_digits(8, start); break;
        default:
          --pos_;
          fail_at(start, "unknown escape '\\" + std::string(at_end() ? "" : std::string(1, e)) +
                             "' (known: \\n \\t \\r \\\\ \\\" \\' \\[ \\] \\- \\/ \\^ \\xHH \\uHHHH \\UHHHHHHHH)");
      }
      if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
        fail_at(start, "the escape names " + std::string(cp > 0x10FFFF ? "no Unicode code point" : "a UTF-16 surrogate") +
                           " (valid: 0 to 0x10FFFF outside 0xD800-0xDFFF)");
      }
      return cp;
    }
    // UTF-8 from the text itself.
    int length = lead < 0x80 ? 1 : lead >= 0xC2 && lead <= 0xDF ? 2 : lead >= 0xE0 && lead <= 0xEF ? 3
                                 : lead >= 0xF0 && lead <= 0xF4 ? 4 : 0;
    if (length == 0) fail_at(start, "invalid UTF-8 in the grammar text");
    char32_t cp = length == 1 ? lead : lead & (0x7F >> length);
    for (int i = 1; i < length; ++i) {
      const auto b = static_cast<unsigned char>(peek(static_cast<std::size_t>(i)));
      if ((b & 0xC0) != 0x80) fail_at(start, "invalid UTF-8 in the grammar text");
      cp = (cp << 6) | (b & 0x3F);
    }
    const char32_t min = length == 2 ? 0x80 : length == 3 ? 0x800 : length == 4 ? 0x10000 : 0;
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) fail_at(start, "invalid UTF-8 in the grammar text");
    pos_ += static_cast<std::size_t>(length);
    return cp;
  }

  void parse_literal(Sequence& sequence) {
    const std::size_t open = pos_++;
    for (;;) {
      if (at_end() || peek() == '\n') {
        fail_at(pos_, "expected '\"' to close the string opened at " + place_words(open) + ", found " + here_found());
      }
      if (peek() == '"') break;
      const std::size_t at = pos_;
      const char32_t cp = parse_char();
      add_set(sequence, {{cp, cp}}, false, at);
    }
    ++pos_;
  }

  void parse_class(Sequence& sequence) {
    const std::size_t open = pos_++;
    bool negated = false;
    if (peek() == '^') {
      negated = true;
      ++pos_;
    }
    GrammarBuilder::Ranges ranges;
    for (;;) {
      if (at_end() || peek() == '\n') {
        fail_at(pos_, "expected ']' to close the character class opened at " + place_words(open) + ", found " +
                          here_found());
      }
      if (peek() == ']') break;
      const std::size_t at = pos_;
      const char32_t lo = parse_char();
      char32_t hi = lo;
      if (peek() == '-' && peek(1) != ']' && pos_ + 1 < text_.size()) {
        ++pos_;
        if (peek() == '\n') fail_at(pos_, "expected the end of the range begun at " + place_words(at));
        hi = parse_char();
        if (hi < lo) fail_at(at, "the range in the character class is reversed (its end is below its start)");
      }
      ranges.emplace_back(lo, hi);
    }
    if (ranges.empty()) fail_at(open, "empty character class (it would match nothing)");
    ++pos_;
    add_set(sequence, std::move(ranges), negated, open);
  }

  std::uint32_t parse_count(std::size_t brace) {
    if (peek() < '0' || peek() > '9') fail_at(pos_, "expected a number in the repetition opened at " + place_words(brace) + ", found " + here_found());
    const std::size_t start = pos_;
    std::uint64_t value = 0;
    while (peek() >= '0' && peek() <= '9') {
      value = value * 10 + static_cast<std::uint64_t>(peek() - '0');
      if (value > limits_.max_repetition) {
        while (peek() >= '0' && peek() <= '9') ++pos_;
        fail_at(start, "the repetition count " + std::string(text_.substr(start, pos_ - start)) + " is over the limit of " +
                           std::to_string(limits_.max_repetition) + " (max_repetition)");
      }
      ++pos_;
    }
    return static_cast<std::uint32_t>(value);
  }

  void parse_repeat(std::uint32_t owner, Sequence& sequence, std::size_t item_start) {
    const std::size_t start = pos_;
    const Place origin = place_of(start);
    const char op = peek();
    ++pos_;
    std::uint32_t min = 0;
    std::uint32_t max = 0;
    bool unbounded = false;
    if (op == '*') {
      unbounded = true;
    } else if (op == '+') {
      min = 1;
      unbounded = true;
    } else if (op == '?') {
      max = 1;
    } else {  // {m}, {m,}, {m,n}
      skip_space(false);
      min = max = parse_count(start);
      skip_space(false);
      if (peek() == ',') {
        ++pos_;
        skip_space(false);
        if (peek() == '}') {
          unbounded = true;
        } else {
          max = parse_count(start);
          if (max < min) fail_at(start, "the repetition's maximum " + std::to_string(max) + " is below its minimum " + std::to_string(min));
        }
        skip_space(false);
      }
      if (peek() != '}') fail_at(pos_, "expected '}' to close the repetition opened at " + place_words(start) + ", found " + here_found());
      ++pos_;
    }
    const Sequence item(sequence.begin() + static_cast<std::ptrdiff_t>(item_start), sequence.end());
    sequence.resize(item_start);
    // The item was counted once already; copies beyond the first are new elements.
    builder_.count_elements(static_cast<std::size_t>(min) * item.size() + item.size() + 2, origin);
    for (std::uint32_t i = 0; i < min; ++i) sequence.insert(sequence.end(), item.begin(), item.end());
    if (unbounded) {
      // star ::= item star | (nothing)
      const std::uint32_t star = builder_.generated(owner, {}, origin);
      Sequence loop = item;
      loop.push_back(Element{ElementKind::rule_ref, star});
      replace_alternatives(star, {std::move(loop), {}});
      sequence.push_back(Element{ElementKind::rule_ref, star});
      return;
    }
    // Up to (max - min) more, nested so that there is one way to match each count:
    // opt_1 ::= item | (nothing); opt_k ::= item opt_(k-1) | (nothing).
    std::uint32_t previous = 0;
    bool have_previous = false;
    for (std::uint32_t k = 0; k < max - min; ++k) {
      builder_.count_elements(item.size() + 1, origin);
      Sequence more = item;
      if (have_previous) more.push_back(Element{ElementKind::rule_ref, previous});
      previous = builder_.generated(owner, {std::move(more), {}}, origin);
      have_previous = true;
    }
    if (have_previous) sequence.push_back(Element{ElementKind::rule_ref, previous});
  }

  void replace_alternatives(std::uint32_t rule, std::vector<Sequence> alternatives) {
    builder_.redefine_generated(rule, std::move(alternatives));
  }

  std::string_view text_;
  const GrammarLimits& limits_;
  GrammarBuilder builder_;
  std::size_t pos_ = 0;
};

}  // namespace

std::shared_ptr<const Grammar> parse_gbnf(std::string_view text, const GrammarLimits& limits) {
  return GbnfParser(text, limits).parse();
}

}  // namespace loom::compute::grammar
