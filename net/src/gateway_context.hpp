// GatewayContext: what every connection of the gateway shares: the engine, the configuration, the loaded
// model's facts, the phase (loading, ready, draining), the request budget and the metrics. Connections run
// on their own strands and reach the engine only through loom::Engine (which is safe from any thread).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "gateway_metrics.hpp"
#include "loom/compute/text/tokenizer.hpp"
#include "loom/engine.hpp"
#include "loom/net/gateway_config.hpp"
#include "loom/proto/parse_options.hpp"

namespace loom::net {

enum class GatewayPhase : std::uint8_t { loading, ready, draining, failed };
std::string_view to_string(GatewayPhase phase) noexcept;

// The model's name in the API: config.model_id, "loom-demo" for the demo model, else the file's stem.
std::string model_id_for(const GatewayConfig& config);

// Requests in flight on the whole gateway, at most a limit. A Slot gives its place back when destroyed.
class RequestBudget {
 public:
  explicit RequestBudget(std::size_t limit) : limit_(limit) {}
  class Slot {
   public:
    explicit Slot(RequestBudget* budget) : budget_(budget) {}
    Slot(Slot&& other) noexcept : budget_(std::exchange(other.budget_, nullptr)) {}
    Slot& operator=(Slot&&) = delete;
    ~Slot() {
      if (budget_ != nullptr) budget_->used_.fetch_sub(1, std::memory_order_acq_rel);
    }

   private:
    RequestBudget* budget_;
  };
  // nullopt when the gateway is full (answer overloaded / 503).
  std::optional<Slot> try_acquire() noexcept;
  std::size_t in_use() const noexcept { return used_.load(std::memory_order_acquire); }
  std::size_t limit() const noexcept { return limit_; }

 private:
  std::size_t limit_;
  std::atomic<std::size_t> used_{0};
};

// Connections that want to hear when a graceful shutdown begins (a WebSocket closes with 1001 once its
// requests are done; an idle keep-alive connection closes). The callbacks run on the shutting-down thread
// and must only post to their connection's strand. A mutex, not a message: connections are not actors,
// and registration happens once per connection.
class ShutdownNotifier {
 public:
  using Id = std::uint64_t;
  // Returns an id for remove(). If shutdown has already begun, `callback` runs at once (before returning).
  Id add(std::function<void()> callback);
  void remove(Id id);
  // Runs every registered callback once; later add()s run theirs at once.
  void notify_all();
  bool notified() const;

 private:
  mutable std::mutex mutex_;
  std::map<Id, std::function<void()>> callbacks_;
  Id next_ = 1;
  bool notified_ = false;
};

struct GatewayContext {
  GatewayContext(loom::Engine& engine, GatewayConfig config);

  loom::Engine& engine;
  const GatewayConfig config;
  // The limits the proto parsers apply (frame size, max_tokens limit, ...), derived from config.
  const proto::ParseOptions parse_options;
  GatewayMetrics metrics;
  RequestBudget budget;
  ShutdownNotifier shutdown;

  std::atomic<GatewayPhase> phase{GatewayPhase::loading};
  // Set once before phase becomes ready, read-only after.
  std::string model_id;
  std::int64_t context_length = 0;
  std::int64_t embedding_length = 0;  // the model's hidden size: /v1/embeddings' vector length
  std::int64_t created_unix = 0;  // when the model was loaded, for /v1/models
  std::string chat_template;       // the chat template's description; empty: none (the hello's features)
  bool chat_tool_calls = false;    // its family writes tool calls loom parses
  bool chat_reasoning = false;     // its family marks reasoning
  // The model's tokenizer (POST /tokenize, /detokenize; its const members are safe from any thread) and
  // its facts for /v1/models' "meta" (llama_routes.hpp).
  std::shared_ptr<const compute::Tokenizer> tokenizer;
  nlohmann::json model_meta;

  bool ready() const noexcept { return phase.load(std::memory_order_acquire) == GatewayPhase::ready; }
  // Engine-wide unique ids: request and session ids are per connection on the wire, so the gateway
  // prefixes them with a serial of its own ("c12:r1").
  std::uint64_t next_serial() noexcept { return serial_.fetch_add(1, std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> serial_{1};
};

}  // namespace loom::net
