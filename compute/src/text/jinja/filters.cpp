// Filters and tests (builtins.hpp): jinja2's, with transformers' tojson.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <unordered_map>
#include <utility>

#include "builtins.hpp"
#include "strings.hpp"

namespace loom::compute::jinja::detail {
namespace {

using FilterFn = Value (*)(Renderer&, const Value&, Args&);
using TestFn = bool (*)(Renderer&, const Value&, Args&);

std::int64_t length_of(const Value& v) {
  switch (v.kind) {
    case Kind::undefined: return 0;
    case Kind::string: return static_cast<std::int64_t>(is_ascii(v.str()) ? v.str().size() : code_point_count(v.str()));
    case Kind::list: return static_cast<std::int64_t>(v.array().items.size());
    case Kind::dict:
      if (v.dict().is_loop) return v.dict().entries[1].second.integer > 0 ? static_cast<std::int64_t>(v.dict().entries[1].second.integer) : 0;
      return static_cast<std::int64_t>(v.dict().entries.size());
    case Kind::range: return v.range().size();
    default: fail(ErrorKind::type, "object of type '" + type_name(v) + "' has no len()");
  }
}

Value list_of(std::vector<Value> items) { return Value::from(Array{std::move(items), false}); }

// `a.b.0`-style attribute paths as map/selectattr/sort/join take them.
Value attribute_path(Renderer& r, Value v, const std::string& path) {
  std::size_t start = 0;
  for (;;) {
    std::size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!part.empty() && part.find_first_not_of("0123456789") == std::string::npos)
      v = get_item(r, v, Value::from_int(std::stoll(part)));
    else
      v = get_item(r, v, Value::from(part));
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

std::string str_arg(const Value& v, const char* what) {
  if (!v.is_string()) fail(ErrorKind::type, std::string(what) + " must be a string");
  return v.str();
}

Value f_trim(Renderer&, const Value& v, Args& a) {
  Value chars = a.get(0, "chars", Value::none());
  return Value::from(py_strip(to_str(v), chars.is_string() ? std::optional<std::string>(chars.str()) : std::nullopt, StripSide::both));
}
Value f_length(Renderer&, const Value& v, Args&) { return Value::from_int(length_of(v)); }
Value f_string(Renderer&, const Value& v, Args&) { return v.is_string() ? v : Value::from(to_str(v)); }
Value f_safe(Renderer&, const Value& v, Args&) { return Value::markup(to_str(v)); }
Value f_lower(Renderer&, const Value& v, Args&) { return Value::from(py_lower(to_str(v))); }
Value f_upper(Renderer&, const Value& v, Args&) { return Value::from(py_upper(to_str(v))); }
Value f_capitalize(Renderer&, const Value& v, Args&) { return Value::from(py_capitalize(to_str(v))); }

// jinja2's title: each run after one of -, whitespace, ( { [ < starts with an upper-case letter.
Value f_title(Renderer&, const Value& v, Args&) {
  std::string s = to_str(v), out, word;
  auto flush = [&] {
    if (word.empty()) return;
    auto cps = code_points(word);
    out += py_upper(cps[0]);
    out += py_lower(std::string_view(word).substr(cps[0].size()));
    word.clear();
  };
  for (auto cp : code_points(s)) {
    bool delim = cp == "-" || cp == "(" || cp == "{" || cp == "[" || cp == "<" ||
                 (cp.size() == 1 && is_py_space(static_cast<unsigned char>(cp[0])));
    if (delim) {
      flush();
      out += cp;
    } else {
      word += cp;
    }
  }
  flush();
  return Value::from(std::move(out));
}

Value f_replace(Renderer& r, const Value& v, Args& a) {
  Value count = a.get(2, "count", Value::none());
  long long n = count.kind == Kind::integer ? static_cast<long long>(count.integer) : -1;
  return Value::from(py_replace(to_str(v), to_str(a.get(0, "old")), to_str(a.get(1, "new")), n, r.limits().max_output_bytes));
}

Value f_default(Renderer&, const Value& v, Args& a) {
  bool boolean = truthy(a.get(1, "boolean", Value::from(false)));
  if (v.is_undefined() || (boolean && !truthy(v))) return a.get(0, "default_value", Value::from(std::string()));
  return v;
}

Value f_join(Renderer& r, const Value& v, Args& a) {
  std::string sep = to_str(a.get(0, "d", Value::from(std::string())));
  Value attribute = a.get(1, "attribute", Value::none());
  std::string out;
  bool first = true;
  for (auto& item : iterate(r, v)) {
    if (!first) out += sep;
    first = false;
    append_str(out, attribute.is_none() ? item : attribute_path(r, item, to_str(attribute)));
    r.check_bound(out.size());
  }
  r.check_size(out.size());
  return Value::from(std::move(out));
}

Value f_tojson(Renderer& r, const Value& v, Args& a) {
  JsonStyle style;
  style.ensure_ascii = truthy(a.get(0, "ensure_ascii", Value::from(false)));
  Value indent = a.get(1, "indent", Value::none());
  if (indent.kind == Kind::integer) style.indent = static_cast<std::size_t>(std::clamp<Int>(indent.integer, 0, 64));
  else if (!indent.is_none()) fail(ErrorKind::type, "tojson indent must be an integer");
  if (style.indent) style.item_separator = ",";
  Value separators = a.get(2, "separators", Value::none());
  if (separators.kind == Kind::list && separators.array().items.size() == 2) {
    style.item_separator = to_str(separators.array().items[0]);
    style.key_separator = to_str(separators.array().items[1]);
  } else if (!separators.is_none()) {
    fail(ErrorKind::type, "tojson separators must be a pair of strings");
  }
  style.sort_keys = truthy(a.get(3, "sort_keys", Value::from(false)));
  return Value::from(to_json(r, v, style));
}

Value f_items(Renderer&, const Value& v, Args&) {
  if (v.is_undefined()) return list_of({});
  if (v.kind != Kind::dict || v.dict().is_namespace || v.dict().is_loop) fail(ErrorKind::type, "items filter: can only get item pairs from a mapping");
  std::vector<Value> out;
  for (const auto& [k, val] : v.dict().entries) out.push_back(Value::from(Array{{k, val}, true}));
  return list_of(std::move(out));
}

Value f_list(Renderer& r, const Value& v, Args&) { return list_of(iterate(r, v)); }

Value f_first(Renderer& r, const Value& v, Args&) {
  if (v.kind == Kind::list) return v.array().items.empty() ? Value::undefined() : v.array().items.front();
  auto items = iterate(r, v);
  return items.empty() ? Value::undefined() : items.front();
}
Value f_last(Renderer& r, const Value& v, Args&) {
  if (v.kind == Kind::list) return v.array().items.empty() ? Value::undefined() : v.array().items.back();
  auto items = iterate(r, v);
  return items.empty() ? Value::undefined() : items.back();
}
Value f_reverse(Renderer& r, const Value& v, Args&) {
  if (v.is_string()) {
    auto cps = code_points(v.str());
    std::string out;
    for (auto it = cps.rbegin(); it != cps.rend(); ++it) out += *it;
    return Value::from(std::move(out));
  }
  auto items = iterate(r, v);
  std::reverse(items.begin(), items.end());
  return list_of(std::move(items));
}

Value f_map(Renderer& r, const Value& v, Args& a) {
  std::vector<Value> out;
  if (!truthy(v)) return list_of({});
  Value attribute = a.get(static_cast<std::size_t>(-1), "attribute");
  if (!attribute.is_undefined()) {
    Value fallback = a.get(static_cast<std::size_t>(-1), "default");
    for (auto& item : iterate(r, v)) {
      Value x = attribute_path(r, item, to_str(attribute));
      out.push_back(x.is_undefined() && !fallback.is_undefined() ? fallback : x);
    }
    return list_of(std::move(out));
  }
  if (a.positional.empty()) fail(ErrorKind::type, "map requires a filter name or attribute=");
  std::string filter = str_arg(a.positional[0], "map filter name");
  Args rest{{a.positional.begin() + 1, a.positional.end()}, a.keyword};
  for (auto& item : iterate(r, v)) out.push_back(call_filter(r, filter, item, rest));
  return list_of(std::move(out));
}

bool run_test(Renderer& r, const Value& item, const Args& a, std::size_t first) {
  if (a.positional.size() <= first) return truthy(item);
  Args rest{{a.positional.begin() + static_cast<std::ptrdiff_t>(first) + 1, a.positional.end()}, a.keyword};
  return call_test(r, str_arg(a.positional[first], "test name"), item, rest);
}

template <bool Keep, bool ByAttribute>
Value f_select(Renderer& r, const Value& v, Args& a) {
  std::vector<Value> out;
  std::string attribute;
  if (ByAttribute) {
    if (a.positional.empty()) fail(ErrorKind::type, "selectattr/rejectattr need an attribute");
    attribute = to_str(a.positional[0]);
  }
  if (!truthy(v)) return list_of({});
  for (auto& item : iterate(r, v)) {
    Value subject = ByAttribute ? attribute_path(r, item, attribute) : item;
    if (run_test(r, subject, a, ByAttribute ? 1 : 0) == Keep) out.push_back(item);
  }
  return list_of(std::move(out));
}

Value sort_key(Renderer& r, const Value& item, const Value& attribute, bool case_sensitive) {
  Value k = attribute.is_none() || attribute.is_undefined() ? item : attribute_path(r, item, to_str(attribute));
  if (!case_sensitive && k.is_string()) return Value::from(py_lower(k.str()));
  return k;
}

Value f_sort(Renderer& r, const Value& v, Args& a) {
  bool reverse = truthy(a.get(0, "reverse", Value::from(false)));
  bool case_sensitive = truthy(a.get(1, "case_sensitive", Value::from(false)));
  Value attribute = a.get(2, "attribute", Value::none());
  std::vector<std::pair<Value, Value>> keyed;
  for (auto& item : iterate(r, v)) keyed.emplace_back(sort_key(r, item, attribute, case_sensitive), item);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? compare(y.first, x.first) < 0 : compare(x.first, y.first) < 0;
  });
  std::vector<Value> out;
  for (auto& kv : keyed) out.push_back(std::move(kv.second));
  return list_of(std::move(out));
}

Value f_dictsort(Renderer& r, const Value& v, Args& a) {
  if (v.kind != Kind::dict) fail(ErrorKind::type, "dictsort: can only sort a mapping");
  bool case_sensitive = truthy(a.get(0, "case_sensitive", Value::from(false)));
  bool by_value = to_str(a.get(1, "by", Value::from(std::string("key")))) == "value";
  bool reverse = truthy(a.get(2, "reverse", Value::from(false)));
  Value items = f_items(r, v, a);
  std::vector<Value> out = items.array().items;
  std::stable_sort(out.begin(), out.end(), [&](const Value& x, const Value& y) {
    Value kx = sort_key(r, x.array().items[by_value ? 1 : 0], Value::none(), case_sensitive);
    Value ky = sort_key(r, y.array().items[by_value ? 1 : 0], Value::none(), case_sensitive);
    return reverse ? compare(ky, kx) < 0 : compare(kx, ky) < 0;
  });
  return list_of(std::move(out));
}

Value f_unique(Renderer& r, const Value& v, Args& a) {
  bool case_sensitive = truthy(a.get(0, "case_sensitive", Value::from(false)));
  Value attribute = a.get(1, "attribute", Value::none());
  std::vector<Value> out, seen;
  for (auto& item : iterate(r, v)) {
    Value k = sort_key(r, item, attribute, case_sensitive);
    bool dup = false;
    for (const auto& s : seen) dup = dup || equals(s, k);
    r.step(seen.size());
    if (dup) continue;
    seen.push_back(k);
    out.push_back(item);
  }
  return list_of(std::move(out));
}

std::optional<Int> parse_int(std::string s, int base) {
  s = py_strip(s, std::nullopt, StripSide::both);
  std::string digits;
  for (char c : s)
    if (c != '_') digits.push_back(c);
  if (digits.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(digits.c_str(), &end, base);
  if (errno != 0 || *end != '\0') return std::nullopt;
  return Int(v);
}

Value f_int(Renderer&, const Value& v, Args& a) {
  Value fallback = a.get(0, "default", Value::from_int(0));
  int base = static_cast<int>(to_str(a.get(1, "base", Value::from_int(10))) == "10" ? 10 : std::atoi(to_str(a.get(1, "base")).c_str()));
  switch (v.kind) {
    case Kind::integer: return v;
    case Kind::boolean: return Value::from(Int(v.boolean));
    case Kind::floating:
      if (!std::isfinite(v.number) || std::fabs(v.number) > 1e30) return fallback;
      return Value::from(static_cast<Int>(v.number));
    case Kind::string: {
      if (auto i = parse_int(v.str(), base)) return Value::from(*i);
      char* end = nullptr;
      std::string s = py_strip(v.str(), std::nullopt, StripSide::both);
      double d = std::strtod(s.c_str(), &end);
      if (!s.empty() && *end == '\0' && std::isfinite(d) && std::fabs(d) < 1e30) return Value::from(static_cast<Int>(d));
      return fallback;
    }
    default: return fallback;
  }
}

Value f_float(Renderer&, const Value& v, Args& a) {
  Value fallback = a.get(0, "default", Value::from(0.0));
  switch (v.kind) {
    case Kind::floating: return v;
    case Kind::integer: return Value::from(static_cast<double>(v.integer));
    case Kind::boolean: return Value::from(v.boolean ? 1.0 : 0.0);
    case Kind::string: {
      std::string s = py_strip(v.str(), std::nullopt, StripSide::both);
      char* end = nullptr;
      double d = std::strtod(s.c_str(), &end);
      if (!s.empty() && *end == '\0') return Value::from(d);
      return fallback;
    }
    default: return fallback;
  }
}

Value f_round(Renderer&, const Value& v, Args& a) {
  if (!v.is_number()) fail(ErrorKind::type, "round: a number is required");
  Value p = a.get(0, "precision", Value::from_int(0));
  std::string method = to_str(a.get(1, "method", Value::from(std::string("common"))));
  int precision = p.kind == Kind::integer ? static_cast<int>(std::clamp<Int>(p.integer, -300, 300)) : 0;
  double x = v.kind == Kind::floating ? v.number : static_cast<double>(v.kind == Kind::boolean ? Int(v.boolean) : v.integer);
  double scale = std::pow(10.0, precision);
  double y = x * scale;
  if (method == "common") y = std::round(y);
  else if (method == "ceil") y = std::ceil(y);
  else if (method == "floor") y = std::floor(y);
  else fail(ErrorKind::other, "method must be common, ceil or floor");
  return Value::from(y / scale);
}

Value f_abs(Renderer& r, const Value& v, Args&) {
  if (v.kind == Kind::floating) return Value::from(std::fabs(v.number));
  if (v.kind == Kind::integer) return v.integer < 0 ? arithmetic(r, Op::neg, v, Value()) : v;
  if (v.kind == Kind::boolean) return Value::from(Int(v.boolean));
  fail(ErrorKind::type, "bad operand type for abs(): '" + type_name(v) + "'");
}

Value f_indent(Renderer& r, const Value& v, Args& a) {
  Value width = a.get(0, "width", Value::from_int(4));
  std::string indention = width.is_string() ? width.str() : std::string(static_cast<std::size_t>(std::clamp<Int>(width.integer, 0, 1024)), ' ');
  bool first = truthy(a.get(1, "first", Value::from(false)));
  bool blank = truthy(a.get(2, "blank", Value::from(false)));
  auto lines = py_splitlines(to_str(v) + "\n");
  std::string out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) {
      out += "\n";
      if (blank || !lines[i].empty()) out += indention;
    }
    out += lines[i];
    r.check_bound(out.size());
  }
  if (first) out = indention + out;
  r.check_size(out.size());
  return Value::from(std::move(out));
}

