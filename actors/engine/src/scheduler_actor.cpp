#include "loom/actors/engine/scheduler_actor.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "loom/actors/runtime/logger.hpp"
#include "loom/proto/generate_request.hpp"

namespace loom::actors {

namespace {

using Clock = std::chrono::steady_clock;
using proto::FinishReason;

double milliseconds(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

bool contains(const std::vector<std::int32_t>& ids, std::int32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

constexpr auto kDeadlineCheck = std::chrono::milliseconds(20);
constexpr auto kRateWindow = std::chrono::seconds(5);
constexpr auto kReserveTimeout = std::chrono::seconds(30);

}  // namespace

const ThermalPolicy& ThermalPolicyTable::at(ThermalState state) const noexcept {
  switch (state) {
    case ThermalState::nominal: return nominal;
    case ThermalState::fair: return fair;
    case ThermalState::serious: return serious;
    case ThermalState::critical: return critical;
  }
  return nominal;
}

void SchedulerConfig::validate() const {
  const auto require = [](bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument("scheduler config: " + what);
  };
  require(max_batch_tokens >= 1, "max_batch_tokens must be at least 1");
  require(max_running >= 1, "max_running must be at least 1");
  require(max_waiting >= 1, "max_waiting must be at least 1");
  require(context_length >= 2, "context_length must be at least 2 (the model's, set at load)");
  require(step_timeout.count() > 0, "step_timeout must be positive");
  for (const ThermalPolicy* p : {&thermal.nominal, &thermal.fair, &thermal.serious, &thermal.critical}) {
    require(p->step_delay.count() >= 0 && p->step_delay <= std::chrono::minutes(1),
            "a thermal step_delay must lie in [0, 60 s]");
    require(p->min_priority >= proto::GenerateRequest::kMinPriority &&
                p->min_priority <= proto::GenerateRequest::kMaxPriority,
            "a thermal min_priority must lie in [-10, 10]");
  }
}

// ---- Per-sequence state ----

struct SchedulerActor::Sequence {
  SubmitSequence submit;
  std::vector<std::int32_t> tokens;  // prompt, then every generated token (the last one not yet computed)
  std::size_t generated = 0;
  bool in_cache = false;             // the cache manager holds the sequence
  std::size_t reserved = 0;          // tokens with a slot in the cache (while in_cache)
  std::size_t computed = 0;          // positions whose K/V are in the cache (while in_cache)
  std::vector<std::int32_t> block_table;
  std::uint64_t admission = 0;       // order of the last admission (0: never admitted)
  std::optional<FinishReason> ending;  // cancelled or timed out while its step was out
  std::int32_t cached_tokens = -1;   // from the first creation
  std::int32_t prefilled = 0;
  std::int32_t preemptions = 0;
  std::optional<Clock::time_point> first_scheduled, first_token, last_token;

  // Tokens still to run through the model: the prompt's (or, after a preemption, every known token) until
  // they are in, then the one token each decode computes.
  std::size_t remaining() const { return tokens.size() - (in_cache ? computed : 0); }
  bool decoding() const { return in_cache && generated > 0 && remaining() == 1; }
};

struct SchedulerActor::PlannedItem {
  cache::SequenceId id = 0;
  bool reserves = false;      // has an item in the plan's reservation (creation, or slots for new tokens)
  bool decode = false;
  std::size_t chunk = 0;      // tokens computed this step (settled once the reservation is known)
  bool sample = false;
};

SchedulerActor::SchedulerActor(SchedulerConfig config, Address<CacheManagerProtocol> cache,
                               Address<GpuExecutorProtocol> executor)
    : config_(std::move(config)), cache_(std::move(cache)), executor_(std::move(executor)) {
  config_.validate();
  if (cache_ == Address<CacheManagerProtocol>()) throw std::invalid_argument("scheduler: empty cache manager address");
  if (executor_ == Address<GpuExecutorProtocol>()) throw std::invalid_argument("scheduler: empty executor address");
}

SchedulerActor::~SchedulerActor() = default;

void SchedulerActor::on_start() {
  start_periodic(kDeadlineCheck, [this] { expire_deadlines(); });
}

const ThermalPolicy& SchedulerActor::policy() const noexcept { return config_.thermal.at(thermal_); }

// How many sequences one step may hold now.
std::size_t SchedulerActor::step_cap() const noexcept {
  std::size_t cap = std::min(config_.max_running, config_.max_batch_tokens);
  const ThermalPolicy& p = policy();
  if (p.max_running > 0) cap = std::min(cap, p.max_running);
  if (p.max_running == 0 && thermal_ == ThermalState::serious) cap = std::max<std::size_t>(1, cap / 2);
  return cap;
}

bool SchedulerActor::may_run(const Sequence& s) const noexcept { return s.submit.priority >= policy().min_priority; }

// In the plan being reserved or computed: such a sequence can only end when that step is back.
bool SchedulerActor::in_step(cache::SequenceId id) const noexcept {
  return busy_ && std::any_of(plan_.begin(), plan_.end(), [&](const PlannedItem& p) { return p.id == id; });
}

void SchedulerActor::forget_old_rates(Clock::time_point now) {
  while (!recent_tokens_.empty() && now - recent_tokens_.front().first > kRateWindow) recent_tokens_.pop_front();
}

// ---- Messages ----

void SchedulerActor::on(SubmitSequence m) {
  ++stats_.submitted;
  const auto reject = [&](proto::ErrorCode code, std::string message) {
    ++stats_.rejected;
    if (m.sink) m.sink(SequenceRejected{m.sequence, code, std::move(message)});
  };
  if (draining_) return reject(proto::ErrorCode::unavailable, "the engine is shutting down");
  if (sequences_.contains(m.sequence)) {
    return reject(proto::ErrorCode::conflict, "sequence " + std::to_string(m.sequence) + " is already live");
  }
  if (m.prompt.empty()) return reject(proto::ErrorCode::invalid_request, "the prompt has no tokens");
  if (static_cast<std::int64_t>(m.prompt.size()) >= config_.context_length) {
    return reject(proto::ErrorCode::invalid_request,
                  "the prompt is " + std::to_string(m.prompt.size()) + " tokens; the context holds " +
                      std::to_string(config_.context_length) + " (and one generated token needs a place)");
  }
  if (m.max_tokens < 1) return reject(proto::ErrorCode::invalid_request, "max_tokens must be at least 1");
  if (m.logprobs < 0) return reject(proto::ErrorCode::invalid_request, "logprobs must not be negative");
  if (waiting_.size() >= config_.max_waiting) {
    return reject(proto::ErrorCode::overloaded,
                  "the waiting queue is full (" + std::to_string(config_.max_waiting) + " requests)");
  }
  auto s = std::make_unique<Sequence>();
  s->tokens = m.prompt;
  s->submit = std::move(m);
  const cache::SequenceId id = s->submit.sequence;
  sequences_.emplace(id, std::move(s));
  waiting_.push_back(id);
  request_tick();
}

void SchedulerActor::on(CancelSequence m) {
  const auto it = sequences_.find(m.sequence);
  if (it == sequences_.end()) return;
  Sequence& s = *it->second;
  if (in_step(m.sequence)) {
    if (!s.ending) s.ending = m.reason;  // ends when its step is back
    return;
  }
  finish(m.sequence, m.reason);
  request_tick();
}

void SchedulerActor::on(ThermalStateChanged m) {
  if (m.state == thermal_) return;
  logger().info("actor=scheduler thermal={} -> {} reason=\"{}\"", to_string(thermal_), to_string(m.state), m.reason);
  thermal_ = m.state;
  request_tick();
}

void SchedulerActor::on(DrainScheduler m) {
  draining_ = true;
  drain_replies_.push_back(std::move(m.reply));
  if (m.cancel_running) {
    std::vector<cache::SequenceId> ids;
    for (const auto& [id, s] : sequences_) ids.push_back(id);
    for (const cache::SequenceId id : ids) on(CancelSequence{id, FinishReason::cancelled});
  }
  maybe_answer_drain();
}

void SchedulerActor::maybe_answer_drain() {
  if (!draining_ || !sequences_.empty() || busy_) return;
  for (auto& reply : drain_replies_) reply(true);
  drain_replies_.clear();
}

void SchedulerActor::on(GetSchedulerStats m) {
  SchedulerStats out = stats_;
  out.waiting = waiting_.size();
  out.running = running_.size();
  out.paused = static_cast<std::size_t>(std::count_if(running_.begin(), running_.end(), [&](cache::SequenceId id) {
    return !may_run(*sequences_.at(id));
  }));
  out.thermal = thermal_;
  const auto now = Clock::now();
  forget_old_rates(now);
  std::size_t tokens = 0;
  for (const auto& [when, n] : recent_tokens_) tokens += n;
  if (!recent_tokens_.empty()) {
    const double seconds = std::max(0.1, std::chrono::duration<double>(now - recent_tokens_.front().first).count());
    out.tokens_per_second = static_cast<double>(tokens) / seconds;
  }
  m.reply(std::move(out));
}

// ---- The loop ----

void SchedulerActor::request_tick(Clock::duration delay) {
  if (tick_posted_ || busy_) return;
  tick_posted_ = true;
  if (delay <= Clock::duration::zero()) {
    continuation("Tick", [this] { tick(); })();
  } else {
    start_timer(delay, [this] { tick(); });
  }
}

void SchedulerActor::tick() {
  tick_posted_ = false;
  if (busy_) return;
  expire_deadlines();
  plan_step();
}

// Moves waiting sequences into the running set: highest priority first, then the fairness key admitted
// least recently, then arrival order. Past the cap, a waiting sequence of higher priority than the lowest
// running one takes its place (that one is preempted).
void SchedulerActor::admit() {
  while (!waiting_.empty()) {
    auto best = waiting_.end();
    for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
      const Sequence& s = *sequences_.at(*it);
      if (!may_run(s)) continue;
      if (best == waiting_.end()) {
        best = it;
        continue;
      }
      const Sequence& b = *sequences_.at(*best);
      if (s.submit.priority != b.submit.priority) {
        if (s.submit.priority > b.submit.priority) best = it;
        continue;
      }
      const auto served = [&](const Sequence& x) {
        const auto f = last_admitted_.find(x.submit.fairness_key);
        return f == last_admitted_.end() ? std::uint64_t{0} : f->second;
      };
      if (served(s) < served(b)) best = it;  // ties keep the earlier arrival
    }
    if (best == waiting_.end()) return;
    Sequence& candidate = *sequences_.at(*best);
    // Full (or short of KV blocks since a preemption): only a higher priority gets in, in the place of the
    // lowest running sequence.
    const bool full = running_.size() >= config_.max_running || (admission_held_ && !running_.empty());
    const cache::SequenceId chosen = *best;
    if (full) {
      // The lowest running sequence (most recently admitted among equals) yields to a higher priority.
      auto lowest = std::min_element(running_.begin(), running_.end(), [&](cache::SequenceId a, cache::SequenceId b) {
        const Sequence& x = *sequences_.at(a);
        const Sequence& y = *sequences_.at(b);
        return x.submit.priority != y.submit.priority ? x.submit.priority < y.submit.priority : x.admission > y.admission;
      });
      if (sequences_.at(*lowest)->submit.priority >= candidate.submit.priority) return;
      preempt(*lowest);  // one place for one sequence: the loop checks again for the next candidate
    }
    candidate.admission = ++admissions_;
    last_admitted_[candidate.submit.fairness_key] = candidate.admission;
    running_.push_back(chosen);
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), chosen));
  }
}

