// The Gateway object: it builds the engine and the shared GatewayContext, starts the listener (whose
// connections are http_connection.cpp's), loads the model in the background, and runs the graceful
// shutdown. The rest of the gateway, one file per role, is listed in net/README.md.
#include "loom/net/gateway.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include "gateway_context.hpp"
#include "loom/compute/devices.hpp"
#include "loom/compute/text/chat_format.hpp"
#include "http_connection.hpp"
#include "llama_routes.hpp"
#include "listener.hpp"
#include "net_logger.hpp"

namespace loom::net {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

constexpr int kEngineThreads = 2;  // the engine's actors (the forward passes have threads of their own)
constexpr auto kConnectionsCloseLimit = std::chrono::seconds(5);

actors::EngineConfig engine_config_for(const GatewayConfig& config) {
  actors::EngineConfig engine;
  engine.model.model_path = config.model;
  engine.model.device = config.device;
  engine.model.arithmetic = compute::parse_device_arithmetic(config.vulkan_arithmetic);  // validate() checked it
  engine.model.tokenizer_path = config.tokenizer;
  engine.model.threads = config.compute_threads;
  engine.scheduler.max_batch_tokens = static_cast<std::size_t>(config.max_batch_tokens);
  if (config.kv_cache_mb > 0) {
    engine.model.kv.budget_bytes = static_cast<std::uint64_t>(config.kv_cache_mb) * 1024 * 1024;
  } else {
    // A loaded server runs many sequences at once: a cache of a few contexts would preempt them in turn.
    engine.model.kv_contexts = GatewayConfig::kKvContextsWhenMemoryUnknown;
    engine.model.kv_auto = compute::KvAutoSize{
        .share = config.kv_cache_percent / 100.0,
        // No more than every sequence that can run at once holding a full context.
        .max_sequences = static_cast<std::int64_t>(std::min(config.max_requests_total, engine.scheduler.max_running)),
        .max_bytes = GatewayConfig::kMaxDefaultKvBytes,
    };
  }
  engine.chat_template = config.chat_template;
  if (!config.chat_template_file.empty()) {
    engine.chat_template_source = compute::read_chat_template_file(config.chat_template_file);
    engine.chat_template_label = config.chat_template_file;
  }
  // Like llama.cpp's server: a model without a template still chats, in ChatML (with a warning in the log).
  engine.fallback_chat_template = "chatml";
  engine.max_prompt_tokens = config.max_prompt_tokens;
  engine.default_timeout = config.request_timeout;
  engine.io_threads = kEngineThreads;
  return engine;
}

// What a request may hold, prompt and output together: the model's context, or less when the KV cache
// cannot hold that much (the engine limits its sequences to the same).
std::int64_t effective_context_length(const actors::LoadResult& result) {
  const auto& info = result.info;
  return std::min(info.config.context_length, info.kv_blocks * info.kv_block_size);
}

// A KV cache smaller than one model context is allowed (a small machine, short chats), but said loudly,
// with the budget that would hold a full context.
void warn_short_context(const actors::LoadResult& result, std::int64_t context_length) {
  const auto& info = result.info;
  const std::int64_t kv_tokens = info.kv_blocks * info.kv_block_size;
  const double bytes_per_token = static_cast<double>(info.kv_bytes) / static_cast<double>(std::max<std::int64_t>(1, kv_tokens));
  const auto full_context_mb = static_cast<std::int64_t>(
      std::ceil(bytes_per_token * static_cast<double>(info.config.context_length) / (1024.0 * 1024.0)));
  logger().warn("the KV cache holds {} tokens, less than the model's context of {}: every request is limited to {} "
                "tokens, prompt and output together (reported as context_length by /health and max_model_len by "
                "/v1/models); a KV cache of at least {} MiB (--kv-cache-mb) holds one full context",
                kv_tokens, info.config.context_length, context_length, full_context_mb);
}

std::int64_t unix_seconds_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

struct Gateway::State : std::enable_shared_from_this<Gateway::State> {
  State(asio::io_context& io_, GatewayConfig config_)
      : io(io_),
        engine(std::make_unique<loom::Engine>(engine_config_for(config_))),
        context(std::make_unique<GatewayContext>(*engine, std::move(config_))),
        listener(io_, *context),
        shutdown_strand(asio::make_strand(io_)) {}

  asio::io_context& io;
  std::unique_ptr<loom::Engine> engine;
  std::unique_ptr<GatewayContext> context;
  Listener listener;
  asio::strand<asio::io_context::executor_type> shutdown_strand;
  // On shutdown_strand:
  bool shutting_down = false;
  std::vector<std::function<void()>> shutdown_done;

