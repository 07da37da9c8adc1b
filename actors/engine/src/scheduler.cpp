#include "loom/actors/engine/scheduler.hpp"

#include <algorithm>
#include <iterator>
#include <stdexcept>
#include <utility>

#include "loom/proto/generate_request.hpp"

namespace loom::actors {

namespace {

using Clock = Scheduler::Clock;
using proto::FinishReason;

double milliseconds(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

bool contains_id(const std::vector<std::int32_t>& ids, std::int32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

std::shared_ptr<const SequenceSink> share(SequenceSink sink) {
  if (!sink) return nullptr;
  return std::make_shared<const SequenceSink>(std::move(sink));
}

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

struct Scheduler::Sequence {
  SubmitSequence submit;                    // its sink moved to `sink`
  std::shared_ptr<const SequenceSink> sink;
  std::vector<std::int32_t> tokens;  // prompt, then every generated token (the last one not yet computed)
  std::size_t generated = 0;
  bool in_cache = false;             // the cache manager holds the sequence
  std::size_t reserved = 0;          // tokens with a slot in the cache (while in_cache)
  std::size_t computed = 0;          // positions whose K/V are in the cache (while in_cache)
  std::vector<compute::BlockId> block_table;
  // What the backend holds of it: its table as last sent, and whether it holds the sequence at all (not
  // before its first step, nor after a preemption until it starts again). Steps send the difference.
  std::vector<compute::BlockId> backend_table;
  bool backend_holds = false;
  std::uint64_t admission = 0;       // order of the last admission (0: never admitted)
  std::uint64_t arrival_turn = 0;    // admissions made before it arrived: its place in the round-robin
  std::optional<FinishReason> ending;  // cancelled or timed out while its step was out
  std::int32_t choice = 0;           // of its request (n > 1): 0, or i for a fork made for choice i
  std::int32_t cached_tokens = -1;   // from the first creation
  std::int32_t prefilled = 0;
  std::int32_t preemptions = 0;
  std::optional<Clock::time_point> first_scheduled, first_token, last_token;
  std::vector<float> embedding;      // an embedding sequence's vector, once its last chunk is back

  // Tokens still to run through the model: the prompt's (or, after a preemption, every known token) until
  // they are in, then the one token each decode computes.
  std::size_t remaining() const { return tokens.size() - (in_cache ? computed : 0); }
  bool decoding() const { return in_cache && generated > 0 && remaining() == 1; }
};

struct Scheduler::PlannedItem {
  cache::SequenceId id = 0;
  bool reserves = false;      // has an item in the plan's reservation (creation, or slots for new tokens)
  bool decode = false;
  std::size_t chunk = 0;      // tokens computed this step (settled once the reservation is known)
  bool sample = false;
  std::size_t forks = 0;      // forks made where it samples: their entries follow its own in the answer
};

Scheduler::Scheduler(SchedulerConfig config) : config_(std::move(config)) { config_.validate(); }

Scheduler::~Scheduler() = default;

bool Scheduler::may_run(const Sequence& s) const noexcept { return s.submit.priority >= policy().min_priority; }

// In the step that is out: such a sequence can only end when that step is back.
bool Scheduler::in_step(cache::SequenceId id) const noexcept {
  return step_out_ && std::any_of(plan_.begin(), plan_.end(), [&](const PlannedItem& p) { return p.id == id; });
}

// Lower priority yields first; among equals, the most recently admitted.
bool Scheduler::yields_to(const Sequence& x, const Sequence& y) const noexcept {
  return x.submit.priority != y.submit.priority ? x.submit.priority < y.submit.priority : x.admission > y.admission;
}

std::size_t Scheduler::step_cap() const noexcept {
  std::size_t cap = std::min(config_.max_running, config_.max_batch_tokens);
  const ThermalPolicy& p = policy();
  if (p.max_running > 0) cap = std::min(cap, p.max_running);
  if (p.max_running == 0 && thermal_ == ThermalState::serious) cap = std::max<std::size_t>(1, cap / 2);
  return cap;
}

std::size_t Scheduler::paused_count() const {
  return static_cast<std::size_t>(
      std::count_if(running_.begin(), running_.end(), [&](cache::SequenceId id) { return !may_run(at(id)); }));
}

SchedulerBookkeeping Scheduler::bookkeeping() const noexcept {
  SchedulerBookkeeping out;
  out.sequences = sequences_.size();
  out.waiting = waiting_.size();
  out.running = running_.size();
  out.fairness_keys = fairness_keys_.size();
  out.step_plan = plan_.size();
  return out;
}

bool Scheduler::set_thermal(ThermalState state) noexcept {
  if (state == thermal_) return false;
  thermal_ = state;
  return true;
}

// ---- Sequences come and go ----

std::optional<SinkEvent> Scheduler::submit(SubmitSequence m) {
  const auto reject = [&](proto::ErrorCode code, std::string message) {
    const cache::SequenceId id = m.sequence;
    return SinkEvent{share(std::move(m.sink)), SequenceRejected{id, code, std::move(message)}};
  };
  if (sequences_.contains(m.sequence)) {
    return reject(proto::ErrorCode::conflict, "sequence " + std::to_string(m.sequence) + " is already live");
  }
  if (m.prompt.empty()) return reject(proto::ErrorCode::invalid_request, "the prompt has no tokens");
  if (static_cast<std::int64_t>(m.prompt.size()) >= config_.context_length) {
    return reject(proto::ErrorCode::invalid_request,
                  "the prompt is " + std::to_string(m.prompt.size()) + " tokens; the context holds " +
                      std::to_string(config_.context_length) + " (and one generated token needs a place)");
  }
  if (m.params.max_tokens < 1) return reject(proto::ErrorCode::invalid_request, "max_tokens must be at least 1");
  if (m.params.logprobs < 0) return reject(proto::ErrorCode::invalid_request, "logprobs must not be negative");
  if (m.forks.size() > SubmitSequence::kMaxForks) {
    return reject(proto::ErrorCode::invalid_request,
                  "at most " + std::to_string(SubmitSequence::kMaxForks) + " forks (choices beyond the first)");
  }
  for (std::size_t i = 0; i < m.forks.size(); ++i) {
    const cache::SequenceId fork = m.forks[i];
    if (fork == m.sequence || sequences_.contains(fork) || std::count(m.forks.begin(), m.forks.begin() + i, fork) > 0) {
      return reject(proto::ErrorCode::conflict, "fork id " + std::to_string(fork) + " is not a new sequence id");
    }
  }
  if (waiting_.size() >= config_.max_waiting) {
    return reject(proto::ErrorCode::overloaded,
                  "the waiting queue is full (" + std::to_string(config_.max_waiting) + " requests)");
  }
  auto s = std::make_unique<Sequence>();
  s->tokens = m.prompt;
  s->arrival_turn = admissions_;
  s->sink = share(std::move(m.sink));
  s->submit = std::move(m);
  const cache::SequenceId id = s->submit.sequence;
  ++fairness_keys_[s->submit.fairness_key].live;
  sequences_.emplace(id, std::move(s));
  waiting_.push_back(id);
  return std::nullopt;
}

SchedulerActions Scheduler::cancel(cache::SequenceId id, FinishReason reason, Clock::time_point now) {
  SchedulerActions actions;
  const auto it = sequences_.find(id);
  if (it == sequences_.end()) return actions;
  if (in_step(id)) {
    if (!it->second->ending) it->second->ending = reason;  // ends when its step is back
    return actions;
  }
  finish(id, reason, {}, now, actions);
  return actions;
}

SchedulerActions Scheduler::cancel_all(FinishReason reason, Clock::time_point now) {
  std::vector<cache::SequenceId> ids;
  for (const auto& [id, s] : sequences_) ids.push_back(id);
  SchedulerActions actions;
  for (const cache::SequenceId id : ids) {
    SchedulerActions more = cancel(id, reason, now);
    std::move(more.begin(), more.end(), std::back_inserter(actions));
  }
  return actions;
}

SchedulerActions Scheduler::expire_deadlines(Clock::time_point now) {
  std::vector<cache::SequenceId> expired;
  for (const auto& [id, s] : sequences_) {
    if (s->submit.deadline && now >= *s->submit.deadline && !s->ending) expired.push_back(id);
  }
  SchedulerActions actions;
  for (const cache::SequenceId id : expired) {
    if (in_step(id)) {
      at(id).ending = FinishReason::timeout;
    } else {
      finish(id, FinishReason::timeout, "the request passed its deadline", now, actions);
    }
  }
  return actions;
}

// Gone for good: its blocks and sampler are released, and its sink hears the last event.
void Scheduler::finish(cache::SequenceId id, FinishReason reason, std::string error, Clock::time_point now,
                       SchedulerActions& actions) {
  const auto it = sequences_.find(id);
  if (it == sequences_.end()) return;
  std::unique_ptr<Sequence> owned = std::move(it->second);
  sequences_.erase(it);
  const Sequence& s = *owned;
  // The key's last live sequence takes its round-robin state with it (see admission_rank).
  const auto key = fairness_keys_.find(s.submit.fairness_key);
  if (key != fairness_keys_.end() && --key->second.live == 0) fairness_keys_.erase(key);
  std::erase(running_, id);
  if (const auto w = std::find(waiting_.begin(), waiting_.end(), id); w != waiting_.end()) waiting_.erase(w);
  if (s.in_cache) actions.emplace_back(Release{id});
  actions.emplace_back(ReleaseSequence{id});
  admission_held_ = false;
  finish_unforked(s, reason, error, actions);

  SequenceFinished event;
  event.sequence = id;
  event.reason = reason;
  event.error = std::move(error);
  event.prompt_tokens = static_cast<std::int32_t>(s.submit.prompt.size());
  event.cached_tokens = std::max(0, s.cached_tokens);
  event.completion_tokens = static_cast<std::int32_t>(s.generated);
  event.prefilled_tokens = s.prefilled;
  event.preemptions = s.preemptions;
  event.embedding = std::move(owned->embedding);
  event.choice = s.choice;
  proto::Timings& t = event.timings;
  const Clock::time_point started = s.first_scheduled.value_or(now);
  t.queue_ms = milliseconds(started - s.submit.accepted);
  if (s.first_token) {
    t.prefill_ms = milliseconds(*s.first_token - started);
    t.first_token_ms = milliseconds(*s.first_token - s.submit.accepted);
    t.decode_ms = milliseconds(*s.last_token - *s.first_token);
    if (s.generated > 1 && t.decode_ms > 0.0) t.tokens_per_second = static_cast<double>(s.generated - 1) * 1000.0 / t.decode_ms;
  }
  actions.emplace_back(SinkEvent{s.sink, std::move(event)});
}

// ---- Admission ----

// A waiting sequence's place in the round-robin among its priority: the admission count when it arrived,
// or its key's last admission if that came later (a key that was just served waits behind the others). A
// smaller rank goes first; equal ranks go in queue order (arrival, preempted ones first).
//
// Why every wait is bounded: a sequence that arrives when the count is A has a rank of A (its key was last
// admitted before), raised only by admissions of its own key; every sequence arriving after it has a rank
// of at least A and queues behind it. So among its priority it waits only for what was there before it
// (waiting, or running and sent back to the front by a KV shortage) and its own key's earlier sequences.
// (Ranking a never-admitted key as 0, as before, let a stream of new keys, one per stand-alone request,
// overtake a conversation's next turn for as long as the stream lasted.) A key with no live sequence is
// forgotten: its next sequence's arrival count is at least its last admission, so that changes no rank.
std::uint64_t Scheduler::admission_rank(const Sequence& s) const {
  const auto key = fairness_keys_.find(s.submit.fairness_key);
  const std::uint64_t last_admitted = key == fairness_keys_.end() ? 0 : key->second.last_admitted;
  return std::max(s.arrival_turn, last_admitted);
}

// The waiting sequence to admit next: highest priority first, then the smallest admission rank, then queue
// order. Paused priorities are skipped. end(): none.
std::deque<cache::SequenceId>::iterator Scheduler::next_to_admit() {
  auto best = waiting_.end();
  std::uint64_t best_rank = 0;
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
    const Sequence& s = at(*it);
    if (!may_run(s)) continue;
    const std::uint64_t rank = admission_rank(s);
    if (best != waiting_.end()) {
      const Sequence& b = at(*best);
      if (s.submit.priority != b.submit.priority) {
        if (s.submit.priority < b.submit.priority) continue;
      } else if (rank >= best_rank) {
        continue;  // ties keep the earlier place in the queue
      }
    }
    best = it;
    best_rank = rank;
  }
  return best;
}

// Moves waiting sequences into the running set. Past the cap (or while a KV shortage holds admissions), a
// waiting sequence of higher priority than the lowest running one takes its place (that one is preempted).
void Scheduler::admit(SchedulerActions& actions) {
  while (!waiting_.empty()) {
    const auto best = next_to_admit();
    if (best == waiting_.end()) return;
    const cache::SequenceId chosen = *best;
    Sequence& candidate = at(chosen);
    const bool full = running_.size() >= config_.max_running || (admission_held_ && !running_.empty());
    if (full) {
      const auto lowest = std::min_element(running_.begin(), running_.end(), [&](cache::SequenceId a, cache::SequenceId b) {
        return yields_to(at(a), at(b));
      });
      if (at(*lowest).submit.priority >= candidate.submit.priority) return;
      preempt(*lowest, actions);  // one place for one sequence: the loop checks again for the next candidate
    }
    candidate.admission = ++admissions_;
    fairness_keys_.at(candidate.submit.fairness_key).last_admitted = candidate.admission;
    running_.push_back(chosen);
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), chosen));
  }
}

