#include "http_connection.hpp"

#include <array>
#include <chrono>
#include <exception>
#include <optional>
#include <string>
#include <utility>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/rfc7230.hpp>

#include "cors.hpp"
#include "http_router.hpp"
#include "http_util.hpp"
#include "net_logger.hpp"
#include "websocket_upgrade.hpp"

namespace loom::net {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;
using RequestParser = http::request_parser<http::string_body>;

constexpr std::size_t kMaxHeaderBytes = 16 * 1024;

// Counts the connection as open for as long as it lives.
class OpenConnection {
 public:
  explicit OpenConnection(GatewayMetrics& metrics) : metrics_(metrics) { metrics_.connection_opened(); }
  ~OpenConnection() { metrics_.connection_closed(); }
  OpenConnection(const OpenConnection&) = delete;
  OpenConnection& operator=(const OpenConnection&) = delete;

 private:
  GatewayMetrics& metrics_;
};

// What the shutdown notice reads and writes, on the connection's strand: whether the connection waits for
// a request (then its read is cancelled at once), and whether a shutdown began (then no request follows).
struct ConnectionFlags {
  bool idle = false;
  bool draining = false;
};

// Registered with the shutdown notifier while the connection lives.
class ShutdownRegistration {
 public:
  ShutdownRegistration(ShutdownNotifier& notifier, TcpStream& stream, std::shared_ptr<ConnectionFlags> flags)
      : notifier_(notifier) {
    const auto executor = stream.get_executor();
    id_ = notifier_.add([executor, flags, &stream] {
      asio::post(executor, [flags, &stream] {
        flags->draining = true;
        if (flags->idle) stream.cancel();
      });
    });
  }
  ~ShutdownRegistration() { notifier_.remove(id_); }
  ShutdownRegistration(const ShutdownRegistration&) = delete;
  ShutdownRegistration& operator=(const ShutdownRegistration&) = delete;

