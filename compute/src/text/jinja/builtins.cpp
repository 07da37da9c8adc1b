// Attribute and item access, methods, globals, iteration and operators (builtins.hpp).
#include "builtins.hpp"

#include <cmath>
#include <cstring>

#include "strings.hpp"

namespace loom::compute::jinja::detail {
namespace {

Value str_list(std::vector<std::string> parts) {
  Array a;
  a.items.reserve(parts.size());
  for (auto& p : parts) a.items.push_back(Value::from(std::move(p)));
  return Value::from(std::move(a));
}

std::optional<std::string> opt_str(const Value& v, const char* what) {
  if (v.is_none() || v.is_undefined()) return std::nullopt;
  if (!v.is_string()) fail(ErrorKind::type, std::string(what) + " arg must be None or str");
  return v.str();
}

long long to_ll(const Value& v, const char* what) {
  if (v.kind == Kind::integer) {
    if (v.integer > static_cast<Int>(INT64_MAX) || v.integer < static_cast<Int>(INT64_MIN)) fail(ErrorKind::other, "integer too large");
    return static_cast<long long>(v.integer);
  }
  if (v.kind == Kind::boolean) return v.boolean;
  fail(ErrorKind::type, std::string(what) + ": an integer is required, not '" + type_name(v) + "'");
}

const std::string& need_str(const Value& v, const char* what) {
  if (!v.is_string()) fail(ErrorKind::type, std::string(what) + " must be str, not " + type_name(v));
  return v.str();
}

bool affix_match(const std::string& s, const Value& affix, bool prefix) {
  auto one = [&](const std::string& a) {
    if (a.size() > s.size()) return false;
    return prefix ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0;
  };
  if (affix.kind == Kind::list && affix.array().tuple) {
    for (const auto& a : affix.array().items)
      if (one(need_str(a, prefix ? "startswith first arg" : "endswith first arg"))) return true;
    return false;
  }
  return one(need_str(affix, prefix ? "startswith first arg" : "endswith first arg"));
}

// str.format with automatic ({}), numbered ({0}) and named ({name}) fields; format specs are not supported.
Value str_format(const std::string& fmt, const Args& args) {
  std::string out;
  std::size_t auto_index = 0;
  for (std::size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '{' && i + 1 < fmt.size() && fmt[i + 1] == '{') { out.push_back('{'); ++i; continue; }
    if (c == '}' && i + 1 < fmt.size() && fmt[i + 1] == '}') { out.push_back('}'); ++i; continue; }
    if (c != '{') { out.push_back(c); continue; }
    std::size_t end = fmt.find('}', i);
    if (end == std::string::npos) fail(ErrorKind::other, "Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, end - i - 1);
    if (field.find_first_of(":!") != std::string::npos) fail(ErrorKind::other, "format specs are not supported");
    Value v;
    if (field.empty()) v = args.get(auto_index++, "\x01");
    else if (field.find_first_not_of("0123456789") == std::string::npos) v = args.get(std::stoul(field), "\x01");
    else v = args.get(static_cast<std::size_t>(-1), field);
    if (v.is_undefined() && !args.has(0, field)) fail(ErrorKind::other, "format field '" + field + "' has no argument");
    append_str(out, v);
    i = end;
  }
  return Value::from(std::move(out));
}

std::optional<Value> string_method(Renderer& r, const std::string& s, const std::string& name, Args& a) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    auto side = name == "strip" ? StripSide::both : name == "lstrip" ? StripSide::left : StripSide::right;
    return Value::from(py_strip(s, opt_str(a.get(0, "chars"), name.c_str()), side));
  }
  if (name == "split" || name == "rsplit") {
    auto sep = opt_str(a.get(0, "sep"), name.c_str());
    Value m = a.get(1, "maxsplit", Value::from_int(-1));
    auto parts = name == "split" ? py_split(s, sep, to_ll(m, name.c_str())) : py_rsplit(s, sep, to_ll(m, name.c_str()));
    r.step(parts.size());
    return str_list(std::move(parts));
  }
  if (name == "startswith" || name == "endswith") return Value::from(affix_match(s, a.get(0, "prefix"), name == "startswith"));
  if (name == "replace") {
    Value count = a.get(2, "count", Value::from_int(-1));
    return Value::from(py_replace(s, need_str(a.get(0, "old"), "replace() argument 1"), need_str(a.get(1, "new"), "replace() argument 2"),
                                  to_ll(count, "replace"), r.limits().max_output_bytes));
  }
  if (name == "upper") return Value::from(py_upper(s));
  if (name == "lower") return Value::from(py_lower(s));
  if (name == "title") return Value::from(py_title(s));
  if (name == "capitalize") return Value::from(py_capitalize(s));
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    long long p = py_find(s, need_str(a.get(0, "sub"), name.c_str()), name[0] == 'r');
    if (p < 0 && (name == "index" || name == "rindex")) fail(ErrorKind::other, "substring not found");
    return Value::from_int(p);
  }
  if (name == "count") return Value::from_int(py_count(s, need_str(a.get(0, "sub"), "count")));
  if (name == "format") return str_format(s, a);
  if (name == "join") {
    std::string out;
    bool first = true;
    for (const auto& item : iterate(r, a.get(0, "iterable"))) {
      if (!first) out += s;
      first = false;
      out += need_str(item, "sequence item");
      r.check_bound(out.size());
    }
    r.check_size(out.size());
    return Value::from(std::move(out));
  }
  if (name == "splitlines") return str_list(py_splitlines(s));
  auto all_of = [&](auto pred) {
    if (s.empty()) return Value::from(false);
    for (unsigned char c : s)
      if (!pred(c)) return Value::from(false);
    return Value::from(true);
  };
  if (name == "isdigit") return all_of([](unsigned char c) { return c >= '0' && c <= '9'; });
  if (name == "isalpha") return all_of([](unsigned char c) { return std::isalpha(c) || c >= 0x80; });
  if (name == "isalnum") return all_of([](unsigned char c) { return std::isalnum(c) || c >= 0x80; });
  if (name == "isspace") return all_of([](unsigned char c) { return is_py_space(c); });
  if (name == "islower") return Value::from(py_lower(s) == s && py_upper(s) != s);
  if (name == "isupper") return Value::from(py_upper(s) == s && py_lower(s) != s);
  return std::nullopt;
}

