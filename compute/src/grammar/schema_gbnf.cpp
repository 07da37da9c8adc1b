// The JSON Schema converter's GBNF writer (rule names, the shared primitive rules, what a body will cost
// parse_gbnf()) and the GBNF spellings of JSON-string characters.
#include <algorithm>
#include <cstdio>

#include "grammar_builder.hpp"
#include "schema_internal.hpp"
#include "../text/unicode_text.hpp"

namespace loom::compute::grammar::schema {

namespace {

struct Primitive {
  const char* name;
  const char* body;
  std::vector<const char*> needs;
};

// The shared rules, each defined once and only when used. `char` is one character of a JSON string: raw
// (anything from U+0020 but '"' and '\'), or an escape; \u escapes of UTF-16 surrogates are left out, so that
// every `char` is exactly one code point (minLength/maxLength count code points) and no lone surrogate is
// ever written. Whitespace is at most one space after ':' and ','.
const std::vector<Primitive>& primitives() {
  static const std::vector<Primitive> table = {
      {"ws", R"(" "?)", {}},
      {"char",
       R"([^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" ([0-9a-cA-CefEF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2})))",
       {}},
      {"string", R"("\"" char* "\"")", {"char"}},
      {"string-tail", R"(char* "\"")", {"char"}},
      {"integer", R"("-"? ("0" | [1-9] [0-9]*))", {}},
      {"number", R"("-"? ("0" | [1-9] [0-9]*) ("." [0-9]+)? ([eE] [-+]? [0-9]+)?)", {}},
      {"boolean", R"("true" | "false")", {}},
      {"null", R"("null")", {}},
      {"value", "object | array | string | number | boolean | null",
       {"object", "array", "string", "number", "boolean", "null"}},
      {"member", R"(string ":" ws value)", {"string", "ws", "value"}},
      {"object", R"("{" (member ("," ws member)*)? "}")", {"member", "ws"}},
      {"array", R"("[" (value ("," ws value)*)? "]")", {"value", "ws"}},
  };
  return table;
}

bool is_name_char(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-'; }

std::string hex(std::uint32_t value, int digits) {
  static const char* h = "0123456789ABCDEF";
  std::string s(static_cast<std::size_t>(digits), '0');
  for (int i = digits - 1; i >= 0; --i, value >>= 4) s[static_cast<std::size_t>(i)] = h[value & 15];
  return s;
}

// What parse_gbnf() makes of one body: generated rules (over-estimated as documented in the header) and the
// deepest group nesting. Literals and classes are skipped with their escapes.
struct BodyCost {
  std::size_t rules = 0;
  std::uint32_t nesting = 0;
};

std::size_t read_count(const std::string& body, std::size_t& i) {
  std::size_t value = 0;
  while (i < body.size() && body[i] >= '0' && body[i] <= '9') value = std::min<std::size_t>(value * 10 + static_cast<std::size_t>(body[i++] - '0'), 1u << 30);
  return value;
}

BodyCost cost_of(const std::string& body) {
  BodyCost cost;
  std::uint32_t depth = 0;
  for (std::size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (c == '"' || c == '[') {
      const char close = c == '"' ? '"' : ']';
      for (++i; i < body.size() && body[i] != close; ++i) {
        if (body[i] == '\\') ++i;
      }
    } else if (c == '(') {
      ++cost.rules;
      cost.nesting = std::max(cost.nesting, ++depth);
    } else if (c == ')') {
      --depth;
    } else if (c == '?' || c == '*') {
      cost.rules += 1;
    } else if (c == '+') {
      cost.rules += 2;
    } else if (c == '{') {
      ++i;
      const std::size_t m = read_count(body, i);
      std::size_t n = m;
      if (i < body.size() && body[i] == ',') {
        ++i;
        n = (i < body.size() && body[i] == '}') ? m + 1 : read_count(body, i);
      }
      cost.rules += n;
    }
  }
  return cost;
}

}  // namespace

GbnfWriter::GbnfWriter(const SchemaLimits& limits) : limits_(limits) {
  taken_.insert("root");
  for (const Primitive& p : primitives()) taken_.insert(p.name);
}

std::string GbnfWriter::fresh_name(std::string_view base) {
  std::string name;
  for (char c : base.substr(0, 48)) name += is_name_char(c) ? c : '-';
  if (name.empty()) name.push_back('r');
  if (taken_.insert(name).second) return name;
  for (unsigned& n = next_suffix_[name];;) {
    std::string candidate = name + "-" + std::to_string(++n);
    if (taken_.insert(candidate).second) return candidate;
  }
}