Value f_sum(Renderer& r, const Value& v, Args& a) {
  Value attribute = a.get(0, "attribute", Value::none());
  Value total = a.get(1, "start", Value::from_int(0));
  for (auto& item : iterate(r, v)) total = arithmetic(r, Op::add, total, attribute.is_none() ? item : attribute_path(r, item, to_str(attribute)));
  return total;
}

template <bool Max>
Value f_minmax(Renderer& r, const Value& v, Args& a) {
  bool case_sensitive = truthy(a.get(0, "case_sensitive", Value::from(false)));
  Value attribute = a.get(1, "attribute", Value::none());
  auto items = iterate(r, v);
  if (items.empty()) return Value::undefined();
  std::size_t best = 0;
  for (std::size_t i = 1; i < items.size(); ++i) {
    int c = compare(sort_key(r, items[i], attribute, case_sensitive), sort_key(r, items[best], attribute, case_sensitive));
    if (Max ? c > 0 : c < 0) best = i;
  }
  return items[best];
}

// jinja2's format filter: `'%s-%s' | format(a, b)` is Python's `'%s-%s' % (a, b)`; keywords give %(name)s.
Value f_format(Renderer& r, const Value& v, Args& a) {
  Value args;
  if (!a.keyword.empty()) {
    Dict d;
    for (auto& [k, x] : a.keyword) d.set(Value::from(k), x);
    args = Value::from(std::move(d));
  } else {
    args = Value::from(Array{a.positional, true});
  }
  Value out = percent_format(to_str(v), args);
  r.check_size(out.str().size());
  return out;
}

