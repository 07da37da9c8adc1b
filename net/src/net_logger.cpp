#include "net_logger.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace loom::net {

spdlog::logger& logger() {
  static const std::shared_ptr<spdlog::logger> instance = [] {
    if (auto existing = spdlog::get("net")) return existing;
    auto created = spdlog::stderr_color_mt("net");
    created->set_level(spdlog::default_logger()->level());
    return created;
  }();
  return *instance;
}

}  // namespace loom::net
