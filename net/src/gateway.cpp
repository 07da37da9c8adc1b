// The gateway core: the listener, one coroutine per TCP connection that reads HTTP requests and routes
// them (the WebSocket upgrade, the OpenAI routes, /health, /metrics, /v1/models, the chat page), the model
// load, and the graceful shutdown. Each connection runs on its own strand; the shared state is the
// GatewayContext (atomics, the engine facade) and nothing else.
#include "loom/net/gateway.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <stdexcept>
#include <utility>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/websocket/rfc6455.hpp>

#include "chat_page.hpp"
#include "gateway_context.hpp"
#include "http_util.hpp"
#include "net_logger.hpp"
#include "openai_routes.hpp"
#include "prometheus_metrics.hpp"
#include "websocket_connection.hpp"

namespace loom::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;

namespace {

constexpr std::size_t kMaxHeaderBytes = 16 * 1024;
constexpr int kEngineThreads = 2;  // the engine's actors (the forward passes have threads of their own)

actors::EngineConfig engine_config_for(const GatewayConfig& config) {
  actors::EngineConfig engine;
  engine.model.model_path = config.model;
  engine.model.tokenizer_path = config.tokenizer;
  engine.model.threads = config.compute_threads;
  if (config.kv_cache_mb > 0) {
    engine.model.kv.budget_bytes = static_cast<std::uint64_t>(config.kv_cache_mb) * 1024 * 1024;
  } else {
    engine.model.kv_contexts = GatewayConfig::kDefaultKvContexts;
  }
  engine.chat_template = config.chat_template;
  // Like llama.cpp's server: a model without a template still chats, in ChatML.
  engine.fallback_chat_template = "chatml";
  engine.max_prompt_tokens = config.max_prompt_tokens;
  engine.default_timeout = config.request_timeout;
  engine.io_threads = kEngineThreads;
  return engine;
}

std::string model_id_for(const GatewayConfig& config) {
  if (!config.model_id.empty()) return config.model_id;
  if (config.model_is_demo) return "loom-demo";
  return std::filesystem::path(config.model).stem().string();
}

// A browser's Origin is allowed when it is listed, when "*" is listed, or when it names the host the
// request was sent to (our own chat page). Requests without an Origin are not from a browser page.
bool origin_allowed(const GatewayConfig& config, const HttpRequest& request) {
  const auto origin = request.find(http::field::origin);
  if (origin == request.end()) return true;
  const std::string_view value = origin->value();
  for (const auto& allowed : config.allowed_origins) {
    if (allowed == "*" || allowed == value) return true;
  }
  const auto host = request.find(http::field::host);
  if (host == request.end()) return false;
  const std::string_view host_value = host->value();
  return value == "http://" + std::string(host_value) || value == "https://" + std::string(host_value);
}

}  // namespace

struct Gateway::State : std::enable_shared_from_this<Gateway::State> {
  State(asio::io_context& io_, GatewayConfig config_)
      : io(io_),
        engine(std::make_unique<loom::Engine>(engine_config_for(config_))),
        context(std::make_unique<GatewayContext>(*engine, std::move(config_))),
        acceptor(asio::make_strand(io_)),
        shutdown_strand(asio::make_strand(io_)) {}

  asio::io_context& io;
  std::unique_ptr<loom::Engine> engine;
  std::unique_ptr<GatewayContext> context;
  tcp::acceptor acceptor;
  tcp::endpoint endpoint;
  asio::strand<asio::io_context::executor_type> shutdown_strand;
  // On shutdown_strand:
  bool shutting_down = false;
  std::vector<std::function<void()>> shutdown_done;

  asio::awaitable<void> accept_loop();
  asio::awaitable<void> serve_connection(tcp::socket socket);
  asio::awaitable<bool> route(TcpStream& stream, HttpRequest request);
  std::optional<HttpResponse> immediate_route(const HttpRequest& request, const std::string& path);
  asio::awaitable<bool> write(TcpStream& stream, HttpResponse response);
  void begin_shutdown(std::function<void()> done);
  void finish_shutdown();
};

