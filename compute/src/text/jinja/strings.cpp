// Python str operations (strings.hpp).
#include "strings.hpp"

#include <unicode/uchar.h>

#include "../unicode_text.hpp"
#include "value.hpp"

namespace loom::compute::jinja::detail {
namespace {

using compute::detail::append_utf8;
using compute::detail::decode_utf8;
using compute::detail::kInvalidCodePoint;

struct Cp {
  char32_t c;
  std::size_t pos, len;
};

std::vector<Cp> decode(std::string_view s) {
  std::vector<Cp> out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    auto u = decode_utf8(s, i);
    out.push_back({u.code_point, i, u.length});
    i += u.length;
  }
  return out;
}

bool in_set(char32_t c, const std::vector<Cp>& set) {
  for (const auto& x : set)
    if (x.c == c) return true;
  return false;
}

template <typename F>
std::string map_code_points(std::string_view s, F f) {
  std::string out;
  out.reserve(s.size());
  bool prev_cased = false;
  std::size_t index = 0;
  for (std::size_t i = 0; i < s.size(); ++index) {
    auto u = decode_utf8(s, i);
    if (u.code_point == kInvalidCodePoint) {
      out.append(s.substr(i, u.length));
    } else {
      char32_t c = f(u.code_point, index, prev_cased);
      append_utf8(out, c);
      prev_cased = u_hasBinaryProperty(static_cast<UChar32>(u.code_point), UCHAR_CASED) != 0;
    }
    i += u.length;
  }
  return out;
}

char32_t upper(char32_t c) { return static_cast<char32_t>(u_toupper(static_cast<UChar32>(c))); }
char32_t lower(char32_t c) { return static_cast<char32_t>(u_tolower(static_cast<UChar32>(c))); }

}  // namespace

std::string py_strip(std::string_view s, const std::optional<std::string>& chars, StripSide side) {
  auto cps = decode(s);
  std::vector<Cp> set;
  if (chars) set = decode(*chars);
  auto strip_it = [&](char32_t c) { return chars ? in_set(c, set) : is_py_space(c); };
  std::size_t b = 0, e = cps.size();
  if (side != StripSide::right)
    while (b < e && strip_it(cps[b].c)) ++b;
  if (side != StripSide::left)
    while (e > b && strip_it(cps[e - 1].c)) --e;
  if (b == e) return {};
  return std::string(s.substr(cps[b].pos, cps[e - 1].pos + cps[e - 1].len - cps[b].pos));
}

std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep, long long maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) fail(ErrorKind::other, "empty separator");
    std::size_t start = 0;
    for (;;) {
      if (maxsplit >= 0 && static_cast<long long>(out.size()) >= maxsplit) break;
      std::size_t p = s.find(*sep, start);
      if (p == std::string_view::npos) break;
      out.emplace_back(s.substr(start, p - start));
      start = p + sep->size();
    }
    out.emplace_back(s.substr(start));
    return out;
  }
  auto cps = decode(s);
  std::size_t i = 0;
  while (i < cps.size()) {
    while (i < cps.size() && is_py_space(cps[i].c)) ++i;
    if (i >= cps.size()) break;
    if (maxsplit >= 0 && static_cast<long long>(out.size()) >= maxsplit) {
      std::size_t e = cps.size();
      while (e > i && is_py_space(cps[e - 1].c)) --e;
      out.emplace_back(s.substr(cps[i].pos, cps[e - 1].pos + cps[e - 1].len - cps[i].pos));
      break;
    }
    std::size_t j = i;
    while (j < cps.size() && !is_py_space(cps[j].c)) ++j;
    out.emplace_back(s.substr(cps[i].pos, cps[j - 1].pos + cps[j - 1].len - cps[i].pos));
    i = j;
  }
  return out;
}

std::vector<std::string> py_rsplit(std::string_view s, const std::optional<std::string>& sep, long long maxsplit) {
  if (maxsplit < 0 || !sep) return py_split(s, sep, maxsplit);
  if (sep->empty()) fail(ErrorKind::other, "empty separator");
  std::vector<std::string> out;
  std::size_t end = s.size();
  while (static_cast<long long>(out.size()) < maxsplit) {
    if (end < sep->size()) break;
    std::size_t p = s.rfind(*sep, end - sep->size());
    if (p == std::string_view::npos) break;
    out.emplace_back(s.substr(p + sep->size(), end - p - sep->size()));
    end = p;
  }
  out.emplace_back(s.substr(0, end));
  return {out.rbegin(), out.rend()};
}

std::string py_replace(std::string_view s, std::string_view old, std::string_view replacement, long long count,
                       std::size_t max_bytes) {
  std::string out;
  auto check = [&] {
    if (out.size() > max_bytes) fail(ErrorKind::limit, "replace() result exceeds the output limit");
  };
  if (old.empty()) {
    auto cps = decode(s);
    long long n = 0;
    for (const auto& c : cps) {
      if (count < 0 || n < count) out.append(replacement), ++n;
      out.append(s.substr(c.pos, c.len));
      check();
    }
    if (count < 0 || n < count) out.append(replacement);
    check();
    return out;
  }
  std::size_t start = 0;
  long long n = 0;
  while (count < 0 || n < count) {
    std::size_t p = s.find(old, start);
    if (p == std::string_view::npos) break;
    out.append(s.substr(start, p - start));
    out.append(replacement);
    check();
    start = p + old.size();
    ++n;
  }
  out.append(s.substr(start));
  check();
  return out;
}

std::string py_upper(std::string_view s) {
  return map_code_points(s, [](char32_t c, std::size_t, bool) { return upper(c); });
}
std::string py_lower(std::string_view s) {
  return map_code_points(s, [](char32_t c, std::size_t, bool) { return lower(c); });
}
std::string py_capitalize(std::string_view s) {
  return map_code_points(s, [](char32_t c, std::size_t i, bool) {
    return i == 0 ? static_cast<char32_t>(u_totitle(static_cast<UChar32>(c))) : lower(c);
  });
}
std::string py_title(std::string_view s) {
  return map_code_points(s, [](char32_t c, std::size_t, bool prev_cased) {
    return prev_cased ? lower(c) : static_cast<char32_t>(u_totitle(static_cast<UChar32>(c)));
  });
}

long long py_find(std::string_view s, std::string_view sub, bool reverse) {
  std::size_t p = reverse ? s.rfind(sub) : s.find(sub);
  if (p == std::string_view::npos) return -1;
  return static_cast<long long>(code_point_count(s.substr(0, p)));
}

long long py_count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<long long>(code_point_count(s)) + 1;
  long long n = 0;
  for (std::size_t p = s.find(sub); p != std::string_view::npos; p = s.find(sub, p + sub.size())) ++n;
  return n;
}

std::vector<std::string> py_splitlines(std::string_view s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\n' || s[i] == '\r') {
      out.emplace_back(s.substr(start, i - start));
      if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
      start = i + 1;
    }
  }
  if (start < s.size()) out.emplace_back(s.substr(start));
  return out;
}

}  // namespace loom::compute::jinja::detail
