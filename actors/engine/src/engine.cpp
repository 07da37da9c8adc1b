#include "loom/engine.hpp"

#include <future>
#include <utility>

#include <boost/asio/post.hpp>

#include "loom/actors/engine/engine_actor.hpp"
#include "loom/actors/runtime/logger.hpp"

namespace loom {

namespace {

using namespace std::chrono_literals;

// How long ~Engine waits for a shutdown of its own pool's actors: a step in flight must finish first, so
// this is generous; past it the pool is stopped anyway (and the log says so).
constexpr auto kDestructorShutdownBound = 120s;

actors::ActorHandle<actors::EngineProtocol> spawn_engine(boost::asio::any_io_executor executor, Engine::Config config) {
  // Validated here, where the caller can catch it: inside spawn, the actor's constructor runs on its strand.
  config.validate();
  return actors::spawn<actors::EngineActor>(std::move(executor), {.name = "engine"}, std::move(config));
}

}  // namespace

Engine::Engine(boost::asio::any_io_executor executor, Config config)
    : executor_(std::move(executor)), engine_(spawn_engine(executor_, std::move(config))), address_(engine_.address()) {}

Engine::Engine(Config config)
    : own_pool_(std::make_unique<boost::asio::thread_pool>(static_cast<std::size_t>(std::max(config.io_threads, 1)))),
      executor_(own_pool_->get_executor()) {
  try {
    engine_ = spawn_engine(executor_, std::move(config));
    address_ = engine_.address();
  } catch (...) {
    own_pool_->stop();
    own_pool_->join();
    throw;
  }
}

Engine::~Engine() {
  if (!own_pool_) return;  // engine_ goes with the object: the actors stop on the application's executor
  if (engine_) {
    // Promises behind shared pointers: a completion that comes after the bound must find them alive.
    auto shut_down = std::make_shared<std::promise<void>>();
    async_shutdown(ShutdownMode::cancel, [shut_down](actors::error_code, bool) { shut_down->set_value(); });
    if (shut_down->get_future().wait_for(kDestructorShutdownBound) != std::future_status::ready) {
      actors::logger().warn("engine: shutdown did not complete within {} s; stopping the pool anyway",
                            kDestructorShutdownBound.count());
    } else {
      auto stopped = std::make_shared<std::promise<void>>();
      engine_.async_stop([stopped] { stopped->set_value(); });
      stopped->get_future().wait_for(kDestructorShutdownBound);
    }
    engine_ = {};
  }
  own_pool_->stop();
  own_pool_->join();
}

void Engine::close_session(std::string session_id) { engine_.tell(actors::EngineCloseSession{std::move(session_id)}); }

void Engine::generate(proto::GenerateRequest request, EventHandler handler, GenerateOptions options) {
  // Kept for the one case where the engine cannot answer: it has stopped, and the message is refused.
  EventHandler fallback = handler;
  std::string request_id = request.id;
  actors::EngineGenerate message{std::move(request), std::move(handler), options};
  if (engine_.tell(std::move(message))) return;
  if (!fallback) return;
  boost::asio::post(executor_, [fallback = std::move(fallback), request_id = std::move(request_id)] {
    proto::ErrorEvent event;
    event.request_id = request_id;
    event.code = proto::ErrorCode::unavailable;
    event.message = "the engine has stopped";
    fallback(std::move(event));
  });
}

actors::EventStream Engine::generate_stream(proto::GenerateRequest request, GenerateOptions options) {
  actors::EventStream stream(executor_);
  generate(std::move(request), stream.sink(), options);
  return stream;
}

void Engine::cancel(std::string request_id) { engine_.tell(actors::EngineCancel{std::move(request_id)}); }

}  // namespace loom
