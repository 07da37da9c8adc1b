// The runtime's log lines about actor lifecycle events, out of line so that headers every actor includes
// do not pull in spdlog. All go to the "actors" logger (logger.hpp) as key=value fields.
#pragma once

#include <cstdint>
#include <string_view>

namespace loom::actors::detail {

void log_handler_failed(std::string_view actor, std::string_view message, std::string_view error);
void log_restarting(std::string_view actor, std::uint64_t restarts);
void log_stopping_after_failure(std::string_view actor, std::uint64_t restarts);
void log_on_stop_failed(std::string_view actor, std::string_view error);
void log_stopped(std::string_view actor);
void log_child_failed(std::string_view supervisor, std::string_view actor, std::string_view message,
                      bool restarted, std::uint64_t restarts);

}  // namespace loom::actors::detail
