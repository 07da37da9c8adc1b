// GET /metrics: the engine's stats and the gateway's counters in the Prometheus text exposition format
// (version 0.0.4): requests by outcome, TTFT and inter-token latency histograms, tokens generated,
// running and waiting sequences, KV blocks used/cached/free, thermal state, connections, and the sizes of
// the engine's per-request structures (loom_engine_bookkeeping_entries{map="..."}).
#pragma once

#include <string>

#include "gateway_context.hpp"
#include "loom/engine.hpp"

namespace loom::net {

inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

std::string render_prometheus(const GatewayContext& context, const actors::EngineStats& engine,
                              const GatewayMetrics::Snapshot& gateway);

}  // namespace loom::net