// The sequence gives its blocks back and waits again at the front, keeping every token it has (they are
// computed anew when it runs again). Its sampler stays with the executor, so a seeded stream carries on.
void Scheduler::preempt(cache::SequenceId id, SchedulerActions& actions) {
  Sequence& s = at(id);
  running_.erase(std::find(running_.begin(), running_.end(), id));
  if (s.in_cache) {
    actions.emplace_back(Release{id});
    s.in_cache = false;
    s.computed = 0;
    s.reserved = 0;
    s.block_table.clear();
    s.backend_holds = false;  // its next step starts it afresh (the executor keeps its sampler)
    ++s.preemptions;
    ++preemptions_;
  }
  waiting_.push_front(id);
}

// ---- Planning ----

// Who steps: priority first, then admission order; paused sequences wait; at most step_cap().
std::vector<cache::SequenceId> Scheduler::stepping_order() const {
  std::vector<cache::SequenceId> order;
  for (const cache::SequenceId id : running_) {
    if (may_run(at(id))) order.push_back(id);
  }
  std::stable_sort(order.begin(), order.end(), [&](cache::SequenceId a, cache::SequenceId b) {
    return at(a).submit.priority > at(b).submit.priority;
  });
  if (order.size() > step_cap()) order.resize(step_cap());
  return order;
}

