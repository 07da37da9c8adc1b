#include "loom/actors/engine/thermal_thresholds.hpp"

#include <array>
#include <cmath>
#include <stdexcept>
#include <string>

namespace loom::actors {

void ThermalThresholds::validate() const {
  const std::array<std::pair<const char*, double>, 4> fields = {
      {{"fair", fair}, {"serious", serious}, {"critical", critical}, {"hysteresis", hysteresis}}};
  for (const auto& [field, value] : fields) {
    if (!std::isfinite(value)) {
      throw std::invalid_argument(std::string("thermal thresholds: ") + field + " is not a finite number");
    }
  }
  if (!(fair < serious && serious < critical)) {
    throw std::invalid_argument("thermal thresholds: fair (" + std::to_string(fair) + "), serious (" +
                                std::to_string(serious) + ") and critical (" + std::to_string(critical) +
                                ") must be strictly increasing");
  }
  if (hysteresis < 0) {
    throw std::invalid_argument("thermal thresholds: hysteresis (" + std::to_string(hysteresis) +
                                ") must not be negative");
  }
}

ThermalState next_thermal_state(ThermalState current, double celsius, const ThermalThresholds& thresholds) {
  // Thresholds of the states above nominal, by state index - 1; nominal is never left downward.
  const std::array<double, 3> entered_at = {thresholds.fair, thresholds.serious, thresholds.critical};
  for (int state = 3; state >= 1; --state) {
    const double threshold = entered_at[static_cast<std::size_t>(state - 1)];
    const bool reached = celsius >= threshold;
    const bool held = state <= static_cast<int>(current) && celsius > threshold - thresholds.hysteresis;
    if (reached || held) return static_cast<ThermalState>(state);
  }
  return ThermalState::nominal;
}

}  // namespace loom::actors