// The sequence gives its blocks back and waits again, keeping every token it has (they are computed anew
// when it runs again). Its sampler stays with the executor, so a seeded stream carries on where it was.
void SchedulerActor::preempt(cache::SequenceId id) {
  Sequence& s = *sequences_.at(id);
  running_.erase(std::find(running_.begin(), running_.end(), id));
  if (s.in_cache) {
    cache_.tell(Release{id});
    s.in_cache = false;
    s.computed = 0;
    s.reserved = 0;
    s.block_table.clear();
    ++s.preemptions;
    ++stats_.preemptions;
    logger().debug("actor=scheduler preempted sequence={} tokens={}", id, s.tokens.size());
  }
  waiting_.push_front(id);
}

void SchedulerActor::plan_step() {
  if (busy_) return;
  admit();
  // Who steps: priority first, then admission order; paused sequences wait; at most step_cap().
  std::vector<cache::SequenceId> order;
  for (const cache::SequenceId id : running_) {
    if (may_run(*sequences_.at(id))) order.push_back(id);
  }
  std::stable_sort(order.begin(), order.end(), [&](cache::SequenceId a, cache::SequenceId b) {
    return sequences_.at(a)->submit.priority > sequences_.at(b)->submit.priority;
  });
  if (order.size() > step_cap()) order.resize(step_cap());

  plan_.clear();
  std::size_t budget = config_.max_batch_tokens;
  // Decodes first: one token each, so a long prompt never holds up a stream for more than its chunk.
  for (const cache::SequenceId id : order) {
    const Sequence& s = *sequences_.at(id);
    if (!s.decoding()) continue;
    plan_.push_back(PlannedItem{.id = id, .reserves = s.tokens.size() > s.reserved, .decode = true, .chunk = 1, .sample = true});
    --budget;
  }
  // Prefill chunks with what is left (a new sequence's chunk is settled once its reused prefix is known).
  for (const cache::SequenceId id : order) {
    if (budget == 0) break;
    const Sequence& s = *sequences_.at(id);
    if (s.decoding()) continue;
    const std::size_t chunk = std::min(s.remaining(), budget);
    plan_.push_back(PlannedItem{.id = id, .reserves = !s.in_cache || s.tokens.size() > s.reserved, .decode = false,
                                .chunk = chunk, .sample = false});
    budget -= chunk;
  }
  if (plan_.empty()) {
    maybe_answer_drain();
    return;  // idle until a submit, a cancel or a thermal change
  }

  std::vector<ReserveItem> items;
  for (const PlannedItem& p : plan_) {
    if (!p.reserves) continue;  // a later chunk of a prompt: its slots were reserved at creation
    const Sequence& s = *sequences_.at(p.id);
    if (!s.in_cache) {
      items.push_back(ReserveItem{.sequence = p.id, .tokens = s.tokens, .new_sequence = true});
    } else {
      items.push_back(ReserveItem{.sequence = p.id,
                                  .tokens = std::vector<std::int32_t>(s.tokens.begin() + static_cast<std::ptrdiff_t>(s.reserved), s.tokens.end()),
                                  .new_sequence = false});
    }
  }
  busy_ = true;
  const std::uint64_t plan = ++plan_id_;
  if (items.empty()) {
    ReserveResult nothing_to_reserve;
    nothing_to_reserve.reserved = true;
    run_step(std::move(nothing_to_reserve));
    return;
  }
  Reserve request{std::move(items), {}};
  ask(cache_, std::move(request), kReserveTimeout,
      [this, plan](error_code ec, ReserveResult result) { reserved(plan, ec, std::move(result)); });
}

