// loom-ws-client: a small streaming client of loom's WebSocket protocol (proto/PROTOCOL.md). It connects to
// a gateway's /v1/ws, sends one generate frame (built, and every server frame read back, with loom_proto's
// types), writes each token's text to stdout as it arrives and the done event's reason and usage to
// stderr. Ctrl-C sends a cancel for the request and exits after its done event (reason cancelled); a
// second Ctrl-C exits at once. One thread, one io_context, Beast's WebSocket stream.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <nlohmann/json.hpp>

#include "client_options.hpp"
#include "loom/proto/client_message.hpp"
#include "loom/proto/server_message.hpp"

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
namespace proto = loom::proto;
using tcp = asio::ip::tcp;
using boost::system::error_code;

constexpr int kExitDone = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;
constexpr int kExitInterrupted = 130;  // 128 + SIGINT, what a shell reports for a program Ctrl-C ended

using loom::ws_client::kRequestId;
using loom::ws_client::Options;

constexpr const char* kTarget = "/v1/ws";
constexpr auto kConnectTimeout = std::chrono::seconds(10);  // resolve + connect, the handshake, the close
// A connection silent this long (the server answers our pings) is dead.
constexpr auto kIdleTimeout = std::chrono::seconds(60);

// A failure to report on stderr (exit status 1).
class ClientError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::string quoted(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// "reason=length prompt_tokens=5 completion_tokens=8 ...": one line for stderr.
std::string describe(const proto::DoneEvent& done) {
  char timings[160];
  std::snprintf(timings, sizeof timings, " first_token_ms=%.1f tokens_per_second=%.1f", done.timings.first_token_ms,
                done.timings.tokens_per_second);
  std::string line = "done reason=" + std::string(proto::to_string(done.finish_reason)) +
                     " prompt_tokens=" + std::to_string(done.usage.prompt_tokens) +
                     " completion_tokens=" + std::to_string(done.usage.completion_tokens) +
                     " cached_tokens=" + std::to_string(done.usage.cached_tokens) + timings;
  if (done.stop) line += " stop=" + quoted(*done.stop);
  if (done.error_message) line += " error=" + quoted(*done.error_message);
  for (const auto& call : done.tool_calls) line += " tool_call=" + call.name + quoted(call.arguments);
  return line;
}

std::string describe(const proto::ErrorEvent& error) {
  std::string text = std::string(proto::to_string(error.code)) + ": ";
  if (!error.field.empty()) text += error.field + ": ";
  return text + error.message;
}

// The server refused the upgrade: its status, and the message of loom's error object when there is one.
std::string handshake_failure(const error_code& ec, const websocket::response_type& response) {
  if (ec != websocket::error::upgrade_declined) return "the WebSocket handshake failed: " + ec.message();
  std::string text = "the server refused the WebSocket upgrade: HTTP " + std::to_string(response.result_int()) + " " +
                     std::string(response.reason());
  const auto body = nlohmann::json::parse(response.body(), nullptr, false);
  if (body.is_object() && body.contains("error") && body["error"].is_object()) {
    const auto& message = body["error"].value("message", nlohmann::json());
    if (message.is_string()) text += ": " + message.get<std::string>();
  }
  return text;
}

// One connection, one request. Everything runs on the io_context's one thread.
class StreamingClient : public std::enable_shared_from_this<StreamingClient> {
 public:
  StreamingClient(asio::io_context& io, Options options)
      : options_(std::move(options)), resolver_(io), ws_(io), write_done_(io) {
    write_done_.expires_at(asio::steady_timer::time_point::max());  // cancel() wakes its waiters
    parse_options_.strict = false;  // a newer server may add fields
    parse_options_.max_message_bytes = options_.max_frame_bytes;
  }

  // Connects, sends the request and streams its events; returns the exit status. Throws ClientError.
  asio::awaitable<int> run() {
    auto self = shared_from_this();
    co_await connect();
    co_await handshake();
    request_sent_ = true;  // from here a Ctrl-C cancels: the cancel frame waits for this one
    std::string frame = loom::ws_client::generate_frame(options_);
    const error_code ec = co_await send(std::move(frame));
    if (ec) throw ClientError("cannot send the request: " + ec.message());
    const int status = co_await stream_events();
    co_await close();
    co_return status;
  }

  // Ctrl-C. The first one, once the request is out, sends its cancel and returns false; otherwise
  // (nothing to cancel yet, a second Ctrl-C, or the done event already here) true: exit at once.
  bool interrupt() {
    end_text();
    if (++interrupts_ > 1 || !request_sent_ || finished_) return true;
    std::fputs("loom-ws-client: cancelling the request (Ctrl-C again to quit at once)\n", stderr);
    asio::co_spawn(ws_.get_executor(), send_cancel(shared_from_this()), asio::detached);
    return false;
  }

 private:
  asio::awaitable<void> connect() {
    const std::string port = std::to_string(options_.port);
    error_code ec;
    const auto endpoints =
        co_await resolver_.async_resolve(options_.host, port, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) throw ClientError("cannot resolve " + options_.host + ": " + ec.message());
    auto& socket = beast::get_lowest_layer(ws_);
    socket.expires_after(kConnectTimeout);
    co_await socket.async_connect(endpoints, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) throw ClientError("cannot connect to " + options_.host + ":" + port + ": " + ec.message());
    socket.expires_never();  // the WebSocket's own timeouts take over
  }

  asio::awaitable<void> handshake() {
    websocket::stream_base::timeout timeouts{};
    timeouts.handshake_timeout = kConnectTimeout;
    timeouts.idle_timeout = kIdleTimeout;
    timeouts.keep_alive_pings = true;
    ws_.set_option(timeouts);
    ws_.set_option(websocket::stream_base::decorator([key = options_.api_key](websocket::request_type& request) {
      request.set(beast::http::field::user_agent, "loom-ws-client/" LOOM_VERSION);
      if (!key.empty()) request.set(beast::http::field::authorization, "Bearer " + key);
    }));
    ws_.read_message_max(options_.max_frame_bytes);
    const std::string host = options_.host + ":" + std::to_string(options_.port);
    websocket::response_type response;
    error_code ec;
    co_await ws_.async_handshake(response, host, kTarget, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) throw ClientError(handshake_failure(ec, response));
  }

  // One frame at a time: Beast allows a single write in flight (beside the read).
  asio::awaitable<error_code> send(std::string frame) {
    co_await wait_for_writer();
    writing_ = true;
    error_code ec;
    co_await ws_.async_write(asio::buffer(frame), asio::redirect_error(asio::use_awaitable, ec));
    writing_ = false;
    write_done_.cancel();
    co_return ec;
  }

  asio::awaitable<void> wait_for_writer() {
    while (writing_) {
      error_code woken;
      co_await write_done_.async_wait(asio::redirect_error(asio::use_awaitable, woken));
    }
  }

  // A failed send needs no report of its own: the read fails too and says why.
  asio::awaitable<void> send_cancel([[maybe_unused]] std::shared_ptr<StreamingClient> self) {
    std::string frame = proto::serialize(proto::ClientMessage{proto::CancelRequest{kRequestId}});
    co_await send(std::move(frame));
  }

  asio::awaitable<int> stream_events() {
    beast::flat_buffer buffer;
    for (;;) {
      buffer.clear();
      error_code ec;
      co_await ws_.async_read(buffer, asio::redirect_error(asio::use_awaitable, ec));
      if (ec) throw ClientError(read_failure(ec));
      if (!ws_.got_text()) throw ClientError("the server sent a binary frame (the protocol has only text frames)");
      const std::string text = beast::buffers_to_string(buffer.data());
      auto parsed = proto::parse_server_message(text, parse_options_);
      if (!parsed) throw ClientError("the server sent a frame that is not a loom event: " + to_string(parsed.error()));
      if (const auto status = on_message(parsed.value())) co_return *status;
    }
  }

  std::string read_failure(const error_code& ec) const {
    if (ec == websocket::error::closed) {
      const auto& reason = ws_.reason();
      std::string text = "the server closed the connection before the request finished (close code " +
                         std::to_string(reason.code);
      if (!reason.reason.empty()) text += ": " + std::string(reason.reason.data(), reason.reason.size());
      return text + ")";
    }
    if (ec == websocket::error::message_too_big) {
      return "the server sent a message over the limit of " + std::to_string(options_.max_frame_bytes) +
             " bytes (--max-frame-bytes)";
    }
    return "the connection failed: " + ec.message();
  }

  // The exit status once the request is over; nullopt while it streams.
  std::optional<int> on_message(const proto::ServerMessage& message) {
    if (const auto* token = std::get_if<proto::TokenEvent>(&message)) {
      if (token->request_id == kRequestId) write_text(token->text);
      return std::nullopt;
    }
    if (const auto* done = std::get_if<proto::DoneEvent>(&message)) {
      if (done->request_id != kRequestId) return std::nullopt;
      return finish(*done);
    }
    if (const auto* error = std::get_if<proto::ErrorEvent>(&message)) {
      // About our request, or about a frame the server could not read (no id): either way ours failed.
      if (!error->request_id.empty() && error->request_id != kRequestId) return std::nullopt;
      finished_ = true;
      end_text();
      throw ClientError("the server refused the request: " + describe(*error));
    }
    if (const auto* progress = std::get_if<proto::ProgressEvent>(&message)) {
      if (progress->request_id == kRequestId) {
        std::fprintf(stderr, "loom-ws-client: prompt %lld of %lld tokens computed\n",
                     static_cast<long long>(progress->prompt_tokens_computed),
                     static_cast<long long>(progress->prompt_tokens));
      }
      return std::nullopt;
    }
    if (const auto* hello = std::get_if<proto::Hello>(&message)) {
      // The first frame. A newer protocol may still serve this client's one request; say so, in case not.
      if (hello->protocol_version != proto::Hello::kProtocolVersion) {
        std::fprintf(stderr, "loom-ws-client: the server speaks protocol version %lld, this client version %lld\n",
                     static_cast<long long>(hello->protocol_version),
                     static_cast<long long>(proto::Hello::kProtocolVersion));
      }
    }
    return std::nullopt;  // hello, session.opened: nothing to show
  }

  int finish(const proto::DoneEvent& done) {
    finished_ = true;
    end_text();
    std::fprintf(stderr, "loom-ws-client: %s\n", describe(done).c_str());
    const bool failed = done.finish_reason == proto::FinishReason::error ||
                        done.finish_reason == proto::FinishReason::timeout;
    return failed ? kExitFailed : kExitDone;
  }

  void write_text(const std::string& text) {
    if (text.empty()) return;  // half of a multi-byte character: the next token completes it
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    line_open_ = true;
  }

  // Ends the streamed text's line, so that what goes to stderr next starts on a line of its own.
  void end_text() {
    if (!line_open_) return;
    std::fputc('\n', stdout);
    std::fflush(stdout);
    line_open_ = false;
  }

  // A polite close once the done event is here (bounded by the handshake timeout); failures are moot.
  asio::awaitable<void> close() {
    co_await wait_for_writer();
    error_code ignored;
    co_await ws_.async_close(websocket::close_code::normal, asio::redirect_error(asio::use_awaitable, ignored));
  }

  Options options_;
  tcp::resolver resolver_;
  websocket::stream<beast::tcp_stream> ws_;
  asio::steady_timer write_done_;  // woken when a write ends
  proto::ParseOptions parse_options_;
  bool writing_ = false;
  bool request_sent_ = false;
  bool finished_ = false;
  bool line_open_ = false;
  int interrupts_ = 0;
};

int report(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loom-ws-client: %s\n", e.what());
  }
  return kExitFailed;
}

