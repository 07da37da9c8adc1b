// The gateway's logger ("net"), created on first use and registered with spdlog like the actors' one.
// Fields as key=value: conn=12 path=/v1/ws status=403.
#pragma once

#include <spdlog/logger.h>

namespace loom::net {

spdlog::logger& logger();

}  // namespace loom::net