bool is_mutating(Kind kind, const std::string& name) {
  static const char* const list_methods[] = {"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"};
  static const char* const dict_methods[] = {"update", "pop", "popitem", "setdefault", "clear"};
  if (kind == Kind::list)
    for (const char* m : list_methods)
      if (name == m) return true;
  if (kind == Kind::dict)
    for (const char* m : dict_methods)
      if (name == m) return true;
  return false;
}

Value dict_items(const Dict& d) {
  Array out;
  out.items.reserve(d.entries.size());
  for (const auto& [k, v] : d.entries) out.items.push_back(Value::from(Array{{k, v}, true}));
  return Value::from(std::move(out));
}

std::optional<Value> dict_method(const Value& obj, const std::string& name, Args& a) {
  const Dict& d = obj.dict();
  if (name == "items") return dict_items(d);
  if (name == "keys" || name == "values") {
    Array out;
    for (const auto& [k, v] : d.entries) out.items.push_back(name == "keys" ? k : v);
    return Value::from(std::move(out));
  }
  if (name == "get") {
    const Value* v = d.find(a.get(0, "key"));
    return v ? *v : a.get(1, "default", Value::none());
  }
  if (name == "copy") return Value::from(Dict{d.entries, false, false});
  return std::nullopt;
}

std::optional<Value> list_method(const Value& obj, const std::string& name, Args& a) {
  const auto& items = obj.array().items;
  if (name == "index" || name == "count") {
    Value x = a.get(0, "value");
    long long n = 0;
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (!equals(items[i], x)) continue;
      if (name == "index") return Value::from_int(static_cast<long long>(i));
      ++n;
    }
    if (name == "index") fail(ErrorKind::other, "value is not in list");
    return Value::from_int(n);
  }
  return std::nullopt;
}