// jinja2's truncate: past length + leeway (5), cut to length - len(end) (at a word boundary unless
// killwords) and append end.
Value f_truncate(Renderer& r, const Value& v, Args& a) {
  std::string s = to_str(v);
  Value length_v = a.get(0, "length", Value::from_int(255));
  long long length = length_v.kind == Kind::integer ? static_cast<long long>(std::clamp<Int>(length_v.integer, 0, 1 << 24)) : 255;
  bool killwords = truthy(a.get(1, "killwords", Value::from(false)));
  std::string end = to_str(a.get(2, "end", Value::from(std::string("..."))));
  Value leeway_v = a.get(3, "leeway", Value::from_int(5));
  long long leeway = leeway_v.kind == Kind::integer ? static_cast<long long>(std::clamp<Int>(leeway_v.integer, 0, 1 << 24)) : 5;
  auto cps = code_points(s);
  long long end_len = static_cast<long long>(code_point_count(end));
  if (length < end_len) fail(ErrorKind::other, "expected length >= " + std::to_string(end_len) + ", got " + std::to_string(length));
  if (static_cast<long long>(cps.size()) <= length + leeway) return Value::from(std::move(s));
  std::string head;
  for (long long i = 0; i < length - end_len; ++i) head += cps[static_cast<std::size_t>(i)];
  if (!killwords) {
    std::size_t space = head.rfind(' ');
    if (space != std::string::npos) head.resize(space);
  }
  r.check_size(head.size() + end.size());
  return Value::from(head + end);
}

