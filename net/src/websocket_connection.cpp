#include "websocket_connection.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/websocket.hpp>
#include <spdlog/spdlog.h>

#include "loom/proto/client_message.hpp"
#include "loom/proto/error_event.hpp"
#include "loom/proto/server_message.hpp"
#include "net_logger.hpp"
#include "websocket_hello.hpp"

namespace loom::net {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using Strand = WebSocketStrand;
using proto::ErrorCode;

// Removes every occurrence of the connection's prefix from an engine message, so that errors name the ids
// the client chose ("no open session 'chat'", not "'c7:chat'").
std::string without_prefix(std::string text, const std::string& prefix) {
  for (std::size_t at = text.find(prefix); at != std::string::npos; at = text.find(prefix, at)) {
    text.erase(at, prefix.size());
  }
  return text;
}

// A request the connection accepted and the engine has not finished yet.
struct InFlightRequest {
  // The request's place in the gateway-wide budget, given back when its done (or error) event arrives.
  std::unique_ptr<RequestBudget::Slot> slot;
  // Cancelled because the client stopped reading: its remaining token events are dropped.
  bool dropping_tokens = false;
  std::optional<std::string> session;  // the client's id of the session it runs in
};

// One connection. Everything below runs on `strand_`: the read loop, the writer, the engine's events
// (posted here from the engine's strands) and the shutdown notice. The engine's handlers own the
// connection through a shared_ptr, so an event arriving after the socket closed finds live state (and the
// closed_ flag) rather than freed memory.
class WebSocketConnection : public std::enable_shared_from_this<WebSocketConnection> {
 public:
  WebSocketConnection(GatewayContext& context, Strand strand, TcpStream stream)
      : context_(context), strand_(std::move(strand)), ws_(std::move(stream)), writer_wake_(strand_) {}

  // `self` (this connection) keeps it alive while it runs; a parameter rather than a local of the caller's
  // coroutine, whose frame (of an external function) should not hold a type of this file's anonymous namespace.
  asio::awaitable<void> run(std::shared_ptr<WebSocketConnection> self, HttpRequest upgrade) {
    configure_stream();
    beast::error_code ec;
    co_await ws_.async_accept(upgrade, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      logger().debug("websocket: the upgrade failed: {}", ec.message());
      close_socket();
      co_return;
    }
    prefix_ = "c" + std::to_string(context_.next_serial()) + ":";

    std::weak_ptr<WebSocketConnection> weak = self;
    shutdown_registration_ = context_.shutdown.add([weak] {
      if (auto connection = weak.lock()) {
        asio::post(connection->strand_, [connection] { connection->on_shutdown(); });
      }
    });
    // The first frame, before anything the client sends is answered.
    queue_event(make_hello(context_));
    asio::co_spawn(strand_, write_loop(self), asio::detached);

    try {
      co_await read_loop();
    } catch (const std::exception& error) {
      // Nothing in the loop should throw but memory exhaustion; end this connection, not the gateway.
      logger().error("websocket {}: {}", prefix_, error.what());
    }
    finish();
  }

 private:
  void configure_stream() {
    beast::get_lowest_layer(ws_).expires_never();  // the websocket's own timeouts take over
    websocket::stream_base::timeout timeouts{};
    timeouts.handshake_timeout = std::chrono::seconds(30);
    const auto ping_interval = context_.config.ws_ping_interval;
    if (ping_interval.count() > 0) {
      // Beast pings after half the idle timeout without traffic and drops the peer when the other half
      // passes without an answer: a ping every ping_interval.
      timeouts.idle_timeout = 2 * ping_interval;
      timeouts.keep_alive_pings = true;
    } else {
      timeouts.idle_timeout = websocket::stream_base::none();
      timeouts.keep_alive_pings = false;
    }
    ws_.set_option(timeouts);
    ws_.set_option(websocket::stream_base::decorator(
        [](websocket::response_type& response) { response.set(beast::http::field::server, "loom-gateway"); }));
    // No limit in Beast: read_loop enforces config.max_frame_bytes itself (see there).
    ws_.read_message_max(0);
    ws_.control_callback([this](websocket::frame_type kind, std::string_view) {
      if (kind == websocket::frame_type::close) on_close_frame();
    });
    ws_.text(true);
  }

