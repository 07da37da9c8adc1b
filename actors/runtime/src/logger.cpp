#include "loom/actors/runtime/logger.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace loom::actors {

spdlog::logger& logger() {
  static const std::shared_ptr<spdlog::logger> instance = [] {
    if (auto existing = spdlog::get("actors")) return existing;
    auto created = spdlog::stderr_color_mt("actors");
    created->set_level(spdlog::default_logger()->level());
    return created;
  }();
  return *instance;
}

}  // namespace loom::actors
