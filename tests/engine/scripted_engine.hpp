// What the engine's fault, overload and bookkeeping tests share: an Engine on a ScriptedBackend
// (scripted_backend.hpp), small requests, a record of every request's events (to check that each got
// exactly one last event), and the check that every bookkeeping entry is back at its idle value.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <boost/asio/use_future.hpp>

#include "loom/engine.hpp"
#include "scripted_backend.hpp"
#include "test_files.hpp"
#include "test_support.hpp"

namespace loom::actors::testing {

inline const std::string kScriptedModel = "models/aidreams260K.gguf";

// An engine config on the scripted backend: the tiny model's shape and tokenizer, a KV pool of
// `kv_tokens` positions in blocks of `block_size`.
inline Engine::Config scripted_config(const std::shared_ptr<BackendScript>& script, std::int64_t kv_tokens = 4096,
                                      std::int64_t block_size = 16) {
  Engine::Config c;
  c.model.model_path = compute::testing::shared_path(kScriptedModel);
  c.model.threads = 1;
  c.model.kv.block_size = block_size;
  c.model.kv_tokens = kv_tokens;
  c.io_threads = 2;
  c.backend_factory = scripted_backend(script);
  return c;
}

inline proto::GenerateRequest small_request(const std::string& id, std::int32_t max_tokens,
                                            const std::string& prompt = "Once upon a time") {
  proto::GenerateRequest r;
  r.id = id;
  r.input = prompt;
  r.params.temperature = 0.0;
  r.params.max_tokens = max_tokens;
  r.params.ignore_eos = true;
  return r;
}

// Opens the script's gate when the test leaves (a failed assertion included), before the engine, declared
// earlier, waits for the step held there.
struct OpenGateOnExit {
  std::shared_ptr<BackendScript> script;
  ~OpenGateOnExit() { script->open(); }
};

inline EngineStats stats_of(Engine& engine) { return engine.async_stats(boost::asio::use_future).get(); }

// Every request's events, from the engine's callbacks (any thread).
class Outcomes {
 public:
  struct Of {
    std::size_t tokens = 0;
    std::size_t last_events = 0;  // done and error events: exactly one is right
    std::size_t after_last = 0;   // events after the first last event: none is right
    std::optional<proto::DoneEvent> done;
    std::optional<proto::ErrorEvent> error;
    bool over() const { return last_events > 0; }
  };

  Engine::EventHandler handler(const std::string& id) {
    return [this, id](proto::ServerMessage message) { record(id, message); };
  }
  void record(const std::string& id, const proto::ServerMessage& message) {
    std::lock_guard lock(mutex_);
    Of& of = requests_[id];
    if (of.last_events > 0) ++of.after_last;
    if (std::holds_alternative<proto::TokenEvent>(message)) ++of.tokens;
    if (const auto* d = std::get_if<proto::DoneEvent>(&message)) {
      ++of.last_events;
      of.done = *d;
    }
    if (const auto* e = std::get_if<proto::ErrorEvent>(&message)) {
      ++of.last_events;
      of.error = *e;
    }
  }
  Of get(const std::string& id) {
    std::lock_guard lock(mutex_);
    return requests_[id];
  }
  bool over(const std::vector<std::string>& ids) {
    std::lock_guard lock(mutex_);
    for (const auto& id : ids) {
      if (!requests_[id].over()) return false;
    }
    return true;
  }
  // Requests that got no last event, or more than one, or events after it.
  std::vector<std::string> not_exactly_one_last_event(const std::vector<std::string>& ids) {
    std::lock_guard lock(mutex_);
    std::vector<std::string> wrong;
    for (const auto& id : ids) {
      const Of& of = requests_[id];
      if (of.last_events != 1 || of.after_last != 0) wrong.push_back(id);
    }
    return wrong;
  }

 private:
  std::mutex mutex_;
  std::map<std::string, Of> requests_;
};

// "name=value" for every entry that differs from `idle`; empty when all are back.
inline std::string bookkeeping_differences(const std::vector<BookkeepingEntry>& idle,
                                           const std::vector<BookkeepingEntry>& now) {
  std::ostringstream out;
  if (idle.size() != now.size()) out << "entry count " << idle.size() << " -> " << now.size() << "; ";
  for (std::size_t i = 0; i < std::min(idle.size(), now.size()); ++i) {
    if (idle[i].map != now[i].map || idle[i].entries != now[i].entries) {
      out << now[i].map << "=" << now[i].entries << " (idle " << idle[i].entries << ") ";
    }
  }
  return out.str();
}

// Every bookkeeping entry comes back to `idle` (bounded wait: the last releases are messages in flight).
inline void expect_bookkeeping_back_to(Engine& engine, const std::vector<BookkeepingEntry>& idle,
                                       std::chrono::milliseconds limit = std::chrono::seconds(30)) {
  std::string differences;
  const bool back = eventually([&] {
    differences = bookkeeping_differences(idle, stats_of(engine).bookkeeping_entries());
    return differences.empty();
  }, limit);
  EXPECT_TRUE(back) << "bookkeeping not back to idle: " << differences;
}

// The backend holds no sequence (bounded wait: a release runs on the compute thread after the executor
// has counted it).
inline void expect_backend_holds_nothing(BackendScript& script, std::chrono::milliseconds limit = std::chrono::seconds(30)) {
  EXPECT_TRUE(eventually([&] { return script.held() == 0; }, limit)) << script.held() << " sequences still held";
}

}  // namespace loom::actors::testing
