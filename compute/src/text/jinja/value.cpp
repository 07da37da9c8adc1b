// Python value semantics for the Jinja interpreter: equality, ordering, str() and repr() (value.hpp).
#include "value.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "../unicode_text.hpp"

namespace loom::compute::jinja::detail {

void fail(ErrorKind kind, std::string message) { throw TemplateError(kind, std::move(message)); }

Value Value::undefined(std::string name) {
  Value v;
  if (!name.empty()) v.ptr = std::make_shared<const std::string>(std::move(name));
  return v;
}
Value Value::from(std::string s) {
  Value v;
  v.kind = Kind::string;
  v.ptr = std::make_shared<const std::string>(std::move(s));
  return v;
}
std::uint32_t depth_of(const Value& v) {
  if (v.kind == Kind::list) return v.array().depth;
  if (v.kind == Kind::dict) return v.dict().is_namespace ? 1 : v.dict().depth;
  return 0;
}

void check_depth(std::uint32_t depth) {
  if (depth > kMaxValueDepth)
    fail(ErrorKind::limit, "value nested deeper than the limit of " + std::to_string(kMaxValueDepth));
}

Value Value::from(Array a) {
  std::uint32_t depth = 0;
  for (const auto& item : a.items) depth = std::max(depth, depth_of(item));
  a.depth = depth + 1;
  check_depth(a.depth);
  Value v;
  v.kind = Kind::list;
  v.ptr = std::make_shared<const Array>(std::move(a));
  return v;
}
Value Value::from(Dict d) { return from(std::make_shared<Dict>(std::move(d))); }
Value Value::from(std::shared_ptr<Dict> d) {
  std::uint32_t depth = 0;
  for (const auto& kv : d->entries) depth = std::max({depth, depth_of(kv.first), depth_of(kv.second)});
  d->depth = depth + 1;
  check_depth(d->depth);
  Value v;
  v.kind = Kind::dict;
  v.ptr = std::move(d);
  return v;
}
Value Value::from(Range r) {
  Value v;
  v.kind = Kind::range;
  v.ptr = std::make_shared<const Range>(r);
  return v;
}
Value Value::from(Function f) {
  Value v;
  v.kind = Kind::function;
  v.ptr = std::make_shared<const Function>(std::move(f));
  return v;
}

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.str()));
  for (const auto& [k, v] : entries)
    if (equals(k, key)) return &v;
  return nullptr;
}
const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : entries)
    if (k.is_string() && k.str() == key) return &v;
  return nullptr;
}
void Dict::set(Value key, Value value) {
  for (auto& [k, v] : entries)
    if (equals(k, key)) {
      v = std::move(value);
      return;
    }
  entries.emplace_back(std::move(key), std::move(value));
}

std::int64_t Range::size() const {
  if (step > 0 && start < stop) return (stop - start - 1) / step + 1;
  if (step < 0 && start > stop) return (start - stop - 1) / (-step) + 1;
  return 0;
}

Value Args::get(std::size_t index, std::string_view name, Value fallback) const {
  for (const auto& [k, v] : keyword)
    if (k == name) return v;
  if (index < positional.size()) return positional[index];
  return fallback;
}
bool Args::has(std::size_t index, std::string_view name) const {
  for (const auto& kv : keyword)
    if (kv.first == name) return true;
  return index < positional.size();
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Kind::undefined:
    case Kind::none: return false;
    case Kind::boolean: return v.boolean;
    case Kind::integer: return v.integer != 0;
    case Kind::floating: return v.number != 0.0;
    case Kind::string: return !v.str().empty();
    case Kind::list: return !v.array().items.empty();
    case Kind::dict: return v.dict().is_namespace || v.dict().is_loop || !v.dict().entries.empty();
    case Kind::range: return v.range().size() > 0;
    case Kind::function: return true;
  }
  return false;
}

namespace {
bool is_intlike(const Value& v) { return v.kind == Kind::integer || v.kind == Kind::boolean; }
Int as_int(const Value& v) { return v.kind == Kind::boolean ? Int(v.boolean) : v.integer; }
double as_double(const Value& v) { return v.kind == Kind::floating ? v.number : static_cast<double>(as_int(v)); }
}  // namespace

