// PLACEHOLDER until the chat page and the metrics land (branch gw-page deletes this file).
#include "chat_page.hpp"
#include "prometheus_metrics.hpp"

namespace loom::net {
std::string_view chat_page_html() noexcept { return "<!doctype html><title>loom</title><p>not built yet</p>"; }
std::string render_prometheus(const GatewayContext&, const actors::EngineStats&, const GatewayMetrics::Snapshot&) {
  return "# not built yet\n";
}
}  // namespace loom::net
