#include "loom/proto/error_code.hpp"

#include <array>
#include <utility>

namespace loom::proto {

namespace {

constexpr std::array<std::pair<ErrorCode, std::string_view>, 7> kErrorCodeNames{{
    {ErrorCode::invalid_request, "invalid_request"},
    {ErrorCode::not_found, "not_found"},
    {ErrorCode::conflict, "conflict"},
    {ErrorCode::overloaded, "overloaded"},
    {ErrorCode::unsupported, "unsupported"},
    {ErrorCode::unavailable, "unavailable"},
    {ErrorCode::internal, "internal"},
}};

}  // namespace

std::string_view to_string(ErrorCode code) noexcept {
  for (const auto& [value, name] : kErrorCodeNames) {
    if (value == code) return name;
  }
  return "unknown";
}

std::optional<ErrorCode> parse_error_code(std::string_view text) noexcept {
  for (const auto& [value, name] : kErrorCodeNames) {
    if (name == text) return value;
  }
  return std::nullopt;
}

}  // namespace loom::proto