// Decodes first, one token each, so a long prompt never holds up a stream for more than its chunk; then
// prefill chunks with what is left of the budget (a new sequence's chunk is settled once its reused prefix
// is known).
void Scheduler::plan_chunks(const std::vector<cache::SequenceId>& order) {
  std::size_t budget = config_.max_batch_tokens;
  for (const cache::SequenceId id : order) {
    const Sequence& s = at(id);
    if (!s.decoding()) continue;
    plan_.push_back(PlannedItem{.id = id, .reserves = s.tokens.size() > s.reserved, .decode = true, .chunk = 1, .sample = true});
    --budget;
  }
  for (const cache::SequenceId id : order) {
    if (budget == 0) break;
    const Sequence& s = at(id);
    if (s.decoding()) continue;
    const std::size_t chunk = std::min(s.remaining(), budget);
    plan_.push_back(PlannedItem{.id = id, .reserves = !s.in_cache || s.tokens.size() > s.reserved, .decode = false,
                                .chunk = chunk, .sample = false});
    budget -= chunk;
  }
}

// A new sequence reserves every token it knows (reusing its cached prefix); one the cache holds reserves
// the tokens it has no slot for yet. A later chunk of a prompt reserves nothing: creation covered it.
std::vector<ReserveItem> Scheduler::reserve_items() const {
  std::vector<ReserveItem> items;
  for (const PlannedItem& p : plan_) {
    if (!p.reserves) continue;
    const Sequence& s = at(p.id);
    if (!s.in_cache) {
      items.push_back(ReserveItem{.sequence = p.id, .tokens = s.tokens, .new_sequence = true, .reuse_prefix = !s.submit.embed});
    } else {
      items.push_back(ReserveItem{.sequence = p.id,
                                  .tokens = std::vector<std::int32_t>(s.tokens.begin() + static_cast<std::ptrdiff_t>(s.reserved), s.tokens.end()),
                                  .new_sequence = false});
    }
  }
  return items;
}