asio::awaitable<void> Gateway::State::accept_loop() {
  for (;;) {
    boost::system::error_code ec;
    tcp::socket socket = co_await acceptor.async_accept(asio::make_strand(io), asio::redirect_error(asio::use_awaitable, ec));
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
    if (ec) {
      // Out of file descriptors and the like: say so, breathe, go on.
      logger().warn("accept failed error=\"{}\"", ec.message());
      asio::steady_timer pause(acceptor.get_executor(), std::chrono::milliseconds(50));
      co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      continue;
    }
    if (context->metrics.snapshot().connections_open >= context->config.max_connections) {
      logger().warn("refusing a connection: max_connections={} reached", context->config.max_connections);
      boost::system::error_code ignored;
      socket.close(ignored);
      continue;
    }
    auto executor = socket.get_executor();
    asio::co_spawn(executor, serve_connection(std::move(socket)), [](std::exception_ptr error) {
      if (!error) return;
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        logger().error("connection failed error=\"{}\"", e.what());
      }
    });
  }
}

asio::awaitable<bool> Gateway::State::write(TcpStream& stream, HttpResponse response) {
  context->metrics.http_response(static_cast<int>(response.result_int()));
  const bool keep_alive = response.keep_alive();
  boost::system::error_code ec;
  co_await http::async_write(stream, response, asio::redirect_error(asio::use_awaitable, ec));
  co_return !ec && keep_alive;
}

asio::awaitable<void> Gateway::State::serve_connection(tcp::socket socket) {
  auto self = shared_from_this();
  context->metrics.connection_opened();
  struct Closed {
    GatewayMetrics& metrics;
    ~Closed() { metrics.connection_closed(); }
  } closed{context->metrics};

  TcpStream stream(std::move(socket));
  beast::flat_buffer buffer;
  // Shutdown: an idle keep-alive connection closes at once; a busy one after its response.
  auto idle = std::make_shared<bool>(false);
  auto draining = std::make_shared<bool>(false);
  const auto executor = stream.get_executor();
  const auto notifier_id = context->shutdown.add([executor, idle, draining, &stream] {
    asio::post(executor, [idle, draining, &stream] {
      *draining = true;
      if (*idle) stream.cancel();
    });
  });
  struct Unregister {
    ShutdownNotifier& notifier;
    ShutdownNotifier::Id id;
    ~Unregister() { notifier.remove(id); }
  } unregister{context->shutdown, notifier_id};

  for (;;) {
    if (*draining) break;
    http::request_parser<http::string_body> parser;
    parser.header_limit(kMaxHeaderBytes);
    parser.body_limit(context->config.max_body_bytes);
    stream.expires_after(context->config.http_idle_timeout);
    *idle = true;
    boost::system::error_code ec;
    co_await http::async_read(stream, buffer, parser, asio::redirect_error(asio::use_awaitable, ec));
    *idle = false;
    if (ec == http::error::body_limit) {
      HttpRequest head = parser.get();
      head.keep_alive(false);
      co_await write(stream, make_openai_error(head, http::status::payload_too_large,
                                               "the request body is larger than the limit of " +
                                                   std::to_string(context->config.max_body_bytes) + " bytes",
                                               "invalid_request_error", std::nullopt, "body_too_large"));
      break;
    }
    if (ec == http::error::header_limit) {
      HttpRequest head;
      head.keep_alive(false);
      co_await write(stream, make_openai_error(head, http::status::request_header_fields_too_large,
                                               "the request's headers are larger than 16 KiB",
                                               "invalid_request_error"));
      break;
    }
    if (ec) break;  // closed, timed out, cancelled by shutdown, or not HTTP
    stream.expires_never();

    HttpRequest request = parser.release();
    if (*draining) request.keep_alive(false);
    if (beast::websocket::is_upgrade(request) && target_path(request.target()) == "/v1/ws") {
      if (!context->ready() || context->shutdown.notified()) {
        request.keep_alive(false);
        co_await write(stream, make_openai_error(request, http::status::service_unavailable,
                                                 context->shutdown.notified() ? "the server is shutting down"
                                                                              : "the model is still loading",
                                                 "server_error", std::nullopt, "unavailable"));
        break;
      }
      if (!authorized(*context, request, true)) {
        request.keep_alive(false);
        co_await write(stream, make_openai_error(request, http::status::unauthorized,
                                                 "missing or wrong API key (Authorization: Bearer KEY, or "
                                                 "?access_token=KEY on the WebSocket URL)",
                                                 "authentication_error", std::nullopt, "invalid_api_key"));
        break;
      }
      if (!origin_allowed(context->config, request)) {
        logger().warn("websocket refused: origin=\"{}\" is not allowed", std::string(request[http::field::origin]));
        request.keep_alive(false);
        co_await write(stream, make_openai_error(request, http::status::forbidden,
                                                 "this Origin may not open WebSockets here (see allowed_origins)",
                                                 "permission_error", std::nullopt, "origin_not_allowed"));
        break;
      }
      context->metrics.http_response(101);
      co_await run_websocket(*context, std::move(stream), std::move(request));
      co_return;
    }
    if (!co_await route(stream, std::move(request))) break;
  }
  boost::system::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
}

