#include "openai_routes.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/write.hpp>
#include <spdlog/logger.h>

#include "cors.hpp"
#include "net_logger.hpp"
#include "openai_logprobs.hpp"
#include "openai_translate.hpp"
#include "sse_keepalive.hpp"
#include "openai_unhonoured_fields.hpp"
#include "peer_close_watch.hpp"

namespace loom::net {

namespace {

namespace asio = boost::asio;
using boost::system::error_code;

// How long one write may wait for a client that does not read; past it the client counts as gone.
std::chrono::milliseconds write_limit(const GatewayContext& context) {
  const auto idle = context.config.http_idle_timeout;
  return idle.count() > 0 ? idle : std::chrono::milliseconds(60000);
}

// One whole JSON response (a completion or an error) to `request`, with its CORS headers, counted in the
// metrics. Returns keep-alive.
asio::awaitable<bool> write_response(GatewayContext& context, TcpStream& stream, const HttpRequest& request,
                                     HttpResponse response) {
  add_cors_headers(context.config, request, response);
  context.metrics.http_response(static_cast<int>(response.result_int()));
  const bool keep_alive = response.keep_alive();
  error_code ec;
  stream.expires_after(write_limit(context));
  co_await http::async_write(stream, response, asio::redirect_error(asio::use_awaitable, ec));
  co_return keep_alive && !ec;
}

asio::awaitable<bool> write_error(GatewayContext& context, TcpStream& stream, const HttpRequest& request,
                                  const openai::Error& error) {
  return write_response(context, stream, request,
                        make_openai_error(request, static_cast<http::status>(error.status), error.message, error.type,
                                          error.param, error.code));
}

// A text/event-stream response: the header once, then SSE events. HTTP/1.1 gets chunked encoding so the
// connection can be kept alive; HTTP/1.0 has no chunks, so the stream is the raw body and ends with the
// connection.
class EventStreamWriter {
 public:
  EventStreamWriter(GatewayContext& context, TcpStream& stream, const HttpRequest& request)
      : context_(context), stream_(stream), request_(request), chunked_(request.version() >= 11),
        keep_alive_(request.keep_alive()), request_id_(request_id_of(request)) {}

  bool header_written() const { return header_written_; }
  bool keep_alive() const { return chunked_ && keep_alive_; }
  // A header of loom's (X-Loom-Ignored-Fields) for the response's head; before write_header.
  void add_header(std::string_view name, std::string value) { extra_headers_.emplace_back(name, std::move(value)); }

  asio::awaitable<bool> write_header(int version) {
    http::response<http::empty_body> response{http::status::ok, static_cast<unsigned>(version)};
    response.set(http::field::server, "loom/" LOOM_NET_VERSION);
    response.set(http::field::content_type, "text/event-stream");
    response.set("X-Request-Id", request_id_);
    response.set(http::field::cache_control, "no-cache");
    response.set("X-Accel-Buffering", "no");  // a reverse proxy in front must not hold tokens back
    for (const auto& [name, value] : extra_headers_) response.set(name, value);
    response.keep_alive(keep_alive());
    add_cors_headers(context_.config, request_, response);
    if (chunked_) response.chunked(true);
    http::response_serializer<http::empty_body> serializer{response};
    context_.metrics.http_response(200);
    header_written_ = true;
    error_code ec;
    stream_.expires_after(write_limit(context_));
    co_await http::async_write_header(stream_, serializer, asio::redirect_error(asio::use_awaitable, ec));
    co_return !ec;
  }

  // Parameters by value: a coroutine keeps its own copy in its frame.
  asio::awaitable<bool> write(std::string data) {
    error_code ec;
    stream_.expires_after(write_limit(context_));
    if (chunked_) {
      co_await asio::async_write(stream_, http::make_chunk(asio::buffer(data)),
                                 asio::redirect_error(asio::use_awaitable, ec));
    } else {
      co_await asio::async_write(stream_, asio::buffer(data), asio::redirect_error(asio::use_awaitable, ec));
    }
    co_return !ec;
  }

  // The last events ("data: [DONE]" among them) and the end of the body.
  asio::awaitable<bool> finish(std::string data) {
    const bool written = co_await write(std::move(data));
    if (!written) co_return false;
    if (!chunked_) co_return true;
    error_code ec;
    stream_.expires_after(write_limit(context_));
    co_await asio::async_write(stream_, http::make_chunk_last(), asio::redirect_error(asio::use_awaitable, ec));
    co_return !ec;
  }

