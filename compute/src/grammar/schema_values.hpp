// The JSON Schema converter's walk (json_schema.cpp: dispatch, $ref, anyOf, types; schema_values.cpp: the
// values of each type and enum/const). Private to the grammar room.
#pragma once

#include <deque>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "schema_internal.hpp"

namespace loom::compute::grammar::schema {

// Key order kept: an object's properties are written in the schema's order, as OpenAI does.
using json = nlohmann::ordered_json;

inline const char* const kQuote = R"("\"")";   // a '"' in the JSON text
inline const char* const kComma = R"("," ws )";  // between members or items

// Two GBNF sequences one after the other.
inline std::string joined(const std::string& a, const std::string& b) { return a.empty() ? b : b.empty() ? a : a + " " + b; }

// "(inner)" and a repetition suffix ("", "?", "*").
inline std::string grouped(const std::string& inner, const char* suffix = "") {
  std::string out;
  out.reserve(inner.size() + 4);
  out += '(';
  out += inner;
  out += ')';
  out += suffix;
  return out;
}

// A value's compact JSON text; a string that is not UTF-8 is the schema's fault.
inline std::string dumped(const json& v, const Where& where) {
  try {
    return v.dump();
  } catch (const json::exception&) {
    where.fail("a string in the schema is not valid UTF-8");
  }
}

// The GBNF of one value and the rules it may begin with without reading a character (anyOf branches, $ref
// targets), for the left-recursion check.
struct Body {
  std::string text;
  std::vector<std::string> left;
};

class Converter {
 public:
  Converter(const json& root, const SchemaLimits& limits);
  std::string run();

 private:
  struct Pending {
    const json* schema;
    std::string path;
    std::string name;
  };

  // json_schema.cpp
  void define_named(const std::string& name, const Body& b, const std::string& path);
  const json& resolve(const std::string& ref, const Where& at) const;
  std::string ref_rule(const std::string& ref, const Where& where);
  void check_depth(const std::string& path, std::uint32_t depth) const;
  std::string item(const Body& b, const std::string& hint, const Where& where);
  std::string value(const json& schema, const std::string& path, const std::string& hint, std::uint32_t depth);
  Body body(const json& schema, const std::string& path, const std::string& hint, std::uint32_t depth);
  void check_keywords(const json& schema, const std::string& path) const;
  static bool has_constraints(const json& schema, const std::set<std::string>& except);
  Body choice(const json& schema, const std::string& keyword, const std::string& path, const std::string& hint,
              std::uint32_t depth);
  std::set<std::string> types_of(const json& schema, const std::string& path) const;
  Body typed(const json& schema, const std::string& path, const std::string& hint, std::uint32_t depth);
  void check_left_recursion() const;

  // schema_values.cpp
  Body literals(const json& schema, const std::string& path);
  std::string string_value(const json& schema, const std::string& path, const std::string& hint);
  std::string integer_value(const json& schema, const std::string& path);
  std::string number_value(const json& schema, const std::string& path);
  struct ObjectParts {
    std::vector<std::pair<std::string, bool>> members;  // "\"key\"" ":" ws item, and whether required
    std::vector<std::string> keys;                      // every listed name, present or not
    std::string extra;                                  // the extra members' value item; empty: none
  };
  ObjectParts object_parts(const json& schema, const std::string& path, const std::string& hint, std::uint32_t depth);
  std::string object_value(const json& schema, const std::string& path, const std::string& hint, std::uint32_t depth);
  std::string other_key(const std::vector<std::string>& keys, const std::string& hint, const Where& where);
  struct ArrayParts {
    std::vector<std::string> prefix;  // items of the first positions
    std::string rest;                 // item of the others; empty: no others
    std::uint32_t min = 0;
    std::optional<std::uint32_t> max;
  };
  ArrayParts array_parts(const json& schema, const std::string& path, const std::string& hint, std::uint32_t depth);
  std::string array_value(const json& schema, const std::string& path, const std::string& hint, std::uint32_t depth);
  std::string as_item(const std::string& text, const std::string& hint, const Where& where);

  const json& root_;
  const SchemaLimits& limits_;
  GbnfWriter out_;
  RefResolver resolver_;
  std::map<std::string, std::string> refs_;  // $ref -> rule name
  std::map<std::string, std::string> paths_;  // rule name of a $ref target -> its JSON Pointer
  std::deque<Pending> pending_;
  std::map<std::string, std::vector<std::string>> edges_;  // rule -> rules it may begin with
};

}  // namespace loom::compute::grammar::schema
