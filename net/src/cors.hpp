// CORS for the HTTP API: which browser pages on other origins may read the gateway's responses. A page's
// fetch to another origin carries "Origin: scheme://host[:port]"; the browser hands the response to the
// page only when it says Access-Control-Allow-Origin for that origin, and asks first with an OPTIONS
// preflight for anything beyond a simple GET/POST (a JSON body, an Authorization header). The origins
// are config.cors_origins ("*": any); with none listed no CORS header is ever sent, so only the server's
// own page (same-origin, which needs no CORS) reads responses.
//
// How it fits the other browser checks (host_check.hpp, websocket_upgrade.cpp): the Host check runs
// first and is not loosened by CORS (a listed page calls the server by a name the Host check accepts);
// the API key is still wanted on /v1 routes (the preflight itself carries no key and needs none); the
// WebSocket, which browsers open without CORS, admits an Origin listed here as well as allowed_origins.
// CORS is applied to every HTTP response, whatever its route and status, streamed ones included.
#pragma once

#include <string_view>

#include <boost/beast/http/fields.hpp>

#include "http_util.hpp"

namespace loom::net {

// True when `origin` is listed in cors_origins (or "*" is).
bool cors_origin_listed(const GatewayConfig& config, std::string_view origin);

// True for a CORS preflight: OPTIONS with Origin and Access-Control-Request-Method.
bool is_cors_preflight(const HttpRequest& request);

// The preflight's answer: 204 with Access-Control-Allow-Origin/-Methods/-Headers/-Max-Age for a listed
// origin asking for an allowed method and at most kMaxPreflightHeaders well-formed header names; 403
// without any CORS header otherwise (the browser then blocks the request).
HttpResponse cors_preflight_response(const GatewayContext& context, const HttpRequest& request);

// On a response to `request` from a listed origin: Access-Control-Allow-Origin, -Expose-Headers. Vary:
// Origin whenever the answer depends on the Origin (specific origins are listed), so caches keep apart
// the responses for different pages.
void add_cors_headers(const GatewayConfig& config, const HttpRequest& request, boost::beast::http::fields& headers);

}  // namespace loom::net
