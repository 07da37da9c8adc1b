// GatewayMetrics: what only the gateway sees: requests by endpoint and outcome, HTTP responses by status,
// open connections. Atomic counters, because every connection's strand counts into them; /metrics reads a
// snapshot and renders it next to the engine's own stats (prometheus_metrics.hpp).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace loom::net {

enum class Endpoint : std::uint8_t { websocket, completions, chat_completions, embeddings };
inline constexpr std::array<std::string_view, 4> kEndpointNames{"websocket", "completions", "chat_completions",
                                                                "embeddings"};

// A request's outcome: its finish reason (eos, length, stop, cancelled, error, timeout, tool_calls), or
// refused (an error event / error response before it was accepted). An embeddings request: stop when answered,
// cancelled when its client left, error when the engine failed it after accepting it, else refused.
inline constexpr std::array<std::string_view, 8> kOutcomeNames{"eos",     "length",     "stop",   "cancelled", "error",
                                                               "timeout", "tool_calls", "refused"};
// HTTP statuses counted one by one; anything else counts as "other".
inline constexpr std::array<int, 13> kCountedStatuses{101, 200, 204, 400, 401, 403, 404, 405, 413, 429, 500, 503, 504};

class GatewayMetrics {
 public:
  struct Snapshot {
    std::array<std::array<std::uint64_t, kOutcomeNames.size()>, kEndpointNames.size()> requests{};
    std::array<std::uint64_t, kCountedStatuses.size()> http_responses{};
    std::uint64_t http_responses_other = 0;
    std::uint64_t connections_open = 0;
    std::uint64_t connections_total = 0;
    std::uint64_t websocket_frames_in = 0;
    std::uint64_t websocket_frames_out = 0;
    std::uint64_t slow_client_cancels = 0;  // WebSockets whose send queue overflowed
  };

  // `outcome` is one of kOutcomeNames; anything else counts as "error".
  void request_finished(Endpoint endpoint, std::string_view outcome) noexcept;
  void http_response(int status) noexcept;
  void connection_opened() noexcept;
  void connection_closed() noexcept;
  void websocket_frame_in() noexcept { frames_in_.fetch_add(1, std::memory_order_relaxed); }
  void websocket_frame_out() noexcept { frames_out_.fetch_add(1, std::memory_order_relaxed); }
  void slow_client_cancelled() noexcept { slow_clients_.fetch_add(1, std::memory_order_relaxed); }

  Snapshot snapshot() const noexcept;

 private:
  std::array<std::array<std::atomic<std::uint64_t>, kOutcomeNames.size()>, kEndpointNames.size()> requests_{};
  std::array<std::atomic<std::uint64_t>, kCountedStatuses.size()> statuses_{};
  std::atomic<std::uint64_t> status_other_{0};
  std::atomic<std::uint64_t> open_{0};
  std::atomic<std::uint64_t> total_{0};
  std::atomic<std::uint64_t> frames_in_{0};
  std::atomic<std::uint64_t> frames_out_{0};
  std::atomic<std::uint64_t> slow_clients_{0};
};

}  // namespace loom::net