  void start_accepting();
  void load_model(std::function<void(std::string error)> on_loaded);
  // The phase and the log once the load answered; returns the error ("" when loaded), or nullopt when the
  // shutdown began first (on_loaded is then not called: the shutdown's own callback ends the story).
  std::optional<std::string> model_loaded(boost::system::error_code ec, const actors::LoadResult& result,
                           std::chrono::steady_clock::time_point started);
  void begin_shutdown(std::function<void()> done);
  void start_draining();
  void drain_engine();
  void finish_shutdown();
};

// Each connection holds the context through a pointer that shares the state's ownership: the engine and
// the context live until the last connection has ended.
void Gateway::State::start_accepting() {
  listener.start([weak = std::weak_ptr<State>(shared_from_this())](tcp::socket socket) {
    if (auto self = weak.lock()) {
      start_http_connection(std::shared_ptr<GatewayContext>(self, self->context.get()), std::move(socket));
    }
  });
}

void Gateway::State::load_model(std::function<void(std::string error)> on_loaded) {
  logger().info("loading model={}{}", context->config.model, context->config.model_is_demo ? " (demo)" : "");
  const auto started = std::chrono::steady_clock::now();
  engine->async_load([weak = std::weak_ptr<State>(shared_from_this()), on_loaded = std::move(on_loaded), started](
                         boost::system::error_code ec, actors::LoadResult result) mutable {
    auto self = weak.lock();
    if (!self) return;
    std::optional<std::string> error = self->model_loaded(ec, result, started);
    if (error && on_loaded) {
      asio::post(self->io, [on_loaded = std::move(on_loaded), error = std::move(*error)] { on_loaded(error); });
    }
    self.reset();  // before the lambda ends on the engine's thread (see drain_engine)
  });
}

std::optional<std::string> Gateway::State::model_loaded(boost::system::error_code ec, const actors::LoadResult& result,
                                         std::chrono::steady_clock::time_point started) {
  auto& ctx = *context;
  if (ctx.phase.load(std::memory_order_acquire) == GatewayPhase::draining) {
    // The shutdown came first: the load was cut short or its model is not wanted; neither is a failure.
    logger().info("the model load ended by the shutdown");
    return std::nullopt;
  }
  std::string error;
  if (ec) {
    error = "the engine did not answer the load: " + ec.message();
  } else if (!result.loaded()) {
    error = result.error;
  }
  GatewayPhase expected = GatewayPhase::loading;
  if (!error.empty()) {
    ctx.phase.compare_exchange_strong(expected, GatewayPhase::failed, std::memory_order_acq_rel);
    logger().error("the model failed to load: {}", error);
    return error;
  }
  ctx.model_id = model_id_for(ctx.config);
  ctx.context_length = effective_context_length(result);
  ctx.embedding_length = result.info.config.dim;
  ctx.created_unix = unix_seconds_now();
  ctx.chat_template = result.chat_template;
  ctx.chat_tool_calls = result.chat_tool_calls;
  ctx.chat_reasoning = result.chat_reasoning;
  ctx.tokenizer = result.tokenizer;
  ctx.model_meta = model_meta(result.info, ctx.context_length, result.tokenizer.get());
  ctx.phase.compare_exchange_strong(expected, GatewayPhase::ready, std::memory_order_acq_rel);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  logger().info("model loaded model_id={} context_length={} kv_blocks={} load_ms={} device=\"{}\"", ctx.model_id,
                ctx.context_length, result.info.kv_blocks, ms.count(), result.info.device);
  if (!result.info.kv_sizing.empty()) logger().info("kv cache: {}", result.info.kv_sizing);
  if (ctx.context_length < result.info.config.context_length) warn_short_context(result, ctx.context_length);
  return error;
}

void Gateway::State::begin_shutdown(std::function<void()> done) {
  asio::post(shutdown_strand, [self = shared_from_this(), done = std::move(done)]() mutable {
    self->shutdown_done.push_back(std::move(done));
    if (self->shutting_down) return;
    self->shutting_down = true;
    self->start_draining();
    self->drain_engine();
  });
}

// No new connections, new requests refused, every connection told.
void Gateway::State::start_draining() {
  auto& ctx = *context;
  logger().info("shutting down: no new connections; in-flight requests have {} ms", ctx.config.shutdown_grace.count());
  if (ctx.phase.load() != GatewayPhase::failed) ctx.phase.store(GatewayPhase::draining, std::memory_order_release);
  asio::post(listener.executor(), [self = shared_from_this()] { self->listener.close(); });
  ctx.shutdown.notify_all();
}

// The engine finishes what runs; past the grace period it cancels the rest.
void Gateway::State::drain_engine() {
  auto grace = std::make_shared<asio::steady_timer>(shutdown_strand, context->config.shutdown_grace);
  grace->async_wait([self = shared_from_this()](boost::system::error_code ec) {
    if (ec) return;
    logger().warn("shutdown grace period over: cancelling the requests still running");
    self->engine->async_shutdown(loom::Engine::ShutdownMode::cancel, [](boost::system::error_code, bool) {});
  });
  // Engine callbacks run on the engine's own threads and hold the state only weakly: the last owner of
  // the state (and so of the engine) must never be one of the engine's threads.
  engine->async_shutdown(loom::Engine::ShutdownMode::drain,
                         [weak = std::weak_ptr<State>(shared_from_this()), grace](boost::system::error_code, bool) {
                           if (auto locked = weak.lock()) {
                             auto strand = locked->shutdown_strand;
                             locked.reset();
                             asio::post(strand, [weak, grace] {
                               grace->cancel();
                               if (auto state = weak.lock()) state->finish_shutdown();
                             });
                           }
                         });
}

// The engine has stopped and every request had its last event; connections are finishing their writes
// and WebSockets closing with 1001. Wait for them (bounded), then report.
void Gateway::State::finish_shutdown() {
  auto deadline = std::chrono::steady_clock::now() + kConnectionsCloseLimit;
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
  if (config.model.empty()) throw std::invalid_argument("model: no model file given");
  state_ = std::make_shared<State>(io, std::move(config));
}

Gateway::~Gateway() = default;

void Gateway::start(std::function<void(std::string error)> on_loaded) {
  state_->listener.listen(state_->context->config.host, state_->context->config.port);
  state_->start_accepting();
  state_->load_model(std::move(on_loaded));
}

tcp::endpoint Gateway::local_endpoint() const { return state_->listener.local_endpoint(); }

void Gateway::async_shutdown(std::function<void()> done) { state_->begin_shutdown(std::move(done)); }

}  // namespace loom::net
