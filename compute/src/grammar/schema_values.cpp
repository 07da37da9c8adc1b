// The values of each JSON type under their keywords, and enum/const.
//
// (Objects are in schema_objects.cpp.)
//
// Arrays: prefixItems (or the older array form of items) in order, then items for the rest, minItems and
// maxItems counted over all of them.
#include <cmath>
#include <limits>
#include <map>
#include <string>

#include "schema_values.hpp"

namespace loom::compute::grammar::schema {

namespace {


std::string repeat_suffix(std::uint32_t min, std::optional<std::uint32_t> max) {
  if (!max) return min == 0 ? "*" : min == 1 ? "+" : "{" + std::to_string(min) + ",}";
  if (min == 1 && *max == 1) return "";
  if (min == 0 && *max == 1) return "?";
  if (min == *max) return "{" + std::to_string(min) + "}";
  return "{" + std::to_string(min) + "," + std::to_string(*max) + "}";
}

std::string repeated(const std::string& item, std::uint32_t min, std::optional<std::uint32_t> max) {
  if (max && *max == 0) return "";
  return item + repeat_suffix(min, max);
}


// A count keyword (minLength, maxItems, ...): a non-negative integer within max_repetition.
std::optional<std::uint32_t> count_of(const json& schema, const std::string& key, const std::string& path,
                                      const SchemaLimits& limits) {
  auto it = schema.find(key);
  if (it == schema.end()) return std::nullopt;
  const Where where{path, key};
  if (!it->is_number() || it->get<double>() < 0 || std::floor(it->get<double>()) != it->get<double>()) {
    where.fail("must be a non-negative integer");
  }
  if (it->get<double>() > limits.max_repetition) {
    where.fail(it->dump() + " is over the limit of " + std::to_string(limits.max_repetition) + " (max_repetition)");
  }
  return static_cast<std::uint32_t>(it->get<double>());
}


// A bound of an integer as an inclusive int64: up for minimum, down for maximum, past it when exclusive.
std::int64_t integer_bound(const json& v, bool lower, bool exclusive, const Where& where) {
  if (!v.is_number()) where.fail("must be a number");
  const double d = v.get<double>();
  if (!std::isfinite(d) || std::fabs(d) > 9.0e18) where.fail("the bound is out of the supported range (|x| <= 9e18)");
  std::int64_t i = v.is_number_integer() ? v.get<std::int64_t>() : static_cast<std::int64_t>(lower ? std::ceil(d) : std::floor(d));
  const bool integral = v.is_number_integer() || std::floor(d) == d;
  if (exclusive && integral) i += lower ? 1 : -1;
  return i;
}

bool type_matches(const json& v, const std::string& t) {
  if (t == "integer") return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
  if (t == "number") return v.is_number();
  if (t == "string") return v.is_string();
  if (t == "boolean") return v.is_boolean();
  if (t == "null") return v.is_null();
  if (t == "object") return v.is_object();
  return v.is_array();
}

std::size_t code_points(const std::string& text) {
  std::size_t n = 0;
  for (char c : text) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

// Whether an enum/const value passes the simple keywords beside it (each applies to values of its type
// only). The others would need a validator (pattern, format, properties, items, ...): refused.
bool literal_allowed(const json& schema, const json& v, const std::string& path) {
  static const std::map<std::string, json::value_t> applies_to = {
      {"minLength", json::value_t::string},   {"maxLength", json::value_t::string},
      {"pattern", json::value_t::string},     {"format", json::value_t::string},
      {"minItems", json::value_t::array},     {"maxItems", json::value_t::array},
      {"items", json::value_t::array},        {"prefixItems", json::value_t::array},
      {"additionalItems", json::value_t::array}, {"required", json::value_t::object},
      {"properties", json::value_t::object},  {"additionalProperties", json::value_t::object}};
  for (const auto& [k, bound] : schema.items()) {
    if (k == "enum" || k == "const" || k == "type" || is_annotation(k)) continue;
    const Where where{path, k};
    const bool numeric = k == "minimum" || k == "maximum" || k == "exclusiveMinimum" || k == "exclusiveMaximum";
    const auto kind = applies_to.find(k);
    if (numeric ? !v.is_number() : kind == applies_to.end() || kind->second != v.type()) continue;  // not this value's type
    if (k == "required") {
      if (!bound.is_array()) where.fail("required must be an array of strings");
      for (const json& name : bound) {
        if (!name.is_string()) where.fail("required must be an array of strings");
        if (!v.contains(name.get<std::string>())) return false;
      }
      continue;
    }
    const bool length = k == "minLength" || k == "maxLength";
    if (!numeric && !length && k != "minItems" && k != "maxItems") where.fail("cannot be checked against enum or const values");
    if (bound.is_boolean() && (k == "exclusiveMinimum" || k == "exclusiveMaximum")) continue;  // draft 4: below
    if (!bound.is_number()) where.fail("must be a number");
    const double b = bound.get<double>();
    const double x = length ? static_cast<double>(code_points(v.get<std::string>())) : numeric ? v.get<double>() : static_cast<double>(v.size());
    const bool is_min = k.rfind("min", 0) == 0 || k == "exclusiveMinimum";
    const json draft4_flag = schema.value(is_min ? "exclusiveMinimum" : "exclusiveMaximum", json(false));
    const bool exclusive = k.rfind("exclusive", 0) == 0 || ((k == "minimum" || k == "maximum") && draft4_flag == json(true));
    if (is_min ? (exclusive ? x <= b : x < b) : (exclusive ? x >= b : x > b)) return false;
  }
  return true;
}

}  // namespace

std::string Converter::as_item(const std::string& text, const std::string& hint, const Where& where) {
  if (text.empty() || text.find_first_of(" \"[(|?*+{") == std::string::npos) return text;
  return out_.rule(hint, text, where);
}

Body Converter::literals(const json& schema, const std::string& path) {
  const std::string keyword = schema.contains("enum") ? "enum" : "const";
  const Where where{path, keyword};
  std::vector<json> values;
  if (auto e = schema.find("enum"); e != schema.end()) {
    if (!e->is_array()) where.fail("enum must be an array");
    for (const json& v : *e) {
      if (!schema.contains("const") || schema["const"] == v) values.push_back(v);
    }
  } else {
    values.push_back(schema["const"]);
  }
  const std::set<std::string> types = schema.contains("type") ? types_of(schema, path) : std::set<std::string>{};
  Body out;
  std::set<std::string> seen;
  for (const json& v : values) {
    bool typed_ok = types.empty();
    for (const std::string& t : types) typed_ok = typed_ok || type_matches(v, t);
    const std::string text = typed_ok && literal_allowed(schema, v, path) ? gbnf_literal(dumped(v, where)) : std::string();
    if (text.empty() || !seen.insert(text).second) continue;
    out.text += (out.text.empty() ? "" : " | ") + text;
  }
  if (out.text.empty()) where.unsatisfiable("no value is allowed (an empty enum, or none of the type asked for)");
  return out;
}

std::string Converter::string_value(const json& schema, const std::string& path, const std::string& hint) {
  const auto min = count_of(schema, "minLength", path, limits_);
  const auto max = count_of(schema, "maxLength", path, limits_);
  for (const char* special : {"pattern", "format"}) {
    auto it = schema.find(special);
    if (it == schema.end()) continue;
    const Where where{path, special};
    if (!it->is_string()) where.fail(std::string(special) + " must be a string");
    for (const char* other : {"minLength", "maxLength", "format"}) {
      if (other != std::string(special) && schema.contains(other)) {
        Where{path, other}.fail(std::string("cannot be combined with ") + special + " (a grammar cannot intersect the two)");
      }
    }
    const std::string inside = special == std::string("pattern") ? pattern_gbnf(it->get<std::string>(), out_, where)
                                                                 : format_gbnf(it->get<std::string>(), out_, where);
    return out_.rule(hint, joined(joined(kQuote, inside), kQuote), where);
  }
  const Where where{path, max ? "maxLength" : "minLength"};
  if (min && max && *max < *min) where.unsatisfiable("maxLength is below minLength");
  if (!min && !max) return out_.primitive("string", where);
  const std::string chars = repeated(out_.primitive("char", where), min.value_or(0), max);
  return out_.rule(hint, joined(joined(kQuote, chars), kQuote), where);
}

namespace {

// Calls each(value, lower, exclusive, where) for every numeric bound keyword of `schema`: whether it bounds
// from below, and whether it excludes its value (exclusiveMinimum/exclusiveMaximum, or draft 4's boolean
// form beside minimum/maximum, whose booleans are not bounds themselves).
template <class Each>
void for_each_bound(const json& schema, const std::string& path, Each each) {
  for (const char* key : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
    auto it = schema.find(key);
    if (it == schema.end()) continue;
    const Where where{path, key};
    const std::string k = key;
    const bool lower = k == "minimum" || k == "exclusiveMinimum";
    if (it->is_boolean()) {  // draft 4: exclusiveMinimum/Maximum qualify minimum/maximum
      if (k.rfind("exclusive", 0) != 0) where.fail("must be a number");
      continue;
    }
    bool exclusive = k.rfind("exclusive", 0) == 0;
    if (!exclusive) {
      const auto flag = schema.find(lower ? "exclusiveMinimum" : "exclusiveMaximum");
      exclusive = flag != schema.end() && flag->is_boolean() && flag->get<bool>();
    }
    each(*it, lower, exclusive, where);
  }
}

}  // namespace

std::string Converter::integer_value(const json& schema, const std::string& path) {
  std::optional<std::int64_t> lo;
  std::optional<std::int64_t> hi;
  for_each_bound(schema, path, [&](const json& value, bool lower, bool exclusive, const Where& where) {
    const std::int64_t v = integer_bound(value, lower, exclusive, where);
    std::optional<std::int64_t>& bound = lower ? lo : hi;
    if (!bound || (lower ? v > *bound : v < *bound)) bound = v;
  });
  const Where where{path, lo ? "minimum" : "maximum"};
  if (!lo && !hi) return out_.primitive("integer", where);
  return integer_range_gbnf(lo, hi, out_, where);
}

// Number bounds are honoured exactly when they are integers (minimum 0, maximum 100, ...); the grammar then
// writes plain decimals, no exponent. Other bounds are refused.
std::string Converter::number_value(const json& schema, const std::string& path) {
  std::optional<NumberBound> lo;
  std::optional<NumberBound> hi;
  for_each_bound(schema, path, [&](const json& value, bool lower, bool exclusive, const Where& where) {
    if (!value.is_number()) where.fail("must be a number");
    const double d = value.get<double>();
    if (std::floor(d) != d) where.fail("only integer bounds are supported on non-integer numbers");
    const NumberBound b{integer_bound(value, lower, false, where), exclusive};
    std::optional<NumberBound>& slot = lower ? lo : hi;
    const bool tighter = !slot || (lower ? b.value > slot->value : b.value < slot->value) || (b.value == slot->value && b.exclusive);
    if (tighter) slot = b;
  });
  const Where where{path, lo ? (lo->exclusive ? "exclusiveMinimum" : "minimum") : hi ? (hi->exclusive ? "exclusiveMaximum" : "maximum") : ""};
  if (!lo && !hi) return out_.primitive("number", where);
  return number_range_gbnf(lo, hi, out_, where);
}

// The positions of an array: the converted prefixItems (cut at the first that nothing satisfies: no array
// is that long), the rest's item (empty when no more may follow) and the count bounds.
Converter::ArrayParts Converter::array_parts(const json& schema, const std::string& path, const std::string& hint,
                                             std::uint32_t depth) {
  json prefix = json::array();
  json rest = true;
  std::string prefix_key = "prefixItems";
  std::string rest_key = "items";
  const auto items = schema.find("items");
  if (auto p = schema.find("prefixItems"); p != schema.end()) {
    if (!p->is_array()) Where{path, "prefixItems"}.fail("prefixItems must be an array of schemas");
    prefix = *p;
    if (items != schema.end()) rest = *items;
  } else if (items != schema.end() && items->is_array()) {  // the older tuple form
    prefix = *items;
    prefix_key = "items";
    rest_key = "additionalItems";
    if (schema.contains("additionalItems")) rest = schema["additionalItems"];
  } else if (items != schema.end()) {
    rest = *items;
  }
  if (!rest.is_boolean() && !rest.is_object()) Where{path, rest_key}.fail("must be a schema");
  ArrayParts parts;
  parts.min = count_of(schema, "minItems", path, limits_).value_or(0);
  parts.max = count_of(schema, "maxItems", path, limits_);
  auto cap = [&](std::size_t n) { parts.max = static_cast<std::uint32_t>(std::min<std::size_t>(parts.max.value_or(n), n)); };
  auto convert = [&](const json& item, const std::string& item_path, const std::string& item_hint) -> std::string {
    if (item.is_boolean()) return item.get<bool>() ? out_.primitive("value", Where{item_path, ""}) : std::string();
    try {
      return value(item, item_path, item_hint, depth + 1);
    } catch (const Unsatisfiable&) {
      return std::string();
    }
  };
  for (std::size_t i = 0; i < prefix.size() && (!parts.max || i < *parts.max); ++i) {
    std::string name = convert(prefix[i], path + "/" + prefix_key + "/" + std::to_string(i), hint + "-" + std::to_string(i));
    if (name.empty()) break;
    parts.prefix.push_back(std::move(name));
  }
  if (parts.prefix.size() < prefix.size()) cap(parts.prefix.size());
  if (!parts.max || *parts.max > parts.prefix.size()) {
    parts.rest = convert(rest, path + "/" + rest_key, hint + "-item");
    if (parts.rest.empty()) cap(parts.prefix.size());
  }
  if (parts.max && parts.min > *parts.max) {
    Where{path, "minItems"}.unsatisfiable("no array length satisfies minItems and the other items");
  }
  return parts;
}

std::string Converter::array_value(const json& schema, const std::string& path, const std::string& hint,
                                   std::uint32_t depth) {
  const Where where{path, "items"};
  out_.primitive("ws", where);
  const ArrayParts parts = array_parts(schema, path, hint, depth);
  const std::uint32_t min = parts.min;
  const std::optional<std::uint32_t> max = parts.max;
  const std::size_t k = parts.prefix.size();
  const std::string more = parts.rest.empty() ? "" : "(" + std::string(kComma) + parts.rest + ")";
  std::string inner;
  if (k == 0) {
    if (!parts.rest.empty()) {
      std::optional<std::uint32_t> more_max;
      if (max) more_max = *max - 1;
      inner = joined(parts.rest, repeated(more, min > 0 ? min - 1 : 0, more_max));
      if (min == 0) inner = "(" + inner + ")?";
    }
  } else {
    // From the last position back: each is optional from minItems on, and the rest follows the last.
    std::optional<std::uint32_t> more_max;
    if (max) more_max = *max - static_cast<std::uint32_t>(k);
    inner = parts.rest.empty() ? "" : repeated(more, min > k ? min - static_cast<std::uint32_t>(k) : 0, more_max);
    for (std::size_t i = k; i-- > 0;) {
      std::string seg = joined((i ? std::string(kComma) : std::string()) + parts.prefix[i], inner);
      if (i >= min) seg = "(" + seg + ")?";
      inner = i > 0 ? as_item(seg, hint + "-tail", where) : seg;
    }
  }
  return out_.rule(hint, joined(joined(R"("[")", inner), R"("]")"), where);
}

}  // namespace loom::compute::grammar::schema
