// What the parts of the JSON Schema converter share (json_schema.cpp, schema_regex.cpp, schema_formats.cpp):
// the GBNF writer that names rules and counts what parse_gbnf() will make of them, and the GBNF spellings of
// JSON-string characters. Private to the grammar room.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "loom/compute/grammar/grammar.hpp"
#include "loom/compute/grammar/json_schema.hpp"

namespace loom::compute::grammar::schema {

using Ranges = std::vector<std::pair<char32_t, char32_t>>;

// A schema (or a part of one) that no value satisfies: an anyOf branch that is one is dropped; anywhere
// else the error stands.
class Unsatisfiable : public SchemaError {
 public:
  using SchemaError::SchemaError;
};

// Where the converter is: the JSON Pointer of the schema object and the keyword being converted, so that a
// limit or a refusal deep inside names the right place.
struct Where {
  std::string path;
  std::string keyword;
  [[noreturn]] void fail(const std::string& message) const { throw SchemaError(path, keyword, message); }
  [[noreturn]] void unsatisfiable(const std::string& message) const { throw Unsatisfiable(path, keyword, message); }
};

// Collects the rules of the grammar being made. Every body is scanned when it is defined, to count the rules
// parse_gbnf() will generate from it (a group is one; `{m,n}` is counted as n, `*` `+` `?` and `{m,}` as
// m + 1, an over-estimate that also bounds the elements the repetitions expand to) and the depth of its
// groups, so that SchemaLimits bound the compiled grammar, not only the text.
class GbnfWriter {
 public:
  explicit GbnfWriter(const SchemaLimits& limits);

  // A rule name not yet taken, made of `base` with every character outside [a-zA-Z0-9-] turned into '-'.
  std::string fresh_name(std::string_view base);
  // Defines a rule whose name came from fresh_name() (or a fixed one never used before).
  void define(const std::string& name, const std::string& body, const Where& where);
  // A rule with this body: an existing one with the same body, else a new one named after `base`.
  std::string rule(std::string_view base, const std::string& body, const Where& where);
  // Gives rule `from` the name `to` (not yet defined), when nothing refers to `from` (a name that appears
  // anywhere in another body, even inside a literal, counts as a reference): so that `root` or a $ref
  // target is the value's rule itself rather than `root ::= root-1`. Returns whether it did.
  bool rename_unreferenced(const std::string& from, const std::string& to);
  // One of the shared rules below (string, number, value, ...), defined with what it needs on first use.
  const std::string& primitive(const std::string& name, const Where& where);
  bool defined(const std::string& name) const { return bodies_.count(name) != 0; }

  std::string text() const;
  const SchemaLimits& limits() const { return limits_; }

 private:
  void charge(std::size_t rules, std::size_t bytes, std::uint32_t nesting, const Where& where);

  const SchemaLimits& limits_;
  std::vector<std::pair<std::string, std::string>> order_;  // name, body, in definition order
  std::map<std::string, std::string> bodies_;               // name -> body
  std::map<std::string, std::string> by_body_;              // body -> name (for rule())
  std::set<std::string> taken_;
  std::map<std::string, unsigned> next_suffix_;
  std::size_t rules_ = 0;
  std::size_t bytes_ = 0;
};

using grammar::gbnf_literal;  // grammar.hpp
// One code point inside a GBNF character class.
std::string gbnf_class_char(char32_t cp);
// A GBNF character class of sorted, merged ranges ("[a-cx]"), or of everything else ("[^...]").
std::string class_text(const Ranges& ranges, bool negated);

// Decodes UTF-8 into code points; nullopt for invalid UTF-8.
std::optional<std::u32string> decode_utf8(std::string_view text);
std::string encode_utf8(char32_t cp);

// Sorted, merged, complemented sets of code points.
Ranges normalize(Ranges ranges);
Ranges complement(const Ranges& ranges);

// A GBNF item matching one character of a JSON string (the text between the quotes) that decodes to a code
// point in `set`: raw where JSON allows it raw, else its escape. Empty when the set is empty.
std::string json_char_item(const Ranges& set);

// The GBNF for the `pattern` regular expression (schema_regex.cpp): a sequence matching the inside of a
// JSON string (no quotes) whose decoded value Python's re.search() finds the pattern in. Throws SchemaError.
std::string pattern_gbnf(std::string_view pattern, GbnfWriter& out, const Where& where);

// The inside of a JSON string in `format` (schema_formats.cpp); throws SchemaError for other formats.
std::string format_gbnf(const std::string& format, GbnfWriter& out, const Where& where);

// Decimal integers in [lo, hi] (nullopt: unbounded on that side), as a rule name; throws if the range is empty.
std::string integer_range_gbnf(std::optional<std::int64_t> lo, std::optional<std::int64_t> hi, GbnfWriter& out,
                               const Where& where);

// `key` as one token of a JSON Pointer ('~' and '/' escaped), for SchemaError paths.
std::string pointer_token(const std::string& key);

// An integer bound of a number (minimum, exclusiveMaximum, ...): its value and whether it is exclusive.
struct NumberBound {
  std::int64_t value;
  bool exclusive;
};
// Decimal numbers (no exponent) within integer bounds, exactly, as a rule name; throws Unsatisfiable if none.
std::string number_range_gbnf(std::optional<NumberBound> lo, std::optional<NumberBound> hi, GbnfWriter& out,
                              const Where& where);

// Keywords that constrain nothing (title, description, ...; $defs and definitions hold schemas for $ref).
bool is_annotation(const std::string& keyword);

// The schema a local `$ref` ("#", "#/$defs/x", any "#/json/pointer") names; throws SchemaError (keyword $ref).
using RefResolver = std::function<const nlohmann::ordered_json&(const std::string& ref, const Where& where)>;

// `allOf` (and `$ref` beside other keywords) folded into one schema with the same meaning (schema_merge.cpp):
// the branches' keywords side by side, where they meet combined exactly (types intersected, `required`
// joined, bounds tightened, `properties` and `additionalProperties` merged property by property, two
// `anyOf` multiplied out) or else refused. The result has neither allOf nor $ref at its top.
nlohmann::ordered_json merge_all_of(const nlohmann::ordered_json& schema, const Where& where, const RefResolver& resolve,
                            const SchemaLimits& limits);
// Two schemas as one (an anyOf branch with the keywords beside the anyOf).
nlohmann::ordered_json merge_pair(const nlohmann::ordered_json& a, const nlohmann::ordered_json& b, const Where& where,
                          const RefResolver& resolve, const SchemaLimits& limits);

}  // namespace loom::compute::grammar::schema
