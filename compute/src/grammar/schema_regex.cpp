// `pattern` to GBNF. JSON Schema validators in practice (Python's jsonschema among them) run a pattern with
// re.search(): unanchored, so that without '^' any characters may come before a match and without '$' any
// after. The grammar says exactly that ("char* R char*"); with both anchors the string is the match.
//
// The subset: literals, escapes (\t \n \r \f \v \a \xHH \uHHHH \UHHHHHHHH, escaped punctuation), '.', classes
// with ranges and negation, \d \w \s \D \W \S, groups ( ) (?: ) (?P<n> ) (?<n> ), alternation, the greedy
// quantifiers ? * + {m} {m,} {,n} {m,n}, '^' first and '$' last. Everything else (lookaround,
// backreferences, lazy or possessive quantifiers, \b, inline flags, anchors elsewhere) is refused, naming it.
//
// The grammar never accepts a string the pattern (under Python's Unicode rules) would refuse: where Python's
// class is wider than ASCII (\d, \w are Unicode), the grammar takes the ASCII part; where its complement is
// asked for (\D, \W, [^\d]), the grammar leaves out everything Python might count in the class.
#include <string>

#include "schema_internal.hpp"

namespace loom::compute::grammar::schema {

namespace {

struct Node {
  enum class Kind { empty, set, seq, alt, repeat } kind = Kind::empty;
  Ranges set;
  std::vector<Node> kids;
  std::uint32_t min = 0;
  std::uint32_t max = 0;
  bool unbounded = false;
};

std::string escaped_words(const char* words, char32_t letter) {
  std::string out = words;
  out += " \\";
  out += static_cast<char>(letter);
  return out;
}

Node make(Node::Kind kind) {
  Node n;
  n.kind = kind;
  return n;
}

// A class item: the characters it surely matches (inner) and those it might (outer), which differ only for
// Python's Unicode-wide \d and \w; a class takes the inners, a negated class the complement of the outers.
struct ClassItem {
  Ranges inner;
  Ranges outer;
};

const Ranges kDigit = {{'0', '9'}};
const Ranges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
// str.isspace(), which Python's \s follows.
const Ranges kSpace = {{0x09, 0x0D}, {0x1C, 0x20}, {0x85, 0x85}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A},
                       {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}};

Ranges join(Ranges a, const Ranges& b) {
  a.insert(a.end(), b.begin(), b.end());
  return normalize(std::move(a));
}

class RegexParser {
 public:
  RegexParser(std::u32string text, const SchemaLimits& limits, const Where& where)
      : text_(std::move(text)), limits_(limits), where_(where) {}

  Node parse(bool& anchored_start, bool& anchored_end) {
    anchored_start = peek() == U'^';
    if (anchored_start) ++pos_;
    Node node = alternation(0);
    if (pos_ < text_.size()) fail("unbalanced ')'");
    anchored_end = anchored_end_;
    return node;
  }

 private:
  char32_t peek(std::size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : 0; }
  bool at_end() const { return pos_ >= text_.size(); }
  [[noreturn]] void fail(const std::string& what) const {
    where_.fail(what + " (at character " + std::to_string(pos_ + 1) + " of the pattern)");
  }

  Node alternation(std::uint32_t depth) {
    Node alt = make(Node::Kind::alt);
    alt.kids.push_back(sequence(depth));
    while (peek() == U'|' && !at_end()) {
      ++pos_;
      alt.kids.push_back(sequence(depth));
    }
    return alt.kids.size() == 1 ? std::move(alt.kids[0]) : alt;
  }

  Node sequence(std::uint32_t depth) {
    Node seq = make(Node::Kind::seq);
    while (!at_end() && peek() != U'|' && peek() != U')') {
      if (peek() == U'$') {
        if (pos_ + 1 != text_.size() || depth != 0) fail("'$' is supported only at the end of the pattern");
        anchored_end_ = true;
        ++pos_;
        break;
      }
      Node item = atom(depth);
      seq.kids.push_back(quantified(std::move(item)));
    }
    return seq.kids.size() == 1 ? std::move(seq.kids[0]) : seq;
  }

  Node atom(std::uint32_t depth) {
    const char32_t c = peek();
    if (c == U'(') return group(depth);
    if (c == U'[') return char_class();
    if (c == U'^') fail("'^' is supported only at the start of the pattern");
    if (c == U'*' || c == U'+' || c == U'?' || (c == U'{' && quantifier_ahead())) fail("nothing to repeat");
    ++pos_;
    if (c == U'.') return set_node(complement({{U'\n', U'\n'}}));
    if (c == U'\\') return set_node(escape(false).inner);
    return set_node({{c, c}});
  }