void GbnfWriter::charge(std::size_t rules, std::size_t bytes, std::uint32_t nesting, const Where& where) {
  rules_ += rules;
  bytes_ += bytes;
  if (rules_ > limits_.max_rules) {
    where.fail("the grammar needs more than " + std::to_string(limits_.max_rules) +
               " rules (groups and repetitions count; max_rules)");
  }
  if (bytes_ > limits_.max_grammar_bytes) {
    where.fail("the grammar text is over " + std::to_string(limits_.max_grammar_bytes) + " bytes (max_grammar_bytes)");
  }
  if (nesting > limits_.max_depth) {
    where.fail("groups nested more than " + std::to_string(limits_.max_depth) + " deep (max_depth)");
  }
}

void GbnfWriter::define(const std::string& name, const std::string& body, const Where& where) {
  const BodyCost cost = cost_of(body);
  charge(1 + cost.rules, name.size() + body.size() + 6, cost.nesting, where);
  order_.emplace_back(name, body);
  bodies_.emplace(name, body);
  by_body_.emplace(body, name);
}

bool GbnfWriter::rename_unreferenced(const std::string& from, const std::string& to) {
  if (bodies_.count(to) || !bodies_.count(from)) return false;
  for (const auto& [name, body] : order_) {
    for (std::size_t at = body.find(from); at != std::string::npos; at = body.find(from, at + 1)) {
      const bool starts = at == 0 || !is_name_char(body[at - 1]);
      const bool ends = at + from.size() == body.size() || !is_name_char(body[at + from.size()]);
      if (starts && ends) return false;
    }
  }
  const std::string body = bodies_[from];
  bodies_.erase(from);
  bodies_.emplace(to, body);
  by_body_[body] = to;
  for (auto& entry : order_) {
    if (entry.first == from) entry.first = to;
  }
  bytes_ = bytes_ + to.size() - from.size();
  return true;
}

std::string GbnfWriter::rule(std::string_view base, const std::string& body, const Where& where) {
  if (auto it = by_body_.find(body); it != by_body_.end()) return it->second;
  std::string name = fresh_name(base);
  define(name, body, where);
  return name;
}

const std::string& GbnfWriter::primitive(const std::string& name, const Where& where) {
  if (auto it = bodies_.find(name); it != bodies_.end()) return it->first;
  for (const Primitive& p : primitives()) {
    if (name != p.name) continue;
    define(p.name, p.body, where);  // first, so that the recursion through `value` ends
    for (const char* need : p.needs) primitive(need, where);
    return bodies_.find(name)->first;
  }
  where.fail("internal: no primitive rule '" + name + "'");
}

std::string GbnfWriter::text() const {
  std::string out;
  for (int pass = 0; pass < 2; ++pass) {  // root first, for the reader
    for (const auto& [name, body] : order_) {
      if ((name == "root") == (pass == 0)) out += name + " ::= " + body + "\n";
    }
  }
  return out;
}

