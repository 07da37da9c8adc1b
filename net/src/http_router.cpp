#include "http_router.hpp"

#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "chat_page.hpp"
#include "cors.hpp"
#include "host_check.hpp"
#include "openai_embeddings.hpp"
#include "llama_routes.hpp"
#include "openai_routes.hpp"
#include "prometheus_metrics.hpp"

namespace loom::net {

namespace {

namespace asio = boost::asio;

HttpResponse method_not_allowed(const HttpRequest& request, const std::string& path, const char* allow) {
  auto response = make_openai_error(request, http::status::method_not_allowed,
                                    "method " + std::string(request.method_string()) + " is not allowed on " + path,
                                    "invalid_request_error");
  response.set(http::field::allow, allow);
  return response;
}

HttpResponse chat_page_response(const HttpRequest& request) {
  auto response = make_response(request, http::status::ok, "text/html; charset=utf-8", std::string(chat_page_html()));
  response.set(http::field::cache_control, "no-cache");
  // The page talks only to its own origin; nothing may frame it.
  response.set("Content-Security-Policy",
               "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self' ws: wss:; "
               "frame-ancestors 'none'");
  response.set("X-Content-Type-Options", "nosniff");
  return response;
}

// The model's name: the loaded one, or what it will be called while it loads (or after it failed).
std::string served_model_id(const GatewayContext& context) {
  return context.ready() ? context.model_id : model_id_for(context.config);
}

HttpResponse health_response(const GatewayContext& context, const HttpRequest& request) {
  const auto phase = context.phase.load(std::memory_order_acquire);
  // "ok" when ready, as the peer servers answer readiness probes; loom's phase beside it.
  nlohmann::json body = {{"status", phase == GatewayPhase::ready ? std::string("ok") : std::string(to_string(phase))},
                         {"phase", to_string(phase)},
                         {"model", served_model_id(context)},
                         {"demo", context.config.model_is_demo}};
  // The context a request may use (prompt and output), once known: the model's, or less when the KV cache is smaller.
  if (context.ready()) body["context_length"] = context.context_length;
  return make_json_response(request, phase == GatewayPhase::ready ? http::status::ok : http::status::service_unavailable,
                            body);
}

// GET /v1/models (the list of one) and GET /v1/models/ID.
HttpResponse models_response(const GatewayContext& context, const HttpRequest& request, const std::string& path) {
  const std::string id = served_model_id(context);
  nlohmann::json model = {{"id", id}, {"object", "model"}, {"created", context.created_unix}, {"owned_by", "loom"}};
  if (context.ready()) {
    model["max_model_len"] = context.context_length;  // vLLM's name for the usable context
    model["meta"] = context.model_meta;               // llama.cpp's facts of the model, and loom's
  }
  if (path == "/v1/models") {
    nlohmann::json list = {{"object", "list"}, {"data", nlohmann::json::array()}};
    list["data"].push_back(model);
    return make_json_response(request, http::status::ok, list);
  }
  const std::string wanted = path.substr(std::string_view("/v1/models/").size());
  if (wanted != id) {
    return make_openai_error(request, http::status::not_found, "the model '" + wanted + "' does not exist",
                             "invalid_request_error", "model", "model_not_found");
  }
  return make_json_response(request, http::status::ok, model);
}

// nullopt when the OpenAI route may run; else why not.
std::optional<HttpResponse> openai_refusal(const GatewayContext& context, const HttpRequest& request,
                                           const std::string& path) {
  if (request.method() != http::verb::post) return method_not_allowed(request, path, "POST");
  if (!context.ready() || context.shutdown.notified()) {
    return make_openai_error(request, http::status::service_unavailable,
                             context.shutdown.notified() ? "the server is shutting down" : "the model is still loading",
                             "server_error", std::nullopt, "unavailable");
  }
  return std::nullopt;
}

// The routes that answer at once (no engine round trip); nullopt for /metrics and the OpenAI routes once
// they may run. Kept out of the coroutine: GCC 12 miscompiles braced initialiser lists inside co_await
// expressions.
std::optional<HttpResponse> immediate_response(const GatewayContext& context, const HttpRequest& request,
                                               const std::string& path) {
  if (!host_allowed(context, request)) return host_refusal(request);
  // Before the API key: a preflight never carries one (the request that follows does).
  if (is_cors_preflight(request)) return cors_preflight_response(context, request);
  // HEAD is GET without the body (write_http_response leaves it out): allowed wherever GET is.
  const auto method = request.method() == http::verb::head ? http::verb::get : request.method();
  if (path == "/" || path == "/index.html") {
    if (method != http::verb::get) return method_not_allowed(request, path, "GET, HEAD");
    return chat_page_response(request);
  }
  if (path == "/favicon.ico") {  // browsers ask for it; there is none, and a 404 in their console alarms people
    return make_response(request, http::status::no_content, "image/x-icon", {});
  }
  if (path == "/health") {
    if (method != http::verb::get) return method_not_allowed(request, path, "GET, HEAD");
    return health_response(context, request);
  }
  if (path == "/metrics") {
    if (method != http::verb::get) return method_not_allowed(request, path, "GET, HEAD");
    return std::nullopt;
  }
  if (path.rfind("/v1/", 0) == 0 && !authorized(context, request, false)) {
    return make_openai_error(request, http::status::unauthorized, "missing or wrong API key: send Authorization: Bearer KEY",
                             "authentication_error", std::nullopt, "invalid_api_key");
  }
  if (path == "/v1/models" || path.rfind("/v1/models/", 0) == 0) {
    if (method != http::verb::get) return method_not_allowed(request, path, "GET, HEAD");
    return models_response(context, request, path);
  }
  if (path == "/v1/completions" || path == "/v1/chat/completions" || path == "/v1/embeddings") {
    return openai_refusal(context, request, path);
  }
  if (is_llama_route(path)) return llama_route_refusal(context, request, path);
  if (path == "/v1/ws") {
    return make_openai_error(request, http::status::upgrade_required,
                             "/v1/ws is a WebSocket endpoint: send an upgrade request", "invalid_request_error");
  }
  return make_openai_error(request, http::status::not_found,
                           "no route for " + std::string(request.method_string()) + " " + path, "not_found_error");
}

// GET /metrics: the engine's stats (asked on its strands) and the gateway's counters.
asio::awaitable<bool> serve_metrics(GatewayContext& context, TcpStream& stream, HttpRequest request) {
  boost::system::error_code ec;
  // The engine has stopped (shutdown) when this fails: its numbers are gone, the gateway's still count.
  actors::EngineStats stats = co_await context.engine.async_stats(asio::redirect_error(asio::use_awaitable, ec));
  if (ec) stats = actors::EngineStats{};
  auto response = make_response(request, http::status::ok, kPrometheusContentType,
                                render_prometheus(context, stats, context.metrics.snapshot()));
  add_cors_headers(context.config, request, response);
  co_return co_await write_http_response(context, stream, std::move(response), request.method());
}

}  // namespace

asio::awaitable<bool> route_http_request(GatewayContext& context, TcpStream& stream, HttpRequest request) {
  const std::string path(target_path(request.target()));
  if (auto response = immediate_response(context, request, path)) {
    // A preflight's answer has its own CORS headers (or, refused, none).
    if (!is_cors_preflight(request)) add_cors_headers(context.config, request, *response);
    co_return co_await write_http_response(context, stream, std::move(*response), request.method());
  }
  if (path == "/metrics") co_return co_await serve_metrics(context, stream, std::move(request));
  if (path == "/v1/embeddings") co_return co_await serve_openai_embeddings(context, stream, std::move(request));
  if (is_llama_route(path)) co_return co_await serve_llama_route(context, stream, std::move(request));
  const auto which = path == "/v1/completions" ? OpenAiRoute::completions : OpenAiRoute::chat_completions;
  co_return co_await serve_openai(context, stream, std::move(request), which);
}

}  // namespace loom::net