  static Node set_node(Ranges set) {
    Node n = make(Node::Kind::set);
    n.set = std::move(set);
    return n;
  }

  Node group(std::uint32_t depth) {
    if (depth + 1 > limits_.max_depth) fail("groups nested more than " + std::to_string(limits_.max_depth) + " deep (max_depth)");
    ++pos_;
    if (peek() == U'?') {
      const char32_t k = peek(1);
      if (k == U':') {
        pos_ += 2;
      } else if (k == U'=' || k == U'!' || (k == U'<' && (peek(2) == U'=' || peek(2) == U'!'))) {
        fail("lookaround assertions are not supported");
      } else if (k == U'P' || k == U'<') {  // a named group: a group like any other here
        pos_ += k == U'P' ? 2 : 1;
        if (peek() != U'<') fail("unsupported group syntax after '(?P'");
        while (!at_end() && peek() != U'>') ++pos_;
        if (at_end()) fail("unterminated group name");
        ++pos_;
      } else {
        fail("unsupported group syntax '(?' (inline flags, conditionals, atomic groups)");
      }
    }
    Node inner = alternation(depth + 1);
    if (peek() != U')' || at_end()) fail("missing ')'");
    ++pos_;
    return inner;
  }

  // Whether a `{` at pos_ starts a quantifier ({m} {m,} {,n} {m,n}); otherwise Python takes it literally.
  bool quantifier_ahead() const {
    std::size_t i = pos_ + 1;
    bool digits_before = false;
    while (i < text_.size() && text_[i] >= U'0' && text_[i] <= U'9') ++i, digits_before = true;
    if (i < text_.size() && text_[i] == U'}') return digits_before;
    if (i >= text_.size() || text_[i] != U',') return false;
    ++i;
    while (i < text_.size() && text_[i] >= U'0' && text_[i] <= U'9') ++i;
    return i < text_.size() && text_[i] == U'}';
  }

  std::uint32_t count() {
    std::uint64_t value = 0;
    while (peek() >= U'0' && peek() <= U'9' && !at_end()) {
      value = value * 10 + (peek() - U'0');
      if (value > limits_.max_repetition) {
        fail("a repetition count is over " + std::to_string(limits_.max_repetition) + " (max_repetition)");
      }
      ++pos_;
    }
    return static_cast<std::uint32_t>(value);
  }

  Node quantified(Node item) {
    const char32_t c = peek();
    Node rep = make(Node::Kind::repeat);
    if (c == U'*' || c == U'+' || c == U'?') {
      ++pos_;
      rep.min = c == U'+' ? 1 : 0;
      rep.max = 1;
      rep.unbounded = c != U'?';
    } else if (c == U'{' && quantifier_ahead()) {
      ++pos_;
      const bool has_min = peek() != U',';
      rep.min = has_min ? count() : 0;
      rep.max = rep.min;
      if (peek() == U',') {
        ++pos_;
        rep.unbounded = peek() == U'}';
        if (!rep.unbounded) rep.max = count();
      }
      ++pos_;  // '}'
      if (rep.max < rep.min && !rep.unbounded) fail("a repetition's maximum is below its minimum");
    } else {
      return item;
    }
    if (peek() == U'?' && !at_end()) fail("lazy quantifiers are not supported");
    if (peek() == U'+' && !at_end()) fail("possessive quantifiers are not supported");
    if ((peek() == U'*' || (peek() == U'{' && quantifier_ahead())) && !at_end()) fail("multiple repeat");
    rep.kids.push_back(std::move(item));
    return rep;
  }

  std::uint32_t hex_escape(int digits) {
    std::uint32_t value = 0;
    for (int i = 0; i < digits; ++i) {
      const char32_t h = peek();
      int d = h >= U'0' && h <= U'9' ? int(h - U'0') : h >= U'a' && h <= U'f' ? int(h - U'a' + 10) : h >= U'A' && h <= U'F' ? int(h - U'A' + 10) : -1;
      if (d < 0 || at_end()) fail("expected " + std::to_string(digits) + " hex digits in an escape");
      value = value * 16 + static_cast<std::uint32_t>(d);
      ++pos_;
    }
    if (value > 0x10FFFF) fail("an escape names no Unicode code point");
    return value;
  }

