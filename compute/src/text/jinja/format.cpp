// Python's printf-style string formatting (`'%s: %d' % (a, b)` and the `format` filter) (builtins.hpp):
// conversions s r a d i u f F e E g G x X o c and %, with flags, width and precision; `%(name)s` with a dict.
#include <cstdio>

#include "builtins.hpp"

namespace loom::compute::jinja::detail {
namespace {

struct Spec {
  std::string flags;
  int width = -1;
  int precision = -1;
  char conversion = 's';
};

double as_double(const Value& v) {
  if (v.kind == Kind::floating) return v.number;
  if (v.kind == Kind::integer) return static_cast<double>(v.integer);
  if (v.kind == Kind::boolean) return v.boolean;
  fail(ErrorKind::type, "must be real number, not " + type_name(v));
}

std::string pad(std::string s, const Spec& spec) {
  if (spec.width < 0 || static_cast<std::size_t>(spec.width) <= code_point_count(s)) return s;
  std::size_t fill = static_cast<std::size_t>(spec.width) - code_point_count(s);
  if (spec.flags.find('-') != std::string::npos) return s + std::string(fill, ' ');
  return std::string(fill, ' ') + s;
}

std::string c_format(const Spec& spec, const char* length, double d, long long i, bool is_int) {
  std::string fmt = "%" + spec.flags;
  if (spec.width >= 0) fmt += std::to_string(std::min(spec.width, 512));
  if (spec.precision >= 0) {
    fmt += '.';
    fmt += std::to_string(std::min(spec.precision, 512));
  }
  fmt += length;
  fmt.push_back(spec.conversion);
  char buf[1200];
  int n = is_int ? std::snprintf(buf, sizeof buf, fmt.c_str(), i) : std::snprintf(buf, sizeof buf, fmt.c_str(), d);
  return std::string(buf, static_cast<std::size_t>(std::max(0, std::min(n, static_cast<int>(sizeof buf) - 1))));
}

std::string convert(const Spec& spec, const Value& v) {
  switch (spec.conversion) {
    case 's': case 'r': case 'a': {
      std::string s;
      if (spec.conversion == 's') append_str(s, v);
      else append_repr(s, v);
      if (spec.precision >= 0) {
        auto cps = code_points(s);
        if (static_cast<std::size_t>(spec.precision) < cps.size()) {
          std::string cut;
          for (int k = 0; k < spec.precision; ++k) cut += cps[static_cast<std::size_t>(k)];
          s = cut;
        }
      }
      return pad(std::move(s), spec);
    }
    case 'd': case 'i': case 'u': case 'x': case 'X': case 'o': {
      if (v.kind == Kind::floating) {
        Spec s = spec;
        s.conversion = spec.conversion == 'i' || spec.conversion == 'u' ? 'd' : spec.conversion;
        return c_format(s, "ll", 0, static_cast<long long>(v.number), true);
      }
      if (v.kind != Kind::integer && v.kind != Kind::boolean) fail(ErrorKind::type, "%d format: a real number is required, not " + type_name(v));
      Int i = v.kind == Kind::boolean ? Int(v.boolean) : v.integer;
      if (i > Int(INT64_MAX) || i < Int(INT64_MIN)) fail(ErrorKind::other, "integer too large to format");
      Spec s = spec;
      if (s.conversion == 'i' || s.conversion == 'u') s.conversion = 'd';
      return c_format(s, "ll", 0, static_cast<long long>(i), true);
    }
    case 'f': case 'F': case 'e': case 'E': case 'g': case 'G': return c_format(spec, "", as_double(v), 0, false);
    case 'c': {
      if (v.is_string()) return pad(v.str(), spec);
      fail(ErrorKind::type, "%c requires a str");
    }
    default: fail(ErrorKind::other, std::string("unsupported format character '") + spec.conversion + "'");
  }
}

}  // namespace

Value percent_format(const std::string& fmt, const Value& args) {
  std::vector<Value> positional;
  const Value* mapping = nullptr;
  if (args.kind == Kind::list && args.array().tuple) positional = args.array().items;
  else if (args.kind == Kind::dict) mapping = &args, positional.push_back(args);
  else positional.push_back(args);
  std::size_t next = 0;
  std::string out;
  for (std::size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out.push_back(fmt[i]);
      continue;
    }
    if (++i >= fmt.size()) fail(ErrorKind::other, "incomplete format");
    const Value* value = nullptr;
    Value named;
    if (fmt[i] == '(') {
      std::size_t close = fmt.find(')', i);
      if (close == std::string::npos || !mapping) fail(ErrorKind::type, "format requires a mapping");
      const Value* found = mapping->dict().find(std::string_view(fmt).substr(i + 1, close - i - 1));
      if (!found) fail(ErrorKind::other, "format key '" + fmt.substr(i + 1, close - i - 1) + "' missing");
      named = *found;
      value = &named;
      i = close + 1;
    }
    Spec spec;
    while (i < fmt.size() && std::string_view("-+ 0#").find(fmt[i]) != std::string_view::npos) spec.flags.push_back(fmt[i++]);
    auto number = [&](int& target) {
      if (i < fmt.size() && fmt[i] == '*') fail(ErrorKind::other, "'*' widths are not supported");
      while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') target = std::min((target < 0 ? 0 : target) * 10 + (fmt[i++] - '0'), 100000);
    };
    number(spec.width);
    if (i < fmt.size() && fmt[i] == '.') {
      ++i;
      spec.precision = 0;
      number(spec.precision);
    }
    while (i < fmt.size() && (fmt[i] == 'l' || fmt[i] == 'h' || fmt[i] == 'L')) ++i;
    if (i >= fmt.size()) fail(ErrorKind::other, "incomplete format");
    spec.conversion = fmt[i];
    if (spec.conversion == '%') {
      out.push_back('%');
      continue;
    }
    if (!value) {
      if (next >= positional.size()) fail(ErrorKind::type, "not enough arguments for format string");
      value = &positional[next++];
    }
    out += convert(spec, *value);
  }
  if (!mapping && next < positional.size()) fail(ErrorKind::type, "not all arguments converted during string formatting");
  return Value::from(std::move(out));
}

}  // namespace loom::compute::jinja::detail