std::string escape_literal(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7F) {
      out += "\\x" + hex(u, 2);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string gbnf_class_char(char32_t cp) {
  if (cp == '\\' || cp == ']' || cp == '[' || cp == '-' || cp == '^' || cp == '"') return std::string{'\\', static_cast<char>(cp)};
  if (cp >= 0x20 && cp < 0x7F) return std::string(1, static_cast<char>(cp));
  if (cp < 0x100) return "\\x" + hex(cp, 2);
  if (cp < 0x10000) return "\\u" + hex(cp, 4);
  return "\\U" + hex(cp, 8);
}

std::optional<std::u32string> decode_utf8(std::string_view text) {
  std::u32string out;
  for (std::size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const int length = lead < 0x80 ? 1 : lead >= 0xC2 && lead <= 0xDF ? 2 : lead >= 0xE0 && lead <= 0xEF ? 3
                                        : lead >= 0xF0 && lead <= 0xF4 ? 4 : 0;
    if (length == 0 || i + static_cast<std::size_t>(length) > text.size()) return std::nullopt;
    char32_t cp = length == 1 ? lead : lead & (0x7F >> length);
    for (int k = 1; k < length; ++k) {
      const auto b = static_cast<unsigned char>(text[i + static_cast<std::size_t>(k)]);
      if ((b & 0xC0) != 0x80) return std::nullopt;
      cp = (cp << 6) | (b & 0x3F);
    }
    const char32_t min = length == 2 ? 0x80 : length == 3 ? 0x800 : length == 4 ? 0x10000 : 0;
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return std::nullopt;
    out += cp;
    i += static_cast<std::size_t>(length);
  }
  return out;
}

std::string encode_utf8(char32_t cp) {
  std::string s;
  detail::append_utf8(s, cp);
  return s;
}

Ranges normalize(Ranges ranges) { return GrammarBuilder::merged(std::move(ranges)); }

Ranges complement(const Ranges& ranges) {
  Ranges out;
  char32_t next = 0;
  for (const auto& r : normalize(ranges)) {
    if (r.first > next) out.emplace_back(next, r.first - 1);
    next = r.second + 1;
  }
  if (next <= 0x10FFFF) out.emplace_back(next, 0x10FFFF);
  return out;
}

namespace {

Ranges intersect(const Ranges& a, const Ranges& b) {
  Ranges out;
  for (const auto& x : a) {
    for (const auto& y : b) {
      const char32_t lo = std::max(x.first, y.first);
      const char32_t hi = std::min(x.second, y.second);
      if (lo <= hi) out.emplace_back(lo, hi);
    }
  }
  return normalize(out);
}

}  // namespace

std::string class_text(const Ranges& ranges, bool negated) {
  std::string out = negated ? "[^" : "[";
  for (const auto& [lo, hi] : ranges) {
    out += gbnf_class_char(lo);
    if (hi == lo) continue;
    if (hi != lo + 1) out += '-';
    out += gbnf_class_char(hi);
  }
  return out + "]";
}

namespace {

// The raw (unescaped) characters of `set` as one class: listed, or as the negation of what is left out,
// whichever is shorter. Surrogates are not characters and never appear.
std::string raw_class(const Ranges& set) {
  const Ranges excluded = complement(set);  // includes the controls, '"', '\\' and the surrogates
  Ranges shown_excluded;
  for (const auto& r : excluded) {
    if (r.second < 0xD800 || r.first > 0xDFFF) {
      shown_excluded.push_back(r);
    } else {  // drop the surrogates: they cannot occur in UTF-8 anyway
      if (r.first < 0xD800) shown_excluded.emplace_back(r.first, 0xD7FF);
      if (r.second > 0xDFFF) shown_excluded.emplace_back(0xE000, r.second);
    }
  }
  const std::string listed = class_text(set, false);
  const std::string negated = class_text(shown_excluded, true);
  return negated.size() < listed.size() ? negated : listed;
}

}  // namespace

std::string json_char_item(const Ranges& wanted) {
  const Ranges set = intersect(normalize(wanted), {{0, 0xD7FF}, {0xE000, 0x10FFFF}});
  std::vector<std::string> parts;
  const Ranges raw = intersect(set, {{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0xD7FF}, {0xE000, 0x10FFFF}});
  if (!raw.empty()) parts.push_back(raw_class(raw));
  auto has = [&](char32_t cp) { return !intersect(set, {{cp, cp}}).empty(); };
  if (has('"')) parts.push_back(gbnf_literal("\\\""));
  if (has('\\')) parts.push_back(gbnf_literal("\\\\"));
  const Ranges controls = intersect(set, {{0, 0x1F}});
  if (controls == Ranges{{0, 0x1F}}) {
    parts.push_back(R"("\\" [bfnrt])");
    parts.push_back(R"("\\u00" [01] [0-9a-fA-F])");
  } else {
    for (const auto& [lo, hi] : controls) {
      for (char32_t cp = lo; cp <= hi; ++cp) {
        const char* short_form = cp == '\b' ? "b" : cp == '\f' ? "f" : cp == '\n' ? "n" : cp == '\r' ? "r" : cp == '\t' ? "t" : nullptr;
        parts.push_back(gbnf_literal(short_form ? std::string{'\\', *short_form} : "\\u00" + hex(cp, 2)));
      }
    }
  }
  if (parts.size() <= 1) return parts.empty() ? std::string() : parts[0];
  std::string out = "(";
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? " | " : "") + parts[i];
  return out + ")";
}

}  // namespace loom::compute::grammar::schema

namespace loom::compute::grammar {

std::string gbnf_literal(std::string_view text) { return schema::escape_literal(text); }

}  // namespace loom::compute::grammar