  // Reads messages piecewise so that the size limit is ours: Beast's own limit (read_message_max) fails the
  // read at once, and Beast 1.74's teardown then closes the socket before the rest of the oversize frame is
  // read, so the client gets a reset instead of our close frame. Here an oversize message is drained, the
  // writer closes with 1009, and the client's close reply ends the loop.
  asio::awaitable<void> read_loop() {
    beast::flat_buffer buffer;
    const std::size_t limit = context_.config.max_frame_bytes;
    for (;;) {
      buffer.consume(buffer.size());
      bool oversize = false;
      do {
        beast::error_code ec;
        const std::size_t room = oversize ? kReadChunk : std::min(kReadChunk, limit + 1 - buffer.size());
        co_await ws_.async_read_some(buffer, room, asio::redirect_error(asio::use_awaitable, ec));
        if (ec) {
          if (ec == websocket::error::closed) {
            logger().debug("websocket {}: closed ({})", prefix_, static_cast<int>(ws_.reason().code));
          } else {
            logger().debug("websocket {}: read ended: {}", prefix_, ec.message());
          }
          co_return;
        }
        if (closed_) co_return;
        if (!oversize && buffer.size() > limit) {
          oversize = true;
          logger().info("websocket {}: a message over {} bytes: closing with 1009", prefix_, limit);
          ignoring_input_ = true;
          begin_close(websocket::close_code::too_big, /*drop_queued=*/true);
        }
        if (oversize) buffer.consume(buffer.size());
      } while (!ws_.is_message_done());
      if (ignoring_input_) continue;  // closing: drain until the client answers the close
      context_.metrics.websocket_frame_in();
      if (!ws_.got_text()) {
        send_error("", ErrorCode::invalid_request,
                   "binary frames are not accepted: send each message as JSON in a text frame");
        continue;
      }
      const auto data = buffer.data();
      co_await handle_message(std::string_view(static_cast<const char*>(data.data()), data.size()));
    }
  }

  asio::awaitable<void> handle_message(std::string_view text) {
    auto parsed = proto::parse_client_message(text, context_.parse_options);
    if (!parsed) {
      queue_event(proto::to_error_event(parsed.error()));
      co_return;
    }
    proto::ClientMessage& message = parsed.value();
    if (auto* open = std::get_if<proto::SessionOpen>(&message)) {
      std::string no_request;
      co_await open_session(std::move(*open), std::move(no_request));
    } else if (auto* request = std::get_if<proto::GenerateRequest>(&message)) {
      // Named with `session` rather than `session_id`: the first request opens it (no system prompt).
      if (request->open_session && request->session_id && !sessions_.contains(*request->session_id) &&
          !requests_.contains(request->id)) {
        // Named first: GCC 12 mishandles aggregate temporaries built inside a co_await (actors/README.md).
        proto::SessionOpen implicit_open{request->session_id, std::nullopt};
        std::string for_request = request->id;
        const bool opened = co_await open_session(std::move(implicit_open), std::move(for_request));
        if (!opened) {
          context_.metrics.request_finished(Endpoint::websocket, "refused");
          co_return;
        }
      }
      generate(std::move(*request));
    } else if (auto* cancel = std::get_if<proto::CancelRequest>(&message)) {
      // Unknown and finished ids are ignored, by us and by the engine.
      if (requests_.contains(cancel->request_id)) context_.engine.cancel(prefix_ + cancel->request_id);
    } else if (auto* close = std::get_if<proto::SessionClose>(&message)) {
      close_session(close->session_id);
    } else if (auto* reset = std::get_if<proto::SessionReset>(&message)) {
      co_await reset_session(std::move(reset->session_id));
    } else if (std::holds_alternative<proto::SessionList>(message)) {
      list_sessions();
    }
  }