  // After a backslash (pos_ at the escaped character). In a class \b is a backspace.
  ClassItem escape(bool in_class) {
    if (at_end()) fail("a pattern cannot end with '\\'");
    const char32_t e = peek();
    ++pos_;
    auto exact = [](Ranges r) { return ClassItem{r, r}; };
    auto one = [&](char32_t cp) { return exact({{cp, cp}}); };
    switch (e) {
      case U'd': return {kDigit, join(kDigit, {{0x0660, 0x10FFFF}})};
      case U'D': return {normalize({{0, '0' - 1}, {'9' + 1, 0x065F}}), complement(kDigit)};
      case U'w': return {kWord, join(kWord, {{0x80, 0x10FFFF}})};
      case U'W': return {complement(join(kWord, {{0x80, 0x10FFFF}})), complement(kWord)};
      case U's': return exact(kSpace);
      case U'S': return exact(complement(kSpace));
      case U'n': return one(U'\n');
      case U't': return one(U'\t');
      case U'r': return one(U'\r');
      case U'f': return one(U'\f');
      case U'v': return one(U'\v');
      case U'a': return one(7);
      case U'x': return one(hex_escape(2));
      case U'u': return one(hex_escape(4));
      case U'U': return one(hex_escape(8));
      case U'b':
        if (in_class) return one(8);
        fail("word boundaries (\\b) are not supported");
      default: break;
    }
    if (e >= U'0' && e <= U'9') fail("backreferences and octal escapes are not supported");
    if (e == U'B' || e == U'A' || e == U'Z' || e == U'z' || e == U'G') fail(escaped_words("the assertion", e) + " is not supported");
    if ((e >= U'a' && e <= U'z') || (e >= U'A' && e <= U'Z')) fail(escaped_words("unknown escape", e));
    return one(e);
  }

  Node char_class() {
    ++pos_;
    const bool negated = peek() == U'^';
    if (negated) ++pos_;
    Ranges inner;
    Ranges outer;
    for (bool first = true;; first = false) {
      if (at_end()) fail("missing ']'");
      if (peek() == U']' && !first) break;
      const ClassItem lo = class_atom();
      if (peek() == U'-' && peek(1) != U']' && pos_ + 1 < text_.size()) {
        const bool lo_single = lo.inner.size() == 1 && lo.inner[0].first == lo.inner[0].second && lo.inner == lo.outer;
        ++pos_;
        const ClassItem hi = class_atom();
        const bool hi_single = hi.inner.size() == 1 && hi.inner[0].first == hi.inner[0].second && hi.inner == hi.outer;
        if (!lo_single || !hi_single) fail("a class range must be between two characters");
        if (hi.inner[0].first < lo.inner[0].first) fail("a class range is reversed");
        inner.emplace_back(lo.inner[0].first, hi.inner[0].first);
        outer.emplace_back(lo.inner[0].first, hi.inner[0].first);
        continue;
      }
      inner.insert(inner.end(), lo.inner.begin(), lo.inner.end());
      outer.insert(outer.end(), lo.outer.begin(), lo.outer.end());
    }
    ++pos_;
    return set_node(negated ? complement(outer) : normalize(inner));
  }

  ClassItem class_atom() {
    const char32_t c = peek();
    ++pos_;
    if (c == U'\\') return escape(true);
    if (c == U'[' && (peek() == U':' || peek() == U'=' || peek() == U'.')) fail("POSIX classes ([:name:]) are not supported");
    return {{{c, c}}, {{c, c}}};
  }

  std::u32string text_;
  const SchemaLimits& limits_;
  const Where& where_;
  std::size_t pos_ = 0;
  bool anchored_end_ = false;
};

bool nullable(const Node& n) {
  switch (n.kind) {
    case Node::Kind::empty: return true;
    case Node::Kind::set: return false;
    case Node::Kind::seq:
      for (const Node& k : n.kids) {
        if (!nullable(k)) return false;
      }
      return true;
    case Node::Kind::alt:
      for (const Node& k : n.kids) {
        if (nullable(k)) return true;
      }
      return false;
    case Node::Kind::repeat: return n.min == 0 || nullable(n.kids[0]);
  }
  return true;
}

// For an unbounded repetition of a nullable X: non-nullable pieces G with X* = G* (a repetition of something
// that can match nothing is left-recursive in GBNF). Each piece is itself in X, and each word of X is a
// concatenation of pieces.
void generators(const Node& n, std::vector<Node>& out) {
  if (!nullable(n)) {
    out.push_back(n);
    return;
  }
  if (n.kind == Node::Kind::repeat && !nullable(n.kids[0])) {
    out.push_back(n.kids[0]);  // (Y{0,b})* = Y*
    return;
  }
  for (const Node& k : n.kids) generators(k, out);  // empty: none; seq, alt, nullable repeat: their parts
}

std::string quantifier(std::uint32_t min, bool unbounded, std::uint32_t max) {
  if (unbounded && min <= 1) return min == 0 ? "*" : "+";
  if (!unbounded && min == 0 && max == 1) return "?";
  std::string q = "{";
  q += std::to_string(min);
  if (unbounded || max != min) q += ',';
  if (!unbounded && max != min) q += std::to_string(max);
  q += '}';
  return q;
}

struct Emitted {
  std::string text;
  bool single = true;  // one GBNF element (may be repeated as is)
};

class Emitter {
 public:
  Emitter(GbnfWriter& out, const Where& where) : out_(out), where_(where) {}