 private:
  GatewayContext& context_;
  TcpStream& stream_;
  const HttpRequest& request_;
  bool chunked_;
  bool keep_alive_;
  std::string request_id_;  // X-Request-Id, echoed or made (request_id_of)
  std::vector<std::pair<std::string, std::string>> extra_headers_;
  bool header_written_ = false;
};

// One request from the engine's first event to its last.
class OpenAiExchange {
 public:
  OpenAiExchange(GatewayContext& context, TcpStream& stream, const HttpRequest& request, OpenAiRoute route,
                 openai::Request translated)
      : context_(context),
        stream_(stream),
        request_(request),
        endpoint_(route == OpenAiRoute::completions ? Endpoint::completions : Endpoint::chat_completions),
        translated_(std::move(translated)),
        identity_{route, translated_.generate.id, unix_now(), context.model_id},
        events_(start(context, std::move(translated_.generate))),
        choices_(static_cast<std::size_t>(std::max(translated_.n, 1))) {
    if (translated_.top_logprobs) {
      for (ChoiceState& choice : choices_) choice.logprobs.emplace(route, *translated_.top_logprobs);
    }
  }

  asio::awaitable<bool> run() { return translated_.stream ? run_streamed() : run_whole(); }

 private:
  // Per choice (n of them): what its tokens brought so far.
  struct ChoiceState {
    std::string text;                    // whole: the answer; streamed: what was sent (text_offset)
    std::string reasoning;
    std::vector<proto::ToolCall> calls;  // from the deltas (whole: in case done carries none)
    std::optional<openai::LogprobsBuilder> logprobs;  // when the client asked for log-probabilities
  };

  static std::int64_t unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

  static actors::EventStream start(GatewayContext& context, proto::GenerateRequest request) {
    loom::Engine::GenerateOptions options;
    if (context.config.request_timeout.count() > 0) options.timeout = context.config.request_timeout;
    return context.engine.generate_stream(std::move(request), options);
  }

  void count(std::string_view outcome) { context_.metrics.request_finished(endpoint_, outcome); }

  // stream:false: the text is gathered and answered at once. A request that was accepted but did not
  // complete (timeout, error, cancelled by a shutdown) is answered with an HTTP error (504, 500, 503),
  // even when it had produced some text: a client that asked for a whole answer must not take a cut one
  // for complete, and OpenAI has no finish_reason for "failed".
  asio::awaitable<bool> run_whole() {
    auto watch = std::make_unique<PeerCloseWatch>(stream_, [this] {
      logger().debug("route=openai request={} the client went away while waiting: cancelled", identity_.id);
      context_.engine.cancel(identity_.id);
    });
    for (;;) {
      std::optional<proto::ServerMessage> event = co_await events_.async_next(asio::use_awaitable);
      if (!event) break;
      if (const auto* token = std::get_if<proto::TokenEvent>(&*event)) {
        if (ChoiceState* choice = choice_of(*token)) {
          if (choice->logprobs) choice->logprobs->add(*token, choice->text.size());
          choice->text += token->text;
          choice->reasoning += token->reasoning;
          openai::add_tool_call_deltas(choice->calls, token->tool_calls);
        }
        continue;
      }
      std::optional<HttpResponse> response;
      if (const auto* refused = std::get_if<proto::ErrorEvent>(&*event)) {
        count("refused");
        response = error_response(openai::from_error_event(*refused, translated_.client_names));
      } else if (const auto* done = std::get_if<proto::DoneEvent>(&*event)) {
        count(proto::to_string(done->finish_reason));
        const auto reason = openai::finish_reason(done->finish_reason);
        response = reason ? make_json_response(request_, http::status::ok, whole_answer(*done))
                          : error_response(openai::from_failed_done(*done));
        if (reason) add_loom_headers(*response, done->usage);
      }
      if (response) {
        watch.reset();  // before the write: its end cancels the socket's pending operations
        const bool keep_alive = co_await write_response(context_, stream_, request_, std::move(*response));
        co_return keep_alive;
      }
    }
    watch.reset();
    const bool keep_alive = co_await engine_gone();
    co_return keep_alive;
  }