  // The session is forgotten at once (a request running in it is cancelled and still ends with its done
  // event, which may come after session.closed); its id may be opened again right away.
  void close_session(const std::string& client_id) {
    if (!sessions_.contains(client_id)) return send_session_error(client_id, ErrorCode::not_found, no_session(client_id));
    sessions_.erase(client_id);
    context_.engine.close_session(prefix_ + client_id);
    queue_event(proto::SessionClosed{client_id});
  }

  // Awaited in the read loop like session.open, so a generate pipelined behind it finds the history gone.
  asio::awaitable<void> reset_session(std::string client_id) {
    if (!sessions_.contains(client_id)) {
      send_session_error(client_id, ErrorCode::not_found, no_session(client_id));
      co_return;
    }
    beast::error_code ec;
    proto::ServerMessage reply = co_await context_.engine.async_reset_session(
        prefix_ + client_id, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      std::string message = "the engine did not answer session.reset: ";
      message.append(ec.message());
      send_session_error(client_id, ErrorCode::internal, std::move(message));
    } else if (auto* error = std::get_if<proto::ErrorEvent>(&reply)) {
      send_session_error(client_id, error->code, without_prefix(std::move(error->message), prefix_));
    } else {
      queue_event(proto::SessionResetDone{client_id});
    }
  }

  void list_sessions() {
    proto::SessionListed listed;
    for (const auto& session : sessions_) listed.sessions.push_back({session, std::nullopt});
    for (const auto& [request_id, in_flight] : requests_) {
      if (!in_flight.session) continue;
      for (auto& summary : listed.sessions) {
        if (summary.session_id == *in_flight.session) summary.active_request = request_id;
      }
    }
    queue_event(std::move(listed));
  }

  static std::string no_session(const std::string& client_id) {
    std::string message = "no open session '";
    message.append(client_id).append("' on this connection");
    return message;
  }

  // An error answering session.open, .close or .reset: `id` is empty, `session_id` names the session.
  void send_session_error(const std::string& client_id, ErrorCode code, std::string message) {
    proto::ErrorEvent event{"", code, std::move(message), "session_id"};
    if (!client_id.empty()) event.session_id = client_id;
    queue_event(std::move(event));
  }

  // Awaited in the read loop, so a generate pipelined right behind its session.open finds the session.
  // `for_request` empty: a session.open, answered with session.opened or an error with an empty id and the
  // session_id the client asked for. Else the implicit open of a generate's `session`: nothing is sent when
  // it opens, and a refusal is that request's error. Whether the session is open afterwards is the result.
  asio::awaitable<bool> open_session(proto::SessionOpen open, std::string for_request) {
    const bool implicit = !for_request.empty();
    const std::optional<std::string> named = implicit ? std::nullopt : open.session_id;
    auto refuse = [&](ErrorCode code, std::string message, std::string field = {}) {
      proto::ErrorEvent event{for_request, code, std::move(message), std::move(field)};
      event.session_id = named;
      queue_event(std::move(event));
    };
    if (!context_.ready() || draining_) {
      refuse(ErrorCode::unavailable, unavailable_reason());
      co_return false;
    }
    const std::string client_id = open.session_id ? *open.session_id : pick_session_id();
    const std::size_t session_limit = context_.config.max_sessions_per_connection;
    if (sessions_.size() >= session_limit) {
      std::string message = "this connection already has ";
      message.append(std::to_string(session_limit))
          .append(" sessions open (max_sessions_per_connection): close one first");
      refuse(ErrorCode::overloaded, std::move(message), implicit ? "session" : "session_id");
      co_return false;
    }
    if (sessions_.contains(client_id)) {
      // Appended, not "a" + b + "c": GCC 12 warns falsely (-Wrestrict) on that inside this coroutine.
      std::string message = "session '";
      message.append(client_id).append("' is already open");
      refuse(ErrorCode::conflict, std::move(message), "session_id");
      co_return false;
    }
    open.session_id = prefix_ + client_id;
    beast::error_code ec;
    proto::ServerMessage reply =
        co_await context_.engine.async_open_session(std::move(open), asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      std::string message = "the engine did not answer session.open: ";
      message.append(ec.message());
      refuse(ErrorCode::internal, std::move(message));
      co_return false;
    }
    if (std::holds_alternative<proto::SessionOpened>(reply)) {
      if (closed_) {
        context_.engine.close_session(prefix_ + client_id);
        co_return false;
      }
      sessions_.insert(client_id);
      if (!implicit) queue_event(proto::SessionOpened{client_id});
      co_return true;
    }
    if (auto* error = std::get_if<proto::ErrorEvent>(&reply)) {
      refuse(error->code, without_prefix(std::move(error->message), prefix_),
             implicit && error->field == "session_id" ? "session" : error->field);
    }
    co_return false;
  }