  Emitted emit(const Node& n) {
    switch (n.kind) {
      case Node::Kind::empty: return {"", false};
      case Node::Kind::set: return set(n.set);
      case Node::Kind::seq: return seq(n.kids);
      case Node::Kind::alt: return alt(n.kids);
      case Node::Kind::repeat: return repeat(n);
    }
    return {};
  }

 private:
  Emitted set(const Ranges& set) {
    std::string item = json_char_item(set);
    if (item.empty()) where_.fail("a character class in the pattern matches no character");
    const bool single = item[0] == '[' || item[0] == '(';  // an escape literal is two elements
    return {std::move(item), single};
  }

  // Runs of plain characters become one literal, for a shorter grammar.
  Emitted seq(const std::vector<Node>& kids) {
    std::string text;
    std::string run;
    std::size_t items = 0;
    auto flush = [&] {
      if (run.empty()) return;
      if (!text.empty()) text += ' ';
      text += gbnf_literal(run);
      items += run.size() == 1 ? 1 : 2;
      run.clear();
    };
    for (const Node& k : kids) {
      if (k.kind == Node::Kind::set && k.set.size() == 1 && k.set[0].first == k.set[0].second && k.set[0].first >= 0x20 &&
          k.set[0].first != U'"' && k.set[0].first != U'\\' && !(k.set[0].first >= 0xD800 && k.set[0].first <= 0xDFFF)) {
        run += encode_utf8(k.set[0].first);
        continue;
      }
      flush();
      Emitted e = emit(k);
      if (e.text.empty()) continue;
      if (!text.empty()) text += ' ';
      text += e.text;
      items += e.single ? 1 : 2;
    }
    flush();
    return {text, items == 1};
  }

  Emitted alt(const std::vector<Node>& kids) {
    std::string text = "(";
    bool optional = false;
    bool first = true;
    for (const Node& k : kids) {
      Emitted e = emit(k);
      if (e.text.empty()) {  // an empty branch: the whole is optional
        optional = true;
        continue;
      }
      text += (first ? "" : " | ") + e.text;
      first = false;
    }
    if (first) return {"", false};
    return {text + ")" + (optional ? "?" : ""), true};
  }

  Emitted repeat(const Node& n) {
    if (!n.unbounded && n.max == 0) return {"", false};
    Node item = n.kids[0];
    std::uint32_t min = n.min;
    if (n.unbounded && nullable(item)) {
      std::vector<Node> pieces;
      generators(item, pieces);
      if (pieces.empty()) return {"", false};
      item = make(Node::Kind::alt);
      item.kids = std::move(pieces);
      min = 0;
    }
    Emitted e = emit(item);
    if (e.text.empty()) return {"", false};
    if (!e.single) {
      e.text.insert(e.text.begin(), '(');
      e.text.push_back(')');
    }
    if (!n.unbounded && min == 1 && n.max == 1) return e;
    e.text += quantifier(min, n.unbounded, n.max);
    return {e.text, false};
  }

  GbnfWriter& out_;
  const Where& where_;
};

}  // namespace

std::string pattern_gbnf(std::string_view pattern, GbnfWriter& out, const Where& where) {
  if (pattern.size() > out.limits().max_pattern_bytes) {
    where.fail("the pattern has " + std::to_string(pattern.size()) + " bytes, over " +
               std::to_string(out.limits().max_pattern_bytes) + " (max_pattern_bytes)");
  }
  auto text = decode_utf8(pattern);
  if (!text) where.fail("the pattern is not valid UTF-8");
  bool anchored_start = false;
  bool anchored_end = false;
  const Node node = RegexParser(std::move(*text), out.limits(), where).parse(anchored_start, anchored_end);
  const std::string body = Emitter(out, where).emit(node).text;
  const std::string& any = out.primitive("char", where);
  std::string seq = anchored_start ? "" : any + "*";
  if (!body.empty()) seq += (seq.empty() ? "" : " ") + body;
  if (!anchored_end) seq += (seq.empty() ? "" : " ") + any + "*";
  return seq;
}

}  // namespace loom::compute::grammar::schema
