#include "websocket_upgrade.hpp"

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/beast/websocket/rfc6455.hpp>

#include "cors.hpp"
#include "host_check.hpp"
#include "net_logger.hpp"
#include "websocket_connection.hpp"

namespace loom::net {

namespace {

namespace asio = boost::asio;

constexpr std::size_t kMinKernelSendBuffer = 16u << 10;
constexpr std::size_t kMaxKernelSendBuffer = 256u << 10;

// A browser's Origin is allowed when it is listed (allowed_origins, or cors_origins: a page trusted with
// the HTTP API is trusted with the WebSocket too), when "*" is listed, or when it names the host the
// request was sent to (our own chat page) and that Host passed the Host check (host_check.hpp): a
// rebinding page's Origin names its own Host, so trusting any Host would let it through. Requests without
// an Origin are not from a browser page.
bool origin_allowed(const GatewayContext& context, const HttpRequest& request) {
  const auto origin = request.find(http::field::origin);
  if (origin == request.end()) return true;
  const std::string_view value = origin->value();
  for (const auto& allowed : context.config.allowed_origins) {
    if (allowed == "*" || allowed == value) return true;
  }
  if (cors_origin_listed(context.config, value)) return true;
  const auto host = request.find(http::field::host);
  if (host == request.end() || !host_allowed(context, request)) return false;
  const std::string_view host_value = host->value();
  return value == "http://" + std::string(host_value) || value == "https://" + std::string(host_value);
}

// Sec-WebSocket-Key must be the base64 of 16 bytes (RFC 6455 section 4.1): 22 characters of the base64
// alphabet, the last of them with its 4 low bits zero, then "==".
bool valid_websocket_key(std::string_view key) {
  constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  if (key.size() != 24 || key.substr(22) != "==") return false;
  for (std::size_t i = 0; i < 22; ++i) {
    const auto value = kAlphabet.find(key[i]);
    if (value == std::string_view::npos) return false;
    if (i == 21 && (value & 0x0F) != 0) return false;
  }
  return true;
}

// The error response refusing the upgrade (the connection closes after it), or nullopt when it may go on.
std::optional<HttpResponse> refusal(const GatewayContext& context, HttpRequest& request) {
  if (!valid_websocket_key(request[http::field::sec_websocket_key])) {
    request.keep_alive(false);
    return make_openai_error(request, http::status::bad_request,
                             "Sec-WebSocket-Key must be the base64 of 16 bytes (24 characters)",
                             "invalid_request_error", std::nullopt, "bad_websocket_key");
  }
  if (!host_allowed(context, request)) {
    logger().warn("websocket refused: host=\"{}\" is not allowed", std::string(request[http::field::host]));
    request.keep_alive(false);
    return host_refusal(request);
  }
  if (!context.ready() || context.shutdown.notified()) {
    request.keep_alive(false);
    return make_openai_error(request, http::status::service_unavailable,
                             context.shutdown.notified() ? "the server is shutting down" : "the model is still loading",
                             "server_error", std::nullopt, "unavailable");
  }
  if (!authorized(context, request, true)) {
    request.keep_alive(false);
    return make_openai_error(request, http::status::unauthorized,
                             "missing or wrong API key (Authorization: Bearer KEY, or "
                             "?access_token=KEY on the WebSocket URL)",
                             "authentication_error", std::nullopt, "invalid_api_key");
  }
  if (!origin_allowed(context, request)) {
    logger().warn("websocket refused: origin=\"{}\" is not allowed", std::string(request[http::field::origin]));
    request.keep_alive(false);
    return make_openai_error(request, http::status::forbidden,
                             "this Origin may not open WebSockets here (see allowed_origins and cors_origins)", "permission_error",
                             std::nullopt, "origin_not_allowed");
  }
  return std::nullopt;
}

// The stream's socket, moved onto `strand`: the WebSocket's reader, writer, Beast's ping timer and the
// engine's events must not run at once, whatever executor the HTTP connection ran it on. nullopt when
// the peer is already gone.
std::optional<TcpStream> move_onto_strand(const GatewayContext& context, TcpStream& stream,
                                          const WebSocketStrand& strand) {
  auto& socket = stream.socket();
  boost::system::error_code ec;
  const auto protocol = socket.local_endpoint(ec).protocol();
  if (ec) return std::nullopt;
  stream.expires_never();
  const auto native = socket.release(ec);
  if (ec) {
    logger().warn("websocket: cannot move the socket to its strand: {}", ec.message());
    return std::nullopt;
  }
  asio::ip::tcp::socket socket_on_strand(strand, protocol, native);
  // A modest kernel send buffer: what the kernel holds for a client that stopped reading counts against
  // nobody's limit, and autotuning lets it grow to megabytes. Token streams need little bandwidth.
  const std::size_t kernel_buffer =
      std::clamp<std::size_t>(context.config.ws_send_queue_bytes, kMinKernelSendBuffer, kMaxKernelSendBuffer);
  socket_on_strand.set_option(asio::socket_base::send_buffer_size(static_cast<int>(kernel_buffer)), ec);
  return TcpStream(std::move(socket_on_strand));
}

}  // namespace

bool is_websocket_upgrade(const HttpRequest& request) {
  return boost::beast::websocket::is_upgrade(request) && target_path(request.target()) == "/v1/ws";
}

asio::awaitable<bool> serve_websocket_upgrade(GatewayContext& context, TcpStream& stream, HttpRequest request) {
  if (auto refused = refusal(context, request)) {
    co_await write_http_response(context, stream, std::move(*refused), request.method());
    co_return false;
  }
  context.metrics.http_response(101);
  WebSocketStrand strand = asio::make_strand(co_await asio::this_coro::executor);
  std::optional<TcpStream> on_strand = move_onto_strand(context, stream, strand);
  if (!on_strand) co_return true;  // the socket is gone (or released): nothing is left to close
  co_await run_websocket(context, std::move(strand), std::move(*on_strand), std::move(request));
  co_return true;
}

}  // namespace loom::net