  // Every choice, index order, as one completion object.
  nlohmann::json whole_answer(const proto::DoneEvent& done) {
    const auto ends = openai::choice_ends(done);
    nlohmann::json object;
    for (std::size_t i = 0; i < choices_.size(); ++i) {
      ChoiceState& choice = choices_[i];
      const proto::ChoiceEnd* end = i < ends.size() ? &ends[i] : nullptr;
      const std::string reason = end ? openai::finish_reason(end->finish_reason).value_or("stop") : "stop";
      const auto& calls = end && !end->tool_calls.empty() ? end->tool_calls : choice.calls;
      const nlohmann::json logprobs = choice.logprobs ? choice.logprobs->take() : nlohmann::json(nullptr);
      if (i == 0) {
        object = openai::completion_object(identity_, choice.text, reason, done.usage, choice.reasoning, calls, logprobs);
      } else {
        object["choices"].push_back(openai::completion_choice(identity_, static_cast<std::int32_t>(i), choice.text,
                                                              reason, choice.reasoning, calls, logprobs));
      }
    }
    return object;
  }

  // stream:true. The header waits for the engine's first event: until then a refusal or a failure can
  // still be a proper HTTP status. Once the header is out, a failure can only be told inside the stream:
  // a "data:" event holding OpenAI's error object, then [DONE] (what llama.cpp's server and others do, and
  // what the official clients raise as an APIError).
  asio::awaitable<bool> run_streamed() {
    EventStreamWriter writer(context_, stream_, request_);
    if (!translated_.ignored_fields.empty()) writer.add_header(openai::kIgnoredFieldsHeader, ignored_fields());
    for (;;) {
      TimedEventWait::Result waited = co_await waiter_.next(context_.config.sse_ping_interval);
      if (waited.timed_out) {
        if (!co_await ping(writer)) {
          co_await client_gone();
          co_return false;
        }
        continue;
      }
      std::optional<proto::ServerMessage>& event = waited.event;
      if (!event) break;
      if (const auto* refused = std::get_if<proto::ErrorEvent>(&*event)) {
        // An error event comes only instead of acceptance: nothing but pings has been written yet.
        count("refused");
        const auto error = openai::from_error_event(*refused, translated_.client_names);
        if (writer.header_written()) {
          std::string last = openai::sse_event(error.to_json()) + std::string(openai::kSseDone);
          const bool written = co_await writer.finish(std::move(last));
          co_return written && writer.keep_alive();
        }
        const bool keep_alive = co_await write_response(context_, stream_, request_, error_response(error));
        co_return keep_alive;
      }
      if (const auto* token = std::get_if<proto::TokenEvent>(&*event)) {
        bool written = co_await open(writer);
        std::string data = token_data(*token);
        if (written && !data.empty()) written = co_await writer.write(std::move(data));
        if (!written) {
          co_await client_gone();
          co_return false;
        }
        continue;
      }
      const auto* done = std::get_if<proto::DoneEvent>(&*event);
      if (done == nullptr) continue;  // session.opened: not about a stand-alone request
      count(proto::to_string(done->finish_reason));
      const auto reason = openai::finish_reason(done->finish_reason);
      if (!reason && !writer.header_written()) {
        const bool keep_alive =
            co_await write_response(context_, stream_, request_, error_response(openai::from_failed_done(*done)));
        co_return keep_alive;
      }
      std::string last;
      if (reason) {
        last = finish_data(*done);
        if (translated_.include_usage) last += openai::sse_event(openai::usage_chunk(identity_, done->usage));
      } else {
        last = openai::sse_event(openai::from_failed_done(*done).to_json());
      }
      last += openai::kSseDone;
      const bool opened = co_await open(writer);
      if (!opened) co_return false;
      const bool written = co_await writer.finish(std::move(last));
      co_return written && writer.keep_alive();
    }
    if (!writer.header_written()) {
      const bool keep_alive = co_await engine_gone();
      co_return keep_alive;
    }
    // The engine went away under a running stream: say so in the stream, then end it.
    count("error");
    co_await writer.finish(openai::sse_event(engine_gone_error().to_json()) + std::string(openai::kSseDone));
    co_return false;
  }

