// The Host check against DNS rebinding. A page on evil.example whose name the attacker re-points at
// 127.0.0.1 is, to the browser, same-origin with its own server: it may POST to /v1/completions and
// open /v1/ws here, and its requests carry "Host: evil.example:PORT". When no API key protects the
// gateway, a request is served only when its Host names this server: an IP literal (a browser sends one
// only for a page loaded from that address, i.e. from this server), "localhost" or a name under
// ".localhost" (RFC 6761: browsers resolve them to loopback themselves), or a name listed in
// allowed_hosts ("*": any). With an API key every /v1 route wants the key, which a rebinding page does
// not have, and Host is not checked.
#pragma once

#include <string_view>

#include "http_util.hpp"

namespace loom::net {

// "evil.example:8080" -> "evil.example", "[::1]:8080" -> "::1"; names lower-cased, a trailing dot dropped.
std::string host_name_of(std::string_view host_header);

// True when `host_header` names this server by the rules above (the API key plays no part here).
bool host_trusted(const GatewayConfig& config, std::string_view host_header);

// True when the request may be served: an API key is configured, or the request has no Host (not a
// browser), or its Host is trusted.
bool host_allowed(const GatewayContext& context, const HttpRequest& request);

// 403 naming the Host and the flag that would allow it.
HttpResponse host_refusal(const HttpRequest& request);

}  // namespace loom::net
