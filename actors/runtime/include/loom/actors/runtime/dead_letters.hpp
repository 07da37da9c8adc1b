// Messages that reached no actor: told to an address whose actor is stopped or gone. They are dropped
// (a request among them fails its ask with ActorError::no_reply), counted here and logged at debug level.
#pragma once

#include <cstdint>
#include <string_view>

namespace loom::actors {

// Process-wide count of dropped messages, across all actors. Per-actor counts are in MailboxMetrics.
std::uint64_t dead_letter_count() noexcept;

namespace detail {
void record_dead_letter(std::string_view actor, std::string_view message, std::string_view reason);
}

}  // namespace loom::actors