StepPlan Scheduler::plan_step() {
  StepPlan out;
  if (step_out_) return out;
  admit(out.actions);
  plan_.clear();
  plan_chunks(stepping_order());
  if (plan_.empty()) return out;
  out.planned = true;
  out.reserve = reserve_items();
  step_out_ = true;
  return out;
}

// ---- Starting a step ----

// Block tables, and for new sequences the prefix they found cached. Returns the block copies to do first.
std::vector<compute::BlockCopy> Scheduler::apply_reservations(const ReserveResult& reserved) {
  std::vector<compute::BlockCopy> copies;
  std::size_t r = 0;
  for (const PlannedItem& p : plan_) {
    if (!p.reserves) continue;
    Sequence& s = at(p.id);
    const cache::Reservation& reservation = reserved.reservations.at(r);
    s.block_table.assign(reserved.block_tables.at(r).begin(), reserved.block_tables.at(r).end());
    if (reservation.copy) copies.push_back(compute::BlockCopy{reservation.copy->source, reservation.copy->destination});
    if (!s.in_cache) {
      s.in_cache = true;
      s.computed = reservation.reused_tokens;
      if (s.cached_tokens < 0) s.cached_tokens = static_cast<std::int32_t>(reservation.reused_tokens);
    }
    s.reserved = s.tokens.size();
    ++r;
  }
  return copies;
}

