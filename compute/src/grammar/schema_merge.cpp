// allOf as one schema. A grammar cannot intersect two grammars, so `allOf` is folded at the schema level
// instead: keywords that only one branch has are taken as they are (each keyword constrains on its own);
// where branches meet, the combination must be exact or it is refused:
//   type                  the intersection (integer within number)
//   required              the union
//   min*/max* bounds      the tighter
//   enum                  the values in both
//   anyOf, oneOf          multiplied out: anyOf of allOf pairs (oneOf is anyOf here, as everywhere)
//   properties and additionalProperties, together: each property gets the allOf of what every branch says
//     of it (its own schema there, or that branch's additionalProperties); a property some branch forbids
//     (additionalProperties false without listing it) is left out; extra properties need every branch's
//     consent.
//   prefixItems and items (or the older items array and additionalItems), together: each position gets
//     the allOf of what every branch says of that position.
// Draft 4's boolean exclusiveMinimum/exclusiveMaximum are first turned into the numeric form.
// A `$ref` inside allOf (or beside other keywords) is replaced by what it names, so that a base object
// can be extended; a chain of them deeper than max_depth is refused (a reference cycle).
#include <algorithm>
#include <set>
#include <string>

#include "schema_internal.hpp"

namespace loom::compute::grammar::schema {

namespace {

using json = nlohmann::ordered_json;

std::set<std::string> type_set(const json& t, const Where& where) {
  std::set<std::string> out;
  if (t.is_string()) {
    out.insert(t.get<std::string>());
  } else if (t.is_array()) {
    for (const json& e : t) {
      if (!e.is_string()) where.fail("type must be a string or an array of strings");
      out.insert(e.get<std::string>());
    }
  } else {
    where.fail("type must be a string or an array of strings");
  }
  return out;
}

class Merger {
 public:
  Merger(const Where& where, const RefResolver& resolve, const SchemaLimits& limits)
      : where_(where), resolve_(resolve), limits_(limits) {}

  void add(const json& s, std::uint32_t depth) {
    if (depth > limits_.max_depth) {
      where_.fail("allOf/$ref nested more than " + std::to_string(limits_.max_depth) + " deep (max_depth; a reference cycle?)");
    }
    if (s.is_boolean()) {
      if (!s.get<bool>()) where_.unsatisfiable("a branch is the false schema: nothing can match");
      return;
    }
    if (!s.is_object()) where_.fail("a branch must be a schema (an object or a boolean)");
    if (auto r = s.find("$ref"); r != s.end()) {
      if (!r->is_string()) where_.fail("$ref must be a string");
      add(resolve_(r->get<std::string>(), where_), depth + 1);
    }
    if (auto a = s.find("allOf"); a != s.end()) {
      if (!a->is_array() || a->empty()) where_.fail("allOf must be a non-empty array of schemas");
      for (const json& branch : *a) add(branch, depth + 1);
    }
    const json plain = numeric_exclusive_bounds(s);
    if (plain.contains("properties") || plain.contains("additionalProperties")) merge_objects(plain);
    if (plain.contains("items") || plain.contains("prefixItems") || plain.contains("additionalItems")) merge_arrays(plain);
    static const std::set<std::string> joint = {"$ref", "allOf", "properties", "additionalProperties", "items", "prefixItems", "additionalItems"};
    for (const auto& [k, v] : plain.items()) {
      if (joint.count(k) || is_annotation(k)) continue;
      if (auto it = acc_.find(k); it == acc_.end()) {
        acc_[k] = v;
      } else {
        combine(k, *it, v);
      }
    }
  }

  json result() { return std::move(acc_); }

 private:
  // What one branch says of property k: its schema, or its additionalProperties (false: forbidden).
  void side(const json& props, const json& additional, const std::string& k, json& list, bool& forbidden) const {
    if (props.contains(k)) {
      list.push_back(props[k]);
    } else if (additional.is_boolean()) {
      forbidden = forbidden || !additional.get<bool>();
    } else {
      list.push_back(additional);
    }
  }

  void merge_objects(const json& s) {
    const json pa = acc_.value("properties", json::object());
    const json ps = s.value("properties", json::object());
    const json aa = acc_.contains("additionalProperties") ? acc_["additionalProperties"] : json(true);
    const json as = s.contains("additionalProperties") ? s["additionalProperties"] : json(true);
    if (!pa.is_object() || !ps.is_object()) where_.fail("properties must be an object");
    for (const json* a : {&aa, &as}) {
      if (!a->is_boolean() && !a->is_object()) where_.fail("additionalProperties must be a schema");
    }
    json props = json::object();
    std::set<std::string> seen;
    for (const json* p : {&pa, &ps}) {
      for (const auto& [k, v] : p->items()) {
        if (!seen.insert(k).second) continue;
        json list = json::array();
        bool forbidden = false;
        side(pa, aa, k, list, forbidden);
        side(ps, as, k, list, forbidden);
        if (forbidden) continue;  // additionalProperties false leaves it out of the merged object
        props[k] = list.empty() ? json(true) : list.size() == 1 ? list[0] : json{{"allOf", list}};
      }
    }
    acc_["properties"] = std::move(props);
    json extra = json::array();
    bool closed = false;
    for (const json* a : {&aa, &as}) {
      if (a->is_boolean()) {
        closed = closed || !a->get<bool>();
      } else {
        extra.push_back(*a);
      }
    }
    if (closed) {
      acc_["additionalProperties"] = false;
    } else if (extra.empty()) {
      acc_.erase("additionalProperties");
    } else {
      acc_["additionalProperties"] = extra.size() == 1 ? extra[0] : json{{"allOf", extra}};
    }
  }

