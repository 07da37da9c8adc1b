// ThermalProvider: where the thermal monitor's readings come from. A reading is a temperature (which the
// monitor maps to a state through its thresholds), a state named outright (taken as is), or an error saying
// why there is neither. Providers report errors as values, never by throwing, and bound what they read, so a
// broken sensor or a garbage file costs one error reading and nothing more.
//
// Three providers:
// - SysfsThermalProvider: Linux thermal zones, <root>/thermal_zone*/temp (millidegrees C); the hottest
//   readable zone wins. Zones that cannot be read or hold garbage are skipped (laptops commonly have a zone
//   or two that always fail); only when no zone gives a temperature is the reading an error.
// - FileThermalProvider: a file an operator or a test writes: a temperature in degrees C ("71.5") or a state
//   name ("critical"), surrounding whitespace ignored. Replace it atomically (write another file, rename it
//   over this one): a read that meets a half-written file sees garbage, that is a read error.
// - FixedThermalProvider: always the same state (no sensor, or a test).
//
// read() may be called from any thread, and concurrently: the monitor runs it off the io_context threads,
// because file I/O may block.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <variant>

#include "loom/actors/engine/thermal_state.hpp"

namespace loom::actors {

struct Celsius {
  double value = 0;
};
struct ThermalReadError {
  std::string message;
};
using ThermalReading = std::variant<Celsius, ThermalState, ThermalReadError>;

// Temperatures outside this range are garbage (a sensor's "no value" sentinel, a typo), a read error.
inline constexpr double kMinPlausibleCelsius = -273.15;
inline constexpr double kMaxPlausibleCelsius = 1000.0;
// The most bytes read from one file (a zone's temp, the state file); a longer file is a read error.
inline constexpr std::size_t kMaxThermalFileBytes = 64;
// The most thermal zones looked at; further entries are ignored.
inline constexpr std::size_t kMaxThermalZones = 256;

class ThermalProvider {
 public:
  virtual ~ThermalProvider() = default;
  virtual ThermalReading read() const = 0;
};

class SysfsThermalProvider final : public ThermalProvider {
 public:
  explicit SysfsThermalProvider(std::filesystem::path root = "/sys/class/thermal");
  ThermalReading read() const override;

 private:
  std::filesystem::path root_;
};

class FileThermalProvider final : public ThermalProvider {
 public:
  explicit FileThermalProvider(std::filesystem::path path);
  ThermalReading read() const override;

 private:
  std::filesystem::path path_;
};

class FixedThermalProvider final : public ThermalProvider {
 public:
  explicit FixedThermalProvider(ThermalState state) : state_(state) {}
  ThermalReading read() const override { return state_; }

 private:
  ThermalState state_;
};

}  // namespace loom::actors
