// SessionActor: one conversation. It keeps the history of turns and the system prompt, turns a generate
// request into prompt tokens (chat template, tokenizer, trimming old turns to fit the context), submits the
// sequence to the scheduler, and turns the scheduler's token ids back into client events: incremental,
// UTF-8-safe text, stop strings (held back until they cannot match, never shown), usage and timings.
//
// One generation at a time: a request that arrives while another runs is refused with an error event
// (`conflict`, naming the running request; the client may wait for the done event and send it again); the
// running request is not disturbed. The history's KV stays in the cache manager's prefix cache between
// turns (the scheduler releases a finished sequence, its committed full blocks stay cached), so turn N+1
// prefills only what turn N did not leave in whole blocks.
//
// Chat requests render [system] + history + the request's messages with the model's ChatFormat (its own Jinja
// template, or a built-in layout; chat_format.hpp), with the request's tools and chat_template_kwargs,
// tokenized with special tokens recognised, BOS first when the vocabulary wants it (once: a template that
// writes the BOS text does not get a second). The request's system messages, when it has any, replace the
// session's system prompt for that turn (all of them, first, in their order). A template's own refusal
// (raise_exception) is `invalid_request` on `messages` with its message; what a built-in layout cannot show
// (tools, a tool turn) is `unsupported`. When the prompt does not fit the context (it must leave room for one
// generated token), the oldest exchanges are dropped (a user turn with the turns after it up to the next user
// turn), always keeping the system turns and the request's last message; when even those do not fit the
// request is refused (`invalid_request`, field `messages`). Dropped turns are forgotten for good once the
// request's turn is recorded (SessionInfo counts them).
//
// Replies to chat requests are split (reply_parser.hpp) into content (`text`), reasoning and tool-call pieces
// in the syntax of the template's family, when the request offers tools or the template marks reasoning;
// the done event carries the calls whole, with reason `tool_calls` when the model ended its turn with them.
// tool_choice `none` renders without the tools; `required` or a named function constrains decoding to the
// family's call syntax (tool_call_grammar.hpp).
//
// A raw prompt continues the session's transcript (the system prompt text, then every earlier raw prompt
// and its output) as is, tokenized as user text after BOS; it is never trimmed: a transcript that no longer
// fits is refused (`invalid_request`, field `prompt`), as is an empty token list.
//
// Stop strings: the request's own, and for chat requests also the template's end-of-turn markers
// (end_of_turn_markers), for models that write them as text. A match ends the request (the session tells
// the scheduler CancelSequence with reason stop); the text before it is sent, the string never is. The
// done event says `stop` with the string for the request's own stop strings, and `eos` for a template
// marker (the model ended its turn; the client asked for no stop string).
//
// Token events. A token's text is what it completes: text held back (an incomplete UTF-8 character, or
// text that could begin a stop string) holds its token back too, and once nothing is held the waiting
// tokens go out together, the released text on the last of them and "" on the others. So there is always
// a waiting token to carry the text that is released at the end (a character never completed becomes
// U+FFFD; a stop string's beginning that never completed is shown), event indexes count from 0 without
// gaps, a token whose text lies wholly inside a matched stop string is never sent (one that also shows
// text before it is), and the texts of all events joined are exactly the reply's text. While the reply
// parser holds text undecided (what could still become a call marker), the latest token waits, to carry
// what the end releases.
//
// After the reply: a chat request's messages (except system ones) and the assistant's reply (its content,
// reasoning and tool calls apart) join the history; a raw request's prompt and reply join the transcript. Not when it ended with
// reason error, or when it was refused (error event) or rejected by the scheduler: nothing is recorded then.
// Cancelled, timed-out and length-cut replies are recorded as far as they went.
//
// Reset (ResetSession) forgets the history and the transcript, keeping the id and the system prompt, so the
// next request is prepared exactly as in a new session; refused (`conflict`) while a request runs.
//
// Progress: a request with `progress` set gets a progress event (prompt positions computed of the prompt's)
// after each prefill step, before its first token event; none after a stop string matched.
//
// Client mistakes never throw out of a handler (a restart would lose the history): they become error
// events. Every request gets either exactly one error event, or its token events and exactly one done event.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "loom/actors/engine/scheduler_actor.hpp"
#include "loom/actors/engine/session_protocol.hpp"
#include "loom/actors/runtime/actor.hpp"
#include "loom/actors/runtime/address.hpp"
#include "loom/actors/runtime/reply.hpp"
#include "loom/cache/block_manager.hpp"
#include "loom/compute/text/chat_format.hpp"
#include "loom/compute/text/tokenizer.hpp"
#include "loom/proto/generate_request.hpp"
#include "loom/proto/server_message.hpp"