  // {minimum: 5, exclusiveMinimum: true} (draft 4) as {exclusiveMinimum: 5}, so that bounds merge by value.
  static json numeric_exclusive_bounds(const json& s) {
    json out = s;
    for (const auto& [bound, flag] : {std::pair<const char*, const char*>{"minimum", "exclusiveMinimum"}, {"maximum", "exclusiveMaximum"}}) {
      auto f = out.find(flag);
      if (f == out.end() || !f->is_boolean()) continue;
      const bool exclusive = f->get<bool>();
      out.erase(flag);
      if (exclusive && out.contains(bound)) {
        out[flag] = out[bound];
        out.erase(bound);
      }
    }
    return out;
  }

  // Two schemas that must both hold, simplified where one says nothing or both say the same.
  static json both(const json& a, const json& b) {
    if (a == b || b == json(true) || b == json::object()) return a;
    if (a == json(true) || a == json::object()) return b;
    if (a == json(false) || b == json(false)) return false;
    return json{{"allOf", json::array({a, b})}};
  }

  // One branch's array keywords as (schemas of the first positions, schema of the rest).
  std::pair<json, json> positions(const json& s) const {
    json prefix = json::array();
    json rest = true;
    const auto items = s.find("items");
    if (auto p = s.find("prefixItems"); p != s.end()) {
      prefix = *p;
      if (items != s.end()) rest = *items;
    } else if (items != s.end() && items->is_array()) {
      prefix = *items;
      if (s.contains("additionalItems")) rest = s["additionalItems"];
    } else if (items != s.end()) {
      rest = *items;
    }
    if (!prefix.is_array()) where_.fail("prefixItems must be an array of schemas");
    return {prefix, rest};
  }

  void merge_arrays(const json& s) {
    const auto [pa, ra] = positions(acc_);
    const auto [ps, rs] = positions(s);
    json prefix = json::array();
    for (std::size_t i = 0; i < std::max(pa.size(), ps.size()); ++i) {
      prefix.push_back(both(i < pa.size() ? pa[i] : ra, i < ps.size() ? ps[i] : rs));
    }
    for (const char* k : {"items", "prefixItems", "additionalItems"}) acc_.erase(k);
    if (!prefix.empty()) acc_["prefixItems"] = std::move(prefix);
    const json rest = both(ra, rs);
    if (rest != json(true)) acc_["items"] = rest;
  }

  void combine(const std::string& k, json& a, const json& b) {
    if (a == b) return;
    if (k == "type") {
      a = intersect_types(a, b);
    } else if (k == "required") {
      if (!a.is_array() || !b.is_array()) where_.fail("required must be an array");
      for (const json& name : b) {
        if (std::find(a.begin(), a.end(), name) == a.end()) a.push_back(name);
      }
    } else if ((k == "minLength" || k == "minItems" || k == "minimum" || k == "exclusiveMinimum") && a.is_number() && b.is_number()) {
      if (b > a) a = b;
    } else if ((k == "maxLength" || k == "maxItems" || k == "maximum" || k == "exclusiveMaximum") && a.is_number() && b.is_number()) {
      if (b < a) a = b;
    } else if (k == "enum" && a.is_array() && b.is_array()) {
      json both = json::array();
      for (const json& v : a) {
        if (std::find(b.begin(), b.end(), v) != b.end()) both.push_back(v);
      }
      a = std::move(both);
    } else if ((k == "anyOf" || k == "oneOf") && a.is_array() && b.is_array()) {
      if (a.size() * b.size() > limits_.max_rules) {
        where_.fail("two " + k + " lists multiply out to more than " + std::to_string(limits_.max_rules) + " branches (max_rules)");
      }
      json product = json::array();
      for (const json& x : a) {
        for (const json& y : b) product.push_back(json{{"allOf", json::array({x, y})}});
      }
      a = std::move(product);
    } else if (k == "const") {
      where_.unsatisfiable("the branches ask for two different constants");
    } else {
      where_.fail("the branches constrain '" + k + "' differently and the two cannot be combined exactly");
    }
  }

  json intersect_types(const json& a, const json& b) const {
    const auto x = type_set(a, where_);
    const auto y = type_set(b, where_);
    json out = json::array();
    for (const std::string& t : x) {
      if (y.count(t) || (t == "integer" && y.count("number"))) out.push_back(t);
    }
    for (const std::string& t : y) {
      if (t == "integer" && x.count("number") && !x.count("integer")) out.push_back(t);
    }
    if (out.empty()) where_.unsatisfiable("the branches allow no common type");
    return out.size() == 1 ? out[0] : out;
  }

  const Where& where_;
  const RefResolver& resolve_;
  const SchemaLimits& limits_;
  json acc_ = json::object();
};

}  // namespace

json merge_all_of(const json& schema, const Where& where, const RefResolver& resolve, const SchemaLimits& limits) {
  Merger merger(where, resolve, limits);
  merger.add(schema, 0);
  return merger.result();
}

json merge_pair(const json& a, const json& b, const Where& where, const RefResolver& resolve, const SchemaLimits& limits) {
  Merger merger(where, resolve, limits);
  merger.add(a, 0);
  merger.add(b, 0);
  return merger.result();
}

}  // namespace loom::compute::grammar::schema
