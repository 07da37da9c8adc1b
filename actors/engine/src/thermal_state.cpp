#include "loom/actors/engine/thermal_state.hpp"

#include <array>

namespace loom::actors {

namespace {
constexpr std::array<std::string_view, 4> kNames = {"nominal", "fair", "serious", "critical"};
}

std::string_view to_string(ThermalState state) { return kNames.at(static_cast<std::size_t>(state)); }

std::optional<ThermalState> parse_thermal_state(std::string_view name) {
  for (std::size_t i = 0; i < kNames.size(); ++i) {
    if (kNames[i] == name) return static_cast<ThermalState>(i);
  }
  return std::nullopt;
}

}  // namespace loom::actors
