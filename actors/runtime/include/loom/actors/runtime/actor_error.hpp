// Error codes of the actor runtime. They are Boost.System codes because that is what Asio's completion
// machinery understands: an `ask` completes with `void(error_code, R)`, asio::use_future and
// asio::use_awaitable turn a failed ask into a thrown boost::system::system_error carrying one of these.
#pragma once

#include <type_traits>

#include <boost/system/error_code.hpp>

namespace loom::actors {

using error_code = boost::system::error_code;

enum class ActorError {
  timeout = 1,  // no reply arrived within the ask's timeout
  no_reply,     // the request was dropped unanswered: the actor stopped, failed, or discarded it
  stopped,      // the actor is stopped and refused the message
};

const boost::system::error_category& actor_category() noexcept;

inline error_code make_error_code(ActorError e) noexcept { return {static_cast<int>(e), actor_category()}; }

}  // namespace loom::actors

template <>
struct boost::system::is_error_code_enum<loom::actors::ActorError> : std::true_type {};
