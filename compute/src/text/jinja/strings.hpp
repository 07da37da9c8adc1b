// Python str operations on UTF-8 text (internal), by code point as Python counts: strip with Unicode
// whitespace or a character set, split, replace, case mapping (ICU's simple mappings), find.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace loom::compute::jinja::detail {

enum class StripSide { both, left, right };
// chars: nullopt strips Python whitespace; else any code point in chars.
std::string py_strip(std::string_view s, const std::optional<std::string>& chars, StripSide side);
// sep nullopt: runs of whitespace, no empty pieces. maxsplit < 0: no limit.
std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep, long long maxsplit);
std::vector<std::string> py_rsplit(std::string_view s, const std::optional<std::string>& sep, long long maxsplit);
std::string py_replace(std::string_view s, std::string_view old, std::string_view replacement, long long count,
                       std::size_t max_bytes);
std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_capitalize(std::string_view s);
std::string py_title(std::string_view s);
// Code-point index of the first (last) occurrence, -1 when absent.
long long py_find(std::string_view s, std::string_view sub, bool reverse);
long long py_count(std::string_view s, std::string_view sub);
std::vector<std::string> py_splitlines(std::string_view s);

}  // namespace loom::compute::jinja::detail