// The routes that answer at once (no engine round trip); nullopt for the ones that need a coroutine.
// Kept out of the coroutine: GCC 12 miscompiles braced initialiser lists inside co_await expressions.
std::optional<HttpResponse> Gateway::State::immediate_route(const HttpRequest& request, const std::string& path) {
  const auto method = request.method();
  auto& ctx = *context;

  const auto method_not_allowed = [&](const char* allow) {
    auto response = make_openai_error(request, http::status::method_not_allowed,
                                      "method " + std::string(request.method_string()) + " is not allowed on " + path,
                                      "invalid_request_error");
    response.set(http::field::allow, allow);
    return response;
  };

  if (path == "/" || path == "/index.html") {
    if (method != http::verb::get && method != http::verb::head) return method_not_allowed("GET");
    auto response = make_response(request, http::status::ok, "text/html; charset=utf-8", std::string(chat_page_html()));
    response.set(http::field::cache_control, "no-cache");
    // The page talks only to its own origin; nothing may frame it.
    response.set("Content-Security-Policy",
                 "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self' ws: wss:; "
                 "frame-ancestors 'none'");
    response.set("X-Content-Type-Options", "nosniff");
    if (method == http::verb::head) response.body().clear();
    return response;
  }

  if (path == "/health") {
    if (method != http::verb::get) return method_not_allowed("GET");
    const auto phase = ctx.phase.load(std::memory_order_acquire);
    const nlohmann::json body = {{"status", to_string(phase)},
                                 {"model", ctx.ready() ? ctx.model_id : model_id_for(ctx.config)},
                                 {"demo", ctx.config.model_is_demo}};
    return make_json_response(request, phase == GatewayPhase::ready ? http::status::ok : http::status::service_unavailable,
                              body);
  }

  if (path == "/metrics") {
    if (method != http::verb::get) return method_not_allowed("GET");
    return std::nullopt;
  }

  const bool api = path.rfind("/v1/", 0) == 0;
  if (api && !authorized(ctx, request, false)) {
    return make_openai_error(request, http::status::unauthorized, "missing or wrong API key: send Authorization: Bearer KEY",
                             "authentication_error", std::nullopt, "invalid_api_key");
  }

  if (path == "/v1/models" || path.rfind("/v1/models/", 0) == 0) {
    if (method != http::verb::get) return method_not_allowed("GET");
    const std::string id = ctx.ready() ? ctx.model_id : model_id_for(ctx.config);
    const nlohmann::json model = {{"id", id}, {"object", "model"}, {"created", ctx.created_unix}, {"owned_by", "loom"}};
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

  if (path == "/v1/completions" || path == "/v1/chat/completions") {
    if (method != http::verb::post) return method_not_allowed("POST");
    if (!ctx.ready() || ctx.shutdown.notified()) {
      return make_openai_error(request, http::status::service_unavailable,
                               ctx.shutdown.notified() ? "the server is shutting down" : "the model is still loading",
                               "server_error", std::nullopt, "unavailable");
    }
    return std::nullopt;
  }

  if (path == "/v1/ws") {
    return make_openai_error(request, http::status::upgrade_required,
                             "/v1/ws is a WebSocket endpoint: send an upgrade request", "invalid_request_error");
  }
  return make_openai_error(request, http::status::not_found,
                           "no route for " + std::string(request.method_string()) + " " + path, "not_found_error");
}

asio::awaitable<bool> Gateway::State::route(TcpStream& stream, HttpRequest request) {
  const std::string path(target_path(request.target()));
  if (auto response = immediate_route(request, path)) co_return co_await write(stream, std::move(*response));
  auto& ctx = *context;
  if (path == "/metrics") {
    boost::system::error_code ec;
    // The engine has stopped (shutdown) when this fails: its numbers are gone, the gateway's still count.
    actors::EngineStats stats = co_await ctx.engine.async_stats(asio::redirect_error(asio::use_awaitable, ec));
    if (ec) stats = actors::EngineStats{};
    auto response = make_response(request, http::status::ok, kPrometheusContentType,
                                  render_prometheus(ctx, stats, ctx.metrics.snapshot()));
    co_return co_await write(stream, std::move(response));
  }
  const auto which = path == "/v1/completions" ? OpenAiRoute::completions : OpenAiRoute::chat_completions;
  co_return co_await serve_openai(ctx, stream, std::move(request), which);
}

void Gateway::State::begin_shutdown(std::function<void()> done) {
  asio::post(shutdown_strand, [self = shared_from_this(), done = std::move(done)]() mutable {
    self->shutdown_done.push_back(std::move(done));
    if (self->shutting_down) return;
    self->shutting_down = true;
    auto& ctx = *self->context;
    logger().info("shutting down: no new connections; in-flight requests have {} ms", ctx.config.shutdown_grace.count());
    if (ctx.phase.load() != GatewayPhase::failed) ctx.phase.store(GatewayPhase::draining, std::memory_order_release);
    asio::post(self->acceptor.get_executor(), [self] {
      boost::system::error_code ignored;
      self->acceptor.close(ignored);
    });
    ctx.shutdown.notify_all();

    auto grace = std::make_shared<asio::steady_timer>(self->shutdown_strand, ctx.config.shutdown_grace);
    grace->async_wait([self](boost::system::error_code ec) {
      if (ec) return;
      logger().warn("shutdown grace period over: cancelling the requests still running");
      self->engine->async_shutdown(loom::Engine::ShutdownMode::cancel, [](boost::system::error_code, bool) {});
    });
    // Engine callbacks run on the engine's own threads and hold the state only weakly: the last owner of
    // the state (and so of the engine) must never be one of the engine's threads.
    self->engine->async_shutdown(loom::Engine::ShutdownMode::drain,
                                 [weak = std::weak_ptr<State>(self), grace](boost::system::error_code, bool) {
                                   if (auto locked = weak.lock()) {
                                     auto strand = locked->shutdown_strand;
                                     locked.reset();
                                     asio::post(strand, [weak, grace] {
                                       grace->cancel();
                                       if (auto state = weak.lock()) state->finish_shutdown();
                                     });
                                   }
                                 });
  });
}

// The engine has stopped and every request had its last event; connections are finishing their writes
// and WebSockets closing with 1001. Wait for them (bounded), then report.
void Gateway::State::finish_shutdown() {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  auto timer = std::make_shared<asio::steady_timer>(shutdown_strand);
  auto poll = std::make_shared<std::function<void()>>();
  *poll = [self = shared_from_this(), timer, deadline, poll] {
    const auto open = self->context->metrics.snapshot().connections_open;
    if (open > 0 && std::chrono::steady_clock::now() < deadline) {
      timer->expires_after(std::chrono::milliseconds(10));
      timer->async_wait([poll](boost::system::error_code) { (*poll)(); });
      return;
    }
    if (open > 0) logger().warn("shutdown: {} connections still open after 5 s; leaving them", open);
    logger().info("shut down");
    auto callbacks = std::move(self->shutdown_done);
    self->shutdown_done.clear();
    *poll = nullptr;  // break the cycle
    for (auto& callback : callbacks) {
      if (callback) callback();
    }
  };
  (*poll)();
}

Gateway::Gateway(asio::io_context& io, GatewayConfig config) {
  config.validate();
  if (config.device == "vulkan") {
    throw std::invalid_argument("device vulkan: the Vulkan backend is not built yet; use --device cpu");
  }
  if (config.model.empty()) throw std::invalid_argument("model: no model file given");
  state_ = std::make_shared<State>(io, std::move(config));
}

Gateway::~Gateway() = default;

void Gateway::start(std::function<void(std::string error)> on_loaded) {
  auto& s = *state_;
  const auto address = asio::ip::make_address(s.context->config.host);
  const tcp::endpoint wanted(address, s.context->config.port);
  const auto where = s.context->config.host + ":" + std::to_string(s.context->config.port);
  try {
    s.acceptor.open(wanted.protocol());
    s.acceptor.set_option(asio::socket_base::reuse_address(true));
    s.acceptor.bind(wanted);
    s.acceptor.listen(asio::socket_base::max_listen_connections);
  } catch (const boost::system::system_error& e) {
    throw boost::system::system_error(e.code(), "cannot listen on " + where);
  }
  s.endpoint = s.acceptor.local_endpoint();
  asio::co_spawn(s.acceptor.get_executor(), s.accept_loop(), asio::detached);

  logger().info("loading model={}{}", s.context->config.model, s.context->config.model_is_demo ? " (demo)" : "");
  const auto started = std::chrono::steady_clock::now();
  s.engine->async_load([weak = std::weak_ptr<State>(state_), on_loaded = std::move(on_loaded), started](
                           boost::system::error_code ec, actors::LoadResult result) mutable {
    auto self = weak.lock();
    if (!self) return;
    auto& ctx = *self->context;
    std::string error;
    if (ec) {
      error = "the engine did not answer the load: " + ec.message();
    } else if (!result.loaded()) {
      error = result.error;
    }
    if (error.empty()) {
      ctx.model_id = model_id_for(ctx.config);
      ctx.context_length = result.info.config.context_length;
      ctx.created_unix = std::chrono::duration_cast<std::chrono::seconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
      GatewayPhase expected = GatewayPhase::loading;
      ctx.phase.compare_exchange_strong(expected, GatewayPhase::ready, std::memory_order_acq_rel);
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
      logger().info("model loaded model_id={} context_length={} kv_blocks={} load_ms={}", ctx.model_id,
                    ctx.context_length, result.info.kv_blocks, ms.count());
    } else {
      GatewayPhase expected = GatewayPhase::loading;
      ctx.phase.compare_exchange_strong(expected, GatewayPhase::failed, std::memory_order_acq_rel);
      logger().error("the model failed to load: {}", error);
    }
    if (on_loaded) asio::post(self->io, [on_loaded = std::move(on_loaded), error = std::move(error)] { on_loaded(error); });
    self.reset();  // before the lambda ends on the engine's thread (see begin_shutdown)
  });
}

tcp::endpoint Gateway::local_endpoint() const { return state_->endpoint; }

void Gateway::async_shutdown(std::function<void()> done) { state_->begin_shutdown(std::move(done)); }

}  // namespace loom::net