void SchedulerActor::reserved(std::uint64_t plan, error_code ec, ReserveResult result) {
  if (!busy_ || plan != plan_id_) return;  // a stale answer (its plan was given up)
  if (ec || !result.error.empty()) {
    const std::string error = ec ? "the cache manager did not answer: " + ec.message() : result.error;
    logger().error("actor=scheduler reserve failed: {}", error);
    fail_plan("KV cache reservation failed: " + error);
    return;
  }
  if (!result.reserved) {
    // Shortage: the lowest-priority, most recently admitted sequence holding blocks (or, failing that, any
    // planned one) yields, and the step is planned again without it.
    busy_ = false;
    plan_.clear();
    cache::SequenceId victim = 0;
    bool found = false;
    const auto lower = [&](const Sequence& x, const Sequence& y) {
      return x.submit.priority != y.submit.priority ? x.submit.priority < y.submit.priority : x.admission > y.admission;
    };
    for (const bool holders_only : {true, false}) {
      for (const cache::SequenceId id : running_) {
        const Sequence& s = *sequences_.at(id);
        if (holders_only && !s.in_cache) continue;
        if (!found || lower(s, *sequences_.at(victim))) victim = id, found = true;
      }
      if (found) break;
    }
    if (!found) return;
    if (running_.size() == 1) {
      // Alone and still short: it can never fit (the context should have been sized to the cache).
      finish(victim, FinishReason::error, "the KV cache cannot hold this sequence (" +
                                              std::to_string(result.missing_blocks) + " blocks short)");
    } else {
      preempt(victim);
      admission_held_ = true;
    }
    request_tick();
    return;
  }
  // Cancelled while reserving: their reservations stand; finish() releases them below.
  run_step(std::move(result));
}

