// The actors library's logger ("actors"). Messages use key=value fields so logs stay greppable:
//   actor=scheduler message=Tick error="..."
#pragma once

#include <memory>

#include <spdlog/logger.h>

namespace loom::actors {

// Shared by every actor; created on first use and registered with spdlog, so the application can set
// its level or sinks through spdlog's registry like any other logger.
spdlog::logger& logger();

}  // namespace loom::actors