Value loop_field(const Dict& loop, const std::string& name) {
  long long i = static_cast<long long>(loop.entries[0].second.integer);
  long long n = static_cast<long long>(loop.entries[1].second.integer);
  const Value& items = loop.entries[2].second;
  auto item_at = [&](long long k) {
    if (items.kind == Kind::range) return Value::from_int(items.range().at(k));
    return items.array().items[static_cast<std::size_t>(k)];
  };
  if (name == "index") return Value::from_int(i + 1);
  if (name == "index0") return Value::from_int(i);
  if (name == "revindex") return Value::from_int(n - i);
  if (name == "revindex0") return Value::from_int(n - i - 1);
  if (name == "first") return Value::from(i == 0);
  if (name == "last") return Value::from(i == n - 1);
  if (name == "length") return Value::from_int(n);
  if (name == "depth") return Value::from_int(1);
  if (name == "depth0") return Value::from_int(0);
  if (name == "previtem") return i > 0 ? item_at(i - 1) : Value::undefined("previtem");
  if (name == "nextitem") return i + 1 < n ? item_at(i + 1) : Value::undefined("nextitem");
  return Value::undefined(name);
}

Value bound_method(const Value& obj, const std::string& name) {
  Function f;
  f.name = name;
  f.call = [obj, name](Renderer& r, Args& args) -> Value {
    if (is_mutating(obj.kind, name))
      fail(ErrorKind::other, "access to attribute '" + name + "' of '" + type_name(obj) + "' object is unsafe");
    if (auto v = call_method(r, obj, name, args)) return *v;
    fail(ErrorKind::type, "'" + type_name(obj) + "' object has no method '" + name + "'");
  };
  return Value::from(std::move(f));
}

bool has_method(Renderer& r, const Value& obj, const std::string& name) {
  static const char* const str_methods[] = {"strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith",
                                            "replace", "upper", "lower", "title", "capitalize", "find", "rfind", "index",
                                            "rindex", "count", "format", "join", "splitlines", "isdigit", "isalpha",
                                            "isalnum", "isspace", "islower", "isupper"};
  static const char* const dict_methods[] = {"items", "keys", "values", "get", "copy"};
  static const char* const list_methods[] = {"index", "count"};
  (void)r;
  if (is_mutating(obj.kind, name)) return true;
  auto in = [&](const auto& table) {
    for (const char* m : table)
      if (name == m) return true;
    return false;
  };
  if (obj.is_string()) return in(str_methods);
  if (obj.kind == Kind::dict && !obj.dict().is_namespace && !obj.dict().is_loop) return in(dict_methods);
  if (obj.kind == Kind::list) return in(list_methods);
  return false;
}

std::string undefined_message(const Value& obj, const std::string& doing) {
  std::string message = "'";
  message += obj.undefined_name().empty() ? std::string("value") : obj.undefined_name();
  message += "' is undefined (";
  message += doing;
  message += ")";
  return message;
}

std::optional<Int> as_index(const Value& v) {
  if (v.kind == Kind::integer) return v.integer;
  if (v.kind == Kind::boolean) return Int(v.boolean);
  return std::nullopt;
}

}  // namespace

std::optional<Value> call_method(Renderer& r, const Value& obj, const std::string& name, Args& args) {
  r.step(scan_cost(obj));
  for (const auto& arg : args.positional) r.step(scan_cost(arg));
  if (is_mutating(obj.kind, name) && !(obj.kind == Kind::dict && (obj.dict().is_namespace || obj.dict().is_loop)))
    fail(ErrorKind::other, "access to attribute '" + name + "' of '" + type_name(obj) + "' object is unsafe");
  switch (obj.kind) {
    case Kind::string: return string_method(r, obj.str(), name, args);
    case Kind::dict:
      if (obj.dict().is_loop && name == "cycle") {
        if (args.positional.empty()) fail(ErrorKind::other, "no items for cycling given");
        auto i = static_cast<std::size_t>(obj.dict().entries[0].second.integer);
        return args.positional[i % args.positional.size()];
      }
      if (obj.dict().is_namespace || obj.dict().is_loop) return std::nullopt;
      return dict_method(obj, name, args);
    case Kind::list: return list_method(obj, name, args);
    default: return std::nullopt;
  }
}

Value get_attr(Renderer& r, const Value& obj, const std::string& name) {
  switch (obj.kind) {
    case Kind::undefined:
      fail(ErrorKind::undefined, undefined_message(obj, "reading its attribute '" + name + "'"));
    case Kind::dict: {
      const Dict& d = obj.dict();
      r.step(d.entries.size() / 16);  // keys are found by a linear scan
      if (d.is_loop) return loop_field(d, name);
      if (!d.is_namespace && has_method(r, obj, name)) return bound_method(obj, name);
      if (const Value* v = d.find(std::string_view(name))) return *v;
      return Value::undefined(name);
    }
    case Kind::string:
    case Kind::list:
      if (has_method(r, obj, name)) return bound_method(obj, name);
      return Value::undefined(name);
    default: return Value::undefined(name);
  }
}

