#include "loom/actors/engine/session_actor.hpp"

#include <algorithm>
#include <deque>
#include <exception>
#include <random>
#include <stdexcept>
#include <utility>

#include "chat_prompt.hpp"
#include "token_logprobs.hpp"
#include "loom/actors/runtime/logger.hpp"
#include "loom/compute/grammar/output_constraint.hpp"
#include "loom/compute/text/stop_matcher.hpp"
#include "loom/compute/text/streaming_detokenizer.hpp"

namespace loom::actors {
namespace {

using proto::ErrorCode;
using proto::ErrorEvent;
using proto::FinishReason;

// Why prompts are bounded where they are, for the refusal's message.
std::string capacity_reason(const SessionContext& context) {
  if (context.max_prompt_tokens > 0 && context.max_prompt_tokens < context.context_length - 1) {
    return " (the server's prompt limit)";
  }
  return " (the context holds " + std::to_string(context.context_length) + " and one more is needed to generate)";
}

ErrorEvent invalid(const std::string& request_id, std::string field, std::string message) {
  return ErrorEvent{request_id, ErrorCode::invalid_request, std::move(message), std::move(field)};
}

std::string indexed(std::string_view name, std::size_t i) { return std::string(name) + "[" + std::to_string(i) + "]"; }

// A constraint compiles here, on the session's strand, so that a bad one is refused before the request is
// accepted; the backend compiles it again (cached) for the steps. A schema's error names the place in the
// schema and the keyword, a grammar's the line and column.
std::optional<ErrorEvent> check_constraint(const std::string& request_id, const proto::OutputConstraint& constraint) {
  const char* field =
      constraint.kind == proto::OutputConstraint::Kind::grammar ? "params.grammar" : "params.json_schema";
  try {
    compute::grammar::compile_constraint(constraint);
  } catch (const compute::grammar::SchemaError& e) {
    return invalid(request_id, field, e.what());
  } catch (const compute::grammar::GrammarError& e) {
    return invalid(request_id, field, e.what());
  }
  return std::nullopt;
}

// The request's own rules, once each: the wire rules (types, ranges; for a request an application built
// rather than a client's the gateway parsed) by proto's parser itself, with no deployment size limits; then
// what only the loaded model can tell, token ids against its vocabulary.
std::optional<ErrorEvent> check_params(const proto::GenerateRequest& r, const compute::Vocabulary& vocabulary) {
  if (auto error = proto::check_generate_request(r, proto::ParseOptions::unbounded())) {
    return invalid(r.id, error->field, error->message);
  }
  const auto outside = [&](std::int32_t id) {
    return "token id " + std::to_string(id) + " is outside the vocabulary (0.." + std::to_string(vocabulary.size() - 1) + ")";
  };
  const auto& p = r.params;
  for (std::size_t i = 0; i < p.stop_token_ids.size(); ++i) {
    if (!vocabulary.valid(p.stop_token_ids[i])) {
      return invalid(r.id, indexed("params.stop_token_ids", i), outside(p.stop_token_ids[i]));
    }
  }
  for (const auto& [id, bias] : p.logit_bias) {
    if (!vocabulary.valid(id)) return invalid(r.id, "params.logit_bias." + std::to_string(id), outside(id));
  }
  if (p.logprobs > vocabulary.size()) {
    return invalid(r.id, "params.logprobs",
                   "asks for " + std::to_string(p.logprobs) + " alternatives; the vocabulary has " +
                       std::to_string(vocabulary.size()) + " tokens");
  }
  if (p.constraint) return check_constraint(r.id, *p.constraint);
  return std::nullopt;
}

std::vector<std::int32_t> end_ids(const compute::Vocabulary& v) {
  std::vector<std::int32_t> ids;
  if (v.valid(v.eos)) ids.push_back(v.eos);
  if (v.valid(v.eot) && v.eot != v.eos) ids.push_back(v.eot);
  return ids;
}

}  // namespace

struct SessionActor::Prepared {
  std::vector<std::int32_t> tokens;
  std::vector<std::string> stops;       // the request's own, then the template's end-of-turn markers
  std::size_t request_stops = 0;        // how many of `stops` are the request's own
  bool chat = false;
  std::vector<proto::ChatMessage> new_turns;  // chat: the request's turns the history keeps
  std::size_t drop_history = 0;              // chat: oldest history turns dropped to fit
  std::size_t dropped = 0;                   // chat: turns dropped, the request's own included
  std::string raw_prompt;                    // raw: what the transcript gains besides the reply
  std::optional<detail::ReplySplit> reply;   // chat: how the reply splits into content, reasoning and calls
  std::optional<proto::OutputConstraint> tool_constraint;  // chat: tool_choice required or a named function
};

struct SessionActor::Active {
  Active(const compute::Tokenizer& tokenizer, Prepared&& p)
      : prepared(std::move(p)), detokenizer(tokenizer), stops(prepared.stops) {
    if (prepared.reply) reply.emplace(prepared.reply->format, prepared.reply->options);
  }

