// EngineActor: the actor behind loom::Engine (engine.hpp). It owns the other actors (it spawns the
// executor and, once a model is loaded, the cache manager, the scheduler and the thermal monitor), keeps the
// registry of sessions and of running requests (for routing, cancel, and refusing duplicate ids), hands
// out sequence ids, and gathers stats. Applications use loom::Engine; the actor's messages are its protocol.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <variant>

#include <boost/asio/thread_pool.hpp>

#include "loom/actors/actor.hpp"
#include "loom/actors/cache_manager_actor.hpp"
#include "loom/actors/executor_backend.hpp"
#include "loom/actors/gpu_executor_actor.hpp"
#include "loom/actors/reply.hpp"
#include "loom/actors/scheduler_actor.hpp"
#include "loom/actors/session_actor.hpp"
#include "loom/actors/thermal_monitor_actor.hpp"
#include "loom/actors/thermal_provider.hpp"
#include "loom/proto/generate_request.hpp"
#include "loom/proto/server_message.hpp"
#include "loom/proto/session_open.hpp"

namespace loom::actors {

struct EngineConfig {
  LoadOptions model;                          // what async_load loads
  SchedulerConfig scheduler;                  // context_length is filled in from the model at load
  std::string chat_template;                  // a template name (chat_template.hpp); empty: from the model
  std::string fallback_chat_template;         // used when the model has none loom recognises; empty: chat
                                              // requests are then refused as unsupported
  // Thermal monitoring: none (always nominal) unless a provider is given.
  std::shared_ptr<const ThermalProvider> thermal_provider;
  ThermalMonitorConfig thermal;
  std::size_t max_sessions = 1024;            // open sessions at most (stand-alone requests not counted)
  std::chrono::milliseconds default_timeout{0};  // per request when GenerateOptions gives none; 0: none
  std::int64_t max_prompt_tokens = 0;         // a prompt after templating, at most; 0: the context bounds it
  int io_threads = 2;                         // threads of the Engine's own pool (Engine(Config) only)
  BackendFactory backend_factory;             // empty: the CPU LlamaBackend (tests inject faults here)

  // Throws std::invalid_argument naming the field.
  void validate() const;
};

struct GenerateOptions {
  std::optional<std::chrono::milliseconds> timeout;  // ends the request with reason timeout past it
};

enum class ShutdownMode {
  drain,   // running and waiting requests finish normally
  cancel,  // they end at once with reason cancelled
};

struct EngineStats {
  bool model_loaded = false;
  std::size_t sessions = 0;             // open sessions (stand-alone requests not counted)
  std::size_t active_requests = 0;      // accepted, not yet done
  std::uint64_t requests_accepted = 0;   // passed the engine's checks and went to their session
  std::uint64_t requests_refused = 0;    // answered by an error event (by the engine, a session or the scheduler)
  std::uint64_t requests_completed = 0;  // ended by a done event, whatever its reason
  SchedulerStats scheduler;             // queue depth, batch size, tokens/s, TTFT and inter-token histograms
  CacheManagerStats cache;              // KV blocks in use, cached, free
  ExecutorStats executor;
  ThermalState thermal = ThermalState::nominal;
  double kv_usage() const noexcept;     // blocks in use (not merely cached) over all blocks, 0..1
};

// ---- The protocol ----

struct EngineLoad {
  Reply<LoadResult> reply;
};
struct EngineOpenSession {
  proto::SessionOpen open;
  Reply<proto::ServerMessage> reply;  // SessionOpened or ErrorEvent
};
struct EngineCloseSession {
  std::string session_id;
};
struct EngineGenerate {
  proto::GenerateRequest request;
  ClientSink sink;
  GenerateOptions options;
  std::chrono::steady_clock::time_point accepted = std::chrono::steady_clock::now();
};
struct EngineCancel {
  std::string request_id;
};
struct GetEngineStats {
  Reply<EngineStats> reply;
};
struct EngineShutdown {
  ShutdownMode mode = ShutdownMode::cancel;
  Reply<bool> reply;
};

namespace engine_detail {
// A request's last event went out (done or error), told by the wrapper around its sink on the session's
// strand: forget the request; a stand-alone session, or one closed meanwhile, stops.
struct RequestEnded {
  std::string request_id;
  bool refused = false;  // it was an error event
};
// Every child actor has stopped after a shutdown: answer the shutdown.
struct ChildrenStopped {};
}  // namespace engine_detail

using EngineProtocol = std::variant<EngineLoad, EngineOpenSession, EngineCloseSession, EngineGenerate, EngineCancel,
                                    GetEngineStats, EngineShutdown, engine_detail::RequestEnded,
                                    engine_detail::ChildrenStopped>;

class EngineActor : public Actor<EngineActor, EngineProtocol> {
 public:
  // Throws std::invalid_argument for a config validate() refuses.
  explicit EngineActor(EngineConfig config);
  ~EngineActor();

  void on_start();
  void on_stop();
  void on(EngineLoad m);
  void on(EngineOpenSession m);
  void on(EngineCloseSession m);
  void on(EngineGenerate m);
  void on(EngineCancel m);
  void on(GetEngineStats m);
  void on(EngineShutdown m);
  void on(engine_detail::RequestEnded m);
  void on(engine_detail::ChildrenStopped m);

 private:
  struct State;  // children handles, registries, counters (engine_actor.cpp)
  struct SessionEntry;

  void on_loaded(LoadResult result);
  void refuse(ClientSink& sink, const std::string& request_id, proto::ErrorCode code, std::string message,
              std::string field = {});
  SessionEntry& add_session(std::string session_id, std::optional<std::string> system_prompt, bool standalone);
  void release_session(std::uint64_t serial);
  void begin_shutdown();
  void stop_children();

  std::unique_ptr<State> state_;
};

}  // namespace loom::actors