  std::string pick_session_id() {
    for (;;) {
      std::string candidate = "s" + std::to_string(++session_counter_);
      if (!sessions_.contains(candidate)) return candidate;
    }
  }

  std::string unavailable_reason() const {
    if (draining_ || context_.phase.load(std::memory_order_acquire) == GatewayPhase::draining) {
      return "the gateway is shutting down";
    }
    if (context_.phase.load(std::memory_order_acquire) == GatewayPhase::failed) return "the model failed to load";
    return "the gateway is still loading its model";
  }

  void generate(proto::GenerateRequest request) {
    const std::string client_id = request.id;
    auto refuse = [&](ErrorCode code, std::string message, std::string field = {}) {
      context_.metrics.request_finished(Endpoint::websocket, "refused");
      send_error(client_id, code, std::move(message), std::move(field));
    };
    if (!context_.ready() || draining_) return refuse(ErrorCode::unavailable, unavailable_reason());
    if (requests_.contains(client_id)) {
      return refuse(ErrorCode::conflict, "request '" + client_id + "' is still running", "id");
    }
    if (request.session_id && !sessions_.contains(*request.session_id)) {
      return refuse(ErrorCode::not_found, "no open session '" + *request.session_id + "' on this connection",
                    "session_id");
    }
    const std::size_t per_connection = context_.config.max_requests_per_connection;
    if (requests_.size() >= per_connection) {
      return refuse(ErrorCode::overloaded,
                    "this connection already has " + std::to_string(per_connection) +
                        " requests in flight (max_requests_per_connection)");
    }
    if (send_queue_full_) {
      return refuse(ErrorCode::overloaded,
                    "the connection's send queue is full (ws_send_queue_bytes): read the events already sent");
    }
    auto slot = context_.budget.try_acquire();
    if (!slot) {
      return refuse(ErrorCode::overloaded,
                    "the gateway has " + std::to_string(context_.budget.limit()) +
                        " requests in flight (max_requests_total)");
    }
    requests_.emplace(client_id, InFlightRequest{std::make_unique<RequestBudget::Slot>(std::move(*slot)), false,
                                                 request.session_id});

    request.id = prefix_ + client_id;
    if (request.session_id) request.session_id = prefix_ + *request.session_id;
    Engine::GenerateOptions options;
    if (context_.config.request_timeout.count() > 0) options.timeout = context_.config.request_timeout;
    context_.engine.generate(
        std::move(request),
        [self = shared_from_this(), client_id](proto::ServerMessage event) {
          // On an engine strand: hop to ours before touching anything.
          asio::post(self->strand_, [self, client_id, event = std::move(event)]() mutable {
            self->on_engine_event(client_id, std::move(event));
          });
        },
        options);
  }