namespace loom::actors {

// What every session of an engine shares: the loaded model's text side and the scheduler.
// SessionActor's constructor throws std::invalid_argument without a tokenizer or with context_length <= 0.
struct SessionContext {
  std::shared_ptr<const compute::Tokenizer> tokenizer;
  std::shared_ptr<const compute::ChatFormat> chat_format;  // null: chat requests are `unsupported`
  std::int64_t context_length = 0;                     // positions one sequence may use
  Address<SchedulerProtocol> scheduler;                // a submit it refuses (it is gone): `unavailable`
  // A request's prompt (after templating, with the session's history) has at most this many tokens; longer
  // raw prompts are refused, chat history is trimmed to fit. 0: only the context bounds it.
  std::int64_t max_prompt_tokens = 0;

  // Prompts may have at most this many tokens: room for one generated token in the context, and the limit.
  std::int64_t prompt_capacity() const noexcept {
    const std::int64_t by_context = context_length - 1;
    return max_prompt_tokens > 0 && max_prompt_tokens < by_context ? max_prompt_tokens : by_context;
  }
};

struct SessionOptions {
  std::string session_id;                   // the scheduler's fairness key for this session's sequences
  std::optional<std::string> system_prompt; // empty counts as none
};

// The scheduler's sink for a sequence of this session: its events become the session's messages.
SequenceSink sequence_sink_for(Address<SessionProtocol> session);

class SessionActor : public Actor<SessionActor, SessionProtocol> {
 public:
  SessionActor(std::shared_ptr<const SessionContext> context, SessionOptions options);
  ~SessionActor();

  void on(SessionGenerate m);
  void on(SessionCancel m);
  void on(CloseSession m);
  void on(ResetSession m);
  void on(GetSessionInfo m);
  void on(SequenceToken m);
  void on(SequenceFinished m);
  void on(SequenceRejected m);
  void on(SequenceProgress m);
  void on_stop();

 private:
  struct Active;    // the running request (its choice 0): its sink, detokenizer, stop matcher, held tokens, text
                    // so far; a request with n > 1 holds its other choices' in `forks`
  struct Prepared;  // a request turned into prompt tokens and what its reply needs

  // The request as prompt tokens and stop strings, or the error event that refuses it.
  std::variant<Prepared, proto::ErrorEvent> prepare(const proto::GenerateRequest& request) const;
  std::variant<Prepared, proto::ErrorEvent> prepare_chat(const proto::GenerateRequest& request) const;
  std::variant<Prepared, proto::ErrorEvent> prepare_raw(const proto::GenerateRequest& request) const;
  // The running request's choice that sequence `id` is, or null.
  Active* choice_of(cache::SequenceId id) const;
  void handle_token(Active& a, const SequenceToken& m);
  // Sends the choice's waiting tokens as events but the last `keep`, the waiting text on the last one sent.
  void send_held(Active& a, std::size_t keep = 0);
  // A stop string matched: the tokens that formed it are dropped, the rest go out, the scheduler stops.
  void stopped_at(Active& a, std::size_t stop_index);
  // How a choice ended, its held text flushed; the done event once every choice has.
  void end_choice(Active& a, const SequenceFinished& m);
  void send_done();
  // Ends a choice without waiting for the scheduler (it is gone, or the session is stopping).
  void finish_here(Active& a, proto::FinishReason reason, std::string error);
  // Cancels every choice not yet ended (each at most once).
  void cancel_choices();
  void record(const Active& done);
  void send(const ClientSink& sink, proto::ServerMessage message) const;

  std::shared_ptr<const SessionContext> context_;
  SessionOptions options_;
  std::vector<proto::ChatMessage> history_;  // the conversation's turns, oldest first (no system prompt)
  std::string transcript_;                  // raw prompts and outputs, for raw-prompt requests
  std::unique_ptr<Active> active_;
  bool closing_ = false;
  SessionInfo info_;
};

}  // namespace loom::actors
