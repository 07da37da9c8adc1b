// The incremental JSON scanner of reply_scan.hpp: validates JSON text that may be cut off anywhere.
#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "reply_scan.hpp"

namespace loom::compute::reply_detail {
namespace {

constexpr int kMaxDepth = 128;  // a call's arguments nested deeper than this are not taken as a call

JsonScan scan_value(std::string_view s, std::size_t pos, int depth);

JsonScan scan_string(std::string_view s, std::size_t pos) {
  std::size_t i = pos + 1;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"') return {Scan::complete, i + 1};
    if (c < 0x20) return {Scan::invalid, i};
    if (c != '\\') { ++i; continue; }
    if (i + 1 >= s.size()) return {Scan::incomplete, s.size()};
    const char e = s[i + 1];
    if (e == 'u') {
      for (std::size_t k = i + 2; k < i + 6; ++k) {
        if (k >= s.size()) return {Scan::incomplete, s.size()};
        if (!is_json_hex(s[k])) return {Scan::invalid, k};
      }
      i += 6;
    } else if (std::string_view("\"\\/bfnrt").find(e) != std::string_view::npos) {
      i += 2;
    } else {
      return {Scan::invalid, i + 1};
    }
  }
  return {Scan::incomplete, s.size()};
}

// A number ends at the first byte that cannot continue it; a number that reaches the buffer's end could
// still go on, so it is incomplete.
JsonScan scan_number(std::string_view s, std::size_t pos) {
  std::size_t i = pos;
  auto at_end = [&] { return i >= s.size(); };
  if (s[i] == '-') ++i;
  if (at_end()) return {Scan::incomplete, s.size()};
  if (s[i] == '0') {
    ++i;
  } else if (is_json_digit(s[i])) {
    while (!at_end() && is_json_digit(s[i])) ++i;
  } else {
    return {Scan::invalid, i};
  }
  if (at_end()) return {Scan::incomplete, s.size()};
  if (s[i] == '.') {
    ++i;
    if (at_end()) return {Scan::incomplete, s.size()};
    if (!is_json_digit(s[i])) return {Scan::invalid, i};
    while (!at_end() && is_json_digit(s[i])) ++i;
    if (at_end()) return {Scan::incomplete, s.size()};
  }
  if (s[i] == 'e' || s[i] == 'E') {
    ++i;
    if (!at_end() && (s[i] == '+' || s[i] == '-')) ++i;
    if (at_end()) return {Scan::incomplete, s.size()};
    if (!is_json_digit(s[i])) return {Scan::invalid, i};
    while (!at_end() && is_json_digit(s[i])) ++i;
    if (at_end()) return {Scan::incomplete, s.size()};
  }
  return {Scan::complete, i};
}

JsonScan scan_container(std::string_view s, std::size_t pos, int depth, bool object) {
  if (depth > kMaxDepth) return {Scan::invalid, pos};
  const char close = object ? '}' : ']';
  std::size_t i = skip_space(s, pos + 1);
  if (i >= s.size()) return {Scan::incomplete, s.size()};
  if (s[i] == close) return {Scan::complete, i + 1};
  for (;;) {
    if (object) {
      if (s[i] != '"') return {Scan::invalid, i};
      const JsonScan key = scan_string(s, i);
      if (key.status != Scan::complete) return key;
      i = skip_space(s, key.end);
      if (i >= s.size()) return {Scan::incomplete, s.size()};
      if (s[i] != ':') return {Scan::invalid, i};
      i = skip_space(s, i + 1);
      if (i >= s.size()) return {Scan::incomplete, s.size()};
    }
    const JsonScan value = scan_value(s, i, depth + 1);
    if (value.status != Scan::complete) return value;
    i = skip_space(s, value.end);
    if (i >= s.size()) return {Scan::incomplete, s.size()};
    if (s[i] == close) return {Scan::complete, i + 1};
    if (s[i] != ',') return {Scan::invalid, i};
    i = skip_space(s, i + 1);
    if (i >= s.size()) return {Scan::incomplete, s.size()};
  }
}

JsonScan scan_value(std::string_view s, std::size_t pos, int depth) {
  if (pos >= s.size()) return {Scan::incomplete, s.size()};
  const char c = s[pos];
  if (c == '{') return scan_container(s, pos, depth, true);
  if (c == '[') return scan_container(s, pos, depth, false);
  if (c == '"') return scan_string(s, pos);
  if (c == '-' || is_json_digit(c)) return scan_number(s, pos);
  for (std::string_view word : {"true", "false", "null"}) {
    if (c != word[0]) continue;
    const Scan m = match_literal(s, pos, word);
    return {m, m == Scan::complete ? pos + word.size() : s.size()};
  }
  return {Scan::invalid, pos};
}

}  // namespace

JsonScan scan_json_value(std::string_view s, std::size_t pos) { return scan_value(s, pos, 0); }

std::size_t skip_space(std::string_view s, std::size_t pos) {
  while (pos < s.size() && is_json_space(s[pos])) ++pos;
  return pos;
}

Scan match_literal(std::string_view s, std::size_t pos, std::string_view literal) {
  const std::size_t n = std::min(literal.size(), s.size() - std::min(pos, s.size()));
  if (s.substr(pos, n) != literal.substr(0, n)) return Scan::invalid;
  return n == literal.size() ? Scan::complete : Scan::incomplete;
}

bool decode_json_string(std::string_view token, std::string& out) {
  const auto value = nlohmann::json::parse(token, nullptr, /*allow_exceptions=*/false);
  if (!value.is_string()) return false;
  out = value.get<std::string>();
  return true;
}

std::size_t utf8_safe_end(std::string_view s, std::size_t end) {
  // Walk back over at most 3 continuation bytes to the lead byte; keep the character only if it is whole.
  std::size_t lead = end;
  for (int k = 0; k < 4 && lead > 0; ++k) {
    const auto c = static_cast<unsigned char>(s[lead - 1]);
    --lead;
    if ((c & 0xC0) != 0x80) {
      const std::size_t need = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
      return end - lead >= need ? end : lead;
    }
  }
  return end;
}

}  // namespace loom::compute::reply_detail