  void on_engine_event(const std::string& client_id, proto::ServerMessage event) {
    const auto request = requests_.find(client_id);
    if (request == requests_.end()) return;  // not ours any more (cannot happen: done is the last event)
    if (auto* token = std::get_if<proto::TokenEvent>(&event)) {
      if (closed_ || request->second.dropping_tokens) return;
      token->request_id = client_id;
      queue_event(std::move(event));
      return;
    }
    if (auto* progress = std::get_if<proto::ProgressEvent>(&event)) {
      if (closed_ || request->second.dropping_tokens) return;
      progress->request_id = client_id;
      queue_event(std::move(event));
      return;
    }
    if (auto* done = std::get_if<proto::DoneEvent>(&event)) {
      done->request_id = client_id;
      if (done->error_message) done->error_message = without_prefix(std::move(*done->error_message), prefix_);
      context_.metrics.request_finished(Endpoint::websocket, proto::to_string(done->finish_reason));
    } else if (auto* error = std::get_if<proto::ErrorEvent>(&event)) {
      // The engine refused it (unknown session, shutting down, its queue full): never accepted.
      error->request_id = client_id;
      error->message = without_prefix(std::move(error->message), prefix_);
      context_.metrics.request_finished(Endpoint::websocket, "refused");
    } else {
      return;
    }
    requests_.erase(request);  // gives the budget slot back
    queue_event(std::move(event));
    if (draining_ && requests_.empty()) begin_close(websocket::close_code::going_away);
  }

  void send_error(std::string request_id, ErrorCode code, std::string message, std::string field = {}) {
    queue_event(proto::ErrorEvent{std::move(request_id), code, std::move(message), std::move(field)});
  }

  // Queues one frame for the writer. Past ws_send_queue_bytes the client is not keeping up: its requests
  // are cancelled and their tokens dropped (their small done events still go out). Past twice that plus a
  // margin (a client that sends but never reads, piling up error events) the connection is dropped.
  void queue_event(const proto::ServerMessage& event) {
    if (closed_) return;
    std::string frame = proto::serialize(event);
    queued_bytes_ += frame.size();
    send_queue_.push_back(std::move(frame));
    writer_wake_.cancel();

    const std::size_t limit = context_.config.ws_send_queue_bytes;
    if (queued_bytes_ > limit && !send_queue_full_) {
      send_queue_full_ = true;
      context_.metrics.slow_client_cancelled();
      logger().info("websocket {}: {} bytes unsent, the client is not reading: cancelling its {} requests",
                     prefix_, queued_bytes_, requests_.size());
      for (auto& [id, in_flight] : requests_) {
        if (in_flight.dropping_tokens) continue;
        in_flight.dropping_tokens = true;
        context_.engine.cancel(prefix_ + id);
      }
    }
    if (queued_bytes_ > 2 * limit + kHardLimitMargin) {
      logger().warn("websocket {}: {} bytes unsent: dropping the connection", prefix_, queued_bytes_);
      close_socket();
    }
  }

  // `self` keeps the connection alive while the writer runs.
  asio::awaitable<void> write_loop([[maybe_unused]] std::shared_ptr<WebSocketConnection> self) {
    for (;;) {
      if (closed_) break;
      beast::error_code ec;
      if (send_queue_.empty()) {
        if (close_code_) {
          if (!close_sent_) {  // once only: Beast asserts a second close
            close_sent_ = true;
            co_await ws_.async_close(*close_code_, asio::redirect_error(asio::use_awaitable, ec));
            if (ec) logger().debug("websocket {}: close: {}", prefix_, ec.message());
          }
          break;
        }
        writer_wake_.expires_at(asio::steady_timer::time_point::max());
        co_await writer_wake_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        continue;
      }
      const std::string frame = std::move(send_queue_.front());
      send_queue_.pop_front();
      co_await ws_.async_write(asio::buffer(frame), asio::redirect_error(asio::use_awaitable, ec));
      queued_bytes_ -= frame.size();
      if (ec) {
        logger().debug("websocket {}: write failed: {}", prefix_, ec.message());
        close_socket();  // ends the read loop too
        break;
      }
      context_.metrics.websocket_frame_out();
      if (send_queue_full_ && queued_bytes_ <= context_.config.ws_send_queue_bytes / 2) send_queue_full_ = false;
    }
  }