Value get_item(Renderer& r, const Value& obj, const Value& key) {
  switch (obj.kind) {
    case Kind::undefined:
      fail(ErrorKind::undefined, undefined_message(obj, "reading an item"));
    case Kind::dict: {
      const Dict& d = obj.dict();
      r.step(d.entries.size() / 16);  // keys are found by a linear scan
      if (d.is_loop && key.is_string()) return loop_field(d, key.str());
      if (const Value* v = d.find(key)) return *v;
      break;
    }
    case Kind::list:
    case Kind::string:
    case Kind::range: {
      auto index = as_index(key);
      if (!index) break;
      if (obj.is_string()) r.step(scan_cost(obj));  // indexing by code point scans the text
      Int n = obj.kind == Kind::list ? Int(obj.array().items.size())
              : obj.kind == Kind::range ? Int(obj.range().size())
                                        : Int(is_ascii(obj.str()) ? obj.str().size() : code_point_count(obj.str()));
      Int i = *index < 0 ? *index + n : *index;
      if (i < 0 || i >= n) return Value::undefined();
      auto k = static_cast<std::size_t>(i);
      if (obj.kind == Kind::list) return obj.array().items[k];
      if (obj.kind == Kind::range) return Value::from_int(obj.range().at(static_cast<std::int64_t>(k)));
      if (is_ascii(obj.str())) return Value::from(std::string(1, obj.str()[k]));
      return Value::from(std::string(code_points(obj.str())[k]));
    }
    default: break;
  }
  if (key.is_string() && !obj.is_undefined()) return get_attr(r, obj, key.str());
  return Value::undefined();
}

Value get_slice(Renderer& r, const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) fail(ErrorKind::undefined, "cannot slice an undefined value");
  auto bound = [](const Value& v, long long fallback) -> long long {
    if (v.is_none()) return fallback;
    auto i = as_index(v);
    if (!i) fail(ErrorKind::type, "slice indices must be integers or None");
    if (*i > INT64_MAX / 2) return INT64_MAX / 2;
    if (*i < INT64_MIN / 2) return INT64_MIN / 2;
    return static_cast<long long>(*i);
  };
  long long st = bound(step, 1);
  if (st == 0) fail(ErrorKind::other, "slice step cannot be zero");
  std::vector<Value> items;
  std::vector<std::string_view> chars;
  long long n = 0;
  if (obj.kind == Kind::list) n = static_cast<long long>(obj.array().items.size());
  else if (obj.is_string()) n = static_cast<long long>((chars = code_points(obj.str())).size());
  else if (obj.kind == Kind::range) {
    items = iterate(r, obj);
    n = static_cast<long long>(items.size());
  } else fail(ErrorKind::type, "'" + type_name(obj) + "' object is not subscriptable");
  // Python's slice.indices().
  auto clamp = [&](long long v, bool is_start) {
    if (v < 0) v += n;
    if (st > 0) return std::clamp(v, 0LL, n);
    (void)is_start;
    return std::clamp(v, -1LL, n - 1);
  };
  long long b = start.is_none() ? (st > 0 ? 0 : n - 1) : clamp(bound(start, 0), true);
  long long e = stop.is_none() ? (st > 0 ? n : -1) : clamp(bound(stop, 0), false);
  std::string s;
  Array out;
  out.tuple = obj.kind == Kind::list && obj.array().tuple;
  for (long long i = b; st > 0 ? i < e : i > e; i += st) {
    r.step();
    if (obj.is_string()) s.append(chars[static_cast<std::size_t>(i)]);
    else out.items.push_back(obj.kind == Kind::list ? obj.array().items[static_cast<std::size_t>(i)] : items[static_cast<std::size_t>(i)]);
  }
  if (obj.is_string()) return Value::from(std::move(s));
  return Value::from(std::move(out));
}

