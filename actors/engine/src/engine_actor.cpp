#include "loom/actors/engine/engine_actor.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <utility>
#include <vector>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/thread_pool.hpp>

#include "chat_format_choice.hpp"
#include "chat_prompt.hpp"
#include "loom/actors/engine/cache_manager_actor.hpp"
#include "embedding_job.hpp"
#include "request_tracker.hpp"
#include "loom/actors/engine/gpu_executor_actor.hpp"
#include "loom/actors/engine/scheduler_actor.hpp"
#include "loom/actors/engine/session_actor.hpp"
#include "loom/actors/engine/thermal_monitor_actor.hpp"
#include "loom/actors/runtime/logger.hpp"
#include "loom/compute/text/chat_format.hpp"
#include "loom/compute/text/chat_template.hpp"
#include "loom/compute/text/reply_format.hpp"

namespace loom::actors {

namespace {

using namespace std::chrono_literals;

// Loads and drains take as long as they take (a large model, a long generation); the actors answer them
// in any case (a stopped actor answers no_reply), so these bounds only keep a timer from being endless.
constexpr auto kLoadTimeout = std::chrono::hours(24);
constexpr auto kDrainTimeout = std::chrono::hours(24);
// Stats are answered on the children's strands, never behind a computation.
constexpr auto kStatsTimeout = 10s;

proto::ErrorEvent error_event(const std::string& request_id, proto::ErrorCode code, std::string message,
                              std::string field = {}) {
  proto::ErrorEvent event;
  event.request_id = request_id;
  event.code = code;
  event.message = std::move(message);
  event.field = std::move(field);
  return event;
}

}  // namespace

// ---- EngineActor ----

struct EngineActor::SessionEntry {
  std::uint64_t serial = 0;
  std::string session_id;     // the client's name for it; for a stand-alone request's session, "request:<id>"
  bool standalone = false;
  bool closing = false;       // closed, or stand-alone: released as soon as no request of it is in flight
  std::size_t in_flight = 0;  // requests handed to it whose last event has not passed yet
  ActorHandle<SessionProtocol> handle;
};

struct EngineActor::State {
  enum class Model { none, loading, loaded };
  enum class Phase { running, draining, stopping, stopped };

  explicit State(EngineConfig c) : config(std::move(c)) {}

  ~State() {
    // Sessions first (they hold the scheduler's address only), then the rest; releasing a handle stops its
    // actor. The thermal monitor's reads run on thermal_pool: the pool may go only once the monitor has
    // stopped, so it travels with the stop's completion (where nothing can post to it any more).
    sessions.clear();
    scheduler = {};
    if (thermal) {
      thermal.async_stop([pool = std::move(thermal_pool)]() mutable { pool.reset(); });
      thermal = {};
    }
    cache = {};
    executor = {};
  }

  EngineConfig config;
  asio::any_io_executor io;

  ActorHandle<GpuExecutorProtocol> executor;
  ActorHandle<CacheManagerProtocol> cache;
  ActorHandle<SchedulerProtocol> scheduler;
  ActorHandle<ThermalMonitorProtocol> thermal;
  std::shared_ptr<asio::thread_pool> thermal_pool;  // one thread for the monitor's blocking reads
  std::shared_ptr<const SessionContext> context;
  compute::Pooling pooling = compute::Pooling::mean;  // the loaded model's, for embeddings

  Model model = Model::none;
  std::optional<Reply<LoadResult>> load_reply;

  std::map<std::uint64_t, SessionEntry> sessions;                 // by serial, named and stand-alone
  std::unordered_map<std::string, std::uint64_t> named_sessions;  // open sessions by id
  std::unordered_map<std::string, std::uint64_t> requests;        // request id -> its session's serial
  EmbeddingJobs embeddings;                                       // embedding requests with an id

  std::uint64_t next_serial = 1;
  cache::SequenceId next_sequence = 1;
  std::uint64_t next_session_name = 1;
  std::uint64_t accepted = 0;
  std::uint64_t refused = 0;
  std::uint64_t completed = 0;

