// The library a template calls into (internal): filters, tests, methods of str/dict/list as the immutable
// sandbox exposes them, attribute and item access, globals, iteration, and JSON conversion in both
// directions (tojson is Python's json.dumps, as transformers defines it).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator.hpp"
#include "value.hpp"

namespace loom::compute::jinja::detail {

Value call_filter(Renderer& r, const std::string& name, const Value& value, Args& args);
bool call_test(Renderer& r, const std::string& name, const Value& value, Args& args);
// `a.b`: the attribute (a method, a namespace or loop field) first, then the key.
Value get_attr(Renderer& r, const Value& obj, const std::string& name);
// `a[b]`: the key or index first, then the attribute.
Value get_item(Renderer& r, const Value& obj, const Value& key);
Value get_slice(Renderer& r, const Value& obj, const Value& start, const Value& stop, const Value& step);
// obj.name(args) without building a bound method; nullopt when obj has no such method.
std::optional<Value> call_method(Renderer& r, const Value& obj, const std::string& name, Args& args);
// range, namespace, dict, raise_exception, strftime_now; undefined for anything else.
Value global(const std::string& name);
// Every item of a value as `for` sees it (dict keys, string characters); undefined is empty; a value that is
// not iterable is a TypeError.
std::vector<Value> iterate(Renderer& r, const Value& v);
bool contains(const Value& container, const Value& item);
Value arithmetic(Renderer& r, Op op, const Value& a, const Value& b);
// Python's `fmt % args` (args: a tuple, a dict for %(name)s, or one value).
Value percent_format(const std::string& fmt, const Value& args);

Value from_json(const nlohmann::ordered_json& j);
struct JsonStyle {
  std::optional<std::size_t> indent;
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};
std::string to_json(Renderer& r, const Value& v, const JsonStyle& style);

}  // namespace loom::compute::jinja::detail