void SchedulerActor::run_step(ReserveResult&& result) {
  // Apply the reservations: block tables, and for new sequences the prefix they found cached.
  std::size_t r = 0;
  compute::StepBatch batch;
  for (const PlannedItem& p : plan_) {
    if (!p.reserves) continue;
    Sequence& s = *sequences_.at(p.id);
    const cache::Reservation& reservation = result.reservations.at(r);
    s.block_table.assign(result.block_tables.at(r).begin(), result.block_tables.at(r).end());
    if (reservation.copy) batch.copies.push_back(compute::BlockCopy{reservation.copy->source, reservation.copy->destination});
    if (!s.in_cache) {
      s.in_cache = true;
      s.computed = reservation.reused_tokens;
      if (s.cached_tokens < 0) s.cached_tokens = static_cast<std::int32_t>(reservation.reused_tokens);
    }
    s.reserved = s.tokens.size();
    ++r;
  }
  // Chunks: a reused prefix may leave budget over, which goes to the prefills in order.
  std::size_t budget = config_.max_batch_tokens;
  for (const PlannedItem& p : plan_) budget -= p.decode ? 1 : 0;
  for (PlannedItem& p : plan_) {
    if (p.decode) continue;
    const Sequence& s = *sequences_.at(p.id);
    p.chunk = std::min(s.remaining(), budget);
    budget -= p.chunk;
    p.sample = p.chunk == s.remaining();
  }
  std::erase_if(plan_, [](const PlannedItem& p) { return p.chunk == 0; });

  const auto now = Clock::now();
  std::size_t total = 0;
  for (const PlannedItem& p : plan_) {
    Sequence& s = *sequences_.at(p.id);
    if (!s.first_scheduled) s.first_scheduled = now;
    compute::StepSequence step;
    step.sequence = p.id;
    step.start = static_cast<std::int64_t>(s.computed);
    step.tokens.assign(s.tokens.begin() + static_cast<std::ptrdiff_t>(s.computed),
                       s.tokens.begin() + static_cast<std::ptrdiff_t>(s.computed + p.chunk));
    step.block_table = s.block_table;
    step.sample = p.sample;
    if (p.sample) {
      step.sampler = s.submit.sampler;
      step.history = s.tokens;
      step.logprobs = s.submit.logprobs;
    }
    total += p.chunk;
    batch.sequences.push_back(std::move(step));
  }
  if (batch.sequences.empty()) {
    // Everything planned was new and reused its whole prefix but the last token... cannot happen (the
    // last prompt token is always computed); be safe and plan again.
    busy_ = false;
    request_tick();
    return;
  }
  stats_.last_batch_sequences = batch.sequences.size();
  stats_.last_batch_tokens = total;
  const std::uint64_t plan = plan_id_;
  RunStep request{std::move(batch), {}};
  ask(executor_, std::move(request), config_.step_timeout,
      [this, plan](error_code ec, StepOutcome outcome) { step_answered(plan, ec, std::move(outcome)); });
}

