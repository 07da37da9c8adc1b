// JSON Schema to GBNF: the grammar of the JSON texts a schema accepts, for constrained decoding. The output
// is GBNF text whose start rule is `root` (parse_gbnf() compiles it); the JSON it accepts is compact except
// for optional single spaces after ':' and ',' (a model writes what it was trained on; the grammar bounds
// the whitespace so that a model cannot loop on it).
//
// Supported: `type` (object, array, string, number, integer, boolean, null, and lists of them), `properties`,
// `required`, `additionalProperties` (true, false or a schema; absent means any value), `enum`, `const`,
// `items`, `prefixItems`, `minItems`/`maxItems`, `anyOf`/`oneOf` (a choice of the branches; oneOf's "exactly
// one" cannot be checked by a grammar and is treated as anyOf), `allOf` (of object schemas: their
// properties merged), `$ref` to `#`, `#/$defs/...` or `#/definitions/...` (recursive references too),
// string `minLength`/`maxLength`, `pattern` (the regular-expression subset: literals, escapes, `.`,
// classes with ranges and negation, `\d \w \s` and their negations, groups, alternation, `? * + {m} {m,}
// {m,n}`, and `^`/`$` at the ends only), `format` (date, time, date-time, uuid, email), and integer
// `minimum`/`maximum`/`exclusiveMinimum`/`exclusiveMaximum` when they bound the digits. Annotations
// (`title`, `description`, `$schema`, `$id`, `$comment`, `examples`, `default`, `deprecated`, `readOnly`,
// `writeOnly`) are ignored, as they constrain nothing. Any other keyword, or a supported one in a form the
// converter cannot honour exactly, is refused with a SchemaError naming it: never silently ignored.
//
// Everything a client controls is bounded (SchemaLimits): the schema's nesting, the number of rules made,
// the repetition counts, the size of the GBNF text; the grammar's own limits then apply at parse_gbnf().
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
  std::uint32_t max_depth = 64;             // schema objects within schema objects
  std::size_t max_rules = 2048;             // GBNF rules the conversion may make
  std::uint32_t max_repetition = 1000;      // minItems/maxItems, minLength/maxLength, regex {m,n} bounds
  std::size_t max_pattern_bytes = 4096;     // one `pattern`
  std::size_t max_grammar_bytes = 256 * 1024;  // the GBNF text produced
};

// The GBNF grammar (start rule `root`) of JSON texts valid under `schema` (a JSON object or boolean, as
// parsed by nlohmann::json). Throws SchemaError.
std::string json_schema_to_gbnf(const nlohmann::json& schema, const SchemaLimits& limits = {});

// The grammar of any JSON object (OpenAI's response_format {"type": "json_object"}), nested values bounded
// in depth only by the grammar's run-time limits.
std::string json_object_gbnf();

}  // namespace loom::compute::grammar
