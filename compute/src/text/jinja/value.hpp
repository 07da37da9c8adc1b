// Python-like values for the Jinja interpreter (internal): undefined, None, bool, int, float, str, list,
// tuple, dict, namespace, range and callables, with Python's truthiness, equality, ordering, str() and
// repr(). Containers are shared and immutable once built (the sandbox refuses mutating methods); only a
// namespace() changes, through `{% set ns.attr = ... %}`.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "loom/compute/text/jinja/template.hpp"

namespace loom::compute::jinja::detail {

// Python ints as the templates need them: wide enough for any JSON integer (uint64 included); arithmetic
// beyond this range is an error, never a wrong number.
__extension__ typedef __int128 Int;
__extension__ typedef unsigned __int128 UInt;

enum class Kind : std::uint8_t { undefined, none, boolean, integer, floating, string, list, dict, range, function };

struct Value;
struct Array;
struct Dict;
struct Range;
struct Function;
class Renderer;

struct Value {
  Kind kind = Kind::undefined;
  bool boolean = false;
  Int integer = 0;
  double number = 0;
  std::shared_ptr<const void> ptr;  // string/Array/Dict/Range/Function by kind; an undefined's name (string)

  static Value none() { Value v; v.kind = Kind::none; return v; }
  static Value undefined(std::string name = {});
  static Value from(bool b) { Value v; v.kind = Kind::boolean; v.boolean = b; return v; }
  static Value from(Int i) { Value v; v.kind = Kind::integer; v.integer = i; return v; }
  static Value from_int(long long i) { return from(static_cast<Int>(i)); }
  static Value from(double d) { Value v; v.kind = Kind::floating; v.number = d; return v; }
  static Value from(std::string s);
  // A string marked safe (jinja2's Markup, from |safe or |escape): adding a plain string to it escapes that one.
  static Value markup(std::string s) { Value v = from(std::move(s)); v.boolean = true; return v; }
  bool is_markup() const { return kind == Kind::string && boolean; }
  static Value from(Array a);
  static Value from(Dict d);
  static Value from(std::shared_ptr<Dict> d);
  static Value from(Range r);
  static Value from(Function f);

  bool is_undefined() const { return kind == Kind::undefined; }
  bool is_none() const { return kind == Kind::none; }
  bool is_string() const { return kind == Kind::string; }
  bool is_number() const { return kind == Kind::integer || kind == Kind::floating || kind == Kind::boolean; }
  const std::string& str() const { return *static_cast<const std::string*>(ptr.get()); }
  const Array& array() const { return *static_cast<const Array*>(ptr.get()); }
  const Dict& dict() const { return *static_cast<const Dict*>(ptr.get()); }
  Dict& mutable_dict() const { return *const_cast<Dict*>(static_cast<const Dict*>(ptr.get())); }
  const Range& range() const { return *static_cast<const Range*>(ptr.get()); }
  const Function& function() const { return *static_cast<const Function*>(ptr.get()); }
  std::string undefined_name() const { return ptr ? str() : std::string(); }
};

// Nesting depth is bounded (kMaxValueDepth) so that printing, comparing and destroying a value never
// recurses without bound; a namespace counts as depth 1 (the Renderer clears namespaces after a render).
inline constexpr std::uint32_t kMaxValueDepth = 1000;

struct Array {
  std::vector<Value> items;
  bool tuple = false;
  std::uint32_t depth = 1;
};

struct Dict {
  std::vector<std::pair<Value, Value>> entries;  // insertion order
  bool is_namespace = false;
  bool is_loop = false;
  std::uint32_t depth = 1;
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(Value key, Value value);
};

struct Range {
  std::int64_t start = 0, stop = 0, step = 1;
  std::int64_t size() const;
  std::int64_t at(std::int64_t i) const { return start + i * step; }
};

struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // Python-like binding: the argument named `name` or the positional one at `index`, else `fallback`.
  Value get(std::size_t index, std::string_view name, Value fallback = {}) const;
  bool has(std::size_t index, std::string_view name) const;
};

struct Function {
  std::string name;
  std::function<Value(Renderer&, Args&)> call;
};

[[noreturn]] void fail(ErrorKind kind, std::string message);
std::uint32_t depth_of(const Value& v);
void check_depth(std::uint32_t depth);

// Python semantics.
bool truthy(const Value& v);
bool equals(const Value& a, const Value& b, std::uint32_t depth = 0);
int compare(const Value& a, const Value& b, std::uint32_t depth = 0);  // <0, 0, >0; TypeError when Python refuses to order them
std::string type_name(const Value& v);
// What scanning a value once costs in evaluation steps: a step per 8 bytes of a string, per item of a list or
// dict. Operators, filters, tests and methods pay this for their operands, so that a loop cannot do
// unbounded work per step on a large value.
std::uint64_t scan_cost(const Value& v);
std::string to_str(const Value& v);  // str()
void append_str(std::string& out, const Value& v, std::uint32_t depth = 0);
void append_repr(std::string& out, const Value& v, std::uint32_t depth = 0);
std::string int_to_string(Int i);
std::string float_repr(double d);
void append_string_repr(std::string& out, std::string_view s);
std::string html_escape(std::string_view s);

// UTF-8 strings as sequences of code points (Python str indexing, len, iteration).
bool is_ascii(std::string_view s);
std::size_t code_point_count(std::string_view s);
std::vector<std::string_view> code_points(std::string_view s);
bool is_py_space(char32_t c);

}  // namespace loom::compute::jinja::detail
