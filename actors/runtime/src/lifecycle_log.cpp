#include "loom/actors/runtime/lifecycle_log.hpp"

#include <spdlog/spdlog.h>

#include "loom/actors/runtime/logger.hpp"

namespace loom::actors::detail {

void log_handler_failed(std::string_view actor, std::string_view message, std::string_view error) {
  logger().error("actor failed actor={} message={} error=\"{}\"", actor, message, error);
}

void log_restarting(std::string_view actor, std::uint64_t restarts) {
  logger().warn("actor restarting actor={} restarts={}", actor, restarts);
}

void log_stopping_after_failure(std::string_view actor, std::uint64_t restarts) {
  logger().error("actor stopping after failure actor={} restarts={}", actor, restarts);
}

void log_on_stop_failed(std::string_view actor, std::string_view error) {
  logger().error("on_stop threw actor={} error=\"{}\"", actor, error);
}

void log_stopped(std::string_view actor) { logger().debug("actor stopped actor={}", actor); }

void log_child_failed(std::string_view supervisor, std::string_view actor, std::string_view message,
                      bool restarted, std::uint64_t restarts) {
  logger().warn("child failed supervisor={} actor={} message={} restarted={} restarts={}", supervisor, actor,
                message, restarted, restarts);
}

}  // namespace loom::actors::detail
