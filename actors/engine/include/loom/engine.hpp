// loom::Engine: the engine as an application embeds it. It spawns the engine's actors (executor, cache
// manager, scheduler, thermal monitor, one session actor per conversation) on an executor the application
// gives it, or on its own thread pool, and offers a small API: load a model, open, close and reset sessions,
// generate (events by callback, or as a stream a coroutine awaits; progress events when the request asks),
// embed, apply a chat template, cancel, stats and shutdown.
//
// Every method is safe to call from any thread and never blocks; results come back as Asio completions
// (callbacks, asio::use_future, asio::use_awaitable) or as events. The forward passes run on the executor's
// own compute threads, never on the application's io_context.
//
// Requests: a GenerateRequest with a session_id continues that session (opened with open_session);
// without one it runs in a session of its own with no history. Every accepted request gets its token events
// then exactly one done event; a refused one gets exactly one error event (invalid_request, not_found for
// an unknown session, conflict for a request id still running or a session already generating, overloaded
// when the waiting queue is full, unavailable before a model is loaded or after shutdown began).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/thread_pool.hpp>

#include "loom/actors/engine/engine_protocol.hpp"
#include "loom/actors/engine/event_stream.hpp"
#include "loom/actors/runtime/actor.hpp"
#include "loom/proto/generate_request.hpp"
#include "loom/proto/server_message.hpp"
#include "loom/proto/session_open.hpp"

namespace loom {

class Engine {
 public:
  using Config = actors::EngineConfig;
  using Stats = actors::EngineStats;
  using EventHandler = actors::ClientSink;
  using GenerateOptions = actors::GenerateOptions;
  using ShutdownMode = actors::ShutdownMode;

  // On the application's executor (an io_context's, or a strand's). The application keeps it running
  // until shutdown has completed. Both constructors throw std::invalid_argument for a config that
  // Config::validate() refuses.
  Engine(boost::asio::any_io_executor executor, Config config);
  // On a pool of config.io_threads threads of its own.
  explicit Engine(Config config);
  // With its own pool: shuts down (cancelling what runs), waits (bounded) for the actors to stop, and joins
  // the pool; never destroy it from one of the pool's own threads (an event handler). On an application's
  // executor it only lets go of the engine's actors, which then stop on that executor: call async_shutdown
  // first and let it complete, so that every request has had its last event, and keep the executor
  // running until then.
  ~Engine();

  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Loads config.model; completes with void(error_code, actors::LoadResult) (its error says why a load
  // failed). Once: a second load answers an error.
  template <class CompletionToken>
  auto async_load(CompletionToken&& token) {
    actors::EngineLoad request{};
    return address_.ask(std::move(request), kNoTimeout, std::forward<CompletionToken>(token));
  }

  // Answers session.opened, or an error event (conflict for an id in use, overloaded past max_sessions).
  template <class CompletionToken>
  auto async_open_session(proto::SessionOpen open, CompletionToken&& token) {
    actors::EngineOpenSession request{std::move(open), {}};
    return address_.ask(std::move(request), kNoTimeout, std::forward<CompletionToken>(token));
  }
  // Forgets a session (its running request ends as cancelled). Unknown ids are ignored.
  void close_session(std::string session_id);
  // Forgets a session's history, keeping its id and system prompt: answers session.reset_done, or an error
  // event (not_found for an id not open, conflict while it is generating).
  template <class CompletionToken>
  auto async_reset_session(std::string session_id, CompletionToken&& token) {
    actors::EngineResetSession request{std::move(session_id), {}};
    return address_.ask(std::move(request), kNoTimeout, std::forward<CompletionToken>(token));
  }

  // Events go to `handler`, on an engine strand, in order; it must be quick and must not block.
  void generate(proto::GenerateRequest request, EventHandler handler, GenerateOptions options = {});
  // The same events as a stream: `co_await stream.async_next(asio::use_awaitable)` until it yields nullopt.
  actors::EventStream generate_stream(proto::GenerateRequest request, GenerateOptions options = {});

  // Embeds each input of `request` (a text, tokenized as a prompt is, or token ids) as a sequence of its own,
  // batched with generation; completes with void(error_code, actors::EmbedResult): a unit-length vector per
  // input, or the request's error (embedding_protocol.hpp).
  template <class CompletionToken>
  auto async_embed(actors::EmbedRequest request, CompletionToken&& token) {
    actors::EngineEmbed message{std::move(request), {}};
    return address_.ask(std::move(message), kNoTimeout, std::forward<CompletionToken>(token));
  }

  // Ends the request with reason cancelled (an embedding request with an id: with an `unavailable` error).
  // Unknown or finished ids are ignored.
  void cancel(std::string request_id);

  template <class CompletionToken>
  auto async_stats(CompletionToken&& token) {
    actors::GetEngineStats request{};
    return address_.ask(std::move(request), kNoTimeout, std::forward<CompletionToken>(token));
  }

  // The prompt text a chat request (its messages, tools, tool_choice and chat_template_kwargs) renders to
  // with the model's chat template, as a stand-alone request's, and its token count; completes with
  // void(error_code, actors::AppliedTemplate) (its error event says why not).
  template <class CompletionToken>
  auto async_apply_template(proto::GenerateRequest request, CompletionToken&& token) {
    actors::EngineApplyTemplate message{std::move(request), {}};
    return address_.ask(std::move(message), kNoTimeout, std::forward<CompletionToken>(token));
  }

  // New requests are refused (`unavailable`) from now on; running ones finish (drain) or end as cancelled;
  // then every actor stops. Completes with void(error_code, bool) once they have.
  template <class CompletionToken>
  auto async_shutdown(ShutdownMode mode, CompletionToken&& token) {
    actors::EngineShutdown request{mode, {}};
    return address_.ask(std::move(request), kNoTimeout, std::forward<CompletionToken>(token));
  }

  boost::asio::any_io_executor get_executor() const { return executor_; }

 private:
  static constexpr auto kNoTimeout = std::chrono::hours(24 * 365);

  std::unique_ptr<boost::asio::thread_pool> own_pool_;  // only when the engine owns its threads
  boost::asio::any_io_executor executor_;
  actors::ActorHandle<actors::EngineProtocol> engine_;
  // Asked through a member, not a temporary from engine_.address(): with asio::use_awaitable the ask's
  // initiation runs only when the caller co_awaits it, and it refers to the Address it was started from.
  actors::Address<actors::EngineProtocol> address_;
};

}  // namespace loom