// A reused prefix may leave budget over, which goes to the prefills in order; a chunk that reaches the
// last known token samples.
void Scheduler::settle_chunks() {
  std::size_t budget = config_.max_batch_tokens;
  for (const PlannedItem& p : plan_) budget -= p.decode ? 1 : 0;
  for (PlannedItem& p : plan_) {
    if (p.decode) continue;
    const Sequence& s = at(p.id);
    p.chunk = std::min(s.remaining(), budget);
    budget -= p.chunk;
    p.sample = p.chunk == s.remaining();
  }
  std::erase_if(plan_, [](const PlannedItem& p) { return p.chunk == 0; });
}

// The batch the executor runs: per planned sequence its chunk of tokens from the first position not yet
// computed, its block table, and when it samples its sampler, history and logprobs.
compute::StepBatch Scheduler::build_step_batch(std::vector<compute::BlockCopy> copies) {
  compute::StepBatch batch;
  batch.copies = std::move(copies);
  for (PlannedItem& p : plan_) {
    Sequence& s = at(p.id);
    compute::StepSequence step;
    step.sequence = p.id;
    step.start = static_cast<std::int64_t>(s.computed);
    step.tokens.assign(s.tokens.begin() + static_cast<std::ptrdiff_t>(s.computed),
                       s.tokens.begin() + static_cast<std::ptrdiff_t>(s.computed + p.chunk));
    step.sample = p.sample;
    step.embed = s.submit.embed;
    if (p.sample) step.forks = fork_steps(s);
    p.forks = step.forks.size();
    if (!s.backend_holds) {
      // The backend starts the sequence (afresh after a preemption): its parameters, the reused prefix,
      // the whole table.
      step.begin = compute::SequenceStart{
          s.submit.params, std::vector<std::int32_t>(s.tokens.begin(), s.tokens.begin() + step.start)};
      s.backend_table.clear();
    }
    // Only the table's entries that differ from what the backend holds: one new block every block_size
    // decodes, the last one after a copy-on-write, nothing in most steps.
    const auto same = std::mismatch(s.backend_table.begin(), s.backend_table.end(), s.block_table.begin(),
                                    s.block_table.end());
    step.table_from = same.first - s.backend_table.begin();
    step.blocks.assign(same.second, s.block_table.end());
    s.backend_table = s.block_table;
    s.backend_holds = true;
    batch.sequences.push_back(std::move(step));
  }
  return batch;
}

