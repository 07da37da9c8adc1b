// Bookkeeping: the sizes of the engine's per-request and per-session structures (maps, queues, sets), for
// stats and for /metrics (`loom_engine_bookkeeping_entries{map="..."}`). Each one must come back to its
// idle size once the requests it held have ended: a structure that gains an entry per request and never
// loses it is memory that grows for as long as the server runs. Each actor reports its own in its stats;
// EngineStats::bookkeeping_entries() lists them all under stable names ("<actor>.<structure>").
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace loom::actors {

struct BookkeepingEntry {
  std::string map;          // "<actor>.<structure>", e.g. "scheduler.fairness_keys"
  std::size_t entries = 0;
};

// The Scheduler's, all 0 when no sequence is live.
struct SchedulerBookkeeping {
  std::size_t sequences = 0;      // live sequences: waiting, running and paused
  std::size_t waiting = 0;        // the waiting queue
  std::size_t running = 0;        // the running set
  std::size_t fairness_keys = 0;  // fairness keys with a live sequence (their round-robin state)
  std::size_t step_plan = 0;      // sequences in the step that is out
  std::size_t drain_replies = 0;  // drains not yet answered (the actor's)
};

// The GpuExecutorActor's, all 0 when nothing runs.
struct ExecutorBookkeeping {
  std::size_t sequences = 0;     // started on the backend (a step with a begin) and not yet released
  std::size_t pending_jobs = 0;  // loads and steps posted to the compute thread, not yet answered
};

// The EngineActor's own.
struct EngineBookkeeping {
  std::size_t requests = 0;        // requests by id, accepted and not yet done
  std::size_t sessions = 0;        // session actors held: open sessions, closing ones, stand-alone requests'
  std::size_t named_sessions = 0;  // open sessions by id
  std::size_t embeddings = 0;      // embedding requests with an id, by id (what Engine::cancel reaches)
};

}  // namespace loom::actors
