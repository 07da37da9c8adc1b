// Global functions (builtins.hpp): range, namespace, dict, and transformers' raise_exception and
// strftime_now.
#include <array>
#include <cstdio>

#include "builtins.hpp"

namespace loom::compute::jinja::detail {
namespace {

std::int64_t range_arg(const Value& v) {
  if (v.kind == Kind::boolean) return v.boolean;
  if (v.kind != Kind::integer) fail(ErrorKind::type, "'" + type_name(v) + "' object cannot be interpreted as an integer");
  if (v.integer > static_cast<Int>(INT64_MAX / 4) || v.integer < static_cast<Int>(INT64_MIN / 4))
    fail(ErrorKind::limit, "range() bound out of range");
  return static_cast<std::int64_t>(v.integer);
}

Value g_range(Renderer&, Args& a) {
  Range r;
  const auto& p = a.positional;
  if (p.empty() || p.size() > 3) fail(ErrorKind::type, "range expected 1 to 3 arguments");
  if (p.size() == 1) {
    r.stop = range_arg(p[0]);
  } else {
    r.start = range_arg(p[0]);
    r.stop = range_arg(p[1]);
    if (p.size() == 3) r.step = range_arg(p[2]);
  }
  if (r.step == 0) fail(ErrorKind::other, "range() arg 3 must not be zero");
  return Value::from(r);
}

Dict kwargs_dict(Renderer& r, Args& a) {
  std::uint64_t n = a.keyword.size();
  for (const auto& p : a.positional)
    if (p.kind == Kind::dict) n += p.dict().entries.size();
  r.step(n * n / 16);  // each insertion scans the keys so far
  Dict d;
  for (const auto& p : a.positional) {
    if (p.kind != Kind::dict) fail(ErrorKind::type, "expected keyword arguments or a mapping");
    for (const auto& kv : p.dict().entries) d.set(kv.first, kv.second);
  }
  for (auto& [k, v] : a.keyword) d.set(Value::from(k), v);
  return d;
}

Value g_namespace(Renderer& r, Args& a) {
  // Allocated apart from its control block, so that the Renderer's weak reference does not keep it.
  auto ns = std::shared_ptr<Dict>(new Dict(kwargs_dict(r, a)));
  ns->is_namespace = true;
  r.track_namespace(ns);
  return Value::from(std::move(ns));
}

Value g_dict(Renderer& r, Args& a) { return Value::from(kwargs_dict(r, a)); }

Value g_raise_exception(Renderer&, Args& a) {
  throw TemplateError(ErrorKind::raised, to_str(a.get(0, "message", Value::from(std::string()))));
}

const char* const kDays[] = {"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"};
const char* const kMonths[] = {"January", "February", "March",     "April",   "May",      "June",
                               "July",    "August",   "September", "October", "November", "December"};

// C strftime in the C locale, for the conversions chat templates use; any other is passed to strftime.
std::string format_time(const std::string& fmt, const std::tm& tm) {
  std::string out;
  char buf[64];
  auto num = [&](int v, int width, char pad = '0') {
    std::snprintf(buf, sizeof buf, pad == '0' ? "%0*d" : "%*d", width, v);
    out += buf;
  };
  int wday = ((tm.tm_wday % 7) + 7) % 7, mon = ((tm.tm_mon % 12) + 12) % 12;
  for (std::size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%' || i + 1 >= fmt.size()) {
      out.push_back(fmt[i]);
      continue;
    }
    char c = fmt[++i];
    switch (c) {
      case 'a': out.append(kDays[wday], 3); break;
      case 'A': out += kDays[wday]; break;
      case 'b': case 'h': out.append(kMonths[mon], 3); break;
      case 'B': out += kMonths[mon]; break;
      case 'd': num(tm.tm_mday, 2); break;
      case 'e': num(tm.tm_mday, 2, ' '); break;
      case 'm': num(tm.tm_mon + 1, 2); break;
      case 'y': num((tm.tm_year + 1900) % 100, 2); break;
      case 'Y': num(tm.tm_year + 1900, 1); break;
      case 'H': num(tm.tm_hour, 2); break;
      case 'I': num(tm.tm_hour % 12 == 0 ? 12 : tm.tm_hour % 12, 2); break;
      case 'M': num(tm.tm_min, 2); break;
      case 'S': num(tm.tm_sec, 2); break;
      case 'p': out += tm.tm_hour < 12 ? "AM" : "PM"; break;
      case 'j': num(tm.tm_yday + 1, 3); break;
      case 'F': num(tm.tm_year + 1900, 1), out += '-', num(tm.tm_mon + 1, 2), out += '-', num(tm.tm_mday, 2); break;
      case 'T': num(tm.tm_hour, 2), out += ':', num(tm.tm_min, 2), out += ':', num(tm.tm_sec, 2); break;
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case '%': out += '%'; break;
      default: {
        char spec[3] = {'%', c, '\0'};
        std::size_t n = std::strftime(buf, sizeof buf, spec, &tm);
        out.append(buf, n);
      }
    }
  }
  return out;
}

Value g_strftime_now(Renderer& r, Args& a) {
  Value fmt = a.get(0, "format");
  if (!fmt.is_string()) fail(ErrorKind::type, "strftime_now() argument must be str");
  r.check_size(fmt.str().size() * 16);
  return Value::from(format_time(fmt.str(), r.now()));
}

Value make(const char* name, Value (*fn)(Renderer&, Args&)) {
  Function f;
  f.name = name;
  f.call = fn;
  return Value::from(std::move(f));
}

}  // namespace

Value global(const std::string& name) {
  static const std::array<std::pair<const char*, Value>, 5> table = {{
      {"range", make("range", g_range)},
      {"namespace", make("namespace", g_namespace)},
      {"dict", make("dict", g_dict)},
      {"raise_exception", make("raise_exception", g_raise_exception)},
      {"strftime_now", make("strftime_now", g_strftime_now)},
  }};
  for (const auto& [n, v] : table)
    if (name == n) return v;
  return Value::undefined(name);
}

}  // namespace loom::compute::jinja::detail
