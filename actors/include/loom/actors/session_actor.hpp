// SessionActor: one conversation. It keeps the history of turns and the system prompt, turns a generate
// request into prompt tokens (chat template, tokenizer, trimming old turns to fit the context), submits the
// sequence to the scheduler, and turns the scheduler's token ids back into client events: incremental,
// UTF-8-safe text, stop strings (held back until they cannot match, never shown), usage and timings.
//
// One generation at a time: a request that arrives while another runs is rejected with `conflict` (the
// client may wait for the done event and send it again). The history's KV stays in the cache manager's
// prefix cache between turns (the scheduler releases a finished sequence, its committed full blocks stay
// cached), so turn N+1 prefills only what turn N did not leave in whole blocks.
//
// Chat requests render [system prompt] + history + the request's messages; a system message in the
// request replaces the session's system prompt for that turn. When that does not fit the context (leaving
// room for one generated token), the oldest turns are dropped, always keeping the system message and the
// request's last message; when even those do not fit the request is refused (`invalid_request`, field
// `messages`). A raw prompt continues the session's transcript (system prompt text, then every earlier
// prompt and output) as is; it is never trimmed.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "loom/actors/actor.hpp"
#include "loom/actors/address.hpp"
#include "loom/actors/reply.hpp"
#include "loom/actors/scheduler_actor.hpp"
#include "loom/cache/block_manager.hpp"
#include "loom/compute/chat_template.hpp"
#include "loom/compute/tokenizer.hpp"
#include "loom/proto/generate_request.hpp"
#include "loom/proto/server_message.hpp"

namespace loom::actors {

// Where a request's events go: token events, then exactly one done event; or exactly one error event when
// the request was never accepted. Called on the session's strand: must be quick and must not block.
using ClientSink = std::function<void(proto::ServerMessage)>;

// What every session of an engine shares: the loaded model's text side and the scheduler.
struct SessionContext {
  std::shared_ptr<const compute::Tokenizer> tokenizer;
  std::optional<compute::ChatTemplate> chat_template;  // none: chat requests are `unsupported`
  std::int64_t context_length = 0;                     // positions one sequence may use
  Address<SchedulerProtocol> scheduler;
};

struct SessionOptions {
  std::string session_id;
  std::optional<std::string> system_prompt;
};

struct SessionGenerate {
  proto::GenerateRequest request;          // already validated by proto's parser (or built by the caller)
  cache::SequenceId sequence = 0;          // the scheduler id for this request, unique in the engine
  ClientSink sink;
  std::optional<std::chrono::steady_clock::time_point> deadline;
  std::chrono::steady_clock::time_point accepted = std::chrono::steady_clock::now();
};

// Cancels the running request if it has this id (else nothing happens): it ends with reason cancelled.
struct SessionCancel {
  std::string request_id;
};

// Ends the session: a running request is cancelled (its done event is still sent), then the actor stops.
struct CloseSession {};

struct SessionInfo {
  std::string session_id;
  std::size_t history_messages = 0;          // chat turns kept (the system prompt not counted)
  std::optional<std::string> active_request;
  std::uint64_t requests = 0;                // accepted so far
  std::int32_t last_prompt_tokens = 0;       // of the last accepted request
  std::size_t dropped_messages = 0;          // turns dropped to fit the context, over the session's life
};
struct GetSessionInfo {
  Reply<SessionInfo> reply;
};

using SessionProtocol = std::variant<SessionGenerate, SessionCancel, CloseSession, GetSessionInfo, SequenceToken,
                                     SequenceFinished, SequenceRejected>;

// The scheduler's sink for a sequence of this session: its events become the session's messages.
SequenceSink sequence_sink_for(Address<SessionProtocol> session);

class SessionActor : public Actor<SessionActor, SessionProtocol> {
 public:
  SessionActor(std::shared_ptr<const SessionContext> context, SessionOptions options);
  ~SessionActor();

  void on(SessionGenerate m);
  void on(SessionCancel m);
  void on(CloseSession m);
  void on(GetSessionInfo m);
  void on(SequenceToken m);
  void on(SequenceFinished m);
  void on(SequenceRejected m);

 private:
  struct Active;  // the running request: its sink, detokenizer, stop matcher, held tokens, text so far

  std::shared_ptr<const SessionContext> context_;
  SessionOptions options_;
  std::vector<compute::ChatTurn> history_;  // user and assistant turns, oldest first (no system prompt)
  std::string transcript_;                  // raw prompts and outputs, for raw-prompt requests
  std::unique_ptr<Active> active_;
  bool closing_ = false;
  SessionInfo info_;
};

}  // namespace loom::actors
