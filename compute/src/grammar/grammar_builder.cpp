#include "grammar_builder.hpp"

#include <algorithm>

namespace loom::compute::grammar {

namespace {

constexpr char32_t kMaxCodePoint = 0x10FFFF;

std::string place_text(int line, int column) {
  return "line " + std::to_string(line) + ", column " + std::to_string(column) + ": ";
}

}  // namespace

GrammarError::GrammarError(int line, int column, const std::string& message)
    : std::invalid_argument(line > 0 ? place_text(line, column) + message : message),
      line_(line),
      column_(column),
      message_(message) {}

bool CharSet::contains_slow(char32_t cp) const noexcept {
  // ranges are sorted and disjoint: the last range starting at or before cp decides.
  auto it = std::upper_bound(ranges.begin(), ranges.end(), cp,
                             [](char32_t value, const auto& range) { return value < range.first; });
  if (it == ranges.begin()) return false;
  --it;
  return cp <= it->second;
}

bool CharSet::intersects(char32_t lo, char32_t hi) const noexcept {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), hi,
                             [](char32_t value, const auto& range) { return value < range.first; });
  if (it == ranges.begin()) return false;
  --it;  // the last range starting at or before hi
  return it->second >= lo;
}

namespace {

std::pair<int, int> line_column(std::string_view text, std::size_t offset) {
  int line = 1;
  int column = 1;
  for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

}  // namespace

void GrammarBuilder::fail(Place where, const std::string& message) const {
  const auto [line, column] = line_column(text_, where.offset);
  throw GrammarError(line, column, message);
}

std::string GrammarBuilder::place_words(Place where) const {
  const auto [line, column] = line_column(text_, where.offset);
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

std::uint32_t GrammarBuilder::rule_named(const std::string& name, Place used_at) {
  if (auto it = by_name_.find(name); it != by_name_.end()) return it->second;
  check_rule_count(used_at);
  const auto index = static_cast<std::uint32_t>(rules_.size());
  PendingRule rule;
  rule.name = name;
  rule.first_use = used_at;
  rules_.push_back(std::move(rule));
  by_name_.emplace(name, index);
  return index;
}

void GrammarBuilder::define(std::uint32_t rule, std::vector<Sequence> alternatives, Place defined_at) {
  PendingRule& r = rules_[rule];
  if (r.defined) {
    fail(defined_at, "rule '" + r.name + "' is defined twice (first at " + place_words(r.defined_at) + ")");
  }
  r.alternatives = std::move(alternatives);
  r.defined = true;
  r.defined_at = defined_at;
}

std::uint32_t GrammarBuilder::generated(std::uint32_t owner, std::vector<Sequence> alternatives, Place origin) {
  check_rule_count(origin);
  PendingRule rule;
  rule.name = rules_[owner].name + "#" + std::to_string(++rules_[owner].generated_count);
  rule.alternatives = std::move(alternatives);
  rule.defined = true;
  rule.defined_at = origin;
  rule.first_use = origin;
  rules_.push_back(std::move(rule));
  return static_cast<std::uint32_t>(rules_.size() - 1);
}

void GrammarBuilder::check_rule_count(Place where) const {
  if (rules_.size() >= limits_.max_rules) {
    fail(where, "too many rules (groups and repetitions count as rules): the limit is " +
                           std::to_string(limits_.max_rules) + " (max_rules)");
  }
}

void GrammarBuilder::count_elements(std::size_t n, Place where) {
  if (n > limits_.max_elements || element_count_ + n > limits_.max_elements) {
    fail(where, "the grammar expands to more than " + std::to_string(limits_.max_elements) +
                           " elements (max_elements)");
  }
  element_count_ += n;
}

GrammarBuilder::Ranges GrammarBuilder::merged(Ranges ranges) {
  std::sort(ranges.begin(), ranges.end());
  Ranges out;
  for (const auto& r : ranges) {
    if (!out.empty() && r.first <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, r.second);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

std::uint32_t GrammarBuilder::char_set(Ranges ranges, bool negated) {
  Ranges merged = GrammarBuilder::merged(std::move(ranges));
  if (negated) {
    Ranges complement;
    char32_t next = 0;
    for (const auto& r : merged) {
      if (r.first > next) complement.emplace_back(next, r.first - 1);
      next = r.second + 1;
    }
    if (next <= kMaxCodePoint) complement.emplace_back(next, kMaxCodePoint);
    merged = std::move(complement);
  }
  if (auto it = set_index_.find(merged); it != set_index_.end()) return it->second;
  CharSet set;
  set.ranges = merged;
  for (const auto& [lo, hi] : merged) {
    for (char32_t cp = lo; cp <= hi && cp < 128; ++cp) set.ascii[cp >> 6] |= std::uint64_t{1} << (cp & 63);
  }
  const auto index = static_cast<std::uint32_t>(char_sets_.size());
  char_sets_.push_back(std::move(set));
  set_index_.emplace(std::move(merged), index);
  return index;
}

void GrammarBuilder::check_left_recursion() const {
  // A rule can match nothing if one of its alternatives is all such references (fixpoint).
  std::vector<bool> nullable(rules_.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t r = 0; r < rules_.size(); ++r) {
      if (nullable[r]) continue;
      for (const auto& alt : rules_[r].alternatives) {
        const bool all = std::all_of(alt.begin(), alt.end(), [&](const Element& e) {
          return e.kind == ElementKind::rule_ref && nullable[e.value];
        });
        if (all) {
          nullable[r] = true;
          changed = true;
          break;
        }
      }
    }
  }
  // Edge r -> s: r may expand to s before consuming anything. A cycle is an expansion that never ends.
  std::vector<std::vector<std::uint32_t>> left(rules_.size());
  for (std::size_t r = 0; r < rules_.size(); ++r) {
    for (const auto& alt : rules_[r].alternatives) {
      for (const Element& e : alt) {
        if (e.kind != ElementKind::rule_ref) break;
        left[r].push_back(e.value);
        if (!nullable[e.value]) break;
      }
    }
  }
  // Depth-first search for a cycle, with an explicit stack (a grammar may have thousands of rules).
  std::vector<std::uint8_t> color(rules_.size(), 0);  // 0 new, 1 on the path, 2 done
  std::vector<std::uint32_t> path;
  std::vector<std::size_t> next_edge;
  for (std::uint32_t first = 0; first < rules_.size(); ++first) {
    if (color[first] != 0) continue;
    color[first] = 1;
    path.assign(1, first);
    next_edge.assign(1, 0);
    while (!path.empty()) {
      const std::uint32_t r = path.back();
      if (next_edge.back() == left[r].size()) {
        color[r] = 2;
        path.pop_back();
        next_edge.pop_back();
        continue;
      }
      const std::uint32_t s = left[r][next_edge.back()++];
      if (color[s] == 1) {
        const auto from = std::find(path.begin(), path.end(), s);
        // The cycle's rules, the middle left out past eight.
        const auto length = static_cast<std::size_t>(path.end() - from);
        std::string cycle;
        for (std::size_t k = 0; k < length; ++k) {
          if (length > 8 && k == 4) {
            cycle += "... (" + std::to_string(length - 8) + " more) -> ";
            k = length - 4;
          }
          cycle += rules_[*(from + static_cast<std::ptrdiff_t>(k))].name + " -> ";
        }
        cycle += rules_[s].name;
        const PendingRule& at = rules_[s];
        const bool generated = at.name.find('#') != std::string::npos;
        fail(at.defined_at, "rule '" + at.name + "' is left-recursive: " + cycle +
                                " reaches itself without consuming input" +
                                (generated ? " (a repetition of something that can match nothing?)" : ""));
      }
      if (color[s] == 0) {
        color[s] = 1;
        path.push_back(s);
        next_edge.push_back(0);
      }
    }
  }
}

std::shared_ptr<const Grammar> GrammarBuilder::finish() {
  for (const PendingRule& r : rules_) {
    if (!r.defined) {
      fail(r.first_use, "undefined rule '" + r.name + "'");
    }
  }
  const auto root = by_name_.find("root");
  if (root == by_name_.end()) throw GrammarError(0, 0, "the grammar has no 'root' rule (the start rule)");
  check_left_recursion();

  auto grammar = std::make_shared<Grammar>();
  grammar->limits_ = limits_;
  grammar->root_ = root->second;
  grammar->char_sets_ = std::move(char_sets_);
  grammar->rules_.reserve(rules_.size());
  for (PendingRule& r : rules_) {
    Rule rule;
    rule.generated = r.name.find('#') != std::string::npos;
    rule.name = std::move(r.name);
    const auto index = static_cast<std::uint32_t>(grammar->rules_.size());
    for (const Sequence& alt : r.alternatives) {
      rule.alternatives.push_back(static_cast<std::uint32_t>(grammar->elements_.size()));
      grammar->elements_.insert(grammar->elements_.end(), alt.begin(), alt.end());
      grammar->elements_.push_back(Element{ElementKind::end, 0});
    }
    grammar->rule_of_element_.resize(grammar->elements_.size(), index);
    grammar->rules_.push_back(std::move(rule));
  }
  return grammar;
}

}  // namespace loom::compute::grammar