Value f_wordcount(Renderer&, const Value& v, Args&) {
  long long words = 0;
  bool in_word = false;
  const std::string s = to_str(v);
  for (auto cp : code_points(s)) {
    unsigned char c = static_cast<unsigned char>(cp[0]);
    bool word_char = cp.size() > 1 || std::isalnum(c) || c == '_';
    if (word_char && !in_word) ++words;
    in_word = word_char;
  }
  return Value::from_int(words);
}

// Python's str.center.
Value f_center(Renderer& r, const Value& v, Args& a) {
  std::string s = to_str(v);
  Value width_v = a.get(0, "width", Value::from_int(80));
  long long width = width_v.kind == Kind::integer ? static_cast<long long>(std::clamp<Int>(width_v.integer, 0, 1 << 20)) : 80;
  long long len = static_cast<long long>(code_point_count(s));
  if (width <= len) return Value::from(std::move(s));
  long long margin = width - len;
  long long left = margin / 2 + (margin & width & 1);
  r.check_size(s.size() + static_cast<std::size_t>(margin));
  return Value::from(std::string(static_cast<std::size_t>(left), ' ') + s + std::string(static_cast<std::size_t>(margin - left), ' '));
}

Value f_batch(Renderer& r, const Value& v, Args& a) {
  Value count_v = a.get(0, "linecount");
  if (count_v.kind != Kind::integer || count_v.integer <= 0) fail(ErrorKind::other, "batch needs a positive line count");
  auto n = static_cast<std::size_t>(std::min<Int>(count_v.integer, 1 << 24));
  Value fill = a.get(1, "fill_with", Value::none());
  std::vector<Value> out, row;
  for (auto& item : iterate(r, v)) {
    row.push_back(item);
    if (row.size() == n) out.push_back(list_of(std::exchange(row, {})));
  }
  if (!row.empty()) {
    if (!fill.is_none())
      while (row.size() < n) row.push_back(fill);
    out.push_back(list_of(std::move(row)));
  }
  return list_of(std::move(out));
}

