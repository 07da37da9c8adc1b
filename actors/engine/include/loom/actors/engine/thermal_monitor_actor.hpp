// ThermalMonitorActor: reads a ThermalProvider on a timer and tells a sink the thermal state whenever it
// changes (and once, after the first reading, whatever it is), so the scheduler can throttle. Temperatures
// become states through ThermalThresholds (with hysteresis); a state named by the provider is taken as is.
//
// A read error is logged and treated as `nominal`: throttling is a courtesy to the device, not a safety
// mechanism (the kernel and firmware throttle a really hot device themselves), and a broken sensor should not
// stall generation. The errors are counted and the last one kept (GetThermalStatus), so a monitor that only
// ever fails is visible. Repeated identical errors are logged at debug level, a new one at warn.
//
// The read runs on `read_executor` (a pool for blocking work, not the io_context threads: file I/O may
// block), and its result comes back to the strand as a continuation. At most one read is in
// flight; a tick that finds one still running is skipped.
//
// Why a sink and not an Address: the subscriber (the scheduler) is another actor whose protocol this one
// need not know. The engine binds the sink to `scheduler.tell(std::move(change))`, a test to a recording
// actor. The sink runs on the monitor's strand, so it must be quick and must not block: telling is.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>

#include <boost/asio/any_io_executor.hpp>

#include "loom/actors/engine/thermal_monitor_protocol.hpp"
#include "loom/actors/engine/thermal_provider.hpp"
#include "loom/actors/engine/thermal_state.hpp"
#include "loom/actors/engine/thermal_thresholds.hpp"
#include "loom/actors/runtime/actor.hpp"
#include "loom/actors/runtime/reply.hpp"

namespace loom::actors {

class ThermalMonitorActor : public Actor<ThermalMonitorActor, ThermalMonitorProtocol> {
 public:
  // Throws std::invalid_argument for a null provider, an empty sink or read executor, or a config that
  // validate() refuses. Under spawn the actor is built on its strand, where supervision only logs that and
  // stops the actor: validate the config first where the error can still be reported to whoever gave it.
  ThermalMonitorActor(std::shared_ptr<const ThermalProvider> provider, ThermalSink sink,
                      boost::asio::any_io_executor read_executor, ThermalMonitorConfig config = {});

  void on_start();
  void on(GetThermalStatus m);

 private:
  void start_read();
  void reading_taken(const ThermalReading& reading);
  void record_error(const std::string& message);

  std::shared_ptr<const ThermalProvider> provider_;
  ThermalSink sink_;
  boost::asio::any_io_executor read_executor_;
  ThermalMonitorConfig config_;
  ThermalStatus status_;
  bool read_in_flight_ = false;
  bool previous_read_failed_ = false;
  bool announced_ = false;  // the first reading's state has been told
};

}  // namespace loom::actors
