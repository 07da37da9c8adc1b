// ThermalState: how hot the device runs, in four steps, as the thermal monitor reports it and the scheduler's
// thermal policy reads it (batch cap, pacing, which priorities may run). The names are the ones operators
// write in a state file and see in logs and stats.
#pragma once

#include <optional>
#include <string_view>

namespace loom::actors {

// Ordered: a later state is hotter, so states compare with < and >.
enum class ThermalState { nominal, fair, serious, critical };

// "nominal", "fair", "serious", "critical".
std::string_view to_string(ThermalState state);

// The exact lowercase name (as to_string writes it); anything else is nullopt.
std::optional<ThermalState> parse_thermal_state(std::string_view name);

}  // namespace loom::actors
