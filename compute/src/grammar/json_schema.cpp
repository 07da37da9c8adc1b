// JSON Schema to GBNF: one walk over the schema that gives every value a GBNF item (a rule name), sharing the
// primitive rules (string, number, value, ...) and any rule whose body repeats. A `$ref` becomes a rule of
// its own, converted once, so recursive schemas make recursive grammars. The object, array and literal
// parts are in schema_values.cpp; allOf in schema_merge.cpp; `pattern` in schema_regex.cpp; formats and
// integer ranges in schema_formats.cpp.
//
// Decisions (see json_schema.hpp for the keyword list):
// - Untyped schemas whose keywords all belong to one kind (properties: object, minLength: string, ...) are
//   taken to mean that kind, as a model is meant to write one; the grammar then accepts a subset of what the
//   schema allows, never a value it refuses. With no such keyword, any JSON value.
// - Properties are written in the schema's order (nlohmann::ordered_json keeps it; a plain nlohmann::json
//   has sorted it already, and then key order is what there is).
#include "loom/compute/grammar/json_schema.hpp"

#include <cctype>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "schema_internal.hpp"
#include "schema_values.hpp"

namespace loom::compute::grammar {

namespace {

std::string error_text(const std::string& path, const std::string& keyword, const std::string& message) {
  std::string out = "at " + (path.empty() ? std::string("the root") : path) + ": ";
  if (!keyword.empty()) out += "keyword " + keyword + ": ";
  return out + message;
}

}  // namespace

SchemaError::SchemaError(std::string path, std::string keyword, const std::string& message)
    : std::invalid_argument(error_text(path, keyword, message)),
      path_(std::move(path)),
      keyword_(std::move(keyword)),
      message_(message) {}

namespace schema {

bool is_annotation(const std::string& keyword) {
  static const std::set<std::string> names = {"title",      "description", "$schema",  "$id",       "$comment",
                                               "examples",   "default",     "deprecated", "readOnly", "writeOnly",
                                               "$defs",      "definitions"};
  return names.count(keyword) != 0;
}

std::string pointer_token(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

namespace {

std::string percent_decoded(const std::string& text, const Where& where) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    if (i + 2 >= text.size() || !std::isxdigit(static_cast<unsigned char>(text[i + 1])) ||
        !std::isxdigit(static_cast<unsigned char>(text[i + 2]))) {
      where.fail("malformed percent-escape in \"" + text + "\"");
    }
    out += static_cast<char>(std::stoi(text.substr(i + 1, 2), nullptr, 16));
    i += 2;
  }
  return out;
}

}  // namespace

Converter::Converter(const json& root, const SchemaLimits& limits) : root_(root), limits_(limits), out_(limits) {
  resolver_ = [this](const std::string& ref, const Where& where) -> const json& { return resolve(ref, where); };
}

namespace {

// nlohmann::json copies, compares and serializes recursively, so a document nested thousands deep (a const
// value, say) could exhaust the stack before any schema limit is met: its depth is checked first, without
// recursion. A schema needs max_depth levels of schemas, each one or two JSON levels deep.
void check_document_depth(const json& root, std::uint32_t max_depth) {
  const std::size_t limit = 4 * static_cast<std::size_t>(max_depth) + 16;
  std::vector<std::pair<const json*, std::size_t>> todo = {{&root, 1}};
  while (!todo.empty()) {
    const auto [node, depth] = todo.back();
    todo.pop_back();
    if (depth > limit) {
      Where{"", ""}.fail("the schema document is nested more than " + std::to_string(limit) + " deep (4 x max_depth + 16)");
    }
    if (node->is_structured()) {
      for (const json& child : *node) todo.emplace_back(&child, depth + 1);
    }
  }
}

}  // namespace

std::string Converter::run() {
  check_document_depth(root_, limits_.max_depth);
  define_named("root", body(root_, "", "root", 0), "");
  while (!pending_.empty()) {
    const Pending next = pending_.front();
    pending_.pop_front();
    define_named(next.name, body(*next.schema, next.path, next.name, 0), next.path);
  }
  check_left_recursion();
  return out_.text();
}

// The rule `name` (root, a $ref target) with the body of a value: that value's own rule renamed when it is
// the whole body and nothing else uses it, else `name ::= body`.
void Converter::define_named(const std::string& name, const Body& b, const std::string& path) {
  const bool bare = b.text.find_first_of(" \"[(|?*+{") == std::string::npos;
  if (bare && b.text != name && b.text.rfind(name + "-", 0) == 0 && out_.rename_unreferenced(b.text, name)) {
    if (auto it = edges_.find(b.text); it != edges_.end()) {
      edges_[name] = it->second;
      edges_.erase(b.text);
    }
    return;
  }
  out_.define(name, b.text, Where{path, ""});
  edges_[name] = b.left;
}

const json& Converter::resolve(const std::string& ref, const Where& at) const {
  const Where where{at.path, "$ref"};
  if (ref.empty() || ref[0] != '#') where.fail("only local references (\"#...\") are supported, not \"" + ref + "\"");
  const std::string pointer = percent_decoded(ref.substr(1), where);
  try {
    return root_.at(json::json_pointer(pointer));
  } catch (const json::exception&) {
    where.fail("\"" + ref + "\" names nothing in the schema");
  }
}

std::string Converter::ref_rule(const std::string& ref, const Where& where) {
  if (ref == "#") return "root";
  if (auto it = refs_.find(ref); it != refs_.end()) return it->second;
  const json& target = resolve(ref, where);
  const std::string pointer = percent_decoded(ref.substr(1), where);
  const std::string name = out_.fresh_name(pointer.substr(pointer.rfind('/') + 1));
  refs_.emplace(ref, name);
  paths_.emplace(name, pointer);
  pending_.push_back(Pending{&target, pointer, name});
  return name;
}

void Converter::check_depth(const std::string& path, std::uint32_t depth) const {
  if (depth > limits_.max_depth) {
    Where{path, ""}.fail("schemas nested more than " + std::to_string(limits_.max_depth) + " deep (max_depth)");
  }
}

std::string Converter::item(const Body& b, const std::string& hint, const Where& where) {
  const bool bare = !b.text.empty() && b.text.find_first_of(" \"[(|?*+{") == std::string::npos;
  if (bare) return b.text;
  const std::string name = out_.rule(hint, b.text, where);
  if (!b.left.empty()) edges_[name] = b.left;
  return name;
}

std::string Converter::value(const json& schema, const std::string& path, const std::string& hint, std::uint32_t depth) {
  return item(body(schema, path, hint, depth), hint, Where{path, ""});
}

Body Converter::body(const json& schema, const std::string& path, const std::string& hint, std::uint32_t depth) {
  check_depth(path, depth);
  const Where where{path, ""};
  if (schema.is_boolean()) {
    if (!schema.get<bool>()) where.unsatisfiable("the schema is false: no value can match");
    return Body{out_.primitive("value", where), {}};
  }
  if (!schema.is_object()) where.fail("a schema must be an object or a boolean");
  check_keywords(schema, path);
  if (auto r = schema.find("$ref"); r != schema.end()) {
    if (!r->is_string()) Where{path, "$ref"}.fail("$ref must be a string");
    if (!has_constraints(schema, {"$ref"})) {
      const std::string name = ref_rule(r->get<std::string>(), where);
      return Body{name, {name}};
    }
    // $ref beside other keywords: both apply (JSON Schema 2019-09 and later), as with allOf.
    return body(merge_all_of(schema, Where{path, "$ref"}, resolver_, limits_), path, hint, depth + 1);
  }
  if (schema.contains("allOf")) return body(merge_all_of(schema, Where{path, "allOf"}, resolver_, limits_), path, hint, depth + 1);
  if (schema.contains("anyOf")) return choice(schema, "anyOf", path, hint, depth);
  if (schema.contains("oneOf")) return choice(schema, "oneOf", path, hint, depth);
  if (schema.contains("enum") || schema.contains("const")) return literals(schema, path);
  return typed(schema, path, hint, depth);
}

void Converter::check_keywords(const json& schema, const std::string& path) const {
  static const std::set<std::string> known = {
      "type",      "properties", "required",  "additionalProperties", "enum",      "const",   "items",
      "prefixItems", "additionalItems", "minItems", "maxItems", "anyOf", "oneOf", "allOf", "$ref",
      "minLength", "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
  for (const auto& [k, v] : schema.items()) {
    if (!known.count(k) && !is_annotation(k)) Where{path, k}.fail("the keyword is not supported");
  }
}

bool Converter::has_constraints(const json& schema, const std::set<std::string>& except) {
  for (const auto& [k, v] : schema.items()) {
    if (!except.count(k) && !is_annotation(k)) return true;
  }
  return false;
}

// anyOf/oneOf: a choice of the branches; the keywords beside it apply to every branch, so each branch is
// merged with them. A false branch offers nothing and is dropped.
Body Converter::choice(const json& schema, const std::string& keyword, const std::string& path, const std::string& hint,
                       std::uint32_t depth) {
  const Where where{path, keyword};
  const json& branches = schema[keyword];
  if (!branches.is_array() || branches.empty()) where.fail(keyword + " must be a non-empty array of schemas");
  json rest = schema;
  rest.erase(keyword);
  const bool merge = has_constraints(rest, {});
  Body out;
  for (std::size_t i = 0; i < branches.size(); ++i) {
    const json& branch = branches[i];
    if (branch.is_boolean() && !branch.get<bool>()) continue;
    const std::string branch_path = path + "/" + keyword + "/" + std::to_string(i);
    std::string name;
    try {
      name = merge ? value(merge_pair(branch, rest, Where{branch_path, keyword}, resolver_, limits_), branch_path, hint + "-" + std::to_string(i), depth + 1)
                   : value(branch, branch_path, hint + "-" + std::to_string(i), depth + 1);
    } catch (const Unsatisfiable&) {
      continue;  // a branch nothing satisfies offers nothing; the rules it made are unused but valid
    }
    out.text += (out.text.empty() ? "" : " | ") + name;
    out.left.push_back(name);
  }
  if (out.text.empty()) where.unsatisfiable("every branch is false or unsatisfiable: no value can match");
  return out;
}

std::set<std::string> Converter::types_of(const json& schema, const std::string& path) const {
  static const std::set<std::string> all = {"object", "array", "string", "number", "integer", "boolean", "null"};
  std::set<std::string> types;
  if (auto t = schema.find("type"); t != schema.end()) {
    const Where where{path, "type"};
    if (t->is_string()) {
      types.insert(t->get<std::string>());
    } else if (t->is_array() && !t->empty()) {
      for (const json& e : *t) types.insert(e.is_string() ? e.get<std::string>() : std::string("?"));
    } else {
      where.fail("type must be a type name or a non-empty array of them");
    }
    for (const std::string& name : types) {
      if (!all.count(name)) where.fail("unknown type \"" + name + "\"");
    }
    return types;
  }
  static const std::vector<std::pair<std::string, std::vector<std::string>>> kinds = {
      {"object", {"properties", "required", "additionalProperties"}},
      {"array", {"items", "prefixItems", "additionalItems", "minItems", "maxItems"}},
      {"string", {"minLength", "maxLength", "pattern", "format"}},
      {"number", {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}},
  };
  for (const auto& [kind, keywords] : kinds) {
    for (const std::string& k : keywords) {
      if (schema.contains(k)) types.insert(kind);
    }
  }
  return types;
}

Body Converter::typed(const json& schema, const std::string& path, const std::string& hint, std::uint32_t depth) {
  const Where where{path, ""};
  const std::set<std::string> types = types_of(schema, path);
  if (types.empty()) return Body{out_.primitive("value", where), {}};
  Body out;
  for (const std::string& t : types) {
    std::string name;
    if (t == "null" || t == "boolean") {
      name = out_.primitive(t, where);
    } else if (t == "string") {
      name = string_value(schema, path, hint);
    } else if (t == "integer") {
      name = integer_value(schema, path);
    } else if (t == "number") {
      name = number_value(schema, path);
    } else if (t == "object") {
      name = object_value(schema, path, hint, depth);
    } else {
      name = array_value(schema, path, hint, depth);
    }
    out.text += (out.text.empty() ? "" : " | ") + name;
  }
  return out;
}

void Converter::check_left_recursion() const {
  // A rule reaching itself through first-position references (anyOf branches, $ref chains) without a
  // character in between would never end; every other value begins with a character of its own.
  std::map<std::string, int> color;  // 0 new, 1 on the path, 2 done
  std::function<void(const std::string&)> visit = [&](const std::string& name) {
    color[name] = 1;
    if (auto it = edges_.find(name); it != edges_.end()) {
      for (const std::string& next : it->second) {
        if (color[next] == 1) {
          const auto path = paths_.find(name);
          Where{path == paths_.end() ? "" : path->second, "$ref"}.fail("the reference cycle through \"" + next +
                                                         "\" reaches itself without any text in between");
        }
        if (color[next] == 0) visit(next);
      }
    }
    color[name] = 2;
  };
  for (const auto& [name, targets] : edges_) {
    if (color[name] == 0) visit(name);
  }
}

}  // namespace schema

std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema, const SchemaLimits& limits) {
  return schema::Converter(schema, limits).run();
}

std::string json_schema_to_gbnf(const nlohmann::json& schema, const SchemaLimits& limits) {
  const nlohmann::ordered_json ordered(schema);
  return json_schema_to_gbnf(ordered, limits);
}

std::string json_object_gbnf() {
  const SchemaLimits limits;
  schema::GbnfWriter out(limits);
  const schema::Where where{"", ""};
  out.define("root", out.primitive("object", where), where);
  return out.text();
}

}  // namespace loom::compute::grammar