compute::StepBatch Scheduler::start_step(const ReserveResult& reserved, Clock::time_point now) {
  std::vector<compute::BlockCopy> copies = apply_reservations(reserved);
  settle_chunks();
  for (const PlannedItem& p : plan_) {
    Sequence& s = at(p.id);
    if (!s.first_scheduled) s.first_scheduled = now;
  }
  compute::StepBatch batch = build_step_batch(std::move(copies));
  // Everything planned reused its whole prefix... cannot happen (the last known token is always computed);
  // be safe: the step is over and the actor plans again.
  if (batch.sequences.empty()) end_step();
  return batch;
}

void Scheduler::end_step() {
  step_out_ = false;
  plan_.clear();
}

// ---- A step's answer ----

SchedulerActions Scheduler::shortage(std::size_t missing_blocks, Clock::time_point now) {
  end_step();
  SchedulerActions actions;
  // The yielding one: among sequences holding blocks if any, else among every running one.
  const Sequence* victim = nullptr;
  for (const bool holders_only : {true, false}) {
    for (const cache::SequenceId id : running_) {
      const Sequence& s = at(id);
      if (holders_only && !s.in_cache) continue;
      if (victim == nullptr || yields_to(s, *victim)) victim = &s;
    }
    if (victim != nullptr) break;
  }
  if (victim == nullptr) return actions;
  const cache::SequenceId id = victim->submit.sequence;
  if (running_.size() == 1) {
    // Alone and still short: it can never fit (the context should have been sized to the cache).
    finish(id, FinishReason::error,
           "the KV cache cannot hold this sequence (" + std::to_string(missing_blocks) + " blocks short)", now, actions);
  } else {
    preempt(id, actions);
    admission_held_ = true;
  }
  return actions;
}

SchedulerActions Scheduler::fail_step(const std::string& error, Clock::time_point now) {
  std::vector<cache::SequenceId> ids;
  for (const PlannedItem& p : plan_) ids.push_back(p.id);
  end_step();
  SchedulerActions actions;
  for (const cache::SequenceId id : ids) finish(id, FinishReason::error, error, now, actions);
  return actions;
}

AppliedStep Scheduler::apply_step(StepDone done, Clock::time_point now) {
  const std::vector<PlannedItem> plan = std::move(plan_);
  end_step();
  AppliedStep out;
  std::size_t sampled_index = 0;
  for (const PlannedItem& p : plan) apply_item(p, done, sampled_index, now, out);
  return out;
}

