// Objects: the properties in the schema's order, required ones always and optional
// ones optionally, then (unless additionalProperties is false) extra members. An extra member's key can never
// be a listed name, however escaped: it is written through a trie of the listed names, each character raw or
// escaped (\uXXXX too), and leaves the trie as soon as it differs from every name, so that a listed property
// cannot come back with a value its schema refuses. (Only a listed name's character outside the Basic
// Multilingual Plane written as a surrogate-pair escape is not offered: no surrogate escapes are written.)
#include <map>
#include <set>
#include <string>

#include "schema_values.hpp"

namespace loom::compute::grammar::schema {

namespace {

std::set<std::string> required_names(const json& schema, const std::string& path) {
  std::set<std::string> required;
  if (auto r = schema.find("required"); r != schema.end()) {
    if (!r->is_array()) Where{path, "required"}.fail("required must be an array of strings");
    for (const json& name : *r) {
      if (!name.is_string()) Where{path, "required"}.fail("required must be an array of strings");
      required.insert(name.get<std::string>());
    }
  }
  return required;
}

}  // namespace

// The listed members (a key literal and its value's item) and the extra member's value item (empty when
// extra members are not allowed: additionalProperties false, or a schema nothing satisfies).
Converter::ObjectParts Converter::object_parts(const json& schema, const std::string& path, const std::string& hint,
                                               std::uint32_t depth) {
  const Where where{path, "properties"};
  const json props = schema.value("properties", json::object());
  if (!props.is_object()) where.fail("properties must be an object");
  const std::set<std::string> required = required_names(schema, path);
  const json additional = schema.contains("additionalProperties") ? schema["additionalProperties"] : json(true);
  if (!additional.is_boolean() && !additional.is_object()) Where{path, "additionalProperties"}.fail("must be a schema");
  ObjectParts parts;
  if (additional.is_boolean()) {
    if (additional.get<bool>()) parts.extra = out_.primitive("value", where);
  } else {
    try {
      parts.extra = value(additional, path + "/additionalProperties", hint + "-additional", depth + 1);
    } catch (const Unsatisfiable&) {
      // no extra member can have a valid value: none may be written
    }
  }
  auto add = [&](const std::string& key, const std::string& item, bool is_required) {
    parts.members.push_back({gbnf_literal(dumped(json(key), where)) + R"( ":" ws )" + item, is_required});
  };
  for (const auto& [key, sub] : props.items()) {
    parts.keys.push_back(key);
    const bool is_required = required.count(key) != 0;
    const std::string sub_path = path + "/properties/" + pointer_token(key);
    if (sub.is_boolean() && !sub.get<bool>()) {
      if (is_required) Where{path, "required"}.unsatisfiable("\"" + key + "\" is required but its schema is false");
      continue;  // never present
    }
    try {
      add(key, value(sub, sub_path, hint + "-" + key, depth + 1), is_required);
    } catch (const Unsatisfiable&) {
      if (is_required) throw;
      // An optional property that no value satisfies is never present (and is no extra member either).
    }
  }
  for (const std::string& key : required) {
    if (props.contains(key)) continue;
    if (parts.extra.empty()) {
      Where{path, "required"}.unsatisfiable("\"" + key + "\" is required, but properties does not list it and additionalProperties allows no value");
    }
    parts.keys.push_back(key);
    add(key, parts.extra, true);
  }
  return parts;
}

// From the last member back, two continuations: `after` (something was written before, so a comma first)
// and `first` (nothing yet). A required member ends the choice; an optional one offers both ways, and its
// continuations become rules so that the text stays linear in the number of members.
std::string Converter::object_value(const json& schema, const std::string& path, const std::string& hint,
                                    std::uint32_t depth) {
  const Where where{path, "properties"};
  out_.primitive("ws", where);
  const ObjectParts parts = object_parts(schema, path, hint, depth);
  std::string after;
  std::string first;
  if (!parts.extra.empty()) {
    const std::string key = parts.keys.empty() ? out_.primitive("string", where) : other_key(parts.keys, hint, where);
    const std::string extra = out_.rule(hint + "-extra", key + R"( ":" ws )" + parts.extra, where);
    after = grouped(kComma + extra, "*");
    first = grouped(joined(extra, after), "?");
  }
  for (std::size_t i = parts.members.size(); i-- > 0;) {
    const auto& [text, required] = parts.members[i];
    if (required) {
      first = joined(text, after);
      after = joined(kComma + text, after);
      continue;
    }
    const std::string a = as_item(after, hint + "-rest", where);
    const std::string f = as_item(first, hint + "-first", where);
    first = f.empty() ? grouped(joined(text, a), "?") : grouped(joined(text, a) + " | " + f);
    after = joined(grouped(kComma + text, "?"), a);
  }
  return out_.rule(hint, joined(joined(R"("{")", first), R"("}")"), where);
}

namespace {

std::string hex_digit_class(const std::set<unsigned>& digits) {
  Ranges ranges;
  for (unsigned d : digits) {
    if (d < 10) {
      ranges.emplace_back(U'0' + d, U'0' + d);
    } else {
      ranges.emplace_back(U'a' + d - 10, U'a' + d - 10);
      ranges.emplace_back(U'A' + d - 10, U'A' + d - 10);
    }
  }
  return class_text(normalize(std::move(ranges)), false);
}

// The hex digits of \uXXXX from digit `level` on, after `prefix`: those spelling a code point in `targets`
// go on to its rule, the others (never a surrogate, as in `char`) end the name comparison. `wide` is the
// shared rule of the escapes above U+00FF, used when every target is below.
std::string hex_escape_level(const std::map<char32_t, std::string>& targets, std::uint32_t prefix, unsigned level,
                             const std::string& tail, const std::string& wide) {
  if (level == 0 && (targets.empty() || targets.rbegin()->first < 0x100)) {
    return "(" + wide + " " + tail + " | \"00\" " + hex_escape_level(targets, 0, 2, tail, wide) + ")";
  }
  std::set<unsigned> present;
  for (const auto& [cp, name] : targets) {
    if ((cp >> (16 - 4 * level)) == prefix) present.insert((cp >> (12 - 4 * level)) & 15u);
  }
  std::set<unsigned> free;
  const unsigned top = level == 1 && prefix == 0xD ? 7 : 15;  // D800-DFFF are surrogates
  for (unsigned d = 0; d <= top; ++d) {
    if (!present.count(d) && !(level == 0 && d == 0xD)) free.insert(d);
  }
  std::vector<std::string> alternatives;
  for (unsigned d : present) {
    const std::uint32_t next = (prefix << 4) | d;
    alternatives.push_back(hex_digit_class({d}) + " " +
                           (level == 3 ? targets.at(next) : hex_escape_level(targets, next, level + 1, tail, wide)));
  }
  const std::string rest = level == 3 ? "" : level == 2 ? " [0-9a-fA-F]" : " [0-9a-fA-F]{" + std::to_string(3 - level) + "}";
  if (!free.empty()) alternatives.push_back(hex_digit_class(free) + rest + " " + tail);
  if (level == 0 && !present.count(0xD)) alternatives.push_back("[dD] [0-7] [0-9a-fA-F]{2} " + tail);
  std::string out = "(";
  for (std::size_t i = 0; i < alternatives.size(); ++i) out += (i ? " | " : "") + alternatives[i];
  return out + ")";
}

}  // namespace

std::string Converter::other_key(const std::vector<std::string>& keys, const std::string& hint, const Where& where) {
  struct Node {
    std::map<char32_t, std::size_t> kids;
    bool terminal = false;
  };
  std::vector<Node> trie(1);
  for (const std::string& key : keys) {
    const auto cps = decode_utf8(key);
    if (!cps) where.fail("a property name is not valid UTF-8");
    std::size_t at = 0;
    for (char32_t cp : *cps) {
      auto it = trie[at].kids.find(cp);
      if (it == trie[at].kids.end()) {
        it = trie[at].kids.emplace(cp, trie.size()).first;
        trie.emplace_back();
      }
      at = it->second;
    }
    trie[at].terminal = true;
  }
  const std::string& any = out_.primitive("char", where);
  const std::string& tail = out_.primitive("string-tail", where);
  // \u escapes of code points from U+0100 (no surrogates): what a name made of Latin-1 cannot be spelled by.
  const std::string wide = out_.rule("u-wide", R"(([1-9a-cA-CefEF] [0-9a-fA-F]{3} | "0" [1-9a-fA-F] [0-9a-fA-F]{2} | [dD] [0-7] [0-9a-fA-F]{2}))", where);
  std::vector<std::string> names(trie.size());
  for (std::size_t i = 0; i < trie.size(); ++i) {
    names[i] = trie[i].kids.empty() ? out_.rule("key-leaf", any + " " + tail, where) : out_.fresh_name(hint + "-key");
  }
  static const std::vector<std::pair<char, char32_t>> escapes = {
      {'"', U'"'}, {'\\', U'\\'}, {'/', U'/'}, {'b', 8}, {'f', 12}, {'n', 10}, {'r', 13}, {'t', 9}};
  for (std::size_t i = 0; i < trie.size(); ++i) {
    const Node& node = trie[i];
    if (node.kids.empty()) continue;
    std::vector<std::string> alternatives;
    if (!node.terminal) alternatives.push_back(kQuote);  // a proper prefix of a name is another name
    Ranges taken = {{0, 0x1F}, {U'"', U'"'}, {U'\\', U'\\'}};
    for (const auto& [cp, next] : node.kids) taken.emplace_back(cp, cp);
    const std::string differs = json_char_item(complement(taken));
    if (!differs.empty()) alternatives.push_back(differs + " " + tail);
    std::string free_escapes;
    for (const auto& [letter, decoded] : escapes) {
      auto kid = node.kids.find(decoded);
      if (kid != node.kids.end()) {
        alternatives.push_back(gbnf_literal(std::string{'\\', letter}) + " " + names[kid->second]);
      } else {
        free_escapes += gbnf_class_char(static_cast<unsigned char>(letter));
      }
    }
    if (!free_escapes.empty()) alternatives.push_back(R"("\\" [)" + free_escapes + "] " + tail);
    std::map<char32_t, std::string> targets;
    for (const auto& [cp, next] : node.kids) {
      if (cp <= 0xFFFF) targets.emplace(cp, names[next]);
    }
    alternatives.push_back(R"("\\u" )" + hex_escape_level(targets, 0, 0, tail, wide));
    for (const auto& [cp, next] : node.kids) {
      if (cp >= 0x20 && cp != U'"' && cp != U'\\') alternatives.push_back(gbnf_literal(encode_utf8(cp)) + " " + names[next]);
    }
    std::string body;
    for (const std::string& a : alternatives) body += (body.empty() ? "" : " | ") + a;
    out_.define(names[i], body, where);
  }
  return std::string(kQuote) + " " + names[0];
}

}  // namespace loom::compute::grammar::schema
