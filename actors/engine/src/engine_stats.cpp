// EngineConfig's checks and EngineStats' derived values (engine_protocol.hpp).
#include <stdexcept>
#include <vector>

#include "loom/actors/engine/engine_protocol.hpp"
#include "loom/compute/text/chat_template.hpp"

namespace loom::actors {

void EngineConfig::validate() const {
  if (io_threads < 1) throw std::invalid_argument("engine config: io_threads must be at least 1");
  if (default_timeout.count() < 0) throw std::invalid_argument("engine config: default_timeout must not be negative");
  if (max_prompt_tokens < 0) throw std::invalid_argument("engine config: max_prompt_tokens must not be negative");
  if (!chat_template.empty() && !compute::find_chat_template(chat_template)) {
    throw std::invalid_argument("engine config: chat_template '" + chat_template + "' is not a known template");
  }
  if (!fallback_chat_template.empty() && !compute::find_chat_template(fallback_chat_template)) {
    throw std::invalid_argument("engine config: fallback_chat_template '" + fallback_chat_template +
                                "' is not a known template");
  }
  // context_length comes from the model at load; any positive value stands in for it here.
  SchedulerConfig scheduler_check = scheduler;
  if (scheduler_check.context_length <= 0) scheduler_check.context_length = std::int64_t{1} << 20;
  scheduler_check.validate();
  if (thermal_provider) thermal.validate();
}

std::vector<BookkeepingEntry> EngineStats::bookkeeping_entries() const {
  const SchedulerBookkeeping& s = scheduler.bookkeeping;
  return {
      {"engine.requests", bookkeeping.requests},
      {"engine.sessions", bookkeeping.sessions},
      {"engine.named_sessions", bookkeeping.named_sessions},
      {"engine.embeddings", bookkeeping.embeddings},
      {"scheduler.sequences", s.sequences},
      {"scheduler.waiting", s.waiting},
      {"scheduler.running", s.running},
      {"scheduler.fairness_keys", s.fairness_keys},
      {"scheduler.step_plan", s.step_plan},
      {"scheduler.drain_replies", s.drain_replies},
      {"cache.sequences", cache.cache.sequences},
      {"executor.sequences", executor.bookkeeping.sequences},
      {"executor.pending_jobs", executor.bookkeeping.pending_jobs},
  };
}

double EngineStats::kv_usage() const noexcept {
  const auto total = cache.cache.total_blocks;
  return total == 0 ? 0.0 : static_cast<double>(cache.cache.used_blocks) / static_cast<double>(total);
}

}  // namespace loom::actors