// An embedding sequence's last chunk is back: it ends with its vector (reason stop), or as it was asked to.
void Scheduler::apply_embedding(cache::SequenceId id, StepDone& done, Clock::time_point now, AppliedStep& out) {
  Sequence& s = at(id);
  const auto it = std::find_if(done.embeddings.begin(), done.embeddings.end(),
                               [id](const compute::PooledEmbedding& e) { return e.sequence == id; });
  if (s.ending) return finish(id, *s.ending, {}, now, out.actions);
  if (it == done.embeddings.end()) {
    return finish(id, FinishReason::error, "the executor returned no embedding for the sequence", now, out.actions);
  }
  s.embedding = std::move(it->values);
  finish(id, FinishReason::stop, {}, now, out.actions);
}

// An end id or a stop id ends the sequence with the token that was sampled (which is not streamed).
std::optional<FinishReason> Scheduler::ending_for(const Sequence& s, std::int32_t token) const {
  if (contains_id(s.submit.end_ids, token)) return FinishReason::eos;
  if (contains_id(s.submit.params.stop_token_ids, token)) return FinishReason::stop;
  return std::nullopt;
}

void Scheduler::apply_item(const PlannedItem& p, StepDone& done, std::size_t& sampled_index, Clock::time_point now,
                           AppliedStep& out) {
  Sequence& s = at(p.id);
  s.computed += p.chunk;
  s.prefilled += static_cast<std::int32_t>(p.chunk);
  if (!p.decode) out.prefill_tokens += p.chunk;
  out.actions.emplace_back(Commit{p.id, s.computed});
  // Not once preempted: a recompute would report fewer positions than already reported.
  if (s.submit.progress && s.sink && !p.decode && s.generated == 0 && s.preemptions == 0) {
    out.actions.emplace_back(SinkEvent{s.sink, SequenceProgress{p.id, static_cast<std::int32_t>(s.computed),
                                                                static_cast<std::int32_t>(s.tokens.size())}});
  }
  if (!p.sample) {
    if (s.ending) finish(p.id, *s.ending, {}, now, out.actions);
    return;
  }
  if (s.submit.embed) return apply_embedding(p.id, done, now, out);
  if (sampled_index >= done.sampled.size() || done.sampled[sampled_index].sequence != p.id) {
    finish(p.id, FinishReason::error, "the executor returned no token for the sequence", now, out.actions);
    return;
  }
  compute::SampledToken& sampled = done.sampled[sampled_index++];
  const std::size_t forks_from = sampled_index;
  sampled_index += p.forks;
  if (s.ending) {
    finish(p.id, *s.ending, {}, now, out.actions);
    return;
  }
  if (!sampled.error.empty()) {
    // This sequence alone cannot go on (its grammar allows nothing, ...); its token means nothing.
    finish(p.id, FinishReason::error, std::move(sampled.error), now, out.actions);
    return;
  }
  if (p.forks > 0) {
    bool answered = sampled_index <= done.sampled.size();
    for (std::size_t i = 0; answered && i < p.forks; ++i) {
      answered = done.sampled[forks_from + i].sequence == s.submit.forks[i];
    }
    if (!answered) {
      finish(p.id, FinishReason::error, "the executor returned no token for a forked choice", now, out.actions);
      return;
    }
    const std::vector<cache::SequenceId> children = fork_choices(p.id, out.actions);
    take_token(p.id, sampled, now, out);
    for (std::size_t i = 0; i < children.size(); ++i) take_token(children[i], done.sampled[forks_from + i], now, out);
    return;
  }
  take_token(p.id, sampled, now, out);
}

