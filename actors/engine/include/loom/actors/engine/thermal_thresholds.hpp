// ThermalThresholds: how the thermal monitor turns a temperature into a ThermalState. A state is entered
// when the temperature reaches its threshold and left only once the temperature has fallen a hysteresis
// margin below it, so a sensor hovering at a threshold does not make the scheduler's policy flap.
//
// Defaults: fair from 70 C, serious from 80 C, critical from 90 C, margin 5 C. Rising: 69.9 is nominal,
// 70 fair, 80 serious, 90 critical (several steps at once if the temperature jumps). Falling from critical:
// it stays critical above 85 C, is serious at 85 (if still above 75), fair at 75 (if still above 65), and
// nominal at 65 or below.
#pragma once

#include "loom/actors/engine/thermal_state.hpp"

namespace loom::actors {

struct ThermalThresholds {
  double fair = 70.0;      // degrees C at which each state is entered
  double serious = 80.0;
  double critical = 90.0;
  double hysteresis = 5.0;  // a state is left at or below its threshold minus this

  // Throws std::invalid_argument naming the field: thresholds must be finite and strictly increasing, the
  // margin finite and not negative.
  void validate() const;
};

// The state after a reading of `celsius` while in `current` (thresholds assumed valid): the hottest state
// whose threshold the temperature reaches, if hotter than `current`; otherwise the hottest state up to
// `current` that the temperature has not yet left (above its threshold minus the margin).
ThermalState next_thermal_state(ThermalState current, double celsius, const ThermalThresholds& thresholds);

}  // namespace loom::actors