Value f_attr(Renderer& r, const Value& v, Args& a) { return get_attr(r, v, to_str(a.get(0, "name"))); }

Value f_escape(Renderer&, const Value& v, Args&) { return v.is_markup() ? v : Value::markup(html_escape(to_str(v))); }

const std::unordered_map<std::string, FilterFn>& filters() {
  static const std::unordered_map<std::string, FilterFn> table = {
      {"trim", f_trim},       {"length", f_length},     {"count", f_length},        {"string", f_string},
      {"safe", f_safe},       {"lower", f_lower},       {"upper", f_upper},         {"capitalize", f_capitalize},
      {"title", f_title},     {"replace", f_replace},   {"default", f_default},     {"d", f_default},
      {"join", f_join},       {"tojson", f_tojson},     {"items", f_items},         {"list", f_list},
      {"first", f_first},     {"last", f_last},         {"reverse", f_reverse},     {"map", f_map},
      {"select", f_select<true, false>},                {"reject", f_select<false, false>},
      {"selectattr", f_select<true, true>},             {"rejectattr", f_select<false, true>},
      {"sort", f_sort},       {"dictsort", f_dictsort}, {"unique", f_unique},       {"int", f_int},
      {"float", f_float},     {"round", f_round},       {"abs", f_abs},             {"indent", f_indent},
      {"sum", f_sum},         {"max", f_minmax<true>},  {"min", f_minmax<false>},   {"attr", f_attr},
      {"escape", f_escape},   {"e", f_escape},          {"format", f_format},       {"truncate", f_truncate},
      {"wordcount", f_wordcount},                       {"center", f_center},       {"batch", f_batch},
  };
  return table;
}

