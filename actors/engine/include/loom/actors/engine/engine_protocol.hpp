// The EngineActor's messages (engine_actor.hpp has the actor), which loom::Engine (loom/engine.hpp) sends:
// load, open, close and reset sessions, generate, embed, cancel, stats, shutdown; and the engine's configuration and
// stats. Like every protocol header it includes messages and value types, never an actor's implementation
// or a compute kernel, so that an application embedding the engine compiles against a small surface.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "loom/actors/engine/bookkeeping.hpp"
#include "loom/actors/engine/cache_manager_protocol.hpp"
#include "loom/actors/engine/embedding_protocol.hpp"
#include "loom/actors/engine/gpu_executor_protocol.hpp"
#include "loom/actors/engine/scheduler_protocol.hpp"
#include "loom/actors/engine/session_protocol.hpp"
#include "loom/actors/engine/thermal_monitor_protocol.hpp"
#include "loom/actors/engine/thermal_provider.hpp"
#include "loom/actors/runtime/reply.hpp"
#include "loom/compute/backend.hpp"
#include "loom/proto/generate_request.hpp"
#include "loom/proto/server_message.hpp"
#include "loom/proto/session_open.hpp"

namespace loom::actors {

struct EngineConfig {
  compute::LoadOptions model;                          // what async_load loads
  SchedulerConfig scheduler;                  // context_length is filled in from the model at load
  // How chat messages become a prompt (compute/text/chat_format.hpp), first that applies: a built-in
  // layout by name (chat_template.hpp); Jinja text given here (e.g. read from --chat-template-file); the
  // model's own tokenizer.chat_template; the fallback built-in (logged as a warning). With none of them,
  // chat requests are refused as unsupported.
  std::string chat_template;                  // a built-in name, overriding the model's template
  std::string chat_template_source;           // Jinja text, overriding the model's template
  std::string chat_template_label = "the configured chat template";  // names it in errors and logs
  std::string fallback_chat_template;         // a built-in name for a model without a template
  // Thermal monitoring: none (always nominal) unless a provider is given.
  std::shared_ptr<const ThermalProvider> thermal_provider;
  ThermalMonitorConfig thermal;
  std::size_t max_sessions = 1024;            // open sessions at most (stand-alone requests not counted)
  std::chrono::milliseconds default_timeout{0};  // per request when GenerateOptions gives none; 0: none
  std::int64_t max_prompt_tokens = 0;         // a prompt after templating, at most; 0: the context bounds it
  int io_threads = 2;                         // threads of the Engine's own pool (Engine(Config) only)
  compute::BackendFactory backend_factory;             // empty: load_backend(), the device LoadOptions names (tests inject faults here)

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
  EngineBookkeeping bookkeeping;        // the engine actor's own registries (the children's are in theirs)
  double kv_usage() const noexcept;     // blocks in use (not merely cached) over all blocks, 0..1
  // Every per-request and per-session structure of the engine and its actors, by stable name:
  // engine.requests, engine.sessions, engine.named_sessions, engine.embeddings, scheduler.sequences, scheduler.waiting,
  // scheduler.running, scheduler.fairness_keys, scheduler.step_plan, scheduler.drain_replies,
  // cache.sequences, executor.sequences, executor.pending_jobs. Each is back at its idle value (0, or the
  // open sessions for the session entries) once the requests have ended.
  std::vector<BookkeepingEntry> bookkeeping_entries() const;
};

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
struct EngineResetSession {
  std::string session_id;
  Reply<proto::ServerMessage> reply;  // SessionResetDone, or ErrorEvent (not_found, conflict while generating)
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
struct EngineEmbed {
  EmbedRequest request;
  Reply<EmbedResult> reply;
};
struct GetEngineStats {
  Reply<EngineStats> reply;
};
// A chat request's prompt as the engine renders it for a stand-alone request (no session history or system
// prompt; nothing dropped): the chat template applied with the same code as a request's, and its tokens
// counted as the request's usage.prompt_tokens counts them.
struct AppliedTemplate {
  std::string prompt;                      // the rendered text
  std::int32_t prompt_tokens = 0;          // its tokens (BOS included when the vocabulary adds one)
  std::optional<proto::ErrorEvent> error;  // instead: why not (no model, no template, a template error)
};
struct EngineApplyTemplate {
  proto::GenerateRequest request;  // with messages; tools, tool_choice and chat_template_kwargs as a request's
  Reply<AppliedTemplate> reply;
};
struct EngineShutdown {
  ShutdownMode mode = ShutdownMode::cancel;
  Reply<bool> reply;
};

using EngineProtocol = std::variant<EngineLoad, EngineOpenSession, EngineCloseSession, EngineResetSession,
                                    EngineGenerate, EngineCancel, GetEngineStats, EngineShutdown, EngineEmbed,
                                    EngineApplyTemplate>;

}  // namespace loom::actors
