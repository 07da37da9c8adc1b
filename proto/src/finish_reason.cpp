#include "loom/proto/finish_reason.hpp"

#include <array>
#include <utility>

namespace loom::proto {

namespace {

constexpr std::array<std::pair<FinishReason, std::string_view>, 7> kFinishReasonNames{{
    {FinishReason::eos, "eos"},
    {FinishReason::length, "length"},
    {FinishReason::stop, "stop"},
    {FinishReason::cancelled, "cancelled"},
    {FinishReason::error, "error"},
    {FinishReason::timeout, "timeout"},
    {FinishReason::tool_calls, "tool_calls"},
}};

}  // namespace

std::string_view to_string(FinishReason reason) noexcept {
  for (const auto& [value, name] : kFinishReasonNames) {
    if (value == reason) return name;
  }
  return "unknown";
}

std::optional<FinishReason> parse_finish_reason(std::string_view text) noexcept {
  for (const auto& [value, name] : kFinishReasonNames) {
    if (name == text) return value;
  }
  return std::nullopt;
}

}  // namespace loom::proto