// ---- tests ----

bool is_mapping(const Value& v) { return v.kind == Kind::dict && !v.dict().is_namespace && !v.dict().is_loop; }
bool t_defined(Renderer&, const Value& v, Args&) { return !v.is_undefined(); }
bool t_undefined(Renderer&, const Value& v, Args&) { return v.is_undefined(); }
bool t_none(Renderer&, const Value& v, Args&) { return v.is_none(); }
bool t_string(Renderer&, const Value& v, Args&) { return v.is_string(); }
bool t_mapping(Renderer&, const Value& v, Args&) { return is_mapping(v); }
bool t_iterable(Renderer&, const Value& v, Args&) {
  return v.is_undefined() || v.is_string() || v.kind == Kind::list || is_mapping(v) || v.kind == Kind::range;
}
bool t_sequence(Renderer& r, const Value& v, Args& a) { return t_iterable(r, v, a); }
bool t_number(Renderer&, const Value& v, Args&) { return v.is_number(); }
bool t_integer(Renderer&, const Value& v, Args&) { return v.kind == Kind::integer; }
bool t_float(Renderer&, const Value& v, Args&) { return v.kind == Kind::floating; }
bool t_boolean(Renderer&, const Value& v, Args&) { return v.kind == Kind::boolean; }
bool t_true(Renderer&, const Value& v, Args&) { return v.kind == Kind::boolean && v.boolean; }
bool t_false(Renderer&, const Value& v, Args&) { return v.kind == Kind::boolean && !v.boolean; }
bool t_callable(Renderer&, const Value& v, Args&) { return v.kind == Kind::function; }
Int int_of(const Value& v) {
  if (v.kind == Kind::integer) return v.integer;
  if (v.kind == Kind::boolean) return v.boolean;
  if (v.is_undefined()) fail(ErrorKind::undefined, "'" + v.undefined_name() + "' is undefined");
  fail(ErrorKind::type, "an integer is required, not '" + type_name(v) + "'");
}
bool t_odd(Renderer&, const Value& v, Args&) { return int_of(v) % 2 != 0; }
bool t_even(Renderer&, const Value& v, Args&) { return int_of(v) % 2 == 0; }
bool t_divisibleby(Renderer& r, const Value& v, Args& a) {
  return equals(arithmetic(r, Op::mod, v, a.get(0, "num")), Value::from_int(0));
}
bool t_eq(Renderer&, const Value& v, Args& a) { return equals(v, a.get(0, "other")); }
bool t_ne(Renderer&, const Value& v, Args& a) { return !equals(v, a.get(0, "other")); }
bool t_lt(Renderer&, const Value& v, Args& a) { return compare(v, a.get(0, "other")) < 0; }
bool t_le(Renderer&, const Value& v, Args& a) { return compare(v, a.get(0, "other")) <= 0; }
bool t_gt(Renderer&, const Value& v, Args& a) { return compare(v, a.get(0, "other")) > 0; }
bool t_ge(Renderer&, const Value& v, Args& a) { return compare(v, a.get(0, "other")) >= 0; }
bool t_in(Renderer&, const Value& v, Args& a) { return contains(a.get(0, "seq"), v); }
bool t_lower(Renderer&, const Value& v, Args&) { return v.is_string() && py_lower(v.str()) == v.str(); }
bool t_upper(Renderer&, const Value& v, Args&) { return v.is_string() && py_upper(v.str()) == v.str(); }
bool t_sameas(Renderer&, const Value& v, Args& a) {
  Value o = a.get(0, "other");
  if (v.kind != o.kind) return false;
  if (v.kind == Kind::none || v.kind == Kind::undefined) return true;
  if (v.kind == Kind::boolean) return v.boolean == o.boolean;
  if (v.kind == Kind::integer) return v.integer == o.integer;
  return v.ptr == o.ptr;
}
bool t_escaped(Renderer&, const Value&, Args&) { return false; }
bool t_filter(Renderer&, const Value& v, Args&) { return v.is_string() && filters().count(v.str()) > 0; }