std::vector<Value> iterate(Renderer& r, const Value& v) {
  std::vector<Value> out;
  switch (v.kind) {
    case Kind::undefined: return out;
    case Kind::list: r.step(v.array().items.size()); return v.array().items;
    case Kind::dict:
      if (v.dict().is_namespace || v.dict().is_loop) break;
      r.step(v.dict().entries.size());
      for (const auto& kv : v.dict().entries) out.push_back(kv.first);
      return out;
    case Kind::string:
      r.step(v.str().size());
      for (auto cp : code_points(v.str())) out.push_back(Value::from(std::string(cp)));
      return out;
    case Kind::range: {
      auto n = v.range().size();
      r.step(static_cast<std::uint64_t>(n));
      r.check_size(static_cast<std::size_t>(n) * sizeof(Value));
      out.reserve(static_cast<std::size_t>(n));
      for (std::int64_t i = 0; i < n; ++i) out.push_back(Value::from_int(v.range().at(i)));
      return out;
    }
    default: break;
  }
  fail(ErrorKind::type, "'" + type_name(v) + "' object is not iterable");
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind) {
    case Kind::undefined: return false;
    case Kind::string:
      if (!item.is_string()) fail(ErrorKind::type, "'in <string>' requires string as left operand, not " + type_name(item));
      return container.str().find(item.str()) != std::string::npos;
    case Kind::list:
      for (const auto& x : container.array().items)
        if (equals(x, item)) return true;
      return false;
    case Kind::dict:
      if (container.dict().is_namespace || container.dict().is_loop) break;
      return container.dict().find(item) != nullptr;
    case Kind::range: {
      auto i = as_index(item);
      if (!i) return false;
      const Range& rg = container.range();
      Int off = *i - rg.start;
      if (rg.step > 0 ? (*i < rg.start || *i >= rg.stop) : (*i > rg.start || *i <= rg.stop)) return false;
      return off % rg.step == 0;
    }
    default: break;
  }
  fail(ErrorKind::type, "argument of type '" + type_name(container) + "' is not iterable");
}

namespace {
[[noreturn]] void overflow() { fail(ErrorKind::other, "integer result out of range"); }

Int iadd(Int a, Int b) { Int c; if (__builtin_add_overflow(a, b, &c)) overflow(); return c; }
Int isub(Int a, Int b) { Int c; if (__builtin_sub_overflow(a, b, &c)) overflow(); return c; }
Int imul(Int a, Int b) { Int c; if (__builtin_mul_overflow(a, b, &c)) overflow(); return c; }

Value repeat(Renderer& r, const Value& seq, Int times) {
  std::size_t n = times > 0 ? static_cast<std::size_t>(std::min<Int>(times, Int(SIZE_MAX / 2))) : 0;
  if (seq.is_string()) {
    if (n > 0 && seq.str().size() > 0) r.check_size(seq.str().size() * std::min<std::size_t>(n, SIZE_MAX / (seq.str().size() + 1)));
    std::string out;
    for (std::size_t i = 0; i < n && !seq.str().empty(); ++i) out += seq.str();
    return Value::from(std::move(out));
  }
  const auto& items = seq.array().items;
  if (n > 0 && !items.empty()) r.check_size(items.size() * sizeof(Value) * std::min<std::size_t>(n, SIZE_MAX / (items.size() * sizeof(Value) + 1)));
  Array out;
  out.tuple = seq.array().tuple;
  for (std::size_t i = 0; i < n && !items.empty(); ++i) out.items.insert(out.items.end(), items.begin(), items.end());
  return Value::from(std::move(out));
}

bool intlike(const Value& v) { return v.kind == Kind::integer || v.kind == Kind::boolean; }
Int to_int(const Value& v) { return v.kind == Kind::boolean ? Int(v.boolean) : v.integer; }
double to_double(const Value& v) { return v.kind == Kind::floating ? v.number : static_cast<double>(to_int(v)); }

Value int_pow(Int base, Int exp) {
  if (exp < 0) return Value::from(std::pow(static_cast<double>(base), static_cast<double>(exp)));
  if (base == 0 || base == 1) return Value::from(exp == 0 ? Int(1) : base);
  if (base == -1) return Value::from(exp % 2 == 0 ? Int(1) : Int(-1));
  Int result = 1;
  for (Int i = 0; i < exp; ++i) result = imul(result, base);  // at most ~127 rounds before overflow
  return Value::from(result);
}

const char* op_symbol(Op op) {
  switch (op) {
    case Op::add: return "+";
    case Op::sub: return "-";
    case Op::mul: return "*";
    case Op::div: return "/";
    case Op::floordiv: return "//";
    case Op::mod: return "%";
    case Op::pow: return "**";
    case Op::neg: return "unary -";
    case Op::pos: return "unary +";
    default: return "?";
  }
}

Value numeric(Op op, const Value& a, const Value& b) {
  if (intlike(a) && intlike(b)) {
    Int x = to_int(a), y = to_int(b);
    switch (op) {
      case Op::add: return Value::from(iadd(x, y));
      case Op::sub: return Value::from(isub(x, y));
      case Op::mul: return Value::from(imul(x, y));
      case Op::div:
        if (y == 0) fail(ErrorKind::other, "division by zero");
        return Value::from(static_cast<double>(x) / static_cast<double>(y));
      case Op::floordiv:
      case Op::mod: {
        if (y == 0) fail(ErrorKind::other, "integer division or modulo by zero");
        if (y == -1) return op == Op::mod ? Value::from(Int(0)) : Value::from(isub(0, x));
        Int q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) --q, m += y;
        return Value::from(op == Op::mod ? m : q);
      }
      case Op::pow: return int_pow(x, y);
      default: break;
    }
  }
  double x = to_double(a), y = to_double(b);
  switch (op) {
    case Op::add: return Value::from(x + y);
    case Op::sub: return Value::from(x - y);
    case Op::mul: return Value::from(x * y);
    case Op::div:
      if (y == 0) fail(ErrorKind::other, "float division by zero");
      return Value::from(x / y);
    case Op::floordiv:
    case Op::mod: {
      if (y == 0) fail(ErrorKind::other, "float modulo");
      double m = std::fmod(x, y);
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      return Value::from(op == Op::mod ? m : std::floor((x - m) / y));
    }
    case Op::pow: return Value::from(std::pow(x, y));
    default: break;
  }
  return Value();
}

}  // namespace