// A sampled token appended to its sequence, streamed, or the sequence's end.
void Scheduler::take_token(cache::SequenceId id, compute::SampledToken& sampled, Clock::time_point now,
                           AppliedStep& out) {
  Sequence& s = at(id);
  if (!sampled.error.empty()) {
    finish(id, FinishReason::error, std::move(sampled.error), now, out.actions);
    return;
  }
  const std::int32_t token = sampled.token;
  s.tokens.push_back(token);
  ++s.generated;
  ++out.generated_tokens;
  if (!s.first_token) {
    s.first_token = now;
    out.first_token_latencies.push_back(now - s.submit.accepted);
  } else {
    out.inter_token_latencies.push_back(now - *s.last_token);
  }
  s.last_token = now;
  if (const auto reason = ending_for(s, token)) {
    finish(id, *reason, {}, now, out.actions);
    return;
  }
  if (s.sink) {
    SequenceToken event{.sequence = id, .token = token, .index = static_cast<std::int32_t>(s.generated - 1),
                        .logprob = std::nullopt, .top = {}, .choice = s.choice};
    if (s.submit.params.logprobs > 0) {
      event.logprob = sampled.logprob;
      event.top = std::move(sampled.top);
    }
    out.actions.emplace_back(SinkEvent{s.sink, std::move(event)});
  }
  if (s.generated >= static_cast<std::size_t>(s.submit.params.max_tokens) ||
      static_cast<std::int64_t>(s.tokens.size()) >= config_.context_length) {
    finish(id, FinishReason::length, {}, now, out.actions);
  }
}

// ---- Choices of one prompt (n > 1) ----

// The forks a sequence makes where it samples its first token: fork i samples with seed + i + 1.
std::vector<compute::SequenceFork> Scheduler::fork_steps(const Sequence& s) const {
  std::vector<compute::SequenceFork> forks;
  for (std::size_t i = 0; i < s.submit.forks.size(); ++i) {
    proto::SamplingParams params = s.submit.params;
    if (params.seed) params.seed = *params.seed + i + 1;  // unsigned: wraps
    forks.push_back(compute::SequenceFork{s.submit.forks[i], std::move(params)});
  }
  return forks;
}

// The parent's forks become sequences of their own, running, holding its blocks (the cache manager forks
// them; the backend already holds them) and its tokens before the one it just sampled.
std::vector<cache::SequenceId> Scheduler::fork_choices(cache::SequenceId parent, SchedulerActions& actions) {
  Sequence& s = at(parent);
  const std::vector<compute::SequenceFork> steps = fork_steps(s);
  std::vector<cache::SequenceId> children;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    auto child = std::make_unique<Sequence>();
    child->submit = s.submit;
    child->submit.sequence = steps[i].sequence;
    child->submit.params = steps[i].params;
    child->submit.forks.clear();
    child->sink = s.sink;
    child->tokens = s.tokens;
    child->in_cache = s.in_cache;
    child->reserved = s.reserved;
    child->computed = s.computed;
    child->block_table = s.block_table;
    child->backend_table = s.backend_table;
    child->backend_holds = true;
    child->admission = ++admissions_;
    child->arrival_turn = s.arrival_turn;
    child->choice = static_cast<std::int32_t>(i + 1);
    child->cached_tokens = s.cached_tokens;
    child->first_scheduled = s.first_scheduled;
    ++fairness_keys_[s.submit.fairness_key].live;
    actions.emplace_back(ForkSequence{.sequence = steps[i].sequence, .parent = parent});
    running_.push_back(steps[i].sequence);
    children.push_back(steps[i].sequence);
    sequences_.emplace(steps[i].sequence, std::move(child));
  }
  at(parent).submit.forks.clear();
  return children;
}

// A sequence that ends before it forked: its choices end with it, so that each still hears its last event.
void Scheduler::finish_unforked(const Sequence& s, FinishReason reason, const std::string& error,
                                SchedulerActions& actions) const {
  for (std::size_t i = 0; i < s.submit.forks.size(); ++i) {
    SequenceFinished event;
    event.sequence = s.submit.forks[i];
    event.reason = reason;
    event.error = error;
    event.prompt_tokens = static_cast<std::int32_t>(s.submit.prompt.size());
    event.choice = static_cast<std::int32_t>(i + 1);
    actions.emplace_back(ReleaseSequence{s.submit.forks[i]});  // the backend may hold it (its fork step failed)
    actions.emplace_back(SinkEvent{s.sink, std::move(event)});
  }
}

}  // namespace loom::actors
