// JSON in (template variables) and out (the tojson filter, as Python's json.dumps) (builtins.hpp).
#include <algorithm>
#include <cstdio>
#include <cmath>

#include "../unicode_text.hpp"
#include "builtins.hpp"

namespace loom::compute::jinja::detail {

namespace {
Value from_json_at(const nlohmann::ordered_json& j, std::uint32_t depth) {
  check_depth(depth);
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value::from(j.get<bool>());
    case nlohmann::json::value_t::number_integer: return Value::from(static_cast<Int>(j.get<std::int64_t>()));
    case nlohmann::json::value_t::number_unsigned: return Value::from(static_cast<Int>(j.get<std::uint64_t>()));
    case nlohmann::json::value_t::number_float: return Value::from(j.get<double>());
    case nlohmann::json::value_t::string: return Value::from(j.get<std::string>());
    case nlohmann::json::value_t::array: {
      Array a;
      a.items.reserve(j.size());
      for (const auto& x : j) a.items.push_back(from_json_at(x, depth + 1));
      return Value::from(std::move(a));
    }
    case nlohmann::json::value_t::object: {
      Dict d;
      d.entries.reserve(j.size());
      // JSON objects have unique keys (nlohmann keeps the last of duplicates), so no lookup is needed.
      for (auto it = j.begin(); it != j.end(); ++it) d.entries.emplace_back(Value::from(it.key()), from_json_at(it.value(), depth + 1));
      return Value::from(std::move(d));
    }
    default: fail(ErrorKind::type, "unsupported JSON value");
  }
}

void append_json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out.push_back('"');
  for (std::size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    char buf[16];
    if (c < 0x80) {
      ++i;
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          if (c < 0x20) {
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
          } else {
            out.push_back(static_cast<char>(c));
          }
      }
      continue;
    }
    auto unit = compute::detail::decode_utf8(s, i);
    if (!ensure_ascii || unit.code_point == compute::detail::kInvalidCodePoint) {
      out.append(s.substr(i, unit.length));
    } else if (unit.code_point < 0x10000) {
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(unit.code_point));
      out += buf;
    } else {
      unsigned v = static_cast<unsigned>(unit.code_point) - 0x10000;
      std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
      out += buf;
    }
    i += unit.length;
  }
  out.push_back('"');
}

std::string float_json(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
  return float_repr(d);
}

std::string json_key(const Value& k) {
  switch (k.kind) {
    case Kind::string: return k.str();
    case Kind::integer: return int_to_string(k.integer);
    case Kind::floating: return float_json(k.number);
    case Kind::boolean: return k.boolean ? "true" : "false";
    case Kind::none: return "null";
    default: fail(ErrorKind::type, "keys must be str, int, float, bool or None, not " + type_name(k));
  }
}

class JsonWriter {
 public:
  JsonWriter(Renderer& r, const JsonStyle& style) : r_(r), style_(style) {}

  void write(const Value& v, std::size_t level) {
    check_depth(static_cast<std::uint32_t>(level));
    r_.step();
    r_.check_bound(out.size());
    switch (v.kind) {
      case Kind::none: out += "null"; return;
      case Kind::boolean: out += v.boolean ? "true" : "false"; return;
      case Kind::integer: out += int_to_string(v.integer); return;
      case Kind::floating: out += float_json(v.number); return;
      case Kind::string: append_json_string(out, v.str(), style_.ensure_ascii); return;
      case Kind::list: write_array(v.array().items, level); return;
      case Kind::dict:
        if (!v.dict().is_namespace && !v.dict().is_loop) {
          write_object(v.dict(), level);
          return;
        }
        break;
      default: break;
    }
    fail(v.is_undefined() ? ErrorKind::undefined : ErrorKind::type, "Object of type " + type_name(v) + " is not JSON serializable");
  }

  std::string out;

 private:
  void newline(std::size_t level) {
    if (!style_.indent) return;
    out.push_back('\n');
    out.append(*style_.indent * level, ' ');
  }

  void write_array(const std::vector<Value>& items, std::size_t level) {
    if (items.empty()) {
      out += "[]";
      return;
    }
    out.push_back('[');
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (i) out += style_.item_separator;
      newline(level + 1);
      write(items[i], level + 1);
    }
    newline(level);
    out.push_back(']');
  }

  void write_object(const Dict& d, std::size_t level) {
    if (d.entries.empty()) {
      out += "{}";
      return;
    }
    std::vector<std::pair<std::string, const Value*>> entries;
    entries.reserve(d.entries.size());
    for (const auto& [k, v] : d.entries) entries.emplace_back(json_key(k), &v);
    if (style_.sort_keys)
      std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    out.push_back('{');
    for (std::size_t i = 0; i < entries.size(); ++i) {
      if (i) out += style_.item_separator;
      newline(level + 1);
      append_json_string(out, entries[i].first, style_.ensure_ascii);
      out += style_.key_separator;
      write(*entries[i].second, level + 1);
    }
    newline(level);
    out.push_back('}');
  }

  Renderer& r_;
  const JsonStyle& style_;
};
}  // namespace

Value from_json(const nlohmann::ordered_json& j) { return from_json_at(j, 0); }

std::string to_json(Renderer& r, const Value& v, const JsonStyle& style) {
  JsonWriter w(r, style);
  w.write(v, 0);
  r.check_size(w.out.size());
  return std::move(w.out);
}

}  // namespace loom::compute::jinja::detail
