#include "loom/actors/runtime/dead_letters.hpp"

#include <atomic>

#include "loom/actors/runtime/logger.hpp"

namespace loom::actors {
namespace {
std::atomic<std::uint64_t> dead_letters{0};
}

std::uint64_t dead_letter_count() noexcept { return dead_letters.load(std::memory_order_relaxed); }

namespace detail {
void record_dead_letter(std::string_view actor, std::string_view message, std::string_view reason) {
  dead_letters.fetch_add(1, std::memory_order_relaxed);
  logger().debug("dropped message actor={} message={} reason={}", actor, message, reason);
}
}  // namespace detail

}  // namespace loom::actors
