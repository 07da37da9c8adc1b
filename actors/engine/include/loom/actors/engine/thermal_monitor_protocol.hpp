// The ThermalMonitorActor's messages (thermal_monitor_actor.hpp has the actor): the status query; and what
// it tells its subscriber, ThermalStateChanged.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>

#include "loom/actors/engine/thermal_state.hpp"
#include "loom/actors/engine/thermal_thresholds.hpp"
#include "loom/actors/runtime/reply.hpp"

namespace loom::actors {

// What the subscriber is told.
struct ThermalStateChanged {
  ThermalState state = ThermalState::nominal;
  std::optional<double> celsius;  // the reading behind it, when the provider gave a temperature
  std::string reason;             // for logs: the reading, or the read error
};
using ThermalSink = std::function<void(ThermalStateChanged)>;

struct ThermalMonitorConfig {
  std::chrono::steady_clock::duration interval = std::chrono::seconds(1);  // at least 1 ms
  ThermalThresholds thresholds{};

  // Throws std::invalid_argument naming what is wrong: an interval under 1 ms, or bad thresholds.
  void validate() const;
};

struct ThermalStatus {
  ThermalState state = ThermalState::nominal;
  std::optional<double> last_celsius;  // the last temperature read, if any was
  std::string last_error;              // the last read error, if any happened
  std::uint64_t reads = 0;             // readings taken, errors included
  std::uint64_t errors = 0;
};

struct GetThermalStatus {
  Reply<ThermalStatus> reply;
};

using ThermalMonitorProtocol = std::variant<GetThermalStatus>;

}  // namespace loom::actors
