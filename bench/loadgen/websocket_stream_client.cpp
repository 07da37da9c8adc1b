#include "websocket_stream_client.hpp"

#include <optional>
#include <variant>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <nlohmann/json.hpp>

#include "loom/proto/server_message.hpp"
#include "run_results.hpp"

namespace loom::loadgen {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
namespace proto = loom::proto;
using boost::system::error_code;
using nlohmann::json;

std::string refusal_message(const websocket::response_type& response) {
  std::string text = "the server refused the WebSocket upgrade: HTTP " + std::to_string(response.result_int());
  const json body = json::parse(response.body(), nullptr, false);
  if (body.is_object() && body.contains("error") && body["error"].is_object()) {
    const json& message = body["error"].value("message", json());
    if (message.is_string()) text += ": " + message.get<std::string>().substr(0, 300);
  }
  return text;
}

class WebSocketStreamClient final : public StreamClient {
 public:
  WebSocketStreamClient(asio::any_io_executor executor, const StreamContext& context)
      : executor_(std::move(executor)), context_(context), options_(context.options) {
    parse_options_.strict = false;
    parse_options_.max_message_bytes = options_.max_message_bytes;
  }

  asio::awaitable<RequestOutcome> run(const RequestSpec& spec) override {
    RequestOutcome outcome;
    outcome.asked_max_tokens = spec.max_tokens;
    const auto start = Clock::now();
    const auto deadline =
        start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.timeout_s));
    // The request's deadline is the TCP stream's: it bounds the connecting, the handshake and every read
    // and write (the WebSocket's own timeouts stay off, so the two do not compete).
    if (!ws_ || !ws_->is_open()) {
      if (!co_await open(deadline, outcome)) {
        outcome.e2e_ms = milliseconds_between(start, Clock::now());
        co_return outcome;
      }
    }
    beast::get_lowest_layer(*ws_).expires_at(deadline);
    co_await exchange(spec, start, outcome);
    outcome.e2e_ms = milliseconds_between(start, Clock::now());
    if (ws_) beast::get_lowest_layer(*ws_).expires_never();
    co_return outcome;
  }

 private:
  asio::awaitable<bool> open(Clock::time_point deadline, RequestOutcome& outcome) {
    ws_.emplace(executor_);
    auto& socket = beast::get_lowest_layer(*ws_);
    socket.expires_at(deadline);
    error_code ec;
    co_await socket.async_connect(context_.endpoints, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      ws_.reset();
      fail(outcome, ec == beast::error::timeout ? ErrorKind::timeout : ErrorKind::connect,
           "cannot connect to " + host_header(options_.target) + ": " + ec.message());
      co_return false;
    }
    ws_->set_option(websocket::stream_base::decorator([key = options_.api_key](websocket::request_type& request) {
      request.set(beast::http::field::user_agent, "loom-loadgen/" LOOM_VERSION);
      if (!key.empty()) request.set(beast::http::field::authorization, "Bearer " + key);
    }));
    ws_->read_message_max(options_.max_message_bytes);
    websocket::response_type response;
    co_await ws_->async_handshake(response, host_header(options_.target), options_.target.path,
                                  asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      ws_.reset();
      if (ec == websocket::error::upgrade_declined) {
        fail(outcome, ErrorKind::http_status, refusal_message(response));
        outcome.http_status = response.result_int();
      } else if (ec == beast::error::timeout) {
        fail(outcome, ErrorKind::timeout, "the request timed out (--timeout) in the WebSocket handshake");
      } else {
        fail(outcome, ErrorKind::protocol, "the WebSocket handshake failed: " + ec.message());
      }
      co_return false;
    }
    co_return true;
  }

  asio::awaitable<void> exchange(const RequestSpec& spec, Clock::time_point start, RequestOutcome& outcome) {
    const std::string id = "r" + std::to_string(spec.index);
    const std::string frame = websocket_generate_frame(options_, spec);
    error_code ec;
    ws_->text(true);
    co_await ws_->async_write(asio::buffer(frame), asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      broken(outcome, ec, "cannot send the request");
      co_return;
    }
    std::optional<Clock::time_point> last_token;
    beast::flat_buffer buffer;
    for (;;) {
      buffer.clear();
      co_await ws_->async_read(buffer, asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {
        broken(outcome, ec, "the connection failed while streaming");
        co_return;
      }
      const auto parsed = proto::parse_server_message(beast::buffers_to_string(buffer.data()), parse_options_);
      if (!parsed) {
        fail(outcome, ErrorKind::protocol, "a frame that is not a loom event: " + to_string(parsed.error()));
        close();
        co_return;
      }
      if (const auto* token = std::get_if<proto::TokenEvent>(&*parsed); token && token->request_id == id) {
        const auto now = Clock::now();
        if (!last_token) {
          outcome.ttft_ms = milliseconds_between(start, now);
        } else {
          outcome.add_gap(milliseconds_between(*last_token, now));
        }
        last_token = now;
        ++outcome.content_events;
        context_.results.count_streamed_event();
      } else if (const auto* done = std::get_if<proto::DoneEvent>(&*parsed); done && done->request_id == id) {
        on_done(*done, outcome);
        co_return;
      } else if (const auto* error = std::get_if<proto::ErrorEvent>(&*parsed);
                 error && (error->request_id == id || error->request_id.empty())) {
        fail(outcome, ErrorKind::server,
             "the server refused the request: " + std::string(proto::to_string(error->code)) + ": " + error->message);
        co_return;
      }
    }
  }

  static void on_done(const proto::DoneEvent& done, RequestOutcome& outcome) {
    outcome.usage_completion_tokens = done.usage.completion_tokens;
    outcome.usage_prompt_tokens = done.usage.prompt_tokens;
    switch (done.finish_reason) {
      case proto::FinishReason::eos:
      case proto::FinishReason::length:
      case proto::FinishReason::stop:
      case proto::FinishReason::tool_calls: outcome.ok = true; return;
      case proto::FinishReason::cancelled:
      case proto::FinishReason::error:
      case proto::FinishReason::timeout: break;
    }
    fail(outcome, ErrorKind::server,
         "the request ended with reason " + std::string(proto::to_string(done.finish_reason)) +
             (done.error_message ? ": " + *done.error_message : std::string()));
  }

  void broken(RequestOutcome& outcome, const error_code& ec, const std::string& what) {
    if (ec == beast::error::timeout) {
      fail(outcome, ErrorKind::timeout, "the request timed out (--timeout)");
    } else if (ec == websocket::error::message_too_big) {
      fail(outcome, ErrorKind::protocol,
           "a message over the limit of " + std::to_string(options_.max_message_bytes) + " bytes (--max-message-bytes)");
    } else {
      fail(outcome, ErrorKind::protocol, what + ": " + ec.message());
    }
    close();
  }

  static void fail(RequestOutcome& outcome, ErrorKind kind, std::string message) {
    outcome.ok = false;
    outcome.error = kind;
    outcome.error_message = std::move(message);
  }

  // Drops the connection (no closing handshake: it is broken or out of step); the next request reconnects.
  void close() {
    if (!ws_) return;
    error_code ignored;
    beast::get_lowest_layer(*ws_).socket().close(ignored);
    ws_.reset();
  }

  asio::any_io_executor executor_;
  const StreamContext& context_;
  const Options& options_;
  proto::ParseOptions parse_options_;
  std::optional<websocket::stream<beast::tcp_stream>> ws_;
};

}  // namespace

std::string websocket_generate_frame(const Options& options, const RequestSpec& spec) {
  json frame = {{"type", "generate"}, {"id", "r" + std::to_string(spec.index)}};
  if (spec.chat) {
    frame["messages"] = json::array({{{"role", "user"}, {"content", spec.prompt}}});
  } else {
    frame["prompt"] = spec.prompt;
  }
  json params = {{"max_tokens", spec.max_tokens}, {"temperature", options.temperature}, {"seed", options.seed + spec.index}};
  if (options.ignore_eos) params["ignore_eos"] = true;
  frame["params"] = std::move(params);
  return frame.dump();
}

std::unique_ptr<StreamClient> make_websocket_stream_client(asio::any_io_executor executor,
                                                           const StreamContext& context) {
  return std::make_unique<WebSocketStreamClient>(std::move(executor), context);
}

}  // namespace loom::loadgen