int run_client(Options options) {
  asio::io_context io;
  auto client = std::make_shared<StreamingClient>(io, std::move(options));
  int status = kExitFailed;
  asio::signal_set signals(io, SIGINT);
  std::function<void(const error_code&, int)> on_signal = [&](const error_code& ec, int) {
    if (ec) return;
    if (!client->interrupt()) {
      signals.async_wait(on_signal);
      return;
    }
    std::fputs("loom-ws-client: interrupted\n", stderr);
    status = kExitInterrupted;
    io.stop();
  };
  signals.async_wait(on_signal);
  asio::co_spawn(io, client->run(), [&](std::exception_ptr error, int result) {
    status = error ? report(error) : result;
    // Done: Beast's timers (handshake, idle ping) of a connection left open by a failure must not keep
    // the process waiting.
    io.stop();
  });
  io.run();
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  try {
    loom::cli::CommandLine args(argc, argv, {"help", "version", "chat", "ignore-eos", "progress"});
    if (args.flag("help")) {
      std::fputs(loom::ws_client::kUsage, stdout);
      return kExitDone;
    }
    if (args.flag("version")) {
      std::printf("loom-ws-client %s\n", LOOM_VERSION);
      return kExitDone;
    }
    options = loom::ws_client::read_options(args);
  } catch (const loom::cli::UsageError& e) {
    std::fprintf(stderr, "loom-ws-client: %s\nRun 'loom-ws-client --help' for the options.\n", e.what());
    return kExitUsage;
  }
  return run_client(std::move(options));
}
