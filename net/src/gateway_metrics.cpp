#include "gateway_metrics.hpp"

#include <algorithm>

namespace loom::net {

namespace {
constexpr std::size_t outcome_index(std::string_view outcome) noexcept {
  for (std::size_t i = 0; i < kOutcomeNames.size(); ++i) {
    if (kOutcomeNames[i] == outcome) return i;
  }
  return 4;  // "error"
}
}  // namespace

void GatewayMetrics::request_finished(Endpoint endpoint, std::string_view outcome) noexcept {
  requests_[static_cast<std::size_t>(endpoint)][outcome_index(outcome)].fetch_add(1, std::memory_order_relaxed);
}

void GatewayMetrics::http_response(int status) noexcept {
  const auto* it = std::find(kCountedStatuses.begin(), kCountedStatuses.end(), status);
  if (it == kCountedStatuses.end()) {
    status_other_.fetch_add(1, std::memory_order_relaxed);
  } else {
    statuses_[static_cast<std::size_t>(it - kCountedStatuses.begin())].fetch_add(1, std::memory_order_relaxed);
  }
}

void GatewayMetrics::connection_opened() noexcept {
  open_.fetch_add(1, std::memory_order_relaxed);
  total_.fetch_add(1, std::memory_order_relaxed);
}

void GatewayMetrics::connection_closed() noexcept { open_.fetch_sub(1, std::memory_order_relaxed); }

GatewayMetrics::Snapshot GatewayMetrics::snapshot() const noexcept {
  Snapshot s;
  for (std::size_t e = 0; e < requests_.size(); ++e) {
    for (std::size_t o = 0; o < requests_[e].size(); ++o) s.requests[e][o] = requests_[e][o].load(std::memory_order_relaxed);
  }
  for (std::size_t i = 0; i < statuses_.size(); ++i) s.http_responses[i] = statuses_[i].load(std::memory_order_relaxed);
  s.http_responses_other = status_other_.load(std::memory_order_relaxed);
  s.connections_open = open_.load(std::memory_order_relaxed);
  s.connections_total = total_.load(std::memory_order_relaxed);
  s.websocket_frames_in = frames_in_.load(std::memory_order_relaxed);
  s.websocket_frames_out = frames_out_.load(std::memory_order_relaxed);
  s.slow_client_cancels = slow_clients_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace loom::net
