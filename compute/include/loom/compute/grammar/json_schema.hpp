// JSON Schema to GBNF: the grammar of the JSON texts a schema accepts, for constrained decoding. The output
// is GBNF text whose start rule is `root` (parse_gbnf() compiles it). The grammar accepts only texts valid
// under the schema (as Python's jsonschema judges them, Draft 2020-12 with its format checker), never more;
// it may accept fewer, in these ways:
// - the JSON is compact except for optional single spaces after ':' and ',' (a model writes what it was
//   trained on; bounded whitespace means a model cannot loop on it);
// - objects list their properties in the schema's order (from an nlohmann::ordered_json; a plain
//   nlohmann::json has sorted the keys already), listed ones first, then the extra ones;
// - numbers are written as JSON allows, but integers never as 1.0, bounded numbers without an exponent,
//   and no "-0"; strings use no surrogate \u escapes (a character past U+FFFF is written raw);
// - enum/const values are written in their compact serialization;
// - an untyped schema whose keywords all belong to one type (properties: object, minLength: string, ...)
//   is taken to mean that type.
//
// Supported: `type` (object, array, string, number, integer, boolean, null, and lists of them), `properties`,
// `required`, `additionalProperties` (true, false or a schema; absent means any value; an extra member's
// key is never one of the listed names, however escaped), `enum`, `const` (filtered by the simple keywords
// beside them), `items`, `prefixItems` (and the older array form of `items` with `additionalItems`),
// `minItems`/`maxItems`, `anyOf`/`oneOf` (a choice of the branches, the keywords beside them applying to
// each; oneOf's "exactly one" cannot be checked by a grammar and is treated as anyOf; a branch nothing
// satisfies is dropped), `allOf` (folded into one schema where the branches combine exactly: types
// intersected, properties and items merged position by position, bounds tightened; otherwise refused),
// `$ref` to `#`, `#/$defs/...`, `#/definitions/...` or any local JSON Pointer (recursive references too;
// a cycle of references that reads no character is refused), string `minLength`/`maxLength` (code
// points), `pattern` (as re.search(): unanchored unless it starts with `^` or ends with `$`; the subset:
// literals, escapes, `.`, classes with ranges and negation, `\d \w \s` and their negations, groups
// `( )` `(?: )` and named ones, alternation, the greedy quantifiers `? * + {m} {m,} {,n} {m,n}`, and
// `^`/`$` at the ends only), `format` (date, time, date-time, uuid, email, ipv4: only valid values, days
// within their month, February 29th in leap years), integer `minimum`/`maximum`/`exclusiveMinimum`/
// `exclusiveMaximum` (exact digit ranges) and the same on numbers when the bounds are integers. Annotations
// (`title`, `description`, `$schema`, `$id`, `$comment`, `examples`, `default`, `deprecated`, `readOnly`,
// `writeOnly`, and `$defs`/`definitions` as containers) are ignored, as they constrain nothing. Any other
// keyword (uniqueItems, multipleOf, not, if, patternProperties, minProperties, contains, ...), or a
// supported one in a form the converter cannot honour exactly (pattern with minLength, a non-integer bound
// on a number, lookaround in a pattern, ...), is refused with a SchemaError naming it: never silently
// ignored.
//
// Everything a client controls is bounded (SchemaLimits): the schema's nesting, the number of rules made,
// the repetition counts, the size of the GBNF text. parse_gbnf() then applies the grammar's own limits: the
// defaults here stay within GrammarLimits' defaults for rules, repetitions and nesting, though a text near
// max_grammar_bytes (a huge enum) can still exceed its max_elements.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <stdexcept>
#include <string>

namespace loom::compute::grammar {

// A schema the converter refuses. path() is the JSON Pointer of the offending schema object ("" for the
// root, "/properties/age"); keyword() the keyword at fault ("pattern", "minimum"; empty when the schema as a
// whole is at fault, e.g. not an object or boolean). what() is "at /properties/age: keyword minimum: ...".
class SchemaError : public std::invalid_argument {
 public:
  SchemaError(std::string path, std::string keyword, const std::string& message);
  const std::string& path() const noexcept { return path_; }
  const std::string& keyword() const noexcept { return keyword_; }
  const std::string& message() const noexcept { return message_; }

 private:
  std::string path_;
  std::string keyword_;
  std::string message_;
};

struct SchemaLimits {
  std::uint32_t max_depth = 64;             // schema objects within schema objects; groups within one rule
  // GBNF rules the conversion may make, counting what parse_gbnf() makes of groups and repetitions (a
  // repetition {m,n} counts n, so that this also bounds the elements the repetitions expand to).
  std::size_t max_rules = 2048;
  std::uint32_t max_repetition = 1000;      // minItems/maxItems, minLength/maxLength, regex {m,n} bounds
  std::size_t max_pattern_bytes = 4096;     // one `pattern`
  std::size_t max_grammar_bytes = 256 * 1024;  // the GBNF text produced
};

// The GBNF grammar (start rule `root`) of JSON texts valid under `schema` (a JSON object or boolean).
// Throws SchemaError. Parse the schema into an ordered_json to keep its properties' order.
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema, const SchemaLimits& limits = {});
std::string json_schema_to_gbnf(const nlohmann::json& schema, const SchemaLimits& limits = {});

// The grammar of any JSON object (OpenAI's response_format {"type": "json_object"}), nested values bounded
// in depth only by the grammar's run-time limits.
std::string json_object_gbnf();

}  // namespace loom::compute::grammar