void SchedulerActor::step_answered(std::uint64_t plan, error_code ec, StepOutcome outcome) {
  if (!busy_ || plan != plan_id_) return;
  if (ec) {
    fail_plan("the executor did not answer the step: " + ec.message());
  } else if (auto* failed = std::get_if<StepFailed>(&outcome)) {
    ++stats_.steps_failed;
    fail_plan(failed->error);
  } else {
    ++stats_.steps;
    deliver_step(std::move(std::get<StepDone>(outcome)));
  }
}

// Every sequence of the plan ends with the error; the engine carries on with the others.
void SchedulerActor::fail_plan(const std::string& error) {
  std::vector<cache::SequenceId> ids;
  for (const PlannedItem& p : plan_) ids.push_back(p.id);
  busy_ = false;
  plan_.clear();
  for (const cache::SequenceId id : ids) {
    if (sequences_.contains(id)) finish(id, FinishReason::error, error);
  }
  request_tick();
}

void SchedulerActor::deliver_step(StepDone&& done) {
  const auto now = Clock::now();
  std::vector<PlannedItem> plan = std::move(plan_);
  plan_.clear();
  busy_ = false;
  std::size_t sampled_index = 0;
  std::size_t generated_now = 0;
  for (const PlannedItem& p : plan) {
    Sequence& s = *sequences_.at(p.id);
    s.computed += p.chunk;
    s.prefilled += static_cast<std::int32_t>(p.chunk);
    if (!p.decode) stats_.prefill_tokens += p.chunk;
    cache_.tell(Commit{p.id, s.computed});
    if (!p.sample) {
      if (s.ending) finish(p.id, *s.ending);
      continue;
    }
    if (sampled_index >= done.sampled.size() || done.sampled[sampled_index].sequence != p.id) {
      finish(p.id, FinishReason::error, "the executor returned no token for the sequence");
      continue;
    }
    compute::SampledToken& sampled = done.sampled[sampled_index++];
    if (s.ending) {
      finish(p.id, *s.ending);
      continue;
    }
    const std::int32_t token = sampled.token;
    s.tokens.push_back(token);
    ++s.generated;
    ++generated_now;
    ++stats_.generated_tokens;
    if (!s.first_token) {
      s.first_token = now;
      stats_.time_to_first_token.record(now - s.submit.accepted);
    } else {
      stats_.inter_token_latency.record(now - *s.last_token);
    }
    s.last_token = now;
    if (contains(s.submit.end_ids, token)) {
      finish(p.id, FinishReason::eos);
      continue;
    }
    if (contains(s.submit.stop_ids, token)) {
      finish(p.id, FinishReason::stop);
      continue;
    }
    if (s.submit.sink) {
      SequenceToken event{.sequence = p.id,
                          .token = token,
                          .index = static_cast<std::int32_t>(s.generated - 1),
                          .logprob = std::nullopt,
                          .top = {}};
      if (s.submit.logprobs > 0) {
        event.logprob = sampled.logprob;
        event.top = std::move(sampled.top);
      }
      s.submit.sink(std::move(event));
    }
    if (s.generated >= static_cast<std::size_t>(s.submit.max_tokens) ||
        static_cast<std::int64_t>(s.tokens.size()) >= config_.context_length) {
      finish(p.id, FinishReason::length);
    }
  }
  if (generated_now > 0) recent_tokens_.emplace_back(now, generated_now);
  forget_old_rates(now);
  maybe_answer_drain();
  request_tick(policy().step_delay);
}

