#include "gateway_context.hpp"

#include <filesystem>
#include <vector>

namespace loom::net {

std::string_view to_string(GatewayPhase phase) noexcept {
  switch (phase) {
    case GatewayPhase::loading: return "loading";
    case GatewayPhase::ready: return "ready";
    case GatewayPhase::draining: return "draining";
    case GatewayPhase::failed: return "failed";
  }
  return "unknown";
}

std::string model_id_for(const GatewayConfig& config) {
  if (!config.model_id.empty()) return config.model_id;
  if (config.model_is_demo) return "loom-demo";
  return std::filesystem::path(config.model).stem().string();
}

std::optional<RequestBudget::Slot> RequestBudget::try_acquire() noexcept {
  std::size_t used = used_.load(std::memory_order_acquire);
  do {
    if (used >= limit_) return std::nullopt;
  } while (!used_.compare_exchange_weak(used, used + 1, std::memory_order_acq_rel));
  return Slot(this);
}

ShutdownNotifier::Id ShutdownNotifier::add(std::function<void()> callback) {
  std::unique_lock lock(mutex_);
  const Id id = next_++;
  if (notified_) {
    lock.unlock();
    callback();
    return id;
  }
  callbacks_.emplace(id, std::move(callback));
  return id;
}

void ShutdownNotifier::remove(Id id) {
  std::lock_guard lock(mutex_);
  callbacks_.erase(id);
}

void ShutdownNotifier::notify_all() {
  std::map<Id, std::function<void()>> callbacks;
  {
    std::lock_guard lock(mutex_);
    if (notified_) return;
    notified_ = true;
    callbacks.swap(callbacks_);
  }
  for (auto& [id, callback] : callbacks) callback();
}

bool ShutdownNotifier::notified() const {
  std::lock_guard lock(mutex_);
  return notified_;
}

namespace {
proto::ParseOptions parse_options_for(const GatewayConfig& config) {
  proto::ParseOptions options;
  options.max_message_bytes = config.max_frame_bytes;
  options.max_tokens_limit = config.max_tokens_limit;
  return options;
}
}  // namespace

GatewayContext::GatewayContext(loom::Engine& engine_, GatewayConfig config_)
    : engine(engine_),
      config(std::move(config_)),
      parse_options(parse_options_for(config)),
      budget(config.max_requests_total) {}

}  // namespace loom::net