  // The header, and for chat the first chunk of each choice, which names the role, before the first text.
  asio::awaitable<bool> open(EventStreamWriter& writer) {
    if (!writer.header_written()) {
      const bool written = co_await writer.write_header(static_cast<int>(request_.version()));
      if (!written) co_return false;
    }
    if (identity_.route != OpenAiRoute::chat_completions || role_written_) co_return true;
    role_written_ = true;
    std::string roles;
    for (std::size_t i = 0; i < choices_.size(); ++i) {
      auto chunk = openai::role_chunk(identity_);
      openai::set_choice_index(chunk, static_cast<std::int32_t>(i));
      roles += openai::sse_event(chunk);
    }
    const bool role_written = co_await writer.write(std::move(roles));
    co_return role_written;
  }

  // Nothing came for sse_ping_interval: the header (once) and a comment that keeps the stream alive. The
  // header goes out now, so a failure after this point is told inside the stream.
  asio::awaitable<bool> ping(EventStreamWriter& writer) {
    if (!writer.header_written()) {
      const bool written = co_await writer.write_header(static_cast<int>(request_.version()));
      if (!written) co_return false;
    }
    const bool pinged = co_await writer.write(std::string(kSsePing));
    co_return pinged;
  }

  ChoiceState* choice_of(const proto::TokenEvent& token) {
    const auto index = static_cast<std::size_t>(token.choice);
    return token.choice >= 0 && index < choices_.size() ? &choices_[index] : nullptr;
  }

  // A token's chunks: none when it releases nothing (half of a multi-byte character: the next token completes
  // it), else its reasoning, text and tool call pieces, a chunk each, under its choice's index. Its logprobs
  // entry goes on its first chunk; a token that releases no text has its entry carried by the next one.
  std::string token_data(const proto::TokenEvent& token) {
    ChoiceState* choice = choice_of(token);
    if (choice == nullptr) return {};
    auto chunks = openai::token_chunks(identity_, token);
    for (auto& chunk : chunks) openai::set_choice_index(chunk, token.choice);
    if (choice->logprobs) {
      choice->logprobs->add(token, choice->text.size());
      if (!chunks.empty()) chunks.front()["choices"][0]["logprobs"] = choice->logprobs->take();
    }
    choice->text += token.text;
    openai::add_tool_call_deltas(choice->calls, token.tool_calls);
    std::string data;
    for (const auto& chunk : chunks) data += openai::sse_event(chunk);
    return data;
  }

  // Each choice's end: calls the deltas did not stream (an engine that gives them whole at the end), then its
  // finish chunk, which carries the logprobs entries no chunk has carried yet.
  std::string finish_data(const proto::DoneEvent& done) {
    const auto ends = openai::choice_ends(done);
    std::string data;
    for (std::size_t i = 0; i < choices_.size() && i < ends.size(); ++i) {
      ChoiceState& choice = choices_[i];
      const auto index = static_cast<std::int32_t>(i);
      const auto unstreamed = openai::unstreamed_tool_calls(ends[i].tool_calls, choice.calls.size());
      if (!unstreamed.empty()) {
        auto calls = openai::tool_calls_chunk(identity_, unstreamed);
        openai::set_choice_index(calls, index);
        data += openai::sse_event(calls);
      }
      auto finish = openai::finish_chunk(identity_, openai::finish_reason(ends[i].finish_reason).value_or("stop"));
      openai::set_choice_index(finish, index);
      if (choice.logprobs && !choice.logprobs->empty()) finish["choices"][0]["logprobs"] = choice.logprobs->take();
      data += openai::sse_event(finish);
    }
    return data;
  }

  // A write failed: the client is gone (or stopped reading). Its request is cancelled, and its events are
  // taken to the end so that the budget slot is held until the engine has really let go of the request.
  asio::awaitable<void> client_gone() {
    logger().debug("route=openai request={} the client went away mid-stream: cancelled", identity_.id);
    context_.engine.cancel(identity_.id);
    for (;;) {
      // Through the waiter: a wait it started may still be out.
      std::optional<proto::ServerMessage> event = (co_await waiter_.next(std::chrono::milliseconds(0))).event;
      if (!event) break;
      if (const auto* done = std::get_if<proto::DoneEvent>(&*event)) count(proto::to_string(done->finish_reason));
    }
  }