void SchedulerActor::finish(cache::SequenceId id, FinishReason reason, std::string error) {
  const auto it = sequences_.find(id);
  if (it == sequences_.end()) return;
  std::unique_ptr<Sequence> owned = std::move(it->second);
  sequences_.erase(it);
  Sequence& s = *owned;
  std::erase(running_, id);
  if (const auto w = std::find(waiting_.begin(), waiting_.end(), id); w != waiting_.end()) waiting_.erase(w);
  if (s.in_cache) cache_.tell(Release{id});
  executor_.tell(ReleaseSequence{id});
  admission_held_ = false;

  ++stats_.finished;
  if (reason == FinishReason::cancelled) ++stats_.cancelled;
  if (reason == FinishReason::timeout) ++stats_.timed_out;
  if (reason == FinishReason::error) ++stats_.failed;

  SequenceFinished event;
  event.sequence = id;
  event.reason = reason;
  event.error = std::move(error);
  event.prompt_tokens = static_cast<std::int32_t>(s.submit.prompt.size());
  event.cached_tokens = std::max(0, s.cached_tokens);
  event.completion_tokens = static_cast<std::int32_t>(s.generated);
  event.prefilled_tokens = s.prefilled;
  event.preemptions = s.preemptions;
  const auto now = Clock::now();
  proto::Timings& t = event.timings;
  const Clock::time_point started = s.first_scheduled.value_or(now);
  t.queue_ms = milliseconds(started - s.submit.accepted);
  if (s.first_token) {
    t.prefill_ms = milliseconds(*s.first_token - started);
    t.first_token_ms = milliseconds(*s.first_token - s.submit.accepted);
    t.decode_ms = milliseconds(*s.last_token - *s.first_token);
    if (s.generated > 1 && t.decode_ms > 0.0) t.tokens_per_second = static_cast<double>(s.generated - 1) * 1000.0 / t.decode_ms;
  }
  if (s.submit.sink) s.submit.sink(std::move(event));
  maybe_answer_drain();
}

void SchedulerActor::expire_deadlines() {
  const auto now = Clock::now();
  std::vector<cache::SequenceId> expired;
  for (const auto& [id, s] : sequences_) {
    if (s->submit.deadline && now >= *s->submit.deadline && !s->ending) expired.push_back(id);
  }
  for (const cache::SequenceId id : expired) {
    Sequence& s = *sequences_.at(id);
    if (in_step(id)) {
      s.ending = FinishReason::timeout;
    } else {
      finish(id, FinishReason::timeout, "the request passed its deadline");
    }
  }
  if (!expired.empty()) request_tick();
}

}  // namespace loom::actors
