// HTTP helpers shared by the routes: request/response types, JSON and OpenAI-style error responses, the
// API key check, the path without its query, writing one whole response.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>  // before awaitable.hpp: Boost 1.74 uses std::exchange without including it

#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <nlohmann/json.hpp>

#include "gateway_context.hpp"

namespace loom::net {

namespace openai {
struct Error;
}

namespace http = boost::beast::http;
using HttpRequest = http::request<http::string_body>;
using HttpResponse = http::response<http::string_body>;
using TcpStream = boost::beast::tcp_stream;

// "/v1/ws?x=1" -> "/v1/ws"
std::string_view target_path(std::string_view target) noexcept;
// "%2B" -> "+" (RFC 3986; '+' stays '+': a key may hold one); nullopt when an escape is malformed.
std::optional<std::string> percent_decode(std::string_view text);
// The value of one query parameter ("access_token"), percent-decoded (names too); nullopt when absent or
// when its value holds a malformed escape ("%zz", a '%' at the end).
std::optional<std::string> query_parameter(std::string_view target, std::string_view name);

// `n` random letters and digits (for response ids: unique across restarts, unlike a counter).
std::string random_alphanumeric(std::size_t n);
// The request's X-Request-Id when it is 1 to 128 characters of letters, digits and ._:- (echoed, so that a
// client or proxy can follow its request through logs); otherwise a fresh "req-" id.
std::string request_id_of(const HttpRequest& request);

// Common headers (Server, X-Request-Id, keep-alive as the request asked), body and Content-Length set.
HttpResponse make_response(const HttpRequest& request, http::status status, std::string content_type,
                           std::string body);
HttpResponse make_json_response(const HttpRequest& request, http::status status, const nlohmann::json& body);
// OpenAI's error object: {"error":{"message":..,"type":..,"param":..,"code":..}}. `type` is
// invalid_request_error, authentication_error, not_found_error, server_error, overloaded_error, ...
HttpResponse make_openai_error(const HttpRequest& request, http::status status, std::string message,
                               std::string type, std::optional<std::string> param = std::nullopt,
                               std::optional<std::string> code = std::nullopt);
// The same for a translator's refusal (openai_translate.hpp), with its own status.
HttpResponse make_openai_error(const HttpRequest& request, const openai::Error& error);

// True when no API key is configured, or the request carries "Authorization: Bearer KEY" (the scheme in
// any case: "bearer KEY" too) (or, on the
// WebSocket upgrade only, where browsers cannot set headers, the query parameter access_token=KEY).
// Compared in constant time.
bool authorized(const GatewayContext& context, const HttpRequest& request, bool websocket_upgrade);

// Writes one whole response, counted in the metrics by status; true when the connection may be kept alive
// (the response said so and the write succeeded). To a HEAD request only the headers go out (Content-Length
// still says the body's size), whatever the status.
boost::asio::awaitable<bool> write_http_response(GatewayContext& context, TcpStream& stream, HttpResponse response,
                                                 http::verb request_method);

}  // namespace loom::net