const std::unordered_map<std::string, TestFn>& tests() {
  static const std::unordered_map<std::string, TestFn> table = {
      {"defined", t_defined},   {"undefined", t_undefined}, {"none", t_none},         {"string", t_string},
      {"mapping", t_mapping},   {"iterable", t_iterable},   {"sequence", t_sequence}, {"number", t_number},
      {"integer", t_integer},   {"float", t_float},         {"boolean", t_boolean},   {"true", t_true},
      {"false", t_false},       {"callable", t_callable},   {"odd", t_odd},           {"even", t_even},
      {"divisibleby", t_divisibleby},                       {"equalto", t_eq},        {"eq", t_eq},
      {"==", t_eq},             {"ne", t_ne},               {"!=", t_ne},             {"lt", t_lt},
      {"<", t_lt},              {"lessthan", t_lt},         {"le", t_le},             {"<=", t_le},
      {"gt", t_gt},             {">", t_gt},                {"greaterthan", t_gt},    {"ge", t_ge},
      {">=", t_ge},             {"in", t_in},               {"lower", t_lower},       {"upper", t_upper},
      {"sameas", t_sameas},     {"escaped", t_escaped},     {"filter", t_filter},
  };
  return table;
}

}  // namespace

Value call_filter(Renderer& r, const std::string& name, const Value& value, Args& args) {
  auto it = filters().find(name);
  if (it == filters().end()) fail(ErrorKind::other, "No filter named '" + name + "'.");
  r.step(scan_cost(value));
  for (const auto& arg : args.positional) r.step(scan_cost(arg));
  return it->second(r, value, args);
}

bool call_test(Renderer& r, const std::string& name, const Value& value, Args& args) {
  auto it = tests().find(name);
  if (it == tests().end()) fail(ErrorKind::other, "No test named '" + name + "'.");
  r.step(scan_cost(value));
  for (const auto& arg : args.positional) r.step(scan_cost(arg));
  return it->second(r, value, args);
}

}  // namespace loom::compute::jinja::detail