bool equals(const Value& a, const Value& b, std::uint32_t depth) {
  check_depth(depth);
  if (a.is_number() && b.is_number()) {
    if (is_intlike(a) && is_intlike(b)) return as_int(a) == as_int(b);
    return as_double(a) == as_double(b);
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::undefined:
    case Kind::none: return true;
    case Kind::string: return a.str() == b.str();
    case Kind::list: {
      const auto& x = a.array();
      const auto& y = b.array();
      if (x.tuple != y.tuple || x.items.size() != y.items.size()) return false;
      for (std::size_t i = 0; i < x.items.size(); ++i)
        if (!equals(x.items[i], y.items[i], depth + 1)) return false;
      return true;
    }
    case Kind::dict: {
      const auto& x = a.dict();
      const auto& y = b.dict();
      if (x.is_namespace || y.is_namespace || x.is_loop || y.is_loop) return a.ptr == b.ptr;
      if (x.entries.size() != y.entries.size()) return false;
      for (const auto& [k, v] : x.entries) {
        const Value* other = y.find(k);
        if (!other || !equals(v, *other, depth + 1)) return false;
      }
      return true;
    }
    case Kind::range: {
      const auto& x = a.range();
      const auto& y = b.range();
      if (x.size() != y.size()) return false;
      return x.size() == 0 || (x.start == y.start && (x.size() == 1 || x.step == y.step));
    }
    default: return a.ptr == b.ptr;
  }
}

int compare(const Value& a, const Value& b, std::uint32_t depth) {
  check_depth(depth);
  if (a.is_number() && b.is_number()) {
    if (is_intlike(a) && is_intlike(b)) {
      Int x = as_int(a), y = as_int(b);
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    double x = as_double(a), y = as_double(b);
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    int c = a.str().compare(b.str());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.kind == Kind::list && b.kind == Kind::list && a.array().tuple == b.array().tuple) {
    const auto& x = a.array().items;
    const auto& y = b.array().items;
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals(x[i], y[i], depth + 1)) continue;
      return compare(x[i], y[i], depth + 1);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  if (a.is_undefined() || b.is_undefined()) fail(ErrorKind::undefined, "cannot compare an undefined value");
  fail(ErrorKind::type, "'<' not supported between instances of '" + type_name(a) + "' and '" + type_name(b) + "'");
}

std::uint64_t scan_cost(const Value& v) {
  switch (v.kind) {
    case Kind::string: return v.str().size() / 8;
    case Kind::list: return v.array().items.size();
    case Kind::dict: return v.dict().entries.size();
    default: return 0;
  }
}

std::string type_name(const Value& v) {
  switch (v.kind) {
    case Kind::undefined: return "Undefined";
    case Kind::none: return "NoneType";
    case Kind::boolean: return "bool";
    case Kind::integer: return "int";
    case Kind::floating: return "float";
    case Kind::string: return "str";
    case Kind::list: return v.array().tuple ? "tuple" : "list";
    case Kind::dict: return v.dict().is_namespace ? "Namespace" : (v.dict().is_loop ? "LoopContext" : "dict");
    case Kind::range: return "range";
    case Kind::function: return "function";
  }
  return "object";
}

std::string int_to_string(Int i) {
  if (i == 0) return "0";
  bool negative = i < 0;
  // Work on the magnitude as unsigned so that the most negative value does not overflow.
  UInt u = negative ? static_cast<UInt>(0) - static_cast<UInt>(i)
                                 : static_cast<UInt>(i);
  char buf[48];
  int n = 0;
  while (u > 0) {
    buf[n++] = static_cast<char>('0' + static_cast<int>(u % 10));
    u /= 10;
  }
  std::string s;
  if (negative) s.push_back('-');
  while (n > 0) s.push_back(buf[--n]);
  return s;
}

// Python's repr(float): the shortest digits that read back to the same double, in fixed notation when the
// decimal exponent is in [-4, 16), else scientific with a sign and at least two exponent digits.
std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<std::size_t>(res.ptr - buf));
  bool negative = sci.front() == '-';
  if (negative) sci.remove_prefix(1);
  auto e_pos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e_pos))
    if (c != '.') digits.push_back(c);
  int exponent = std::atoi(std::string(sci.substr(e_pos + 1)).c_str());
  std::string out = negative ? "-" : "";
  int decpt = exponent + 1;
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0.";
      out.append(static_cast<std::size_t>(-decpt), '0');
      out += digits;
    } else if (static_cast<std::size_t>(decpt) >= digits.size()) {
      out += digits + std::string(static_cast<std::size_t>(decpt) - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<std::size_t>(decpt)) + "." + digits.substr(static_cast<std::size_t>(decpt));
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) {
    out += '.';
    out.append(digits, 1, std::string::npos);
  }
  char exp_buf[16];
  std::snprintf(exp_buf, sizeof exp_buf, "e%c%02d", exponent < 0 ? '-' : '+', exponent < 0 ? -exponent : exponent);
  return out + exp_buf;
}

