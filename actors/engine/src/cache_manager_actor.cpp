#include "loom/actors/engine/cache_manager_actor.hpp"

#include <stdexcept>
#include <string>
#include <unordered_set>

#include "loom/actors/runtime/logger.hpp"

namespace loom::actors {

CacheManagerActor::CacheManagerActor(cache::BlockManagerConfig config) : blocks_(config) {}

void CacheManagerActor::reject(const char* message, cache::SequenceId sequence, const char* why) {
  ++rejected_messages_;
  logger().warn("actor=cache_manager message={} sequence={} error=\"{}\"", message, sequence, why);
}

ReserveResult CacheManagerActor::reserve(const std::vector<ReserveItem>& plan) {
  ReserveResult result;
  // Check the whole plan before touching anything: ids, and the blocks it needs against what is available.
  std::unordered_set<cache::SequenceId> seen;
  std::size_t cost = 0;
  for (const auto& item : plan) {
    const std::string id = std::to_string(item.sequence);
    if (!seen.insert(item.sequence).second) {
      result.error = "sequence " + id + " appears twice in the plan";
      return result;
    }
    if (item.tokens.empty()) {
      result.error = "sequence " + id + " reserves no tokens";
      return result;
    }
    if (item.new_sequence == blocks_.contains(item.sequence)) {
      result.error = item.new_sequence ? "sequence " + id + " already exists" : "sequence " + id + " is unknown";
      return result;
    }
    const std::size_t held = item.new_sequence ? 0 : blocks_.token_count(item.sequence);
    if (held + item.tokens.size() > blocks_.max_sequence_tokens()) {
      result.error = "sequence " + id + " would hold " + std::to_string(held + item.tokens.size()) +
                     " tokens; the whole cache holds " + std::to_string(blocks_.max_sequence_tokens());
      return result;
    }
    cost += item.new_sequence ? blocks_.create_cost(item.tokens, item.reuse_prefix) : blocks_.append_cost(item.sequence, item.tokens.size());
  }
  // The costs are upper bounds (a cached block two new prompts share is counted twice), so a plan that
  // passes this check always fits.
  if (cost > blocks_.available_blocks()) {
    result.missing_blocks = cost - blocks_.available_blocks();
    return result;
  }
  result.reservations.reserve(plan.size());
  for (const auto& item : plan) {
    result.reservations.push_back(item.new_sequence ? blocks_.create_sequence(item.sequence, item.tokens, item.reuse_prefix)
                                                    : blocks_.append(item.sequence, item.tokens));
    if (!result.reservations.back().reserved()) {
      // Cannot happen while the costs are upper bounds; if it ever does, say so rather than half-reserve
      // silently (the sequences created for this plan are dropped again).
      for (std::size_t i = 0; i + 1 < result.reservations.size(); ++i) {
        if (plan[i].new_sequence) blocks_.release(plan[i].sequence);
      }
      ReserveResult failed;
      failed.error = "internal: sequence " + std::to_string(item.sequence) + " did not fit after the plan's check";
      logger().error("actor=cache_manager message=Reserve error=\"{}\"", failed.error);
      return failed;
    }
    result.block_tables.push_back(blocks_.block_table(item.sequence));
  }
  result.reserved = true;
  return result;
}

void CacheManagerActor::on(Reserve m) { m.reply(reserve(m.plan)); }

void CacheManagerActor::on(Commit m) {
  if (!blocks_.contains(m.sequence)) return reject("Commit", m.sequence, "unknown sequence");
  if (m.computed_tokens > blocks_.token_count(m.sequence)) return reject("Commit", m.sequence, "past the sequence's end");
  blocks_.commit(m.sequence, m.computed_tokens);
}

void CacheManagerActor::on(Release m) {
  if (!blocks_.contains(m.sequence)) return reject("Release", m.sequence, "unknown sequence");
  blocks_.release(m.sequence);
}

void CacheManagerActor::on(Retain m) {
  if (!blocks_.contains(m.sequence)) return reject("Retain", m.sequence, "unknown sequence");
  if (m.computed_tokens > blocks_.token_count(m.sequence)) return reject("Retain", m.sequence, "past the sequence's end");
  blocks_.commit(m.sequence, m.computed_tokens);
  blocks_.release(m.sequence);
}

void CacheManagerActor::on(MatchPrefix m) { m.reply(blocks_.match_prefix(m.tokens)); }

void CacheManagerActor::on(Fork m) {
  if (!blocks_.contains(m.parent)) return m.reply("sequence " + std::to_string(m.parent) + " is unknown");
  if (blocks_.contains(m.child)) return m.reply("sequence " + std::to_string(m.child) + " already exists");
  blocks_.fork(m.parent, m.child);
  m.reply(std::string());
}

void CacheManagerActor::on(GetCacheStats m) { m.reply(CacheManagerStats{blocks_.stats(), rejected_messages_}); }

}  // namespace loom::actors