  Phase phase = Phase::running;
  std::vector<Reply<bool>> shutdown_replies;
};

EngineActor::EngineActor(EngineConfig config) {
  config.validate();
  state_ = std::make_unique<State>(std::move(config));
}

EngineActor::~EngineActor() = default;

void EngineActor::on_start() {
  auto& s = *state_;
  s.io = strand().get_inner_executor();
  compute::BackendFactory factory = s.config.backend_factory;
  s.executor = spawn<GpuExecutorActor>(s.io, {.name = "gpu-executor"}, std::move(factory));
}

void EngineActor::on_stop() {}

void EngineActor::on(EngineLoad m) {
  auto& s = *state_;
  LoadResult refusal;
  if (s.phase != State::Phase::running) {
    refusal.error = "the engine is shutting down";
  } else if (s.model == State::Model::loading) {
    refusal.error = "a model is already being loaded";
  } else if (s.model == State::Model::loaded) {
    refusal.error = "a model is already loaded (an engine loads one model, once)";
  }
  if (!refusal.error.empty()) {
    m.reply(std::move(refusal));
    return;
  }
  s.model = State::Model::loading;
  s.load_reply = std::move(m.reply);
  LoadModel request{s.config.model, {}};
  ask(s.executor.address(), std::move(request), kLoadTimeout, [this](error_code ec, LoadResult result) {
    if (ec) {
      result = {};
      result.error = "the executor did not answer the load: " + ec.message();
    }
    on_loaded(std::move(result));
  });
}

void EngineActor::on_loaded(LoadResult result) {
  auto& s = *state_;
  s.model = State::Model::none;
  auto reply = std::move(*s.load_reply);
  s.load_reply.reset();
  if (s.phase != State::Phase::running && result.loaded()) result.error = "the engine began shutting down during the load";
  if (!result.loaded()) {
    reply(std::move(result));
    return;
  }
  try {
    const auto& info = result.info;
    if (info.kv_blocks <= 0 || info.kv_block_size <= 0) throw std::runtime_error("the backend reports no KV blocks");
    if (!result.tokenizer) throw std::runtime_error("the backend reports no tokenizer");
    std::int64_t context_length = std::min(info.config.context_length, info.kv_blocks * info.kv_block_size);
    if (s.config.scheduler.context_length > 0) context_length = std::min(context_length, s.config.scheduler.context_length);
    SchedulerConfig scheduler_config = s.config.scheduler;
    scheduler_config.context_length = context_length;
    scheduler_config.validate();

    const auto chat_format = choose_chat_format(s.config, info, *result.tokenizer);
    if (chat_format) {
      result.chat_template = chat_format->description();
      if (!chat_format->source().empty()) {
        const auto family = compute::detect_reply_format(chat_format->source());
        result.chat_tool_calls = family.tools != compute::ToolCallFormat::none;
        result.chat_reasoning = !family.reasoning_open.empty();
      }
    }

    cache::BlockManagerConfig blocks;
    blocks.block_count = static_cast<std::size_t>(info.kv_blocks);
    blocks.block_size = static_cast<std::size_t>(info.kv_block_size);
    s.cache = spawn<CacheManagerActor>(s.io, {.name = "cache-manager"}, blocks);
    s.scheduler = spawn<SchedulerActor>(s.io, {.name = "scheduler"}, scheduler_config, s.cache.address(),
                                        s.executor.address());
    if (s.config.thermal_provider) {
      s.thermal_pool = std::make_shared<asio::thread_pool>(1);
      ThermalSink sink = [scheduler = s.scheduler.address()](ThermalStateChanged change) {
        scheduler.tell(std::move(change));
      };
      s.thermal = spawn<ThermalMonitorActor>(s.io, {.name = "thermal-monitor"}, s.config.thermal_provider,
                                             std::move(sink), asio::any_io_executor(s.thermal_pool->get_executor()),
                                             s.config.thermal);
    }
    s.context = std::make_shared<const SessionContext>(
        SessionContext{result.tokenizer, chat_format, context_length, s.scheduler.address(),
                       s.config.max_prompt_tokens});
    s.pooling = info.config.pooling;
    s.model = State::Model::loaded;
    logger().info("actor={} engine ready context_length={} kv_blocks={} kv_block_size={} chat_template={}", name(),
                  context_length, info.kv_blocks, info.kv_block_size,
                  chat_format ? chat_format->description() : std::string("none"));
  } catch (const std::exception& e) {
    s.thermal = {};
    s.thermal_pool.reset();
    s.scheduler = {};
    s.cache = {};
    result.error = e.what();
    logger().error("actor={} load refused error=\"{}\"", name(), result.error);
  }
  reply(std::move(result));
}

EngineActor::SessionEntry& EngineActor::add_session(std::string session_id, std::optional<std::string> system_prompt,
                                                    bool standalone) {
  auto& s = *state_;
  const std::uint64_t serial = s.next_serial++;
  SessionEntry entry;
  entry.serial = serial;
  entry.session_id = session_id;
  entry.standalone = standalone;
  entry.closing = standalone;
  SessionOptions options;
  options.session_id = std::move(session_id);
  options.system_prompt = std::move(system_prompt);
  entry.handle = spawn<SessionActor>(s.io, {.name = "session:" + entry.session_id}, s.context, std::move(options));
  if (!standalone) s.named_sessions.emplace(entry.session_id, serial);
  return s.sessions.emplace(serial, std::move(entry)).first->second;
}

void EngineActor::release_session(std::uint64_t serial) {
  auto& s = *state_;
  auto it = s.sessions.find(serial);
  if (it == s.sessions.end()) return;
  // A closed session was told CloseSession when it was closed; a stand-alone one is told now. Releasing the
  // handle stops the actor after what it has already accepted.
  if (it->second.standalone) it->second.handle.tell(CloseSession{});
  s.sessions.erase(it);
}

void EngineActor::on(EngineOpenSession m) {
  auto& s = *state_;
  auto refuse_open = [&](proto::ErrorCode code, std::string message, std::string field = {}) {
    m.reply(error_event({}, code, std::move(message), std::move(field)));
  };
  if (s.phase != State::Phase::running) return refuse_open(proto::ErrorCode::unavailable, "the engine is shutting down");
  if (s.model != State::Model::loaded) return refuse_open(proto::ErrorCode::unavailable, "no model is loaded yet");
  std::string id;
  if (m.open.session_id) {
    id = *m.open.session_id;
    if (id.empty()) return refuse_open(proto::ErrorCode::invalid_request, "the session id is empty", "session_id");
    if (s.named_sessions.contains(id)) {
      return refuse_open(proto::ErrorCode::conflict, "session '" + id + "' is already open", "session_id");
    }
  }
  if (s.named_sessions.size() >= s.config.max_sessions) {
    return refuse_open(proto::ErrorCode::overloaded,
                       "too many open sessions (at most " + std::to_string(s.config.max_sessions) + ")");
  }
  if (id.empty()) {
    do {
      id = "session-" + std::to_string(s.next_session_name++);
    } while (s.named_sessions.contains(id));
  }
  add_session(id, std::move(m.open.system_prompt), false);
  m.reply(proto::SessionOpened{id});
}

void EngineActor::on(EngineCloseSession m) {
  auto& s = *state_;
  auto named = s.named_sessions.find(m.session_id);
  if (named == s.named_sessions.end()) return;
  const std::uint64_t serial = named->second;
  s.named_sessions.erase(named);
  auto& entry = s.sessions.at(serial);
  // The session cancels its running request, sends its done event and stops; until that event has passed
  // it must stay alive, so its handle is kept until then.
  entry.handle.tell(CloseSession{});
  entry.closing = true;
  if (entry.in_flight == 0) release_session(serial);
}

void EngineActor::on(EngineResetSession m) {
  auto& s = *state_;
  auto named = s.named_sessions.find(m.session_id);
  if (named == s.named_sessions.end()) {
    m.reply(error_event({}, proto::ErrorCode::not_found, "no open session '" + m.session_id + "'", "session_id"));
    return;
  }
  // The session answers: it alone knows whether a request is running.
  s.sessions.at(named->second).handle.tell(ResetSession{std::move(m.reply)});
}

void EngineActor::refuse(ClientSink& sink, const std::string& request_id, proto::ErrorCode code, std::string message,
                         std::string field) {
  ++state_->refused;
  if (sink) sink(error_event(request_id, code, std::move(message), std::move(field)));
}

void EngineActor::on(EngineGenerate m) {
  auto& s = *state_;
  const std::string& id = m.request.id;
  if (s.phase != State::Phase::running) {
    return refuse(m.sink, id, proto::ErrorCode::unavailable, "the engine is shutting down");
  }
  if (s.model != State::Model::loaded) return refuse(m.sink, id, proto::ErrorCode::unavailable, "no model is loaded yet");
  if (id.empty()) return refuse(m.sink, id, proto::ErrorCode::invalid_request, "the request id is empty", "id");
  if (s.requests.contains(id) || s.embeddings.contains(id)) {
    return refuse(m.sink, id, proto::ErrorCode::conflict, "request '" + id + "' is still running", "id");
  }
  SessionEntry* session = nullptr;
  if (m.request.session_id) {
    auto named = s.named_sessions.find(*m.request.session_id);
    if (named == s.named_sessions.end()) {
      return refuse(m.sink, id, proto::ErrorCode::not_found, "no open session '" + *m.request.session_id + "'",
                    "session_id");
    }
    session = &s.sessions.at(named->second);
  } else {
    session = &add_session("request:" + id, std::nullopt, true);
  }
  ++session->in_flight;
  s.requests.emplace(id, session->serial);
  ++s.accepted;

  std::optional<std::chrono::steady_clock::time_point> deadline;
  const auto timeout = m.options.timeout.value_or(s.config.default_timeout);
  if (timeout.count() > 0) deadline = m.accepted + timeout;

  auto tracker = std::make_shared<RequestTracker>(
      continuation("RequestEnded", [this](std::string request_id, bool refused) { request_ended(request_id, refused); }),
      id, std::move(m.sink));
  SessionGenerate generate;
  generate.sequence = s.next_sequence;
  // A request with n choices takes n ids: the session's choice i is sequence + i.
  s.next_sequence += static_cast<cache::SequenceId>(std::max<std::int32_t>(1, m.request.n));
  generate.request = std::move(m.request);
  generate.sink = [tracker](proto::ServerMessage event) { (*tracker)(std::move(event)); };
  generate.deadline = deadline;
  generate.accepted = m.accepted;
  tracker.reset();  // the sink is now its only owner: when the session drops the sink, the tracker notices
  session->handle.tell(std::move(generate));
}

void EngineActor::on(EngineEmbed m) {
  auto& s = *state_;
  const std::string id = m.request.id;
  const auto refuse_embed = [&](std::string message, proto::ErrorCode code = proto::ErrorCode::unavailable) {
    EmbedResult refused;
    refused.error = error_event(id, code, std::move(message));
    m.reply(std::move(refused));
  };
  if (s.phase != State::Phase::running) return refuse_embed("the engine is shutting down");
  if (s.model != State::Model::loaded) return refuse_embed("no model is loaded yet");
  if (!id.empty() && (s.requests.contains(id) || s.embeddings.contains(id))) {
    return refuse_embed("request '" + id + "' is still running", proto::ErrorCode::conflict);
  }
  EmbeddingJobContext context{s.context, s.pooling, s.next_sequence, {}};
  if (!id.empty()) {
    const std::uint64_t serial = s.embeddings.add(id, s.next_sequence, m.request.inputs.size());
    context.ended = continuation("EmbeddingEnded", [this, id, serial] { state_->embeddings.ended(id, serial); });
  }
  s.next_sequence += m.request.inputs.size();
  start_embedding_job(std::move(m.request), std::move(m.reply), context);
}

void EngineActor::on(EngineCancel m) {
  auto& s = *state_;
  if (s.context && s.embeddings.cancel(m.request_id, s.context->scheduler)) return;
  auto request = s.requests.find(m.request_id);
  if (request == s.requests.end()) return;
  auto session = s.sessions.find(request->second);
  if (session == s.sessions.end()) return;
  session->second.handle.tell(SessionCancel{m.request_id});
}

void EngineActor::request_ended(const std::string& request_id, bool refused) {
  auto& s = *state_;
  auto request = s.requests.find(request_id);
  if (request == s.requests.end()) return;
  const std::uint64_t serial = request->second;
  s.requests.erase(request);
  ++(refused ? s.refused : s.completed);
  auto session = s.sessions.find(serial);
  if (session == s.sessions.end()) return;
  auto& entry = session->second;
  if (entry.in_flight > 0) --entry.in_flight;
  if (entry.closing && entry.in_flight == 0) release_session(serial);
}

void EngineActor::on(EngineApplyTemplate m) {
  const auto& s = *state_;
  const auto refuse_render = [&](proto::ErrorCode code, std::string message) {
    m.reply(AppliedTemplate{.prompt = {}, .prompt_tokens = 0, .error = error_event(m.request.id, code, std::move(message), {})});
  };
  if (s.model != State::Model::loaded) return refuse_render(proto::ErrorCode::unavailable, "no model is loaded yet");
  if (!s.context->chat_format) return refuse_render(proto::ErrorCode::unsupported, "the model has no chat template");
  try {
    // Here on the engine's strand, as a session renders on its own: the input is bounded by the gateway's
    // parse limits, and a rendering takes what a request's does.
    m.reply(detail::apply_template(*s.context->chat_format, *s.context->tokenizer, m.request));
  } catch (const std::exception& e) {
    refuse_render(proto::ErrorCode::internal, std::string("rendering the chat template failed: ") + e.what());
  }
}

void EngineActor::on(GetEngineStats m) {
  auto& s = *state_;
  struct Gather {
    EngineStats stats;
    int pending = 0;
    Reply<EngineStats> reply;
    void one_done() {
      if (--pending == 0) reply(std::move(stats));
    }
  };
  auto gather = std::make_shared<Gather>();
  auto& stats = gather->stats;
  stats.model_loaded = s.model == State::Model::loaded && s.phase != State::Phase::stopped;
  stats.sessions = s.named_sessions.size();
  stats.active_requests = s.requests.size();
  stats.requests_accepted = s.accepted;
  stats.requests_refused = s.refused;
  stats.requests_completed = s.completed;
  stats.bookkeeping.requests = s.requests.size();
  stats.bookkeeping.sessions = s.sessions.size();
  stats.bookkeeping.named_sessions = s.named_sessions.size();
  stats.bookkeeping.embeddings = s.embeddings.size();
  gather->reply = std::move(m.reply);

  // What each child knows, asked together; a child that does not answer leaves its part at the defaults.
  gather->pending = 1;  // this handler's own share, so the reply cannot go before every ask is out
  if (s.executor) {
    ++gather->pending;
    ask(s.executor.address(), GetExecutorStats{}, kStatsTimeout, [gather](error_code ec, ExecutorStats executor) {
      if (!ec) gather->stats.executor = std::move(executor);
      gather->one_done();
    });
  }
  if (s.scheduler) {
    ++gather->pending;
    ask(s.scheduler.address(), GetSchedulerStats{}, kStatsTimeout, [gather](error_code ec, SchedulerStats scheduler) {
      if (!ec) {
        gather->stats.thermal = scheduler.thermal;
        gather->stats.scheduler = std::move(scheduler);
      }
      gather->one_done();
    });
  }
  if (s.cache) {
    ++gather->pending;
    ask(s.cache.address(), GetCacheStats{}, kStatsTimeout, [gather](error_code ec, CacheManagerStats cache) {
      if (!ec) gather->stats.cache = std::move(cache);
      gather->one_done();
    });
  }
  gather->one_done();
}

void EngineActor::on(EngineShutdown m) {
  auto& s = *state_;
  if (s.phase == State::Phase::stopped) {
    m.reply(true);
    return;
  }
  s.shutdown_replies.push_back(std::move(m.reply));
  const bool cancel = m.mode == ShutdownMode::cancel;
  if (s.phase != State::Phase::running) {
    // Already shutting down. A cancel during a drain cancels what is still running, through the sessions.
    if (cancel && s.phase == State::Phase::draining) {
      for (const auto& [request_id, serial] : s.requests) {
        if (auto session = s.sessions.find(serial); session != s.sessions.end()) {
          session->second.handle.tell(SessionCancel{request_id});
        }
      }
    }
    return;
  }
  s.phase = State::Phase::draining;
  logger().info("actor={} shutting down mode={} active_requests={}", name(), cancel ? "cancel" : "drain",
                s.requests.size());
  if (s.model != State::Model::loaded) {
    // Nothing runs without a model; a load in flight ends when the executor stops (its reply: no_reply).
    stop_children();
    return;
  }
  // A session hands a request to the scheduler when it handles it, on its own strand. A round trip through
  // every session with a request in flight first means their submits are in the scheduler's mailbox before
  // the drain is, so an accepted request is drained (or cancelled), never refused by the draining scheduler.
  auto pending = std::make_shared<std::size_t>(1);
  auto drain_when_flushed = [this, pending, cancel] {
    if (--*pending > 0) return;
    DrainScheduler drain{cancel, {}};
    ask(state_->scheduler.address(), std::move(drain), kDrainTimeout, [this](error_code ec, bool) {
      if (ec) logger().warn("actor={} the scheduler's drain failed error=\"{}\"; stopping anyway", name(), ec.message());
      stop_children();
    });
  };
  for (const auto& [serial, entry] : s.sessions) {
    if (entry.in_flight == 0) continue;
    ++*pending;
    ask(entry.handle.address(), GetSessionInfo{}, kStatsTimeout,
        [drain_when_flushed](error_code, SessionInfo) mutable { drain_when_flushed(); });
  }
  drain_when_flushed();
}

void EngineActor::stop_children() {
  auto& s = *state_;
  if (s.phase == State::Phase::stopping || s.phase == State::Phase::stopped) return;
  s.phase = State::Phase::stopping;
  std::size_t children = s.sessions.size();
  for (bool present : {bool(s.scheduler), bool(s.thermal), bool(s.cache), bool(s.executor)}) children += present;
  if (children == 0) {
    children_stopped();
    return;
  }
  // Counted on this strand (the completions are bound to it); the last one continues the engine's work,
  // by a continuation, so nothing here touches the actor if it has gone meanwhile.
  auto remaining = std::make_shared<std::size_t>(children);
  auto one_stopped = asio::bind_executor(
      strand(), [remaining, done = continuation("ChildrenStopped", [this] { children_stopped(); })] {
        if (--*remaining == 0) done();
      });
  for (const auto& [serial, entry] : s.sessions) entry.handle.async_stop(one_stopped);
  if (s.scheduler) s.scheduler.async_stop(one_stopped);
  if (s.thermal) s.thermal.async_stop(one_stopped);
  if (s.cache) s.cache.async_stop(one_stopped);
  if (s.executor) s.executor.async_stop(one_stopped);
}

void EngineActor::children_stopped() {
  auto& s = *state_;
  if (s.phase != State::Phase::stopping) return;
  s.phase = State::Phase::stopped;
  s.sessions.clear();
  s.named_sessions.clear();
  s.context.reset();
  s.scheduler = {};
  s.thermal = {};
  s.thermal_pool.reset();  // the monitor has stopped: joining its read thread waits at most for one read
  s.cache = {};
  s.executor = {};
  s.model = State::Model::none;
  logger().info("actor={} shut down", name());
  auto replies = std::move(s.shutdown_replies);
  for (auto& reply : replies) reply(true);
}

}  // namespace loom::actors
