// EngineActor: the actor behind loom::Engine (engine.hpp). It owns the other actors (it spawns the
// executor and, once a model is loaded, the cache manager, the scheduler and the thermal monitor), keeps the
// registry of sessions and of running requests (for routing, cancel, and refusing duplicate ids), hands
// out sequence ids, and gathers stats. Applications use loom::Engine; the actor's messages are its protocol.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "loom/actors/engine/engine_protocol.hpp"
#include "loom/actors/runtime/actor.hpp"

namespace loom::actors {

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
  void on(EngineResetSession m);
  void on(EngineGenerate m);
  void on(EngineEmbed m);
  void on(EngineCancel m);
  void on(GetEngineStats m);
  void on(EngineShutdown m);
  void on(EngineApplyTemplate m);

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
  // On the strand: a request's last event went out (done, or an error event when `refused`), told by the
  // wrapper around its sink on the session's strand: forget the request; a stand-alone session, or one
  // closed meanwhile, stops.
  void request_ended(const std::string& request_id, bool refused);
  // On the strand: every child actor has stopped after a shutdown; answer the shutdown.
  void children_stopped();

  std::unique_ptr<State> state_;
};

}  // namespace loom::actors