Value arithmetic(Renderer& r, Op op, const Value& a, const Value& b) {
  if (a.is_undefined() || (b.is_undefined() && op != Op::neg && op != Op::pos))
    fail(ErrorKind::undefined, std::string("'") + (a.is_undefined() ? a.undefined_name() : b.undefined_name()) +
                                   "' is undefined (used with " + op_symbol(op) + ")");
  if (op == Op::neg || op == Op::pos) {
    if (!a.is_number()) fail(ErrorKind::type, std::string("bad operand type for ") + op_symbol(op) + ": '" + type_name(a) + "'");
    if (op == Op::pos) return a.kind == Kind::boolean ? Value::from(Int(a.boolean)) : a;
    return a.kind == Kind::floating ? Value::from(-a.number) : Value::from(isub(0, to_int(a)));
  }
  if (a.is_number() && b.is_number()) return numeric(op, a, b);
  if (op == Op::add && a.is_string() && b.is_string()) {
    r.check_size(a.str().size() + b.str().size());
    if (a.is_markup() || b.is_markup())
      return Value::markup((a.is_markup() ? a.str() : html_escape(a.str())) + (b.is_markup() ? b.str() : html_escape(b.str())));
    return Value::from(a.str() + b.str());
  }
  if (op == Op::add && a.kind == Kind::list && b.kind == Kind::list && a.array().tuple == b.array().tuple) {
    Array out{a.array().items, a.array().tuple};
    out.items.insert(out.items.end(), b.array().items.begin(), b.array().items.end());
    r.check_size(out.items.size() * sizeof(Value));
    return Value::from(std::move(out));
  }
  if (op == Op::mod && a.is_string()) {
    Value out = percent_format(a.str(), b);
    r.check_size(out.str().size());
    return out;
  }
  if (op == Op::mul && (a.is_string() || a.kind == Kind::list) && intlike(b)) return repeat(r, a, to_int(b));
  if (op == Op::mul && (b.is_string() || b.kind == Kind::list) && intlike(a)) return repeat(r, b, to_int(a));
  fail(ErrorKind::type, std::string("unsupported operand type(s) for ") + op_symbol(op) + ": '" + type_name(a) + "' and '" +
                            type_name(b) + "'");
}

}  // namespace loom::compute::jinja::detail
