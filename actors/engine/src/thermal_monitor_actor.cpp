#include "loom/actors/engine/thermal_monitor_actor.hpp"

#include <exception>
#include <stdexcept>
#include <utility>

#include <boost/asio/post.hpp>
#include <spdlog/fmt/fmt.h>
#include <spdlog/logger.h>

#include "loom/actors/runtime/logger.hpp"

namespace loom::actors {

void ThermalMonitorConfig::validate() const {
  if (interval < std::chrono::milliseconds(1)) {
    throw std::invalid_argument("thermal monitor: the interval must be at least 1 ms");
  }
  thresholds.validate();
}

ThermalMonitorActor::ThermalMonitorActor(std::shared_ptr<const ThermalProvider> provider, ThermalSink sink,
                                         boost::asio::any_io_executor read_executor, ThermalMonitorConfig config)
    : provider_(std::move(provider)),
      sink_(std::move(sink)),
      read_executor_(std::move(read_executor)),
      config_(config) {
  if (!provider_) throw std::invalid_argument("thermal monitor: the provider is null");
  if (!sink_) throw std::invalid_argument("thermal monitor: the sink is empty");
  if (!read_executor_) throw std::invalid_argument("thermal monitor: the read executor is empty");
  config_.validate();
}

void ThermalMonitorActor::on_start() {
  // Read at once, so the subscriber learns the state without waiting a whole interval.
  start_read();
  start_periodic(config_.interval, [this] {
    if (!read_in_flight_) start_read();
  });
}

void ThermalMonitorActor::start_read() {
  read_in_flight_ = true;
  boost::asio::post(read_executor_, [provider = provider_,
                                     taken = continuation("ThermalReadingTaken", [this](ThermalReading r) {
                                       reading_taken(r);
                                     })] {
    ThermalReading reading;
    // A provider reports errors as values; one that throws anyway must not take down the reading thread.
    try {
      reading = provider->read();
    } catch (const std::exception& e) {
      reading = ThermalReadError{std::string("the provider threw: ") + e.what()};
    } catch (...) {
      reading = ThermalReadError{"the provider threw a non-standard exception"};
    }
    // Dropped (and counted as a dead letter) if the monitor has stopped meanwhile.
    taken(std::move(reading));
  });
}

void ThermalMonitorActor::record_error(const std::string& message) {
  ++status_.errors;
  // A sensor that keeps failing the same way is logged once at warn, not once per interval.
  const bool news = !previous_read_failed_ || message != status_.last_error;
  logger().log(news ? spdlog::level::warn : spdlog::level::debug,
               "actor={} message=ThermalReadingTaken errors={} error=\"{}\" (taken as nominal)", name(), status_.errors,
               message);
  status_.last_error = message;
}

void ThermalMonitorActor::reading_taken(const ThermalReading& reading) {
  read_in_flight_ = false;
  ++status_.reads;
  ThermalStateChanged change;
  if (const auto* celsius = std::get_if<Celsius>(&reading)) {
    change.state = next_thermal_state(status_.state, celsius->value, config_.thresholds);
    change.celsius = celsius->value;
    change.reason = fmt::format("temperature {} C", celsius->value);
    status_.last_celsius = celsius->value;
  } else if (const auto* state = std::get_if<ThermalState>(&reading)) {
    change.state = *state;
    change.reason = "state named by the provider";
  } else {
    const auto& error = std::get<ThermalReadError>(reading).message;
    record_error(error);
    change.state = ThermalState::nominal;
    change.reason = "read error, taken as nominal: " + error;
  }
  previous_read_failed_ = std::holds_alternative<ThermalReadError>(reading);
  if (announced_ && change.state == status_.state) return;
  logger().info("actor={} state={} previous={} reason=\"{}\"", name(), to_string(change.state),
                announced_ ? to_string(status_.state) : "none", change.reason);
  status_.state = change.state;
  announced_ = true;
  sink_(std::move(change));
}

void ThermalMonitorActor::on(GetThermalStatus m) { m.reply(status_); }

}  // namespace loom::actors