 private:
  ShutdownNotifier& notifier_;
  ShutdownNotifier::Id id_ = 0;
};

// The limits of a request, applied while it is read: the read fails as soon as one is passed.
void apply_limits(RequestParser& parser, const GatewayContext& context) {
  parser.header_limit(kMaxHeaderBytes);
  parser.body_limit(context.config.max_body_bytes);
}

// The answer to a request that broke a limit at the read (413, 431), or nullopt for any other read error.
std::optional<HttpResponse> over_limit_response(const GatewayContext& context, const RequestParser& parser,
                                                const boost::system::error_code& ec) {
  if (ec == http::error::body_limit) {
    HttpRequest head = parser.get();
    head.keep_alive(false);
    return make_openai_error(head, http::status::payload_too_large,
                             "the request body is larger than the limit of " +
                                 std::to_string(context.config.max_body_bytes) + " bytes",
                             "invalid_request_error", std::nullopt, "body_too_large");
  }
  if (ec == http::error::header_limit) {
    HttpRequest head;
    head.keep_alive(false);
    return make_openai_error(head, http::status::request_header_fields_too_large,
                             "the request's headers are larger than 16 KiB", "invalid_request_error");
  }
  return std::nullopt;
}

// True when the request's Transfer-Encoding is absent or exactly "chunked". Any other coding (gzip,
// "gzip, chunked") would have to be undone before the body is JSON, which the gateway does not do: it is
// answered 501 (RFC 9112 section 6.1) rather than read as if the coding were not there.
bool transfer_coding_supported(const HttpRequest& head) {
  std::size_t codings = 0;
  bool only_chunked = true;
  const auto [first, last] = head.equal_range(http::field::transfer_encoding);
  for (auto field = first; field != last; ++field) {
    for (const auto& coding : http::token_list(field->value())) {
      ++codings;
      only_chunked = only_chunked && beast::iequals(coding, "chunked");
    }
  }
  return codings == 0 || (codings == 1 && only_chunked);
}

std::optional<HttpResponse> unsupported_coding_response(const RequestParser& parser) {
  if (transfer_coding_supported(parser.get())) return std::nullopt;
  HttpRequest head = parser.get();
  head.keep_alive(false);
  return make_openai_error(head, http::status::not_implemented,
                           "Transfer-Encoding '" + std::string(head[http::field::transfer_encoding]) +
                               "' is not supported: send the body plainly or with chunked alone",
                           "invalid_request_error", std::nullopt, "unsupported_transfer_encoding");
}

// After a refusal that leaves part of the request unread (413): the send side is shut, then what the
// client still sends is read and dropped, at most kDrainBytes for at most kDrainTime. Closing with unread
// data would make the kernel reset the connection, and a client still writing its body (Python's urllib,
// Node's fetch) would see the reset instead of the 413.
constexpr std::size_t kDrainBytes = 8u << 20;
constexpr std::chrono::seconds kDrainTime{2};

asio::awaitable<void> drain_after_refusal(TcpStream& stream) {
  boost::system::error_code ec;
  stream.socket().shutdown(tcp::socket::shutdown_send, ec);
  if (ec) co_return;
  stream.expires_after(kDrainTime);
  std::array<char, 16 * 1024> scratch{};
  std::size_t drained = 0;
  while (drained < kDrainBytes) {
    drained += co_await stream.async_read_some(asio::buffer(scratch), asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;  // the client closed (eof), or the time is up
  }
}

// Reads the next request; nullopt when the connection is over (closed, timed out, cancelled by the
// shutdown, not HTTP, over a limit or in a transfer coding the gateway does not take: those are answered
// here). The header is read first, so that a refused coding is answered before its body is read.
asio::awaitable<std::optional<HttpRequest>> read_request(GatewayContext& context, TcpStream& stream,
                                                         beast::flat_buffer& buffer, ConnectionFlags& flags) {
  RequestParser parser;
  apply_limits(parser, context);
  stream.expires_after(context.config.http_idle_timeout);
  flags.idle = true;
  boost::system::error_code ec;
  co_await http::async_read_header(stream, buffer, parser, asio::redirect_error(asio::use_awaitable, ec));
  flags.idle = false;
  if (!ec) {
    if (auto refused = unsupported_coding_response(parser)) {
      add_cors_headers(context.config, parser.get(), *refused);
      co_await write_http_response(context, stream, std::move(*refused), parser.get().method());
      co_await drain_after_refusal(stream);
      co_return std::nullopt;
    }
    co_await http::async_read(stream, buffer, parser, asio::redirect_error(asio::use_awaitable, ec));
  }
  if (auto refused = over_limit_response(context, parser, ec)) {
    // A page on a listed origin reads the 413 instead of a network error (headers too large: none read).
    if (ec == http::error::body_limit) add_cors_headers(context.config, parser.get(), *refused);
    const auto method = ec == http::error::body_limit ? parser.get().method() : http::verb::get;
    co_await write_http_response(context, stream, std::move(*refused), method);
    co_await drain_after_refusal(stream);
    co_return std::nullopt;
  }
  if (ec) co_return std::nullopt;
  stream.expires_never();
  co_return parser.release();
}

asio::awaitable<void> serve_connection(std::shared_ptr<GatewayContext> context, tcp::socket socket) {
  OpenConnection open(context->metrics);
  TcpStream stream(std::move(socket));
  beast::flat_buffer buffer;
  auto flags = std::make_shared<ConnectionFlags>();
  ShutdownRegistration registration(context->shutdown, stream, flags);

  while (!flags->draining) {
    std::optional<HttpRequest> request = co_await read_request(*context, stream, buffer, *flags);
    if (!request) break;
    if (flags->draining) request->keep_alive(false);
    if (is_websocket_upgrade(*request)) {
      // Taken over: the WebSocket connection has closed the socket.
      if (co_await serve_websocket_upgrade(*context, stream, std::move(*request))) co_return;
      break;
    }
    if (!co_await route_http_request(*context, stream, std::move(*request))) break;
  }
  boost::system::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
}

}  // namespace

void start_http_connection(std::shared_ptr<GatewayContext> context, tcp::socket socket) {
  auto executor = socket.get_executor();
  asio::co_spawn(executor, serve_connection(std::move(context), std::move(socket)), [](std::exception_ptr error) {
    if (!error) return;
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      logger().error("connection failed error=\"{}\"", e.what());
    }
  });
}

}  // namespace loom::net