  // A close frame arrived (called inside Beast's read, on the strand). Beast 1.74 takes codes of 5000 and
  // above for valid and would echo them; RFC 6455 (section 7.4) allows 1000-1003, 1007-1014 and
  // 3000-4999 on the wire (Beast itself refuses the others below 5000 with 1002). For an invalid code
  // our close frame says 1002 instead: sent now, Beast finds the closing handshake begun and sends no echo.
  void on_close_frame() {
    const auto code = static_cast<std::uint16_t>(ws_.reason().code);
    if (code == websocket::close_code::none || valid_close_code(code) || close_sent_) return;
    logger().debug("websocket {}: the client closed with the invalid code {}: answering 1002", prefix_, code);
    close_sent_ = true;
    ws_.async_close(websocket::close_code::protocol_error, [self = shared_from_this()](beast::error_code) {});
  }

  static bool valid_close_code(std::uint16_t code) {
    return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) || (code >= 3000 && code <= 4999);
  }

  void on_shutdown() {
    if (closed_ || draining_) return;
    draining_ = true;
    if (requests_.empty()) begin_close(websocket::close_code::going_away);
  }

  // The writer sends what is queued, then the close frame; the read loop ends when the client answers.
  // With drop_queued (the client broke a limit) what is still queued is not sent.
  void begin_close(websocket::close_code code, bool drop_queued = false) {
    if (closed_ || close_code_) return;
    if (drop_queued) {
      for (const auto& frame : send_queue_) queued_bytes_ -= frame.size();
      send_queue_.clear();
    }
    close_code_ = websocket::close_reason(code);
    writer_wake_.cancel();
  }

  void close_socket() {
    beast::error_code ignored;
    beast::get_lowest_layer(ws_).socket().close(ignored);
  }

  // The connection is over: cancel its requests (their done events still come, give the budget back and
  // are counted, but nothing is sent), close its sessions and stop the writer.
  void finish() {
    closed_ = true;
    context_.shutdown.remove(shutdown_registration_);
    for (const auto& [id, in_flight] : requests_) context_.engine.cancel(prefix_ + id);
    for (const auto& session : sessions_) context_.engine.close_session(prefix_ + session);
    sessions_.clear();
    for (const auto& frame : send_queue_) queued_bytes_ -= frame.size();
    send_queue_.clear();
    writer_wake_.cancel();
    close_socket();
  }

  static constexpr std::size_t kHardLimitMargin = 64u << 10;
  static constexpr std::size_t kReadChunk = 64u << 10;

  GatewayContext& context_;
  Strand strand_;
  websocket::stream<TcpStream> ws_;
  std::string prefix_;  // "c12:", before every request and session id this connection gives the engine

  std::map<std::string, InFlightRequest> requests_;  // by the client's id
  std::set<std::string> sessions_;                   // the client's ids
  std::uint64_t session_counter_ = 0;

  std::deque<std::string> send_queue_;
  std::size_t queued_bytes_ = 0;  // queued frames plus the one being written
  bool send_queue_full_ = false;
  asio::steady_timer writer_wake_;
  std::optional<websocket::close_reason> close_code_;
  bool close_sent_ = false;  // async_close was called (by the writer, or answering an invalid close code)

  ShutdownNotifier::Id shutdown_registration_ = 0;
  bool draining_ = false;
  bool ignoring_input_ = false;  // closing because the client broke a limit: its messages are dropped
  bool closed_ = false;
};

}  // namespace

asio::awaitable<void> run_websocket(GatewayContext& context, Strand strand, TcpStream stream, HttpRequest upgrade) {
  auto connection = std::make_shared<WebSocketConnection>(context, strand, std::move(stream));
  WebSocketConnection& started = *connection;
  return asio::co_spawn(strand, started.run(std::move(connection), std::move(upgrade)), asio::use_awaitable);
}

}  // namespace loom::net
