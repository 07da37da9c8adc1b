#include "cors.hpp"

#include <algorithm>
#include <cctype>
#include <string>

#include <boost/beast/core/string.hpp>

namespace loom::net {

namespace {

// The methods the API answers; a preflight for another one (PUT, DELETE) is refused.
constexpr std::string_view kAllowedMethods = "GET, HEAD, POST";
// The response headers a page may read besides the CORS-safelisted ones (Content-Type, ...): the request's
// id for support, Retry-After to back off from a 503, and loom's reports of ignored fields and trimmed turns.
constexpr std::string_view kExposedHeaders = "X-Request-Id, Retry-After, X-Loom-Ignored-Fields, X-Loom-Trimmed-Messages";
// How long a browser may reuse a preflight's answer (Chromium caps it at 2 hours).
constexpr std::string_view kPreflightMaxAgeSeconds = "600";
// A preflight names the request's non-safelisted headers (Authorization, Content-Type: application/json,
// the OpenAI SDK's X-Stainless-*, ...). Any well-formed name is echoed, as the server ignores headers it does
// not know; a list longer than this (names or bytes) is refused, so the echo stays small.
constexpr std::size_t kMaxPreflightHeaders = 64;
constexpr std::size_t kMaxPreflightHeaderBytes = 4096;

bool method_allowed(std::string_view method) {
  return method == "GET" || method == "HEAD" || method == "POST";
}

// RFC 9110 token characters.
bool token_char(char c) {
  constexpr std::string_view kSymbols = "!#$%&'*+-.^_`|~";
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || kSymbols.find(c) != std::string_view::npos;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

// The requested header names as the answer lists them (lower-cased, ", "-separated); nullopt when the
// list is too long or holds something that is not a header name.
std::optional<std::string> allowed_request_headers(std::string_view requested) {
  if (requested.size() > kMaxPreflightHeaderBytes) return std::nullopt;
  std::string allowed;
  std::size_t count = 0;
  while (!requested.empty()) {
    const auto comma = requested.find(',');
    const std::string_view name = trim(requested.substr(0, comma));
    requested = comma == std::string_view::npos ? std::string_view{} : requested.substr(comma + 1);
    if (name.empty()) continue;
    if (!std::all_of(name.begin(), name.end(), token_char) || ++count > kMaxPreflightHeaders) return std::nullopt;
    if (!allowed.empty()) allowed += ", ";
    for (const char c : name) allowed += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return allowed;
}

bool any_origin(const GatewayConfig& config) {
  return std::find(config.cors_origins.begin(), config.cors_origins.end(), "*") != config.cors_origins.end();
}

// What Access-Control-Allow-Origin says to this request: "*" when any origin is allowed, the Origin itself
// when it is listed; nullopt when the request has no Origin or an unlisted one.
std::optional<std::string> allow_origin_value(const GatewayConfig& config, const HttpRequest& request) {
  if (config.cors_origins.empty()) return std::nullopt;
  const auto origin = request.find(http::field::origin);
  if (origin == request.end()) return std::nullopt;
  if (any_origin(config)) return std::string("*");
  if (!cors_origin_listed(config, origin->value())) return std::nullopt;
  return std::string(origin->value());
}

}  // namespace

bool cors_origin_listed(const GatewayConfig& config, std::string_view origin) {
  // Case-insensitive: browsers send scheme and host in lower case, an operator may not list them so.
  return std::any_of(config.cors_origins.begin(), config.cors_origins.end(), [origin](const std::string& listed) {
    return listed == "*" || boost::beast::iequals(listed, origin);
  });
}

bool is_cors_preflight(const HttpRequest& request) {
  return request.method() == http::verb::options && request.find(http::field::origin) != request.end() &&
         request.find(http::field::access_control_request_method) != request.end();
}

HttpResponse cors_preflight_response(const GatewayContext& context, const HttpRequest& request) {
  const auto allow_origin = allow_origin_value(context.config, request);
  const std::string_view method = request[http::field::access_control_request_method];
  const auto headers = allowed_request_headers(request[http::field::access_control_request_headers]);
  if (!allow_origin || !method_allowed(method) || !headers) {
    std::string why = "Access-Control-Request-Headers is too long or malformed";
    if (!method_allowed(method)) why = "the method '" + std::string(method) + "' is not allowed";
    if (!allow_origin) {
      why = "the Origin '" + std::string(request[http::field::origin]) +
            "' is not allowed to call this API: list it in --cors-origins";
    }
    auto refusal = make_openai_error(request, http::status::forbidden, std::move(why), "permission_error",
                                     std::nullopt, "cors_not_allowed");
    if (!context.config.cors_origins.empty() && !any_origin(context.config)) refusal.set(http::field::vary, "Origin");
    return refusal;
  }
  auto response = make_response(request, http::status::no_content, "text/plain", {});
  response.erase(http::field::content_type);
  response.set(http::field::access_control_allow_origin, *allow_origin);
  response.set(http::field::access_control_allow_methods, kAllowedMethods);
  if (!headers->empty()) response.set(http::field::access_control_allow_headers, *headers);
  response.set(http::field::access_control_max_age, kPreflightMaxAgeSeconds);
  if (*allow_origin != "*") {
    response.set(http::field::vary, "Origin, Access-Control-Request-Method, Access-Control-Request-Headers");
  }
  return response;
}

void add_cors_headers(const GatewayConfig& config, const HttpRequest& request, boost::beast::http::fields& headers) {
  if (config.cors_origins.empty()) return;
  if (!any_origin(config)) headers.set(http::field::vary, "Origin");
  const auto allow_origin = allow_origin_value(config, request);
  if (!allow_origin) return;
  headers.set(http::field::access_control_allow_origin, *allow_origin);
  headers.set(http::field::access_control_expose_headers, kExposedHeaders);
}

}  // namespace loom::net