bool is_py_space(char32_t c) {
  if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f)) return true;
  if (c < 0x85) return false;
  return c == 0x85 || c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
         c == 0x202f || c == 0x205f || c == 0x3000;
}

namespace {
bool is_printable(char32_t c) {
  if (c == ' ') return true;
  auto classes = compute::detail::char_classes(c);
  return (classes & ~compute::detail::char_class::whitespace) != 0;
}
void append_hex(std::string& out, char prefix, unsigned value, int width) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "\\%c%0*x", prefix, width, value);
  out += buf;
}
}  // namespace

void append_string_repr(std::string& out, std::string_view s) {
  char quote = (s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos) ? '"' : '\'';
  out.push_back(quote);
  for (std::size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      if (c == '\\') out += "\\\\";
      else if (c == static_cast<unsigned char>(quote)) (out.push_back('\\'), out.push_back(quote));
      else if (c == '\n') out += "\\n";
      else if (c == '\r') out += "\\r";
      else if (c == '\t') out += "\\t";
      else if (c < 0x20 || c == 0x7f) append_hex(out, 'x', c, 2);
      else out.push_back(static_cast<char>(c));
      continue;
    }
    auto unit = compute::detail::decode_utf8(s, i);
    if (unit.code_point == compute::detail::kInvalidCodePoint) {
      append_hex(out, 'x', c, 2);  // as Python's surrogateescape would show a stray byte
    } else if (is_printable(unit.code_point)) {
      out.append(s.substr(i, unit.length));
    } else if (unit.code_point < 0x100) {
      append_hex(out, 'x', static_cast<unsigned>(unit.code_point), 2);
    } else if (unit.code_point < 0x10000) {
      append_hex(out, 'u', static_cast<unsigned>(unit.code_point), 4);
    } else {
      append_hex(out, 'U', static_cast<unsigned>(unit.code_point), 8);
    }
    i += unit.length;
  }
  out.push_back(quote);
}

void append_repr(std::string& out, const Value& v, std::uint32_t depth) {
  check_depth(depth);
  switch (v.kind) {
    case Kind::undefined: out += "Undefined"; return;
    case Kind::string: append_string_repr(out, v.str()); return;
    case Kind::list: {
      const auto& a = v.array();
      out.push_back(a.tuple ? '(' : '[');
      for (std::size_t i = 0; i < a.items.size(); ++i) {
        if (i) out += ", ";
        append_repr(out, a.items[i], depth + 1);
      }
      if (a.tuple && a.items.size() == 1) out.push_back(',');
      out.push_back(a.tuple ? ')' : ']');
      return;
    }
    case Kind::dict: {
      const auto& d = v.dict();
      if (d.is_namespace) out += "<Namespace ";
      out.push_back('{');
      bool first = true;
      for (const auto& [k, val] : d.entries) {
        if (!first) out += ", ";
        first = false;
        append_repr(out, k, depth + 1);
        out += ": ";
        append_repr(out, val, depth + 1);
      }
      out.push_back('}');
      if (d.is_namespace) out.push_back('>');
      return;
    }
    default: append_str(out, v, depth);
  }
}

void append_str(std::string& out, const Value& v, std::uint32_t depth) {
  switch (v.kind) {
    case Kind::undefined: return;
    case Kind::none: out += "None"; return;
    case Kind::boolean: out += v.boolean ? "True" : "False"; return;
    case Kind::integer: out += int_to_string(v.integer); return;
    case Kind::floating: out += float_repr(v.number); return;
    case Kind::string: out += v.str(); return;
    case Kind::range: {
      const auto& r = v.range();
      out += "range(" + std::to_string(r.start) + ", " + std::to_string(r.stop);
      if (r.step != 1) out += ", " + std::to_string(r.step);
      out += ")";
      return;
    }
    case Kind::function: out += "<function " + v.function().name + ">"; return;
    default: append_repr(out, v, depth);
  }
}

std::string to_str(const Value& v) {
  if (v.is_string()) return v.str();
  std::string out;
  append_str(out, v);
  return out;
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

bool is_ascii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

std::size_t code_point_count(std::string_view s) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < s.size(); ++n) i += compute::detail::decode_utf8(s, i).length;
  return n;
}

std::vector<std::string_view> code_points(std::string_view s) {
  std::vector<std::string_view> out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    auto len = compute::detail::decode_utf8(s, i).length;
    out.push_back(s.substr(i, len));
    i += len;
  }
  return out;
}

}  // namespace loom::compute::jinja::detail