  static openai::Error engine_gone_error() {
    openai::Error error;
    error.status = 500;
    error.type = "server_error";
    error.message = "the engine stopped before the request finished";
    return error;
  }

  // The stream ended with neither done nor error: the engine was torn down under the request.
  asio::awaitable<bool> engine_gone() {
    count("error");
    const bool keep_alive = co_await write_response(context_, stream_, request_, error_response(engine_gone_error()));
    co_return keep_alive;
  }

  // What loom tells besides OpenAI's answer: the fields a lenient request had ignored, and how many messages
  // of the conversation were dropped to fit the context (a stream says the latter in its usage chunk only).
  void add_loom_headers(HttpResponse& response, const proto::Usage& usage) const {
    if (!translated_.ignored_fields.empty()) response.set(openai::kIgnoredFieldsHeader, ignored_fields());
    if (usage.trimmed_messages > 0) response.set("X-Loom-Trimmed-Messages", std::to_string(usage.trimmed_messages));
  }
  std::string ignored_fields() const {
    std::string list;
    for (const auto& field : translated_.ignored_fields) list += (list.empty() ? "" : ", ") + field;
    return list;
  }

  HttpResponse error_response(const openai::Error& error) const {
    return make_openai_error(request_, error);
  }

  GatewayContext& context_;
  TcpStream& stream_;
  const HttpRequest& request_;
  Endpoint endpoint_;
  openai::Request translated_;
  openai::ResponseIdentity identity_;
  actors::EventStream events_;
  TimedEventWait waiter_{events_};  // stream:true takes its events through it (pings between them)
  bool role_written_ = false;       // stream:true, chat: the chunks naming the role are out
  std::vector<ChoiceState> choices_;
};

openai::Error unavailable(std::string message, std::string type, std::string code) {
  openai::Error error;
  error.status = 503;
  error.message = std::move(message);
  error.type = std::move(type);
  error.code = std::move(code);
  return error;
}

// The exchange runs in a coroutine of this file's own: serve_openai's frame (an external function's) should not
// hold a type of the anonymous namespace (GCC's -Wsubobject-linkage, seen in unity builds).
asio::awaitable<bool> run_exchange(GatewayContext& context, TcpStream& stream, const HttpRequest& request,
                                   OpenAiRoute route, openai::Request translated) {
  OpenAiExchange exchange(context, stream, request, route, std::move(translated));
  co_return co_await exchange.run();
}

}  // namespace

asio::awaitable<bool> serve_openai(GatewayContext& context, TcpStream& stream, HttpRequest request,
                                   OpenAiRoute route) {
  const Endpoint endpoint = route == OpenAiRoute::completions ? Endpoint::completions : Endpoint::chat_completions;
  // Random, so that ids stay unique across restarts and several gateways (OpenAI's ids look alike).
  const std::string id = (route == OpenAiRoute::completions ? "cmpl-" : "chatcmpl-") + random_alphanumeric(24);

  std::optional<openai::Error> refusal;
  std::optional<RequestBudget::Slot> slot;
  std::variant<openai::Request, openai::Error> translated = openai::Error{};
  if (context.shutdown.notified()) {
    refusal = unavailable("the server is shutting down", "server_error", "unavailable");
  } else if (!context.ready()) {
    refusal = unavailable("the server is not ready (" + std::string(to_string(context.phase.load())) + ")",
                          "server_error", "unavailable");
  } else {
    translated = openai::translate_request(request.body(), route, id, context.parse_options);
    if (auto* error = std::get_if<openai::Error>(&translated)) {
      refusal = std::move(*error);
    } else {
      // Held until the request's last event has been taken (the exchange ends only then).
      if (auto acquired = context.budget.try_acquire()) {
        slot.emplace(std::move(*acquired));
      } else {
        refusal = unavailable("the server is at capacity (" + std::to_string(context.budget.limit()) +
                                  " requests in flight); retry later",
                              "overloaded_error", "overloaded");
      }
    }
  }
  if (refusal) {
    context.metrics.request_finished(endpoint, "refused");
    const bool keep_alive = co_await write_error(context, stream, request, *refusal);
    co_return keep_alive;
  }

  co_return co_await run_exchange(context, stream, request, route, std::get<openai::Request>(std::move(translated)));
}

}  // namespace loom::net