  bool pending() const noexcept { return !held_text.empty() || !held_reasoning.empty() || !held_calls.empty(); }

  // Text the stop matcher released, through the reply parser when there is one.
  void take(std::string_view released) {
    if (!reply) {
      held_text += released;
      return;
    }
    add(reply->feed(released));
  }
  void add(const std::vector<compute::ReplyDelta>& deltas) {
    for (const auto& delta : deltas) {
      held_text += delta.content;
      held_reasoning += delta.reasoning;
      if (delta.tool_call) {
        const auto& c = *delta.tool_call;
        held_calls.push_back(proto::ToolCallDelta{c.index, c.id, c.name, c.arguments});
      }
    }
  }

  // A token not yet sent, and where its text starts in the stop matcher's input.
  struct Held {
    std::int32_t token = 0;
    std::optional<float> logprob;
    std::size_t start = 0;
    std::vector<compute::TokenLogprob> top{};  // with logprob: the alternatives at its position
  };

  std::string request_id;
  cache::SequenceId sequence = 0;
  ClientSink sink;
  Prepared prepared;
  compute::StreamingDetokenizer detokenizer;
  compute::StopMatcher stops;
  std::deque<Held> held;
  std::optional<compute::ReplyStreamParser> reply;  // chat with tools or reasoning: splits the released text
  std::string held_text;         // content released, not yet sent: goes with the last token sent
  std::string held_reasoning;    // the same for reasoning
  std::vector<proto::ToolCallDelta> held_calls;  // and for tool-call pieces
  std::size_t matcher_input = 0; // bytes fed to the stop matcher so far
  std::string shown;             // every byte the stop matcher released (sent or in held_text)
  std::int32_t next_index = 0;   // of the next token event
  std::int32_t received = 0;     // tokens the scheduler sent
  std::optional<std::size_t> stop_index;  // the stop string that matched
  bool cancel_sent = false;
  std::int32_t choice = 0;                // of the request (n > 1)
  std::optional<SequenceFinished> finished;  // how the scheduler ended it
  std::optional<proto::ChoiceEnd> ended;     // how it ended, as the done event tells
  std::vector<std::unique_ptr<Active>> forks;  // choice 0 only: choices 1 .. n - 1
};

SequenceSink sequence_sink_for(Address<SessionProtocol> session) {
  return [session = std::move(session)](SequenceEvent event) {
    std::visit([&](auto& m) { session.tell(std::move(m)); }, event);
  };
}

SessionActor::SessionActor(std::shared_ptr<const SessionContext> context, SessionOptions options)
    : context_(std::move(context)), options_(std::move(options)) {
  if (!context_ || !context_->tokenizer) throw std::invalid_argument("SessionActor needs a context with a tokenizer");
  if (context_->context_length <= 0) throw std::invalid_argument("SessionActor needs context_length > 0");
  if (options_.system_prompt && options_.system_prompt->empty()) options_.system_prompt.reset();
  transcript_ = options_.system_prompt.value_or("");
  info_.session_id = options_.session_id;
}

SessionActor::~SessionActor() = default;

void SessionActor::send(const ClientSink& sink, proto::ServerMessage message) const {
  if (!sink) return;
  try {
    sink(std::move(message));
  } catch (const std::exception& e) {
    // The client's sink is not ours to fix; failing here would restart the session and lose its history.
    logger().warn("actor=session session={} error=\"client sink threw: {}\"", options_.session_id, e.what());
  }
}

void SessionActor::on(SessionGenerate m) {
  const auto& request = m.request;
  if (closing_) {
    send(m.sink, ErrorEvent{request.id, ErrorCode::unavailable, "session " + options_.session_id + " is closing", {}});
    return;
  }
  if (active_) {
    send(m.sink, ErrorEvent{request.id, ErrorCode::conflict,
                            "session " + options_.session_id + " is already generating request " + active_->request_id,
                            {}});
    return;
  }
  try {
    auto prepared = prepare(request);
    if (auto* error = std::get_if<ErrorEvent>(&prepared)) {
      send(m.sink, std::move(*error));
      return;
    }
    auto active = std::make_unique<Active>(*context_->tokenizer, std::get<Prepared>(std::move(prepared)));
    active->request_id = request.id;
    active->sequence = m.sequence;
    active->sink = std::move(m.sink);
    // Choices beyond the first are sequences m.sequence + i (the engine keeps n ids for the request).
    for (std::int32_t i = 1; i < request.n; ++i) {
      auto fork = std::make_unique<Active>(*context_->tokenizer, Prepared(active->prepared));
      fork->request_id = request.id;
      fork->sequence = m.sequence + static_cast<cache::SequenceId>(i);
      fork->choice = i;
      active->forks.push_back(std::move(fork));
    }

    const auto& params = request.params;
    SubmitSequence submit;
    submit.sequence = m.sequence;
    submit.prompt = active->prepared.tokens;
    submit.params = params;
    if (active->prepared.tool_constraint) submit.params.constraint = active->prepared.tool_constraint;
    // An absent seed asks for a different stream each time: drawn here, once, so that the request keeps
    // one stream however often its sampler is made.
    if (!submit.params.seed) {
      submit.params.seed = static_cast<std::uint64_t>(std::random_device{}()) << 32 | std::random_device{}();
    }
    if (!params.ignore_eos) submit.end_ids = end_ids(context_->tokenizer->vocabulary());
    submit.priority = request.priority;
    submit.fairness_key = options_.session_id;
    submit.deadline = m.deadline;
    submit.accepted = m.accepted;
    submit.sink = sequence_sink_for(self());
    submit.progress = request.progress;
    for (const auto& fork : active->forks) submit.forks.push_back(fork->sequence);
    if (!context_->scheduler.tell(std::move(submit))) {
      send(active->sink, ErrorEvent{request.id, ErrorCode::unavailable, "the scheduler is not running", {}});
      return;
    }
    info_.last_prompt_tokens = static_cast<std::int32_t>(active->prepared.tokens.size());
    active_ = std::move(active);
  } catch (const std::exception& e) {
    // Not the client's doing (the checks above cover its mistakes); still an event, not a restart.
    send(m.sink, ErrorEvent{request.id, ErrorCode::internal, std::string("preparing the request failed: ") + e.what(), {}});
  }
}

std::variant<SessionActor::Prepared, ErrorEvent> SessionActor::prepare(const proto::GenerateRequest& request) const {
  if (auto error = check_params(request, context_->tokenizer->vocabulary())) return std::move(*error);
  return request.is_chat() ? prepare_chat(request) : prepare_raw(request);
}

std::variant<SessionActor::Prepared, ErrorEvent> SessionActor::prepare_raw(const proto::GenerateRequest& request) const {
  const auto& prompt = std::get<std::string>(request.input);
  Prepared p;
  p.raw_prompt = prompt;
  p.stops = request.params.stop;
  p.request_stops = p.stops.size();
  p.tokens = compute::encode_prompt(*context_->tokenizer, transcript_ + prompt, false);
  if (p.tokens.empty()) {
    return invalid(request.id, "prompt", "the prompt is empty and the vocabulary adds no BOS: nothing to generate after");
  }
  if (static_cast<std::int64_t>(p.tokens.size()) > context_->prompt_capacity()) {
    return invalid(request.id, "prompt",
                   "the prompt is " + std::to_string(p.tokens.size()) +
                       " tokens (with the session's earlier text); at most " +
                       std::to_string(context_->prompt_capacity()) + " fit" + capacity_reason(*context_));
  }
  return p;
}

std::variant<SessionActor::Prepared, ErrorEvent> SessionActor::prepare_chat(const proto::GenerateRequest& request) const {
  const auto& messages = std::get<std::vector<proto::ChatMessage>>(request.input);
  if (!context_->chat_format) {
    return ErrorEvent{request.id, ErrorCode::unsupported,
                      "the model has no chat template: send a raw prompt instead of messages", {}};
  }
  if (messages.empty()) return invalid(request.id, "messages", "a chat request needs at least one message");

  const auto input = detail::chat_prompt_input(request, history_, options_.system_prompt, context_->prompt_capacity());
  // The request's turns other than system ones, after the history in the conversation.
  const auto fresh = input.conversation.begin() + static_cast<std::ptrdiff_t>(history_.size());

  auto built = detail::build_chat_prompt(*context_->chat_format, *context_->tokenizer, input);
  if (auto* error = std::get_if<detail::ChatPromptError>(&built)) {
    if (error->unsupported) return ErrorEvent{request.id, ErrorCode::unsupported, std::move(error->message), "messages"};
    if (!error->too_long) return invalid(request.id, "messages", std::move(error->message));
    return invalid(request.id, "messages",
                   "the prompt is " + std::to_string(error->tokens) + " tokens with the chat template; at most " +
                       std::to_string(context_->prompt_capacity()) + " fit" + capacity_reason(*context_));
  }
  auto& prompt = std::get<detail::ChatPrompt>(built);
  Prepared p;
  p.chat = true;
  p.tokens = std::move(prompt.tokens);
  p.dropped = prompt.dropped;
  p.drop_history = std::min(prompt.dropped, history_.size());
  p.new_turns.assign(fresh + static_cast<std::ptrdiff_t>(prompt.dropped - p.drop_history), input.conversation.end());
  p.stops = request.params.stop;
  p.request_stops = p.stops.size();
  for (const auto& marker : context_->chat_format->end_of_turn_markers()) p.stops.push_back(marker);
  p.reply = detail::reply_split(*context_->chat_format, request, prompt.text);
  if (p.reply && p.reply->options.tools_offered) {
    try {
      p.tool_constraint = detail::tool_choice_constraint(p.reply->format, request, input.tools);
    } catch (const compute::grammar::SchemaError& e) {
      return invalid(request.id, "tools", std::string("a tool's parameters cannot be enforced: ") + e.what());
    } catch (const std::invalid_argument& e) {
      return ErrorEvent{request.id, ErrorCode::unsupported, e.what(), "tool_choice"};
    }
  } else if (request.tool_choice.mode == proto::ToolChoice::Mode::required ||
             request.tool_choice.mode == proto::ToolChoice::Mode::function) {
    return ErrorEvent{request.id, ErrorCode::unsupported,
                      "the model's chat template writes no tool calls in a syntax loom knows, so tool_choice cannot be "
                      "enforced",
                      "tool_choice"};
  }
  if (p.tool_constraint && request.params.constraint) {
    return invalid(request.id, "tool_choice", "a forced tool call cannot be combined with a grammar or response_format");
  }
  if (p.tool_constraint) {
    if (auto error = check_constraint(request.id, *p.tool_constraint)) return std::move(*error);
  }
  return p;
}

SessionActor::Active* SessionActor::choice_of(cache::SequenceId id) const {
  if (!active_) return nullptr;
  if (active_->sequence == id) return active_.get();
  for (const auto& fork : active_->forks) {
    if (fork->sequence == id) return fork.get();
  }
  return nullptr;
}

void SessionActor::on(SequenceToken m) {
  Active* a = choice_of(m.sequence);
  if (a == nullptr || a->stop_index || a->ended) return;  // stale, or after a stop
  try {
    handle_token(*a, m);
  } catch (const std::exception& e) {
    // A token the tokenizer cannot show (an id outside the vocabulary): the scheduler's fault, not the
    // client's; the request ends with an error rather than the session restarting.
    if (!a->cancel_sent) context_->scheduler.tell(CancelSequence{a->sequence, FinishReason::cancelled});
    a->cancel_sent = true;
    finish_here(*a, FinishReason::error, std::string("token ") + std::to_string(m.token) + ": " + e.what());
  }
}

void SessionActor::handle_token(Active& a, const SequenceToken& m) {
  ++a.received;
  const std::size_t start = a.matcher_input;
  const std::string text = a.detokenizer.push(m.token);
  a.matcher_input += text.size();
  auto result = a.stops.push(text);
  a.held.push_back({m.token, m.logprob, start, m.top});
  a.shown += result.text;
  a.take(result.text);
  if (result.stopped) {
    stopped_at(a, result.stop_index);
    return;
  }
  // While the reply parser holds text undecided, the latest token stays back to carry what it releases.
  if (!a.detokenizer.holding() && !a.stops.holding()) send_held(a, a.reply && a.reply->holding() ? 1 : 0);
}

void SessionActor::send_held(Active& a, std::size_t keep) {
  while (a.held.size() > keep) {
    const auto held = a.held.front();
    a.held.pop_front();
    proto::TokenEvent event;
    event.request_id = a.request_id;
    event.token = held.token;
    event.index = a.next_index++;
    event.choice = a.choice;
    if (held.logprob) detail::set_logprobs(event, *context_->tokenizer, *held.logprob, held.top);
    if (a.held.size() == keep) {
      event.text = std::exchange(a.held_text, {});
      event.reasoning = std::exchange(a.held_reasoning, {});
      event.tool_calls = std::exchange(a.held_calls, {});
    }
    send(active_->sink, std::move(event));
  }
}

void SessionActor::stopped_at(Active& a, std::size_t stop_index) {
  // The stop string starts at byte shown.size() of the matcher's input; a held token whose text starts
  // there or later is part of it. (Held text always has a held token before the stop string to carry it:
  // the token that fed its first byte is still held, since text was held from that byte on.)
  const std::size_t stop_start = a.shown.size();
  if (a.reply) a.add(a.reply->finish());
  while (a.held.size() > (a.pending() ? 1u : 0u) && a.held.back().start >= stop_start) a.held.pop_back();
  send_held(a);
  a.stop_index = stop_index;
  if (!a.cancel_sent) {
    a.cancel_sent = true;
    // A scheduler that is gone sends no SequenceFinished: end here.
    if (!context_->scheduler.tell(CancelSequence{a.sequence, FinishReason::stop})) {
      finish_here(a, FinishReason::stop, {});
    }
  }
}

void SessionActor::on(SequenceFinished m) {
  Active* a = choice_of(m.sequence);
  if (a == nullptr || a->ended) return;
  end_choice(*a, m);
  if (!active_->ended) return;
  for (const auto& fork : active_->forks) {
    if (!fork->ended) return;
  }
  send_done();
}

void SessionActor::end_choice(Active& a, const SequenceFinished& m) {
  if (!a.stop_index) {
    // What is still held: a character never completed (U+FFFD), then text that could have begun a stop
    // string and did not. The held tokens carry it (see the header: text is never held without a token).
    try {
      const std::string rest = a.detokenizer.finish();
      a.matcher_input += rest.size();
      auto tail = a.stops.push(rest);
      a.shown += tail.text;
      a.take(tail.text);
      if (tail.stopped) {
        a.cancel_sent = true;  // it has finished: nothing to cancel
        stopped_at(a, tail.stop_index);
      } else {
        const std::string released = a.stops.finish();
        a.shown += released;
        a.take(released);
        if (a.reply) a.add(a.reply->finish());
        send_held(a);
      }
    } catch (const std::exception& e) {
      logger().error("actor=session session={} request={} error=\"flushing the text failed: {}\"", options_.session_id,
                     a.request_id, e.what());
    }
  }

  proto::ChoiceEnd end;
  end.index = a.choice;
  end.finish_reason = m.reason;
  if (a.stop_index) {
    if (*a.stop_index < a.prepared.request_stops) {
      end.finish_reason = FinishReason::stop;
      end.stop = a.stops.stops()[*a.stop_index];
    } else {
      end.finish_reason = FinishReason::eos;  // the template's end-of-turn marker, written as text
    }
  }
  if (a.reply) {
    for (const auto& call : a.reply->result().tool_calls) end.tool_calls.push_back({call.id, call.name, call.arguments});
    // The model ended its turn with calls: the client is to run them (OpenAI's finish reason).
    if (!end.tool_calls.empty() && end.finish_reason == FinishReason::eos) end.finish_reason = FinishReason::tool_calls;
  }
  end.completion_tokens = m.completion_tokens;
  a.ended = std::move(end);
  a.finished = m;
}

// Every choice has ended: one done event. Its fields are choice 0's; with n > 1 a choice that failed or timed
// out makes the whole request's reason (a client must not take the answer for complete), and `choices` tells
// each one's end.
void SessionActor::send_done() {
  auto& a = *active_;
  const SequenceFinished& m = *a.finished;
  proto::DoneEvent done;
  done.request_id = a.request_id;
  done.finish_reason = a.ended->finish_reason;
  done.stop = a.ended->stop;
  done.tool_calls = a.ended->tool_calls;
  std::string error = m.error;
  done.usage = {m.prompt_tokens, 0, m.cached_tokens, static_cast<std::int32_t>(a.prepared.dropped)};
  done.timings = m.timings;
  const auto add = [&](const Active& choice) {
    done.usage.completion_tokens += choice.ended->completion_tokens;
    const FinishReason reason = choice.ended->finish_reason;
    if ((reason == FinishReason::error || reason == FinishReason::timeout) && done.finish_reason != FinishReason::error) {
      done.finish_reason = reason;
      error = choice.finished->error;
    }
    if (!a.forks.empty()) done.choices.push_back(*choice.ended);
  };
  add(a);
  for (const auto& fork : a.forks) add(*fork);
  if (done.finish_reason == FinishReason::error || done.finish_reason == FinishReason::timeout) {
    done.error_message = error.empty() ? std::string(proto::to_string(done.finish_reason)) : error;
  }

  const auto finished = std::move(active_);
  if (done.finish_reason != FinishReason::error) record(*finished);
  ++info_.requests;
  send(finished->sink, std::move(done));
  if (closing_) stop();
}

void SessionActor::record(const Active& done) {
  const auto& p = done.prepared;
  if (!p.chat) {
    transcript_ += p.raw_prompt;
    transcript_ += done.shown;
    return;
  }
  history_.erase(history_.begin(), history_.begin() + static_cast<std::ptrdiff_t>(p.drop_history));
  history_.insert(history_.end(), p.new_turns.begin(), p.new_turns.end());
  proto::ChatMessage reply;
  reply.role = proto::ChatRole::assistant;
  if (!done.reply) {
    reply.content = done.shown;
  } else {
    // What the client was shown, as the client will send it back: content, reasoning, calls apart.
    const auto parsed = done.reply->result();
    reply.content = parsed.content;
    if (!parsed.reasoning.empty()) reply.reasoning_content = parsed.reasoning;
    for (const auto& call : parsed.tool_calls) reply.tool_calls.push_back({call.id, call.name, call.arguments});
    reply.content_null = parsed.content.empty() && !parsed.tool_calls.empty();
  }
  history_.push_back(std::move(reply));
  info_.dropped_messages += p.dropped;
}

void SessionActor::on(SequenceRejected m) {
  if (!active_ || m.sequence != active_->sequence) return;
  const auto rejected = std::move(active_);
  send(rejected->sink, ErrorEvent{rejected->request_id, m.code, std::move(m.message), {}});
  if (closing_) stop();
}

void SessionActor::finish_here(Active& a, FinishReason reason, std::string error) {
  SequenceFinished finished;
  finished.sequence = a.sequence;
  finished.reason = reason;
  finished.error = std::move(error);
  finished.prompt_tokens = static_cast<std::int32_t>(a.prepared.tokens.size());
  finished.completion_tokens = a.received;
  finished.choice = a.choice;
  on(std::move(finished));
}

void SessionActor::cancel_choices() {
  std::vector<cache::SequenceId> live;
  const auto consider = [&](Active& a) {
    if (a.cancel_sent || a.ended) return;
    a.cancel_sent = true;
    live.push_back(a.sequence);
  };
  consider(*active_);
  for (const auto& fork : active_->forks) consider(*fork);
  for (const cache::SequenceId sequence : live) {
    if (context_->scheduler.tell(CancelSequence{sequence, FinishReason::cancelled})) continue;
    // The scheduler is gone: no SequenceFinished will come. The last one ended sends the done event.
    if (Active* a = choice_of(sequence)) finish_here(*a, FinishReason::cancelled, {});
  }
}

void SessionActor::on(SessionCancel m) {
  if (!active_ || active_->request_id != m.request_id) return;
  cancel_choices();
}

void SessionActor::on(CloseSession) {
  if (closing_) return;
  closing_ = true;
  if (!active_) {
    stop();
    return;
  }
  cancel_choices();
}

void SessionActor::on(ResetSession m) {
  if (active_) {
    m.reply(ErrorEvent{{}, ErrorCode::conflict,
                       "session '" + options_.session_id + "' is generating request '" + active_->request_id +
                           "': wait for its done event (or cancel it) before resetting",
                       "session_id"});
    return;
  }
  history_.clear();
  transcript_ = options_.system_prompt.value_or("");
  m.reply(proto::SessionResetDone{options_.session_id});
}

void SessionActor::on(SequenceProgress m) {
  if (!active_ || m.sequence != active_->sequence || active_->stop_index) return;
  send(active_->sink, proto::ProgressEvent{active_->request_id, m.computed, m.prompt_tokens});
}

void SessionActor::on(GetSessionInfo m) {
  SessionInfo info = info_;
  info.history_messages = history_.size();
  if (active_) info.active_request = active_->request_id;
  m.reply(std::move(info));
}

void SessionActor::on_stop() {
  // Stopped with a request running (not through CloseSession): its client still gets its done event.
  while (active_) {
    Active* open = !active_->ended ? active_.get() : nullptr;
    for (const auto& fork : active_->forks) {
      if (open == nullptr && !fork->ended) open = fork.get();
    }
    if (open == nullptr) return;  // cannot happen: the last choice to end sends the done event
    if (!open->cancel_sent) {
      open->cancel_sent = true;
      context_->scheduler.tell(CancelSequence{open->sequence, FinishReason::cancelled});
    }
    finish_here(*open, FinishReason::cancelled, {});
  }
}

}  // namespace loom::actors
