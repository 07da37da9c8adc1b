// The SessionActor's messages (session_actor.hpp has the actor): generate, cancel, close, reset, info; the events
// the scheduler sends it for its sequence; and the session's shared context and options.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "loom/actors/engine/scheduler_protocol.hpp"
#include "loom/actors/runtime/address.hpp"
#include "loom/actors/runtime/reply.hpp"
#include "loom/cache/block_manager.hpp"
#include "loom/proto/generate_request.hpp"
#include "loom/proto/server_message.hpp"

namespace loom::actors {

// Where a request's events go: token events, then exactly one done event; or exactly one error event when
// the request was never accepted. Called on the session's strand: must be quick and must not block (an
// exception from it is logged and otherwise ignored).
using ClientSink = std::function<void(proto::ServerMessage)>;

struct SessionGenerate {
  proto::GenerateRequest request;          // already validated by proto's parser (or built by the caller)
  cache::SequenceId sequence = 0;          // the scheduler id for this request, unique in the engine
  ClientSink sink;
  std::optional<std::chrono::steady_clock::time_point> deadline;
  std::chrono::steady_clock::time_point accepted = std::chrono::steady_clock::now();
};

// Cancels the running request if it has this id (else nothing happens): the scheduler ends it and its done
// event says cancelled (or how it ended, if it ended first).
struct SessionCancel {
  std::string request_id;
};

// Ends the session: a running request is cancelled (its done event is still sent), then the actor stops.
// A request that arrives in between is refused (`unavailable`). A session stopped otherwise (its handle
// released) with a request running cancels it at the scheduler and sends its done event (cancelled) itself.
struct CloseSession {};

// Forgets the history (chat turns and raw transcript); the id and system prompt stay. Answers
// SessionResetDone, or an error event `conflict` while a request is generating (nothing is forgotten then).
struct ResetSession {
  Reply<proto::ServerMessage> reply;
};

struct SessionInfo {
  std::string session_id;
  std::size_t history_messages = 0;          // chat turns kept (the system prompt not counted)
  std::optional<std::string> active_request;
  std::uint64_t requests = 0;                // that ended with a done event, so far
  std::int32_t last_prompt_tokens = 0;       // of the last request submitted to the scheduler
  std::size_t dropped_messages = 0;          // turns dropped to fit the context, over the session's life
};
struct GetSessionInfo {
  Reply<SessionInfo> reply;
};

using SessionProtocol = std::variant<SessionGenerate, SessionCancel, CloseSession, ResetSession, GetSessionInfo,
                                     SequenceToken, SequenceFinished, SequenceRejected, SequenceProgress>;


}  // namespace loom::actors
