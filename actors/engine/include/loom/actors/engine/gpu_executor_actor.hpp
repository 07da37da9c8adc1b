// GpuExecutorActor: the one owner of the compute backend and the model it has loaded. Loading a model and
// running a step are long computations, so they never run on the io_context's threads: the actor owns one
// compute thread and posts each job to it, in the order the messages arrived; the job reports back through
// a continuation on the actor's strand, which updates its counters and answers the asker. One job runs at a time, so a RunStep
// sent while another runs waits its turn, and the backend needs no lock.
//
// Failures are answers: a load that fails answers an error (the executor then has no model), a step that
// fails (bad input, a backend error) answers StepFailed naming its sequences, and the next step runs as
// usual. A RunStep with no model loaded (none yet, or the last load failed) answers StepFailed.
//
// When the actor stops, a load that is running is cancelled at its next check (LoadOptions::stop: it ends
// within one slice of its KV cache, not at the end of a load of many GiB); a step that is running finishes
// (the io thread destroying the actor waits for it); jobs not yet started are dropped and their askers
// hear no_reply. Its messages: gpu_executor_protocol.hpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <variant>

#include <boost/asio/thread_pool.hpp>

#include "loom/actors/engine/gpu_executor_protocol.hpp"
#include "loom/actors/runtime/actor.hpp"
#include "loom/compute/backend.hpp"

namespace loom::actors {

class GpuExecutorActor : public Actor<GpuExecutorActor, GpuExecutorProtocol> {
 public:
  // `factory` builds the backend for a LoadModel (on the compute thread); empty: compute::load_backend (the CPU
  // or the Vulkan backend, as LoadOptions::device says).
  explicit GpuExecutorActor(compute::BackendFactory factory = {});

  void on(LoadModel m);
  void on(RunStep m);
  void on(ReleaseSequence m);
  void on(GetLoadedModel m);
  void on(GetExecutorStats m);
  void on_stop();  // cancels a load in progress

 private:
  // On the strand, when the compute thread has finished a job.
  void load_finished(std::uint64_t job, LoadResult result, std::chrono::nanoseconds busy);
  // (The outcome by reference: moved by value there, GCC 12 warns maybe-uninitialized inside std::variant.)
  void step_finished(std::uint64_t job, StepOutcome&& outcome, std::chrono::nanoseconds busy);

  // What the compute thread owns; only its jobs touch it, one at a time.
  struct ComputeState {
    std::unique_ptr<compute::Backend> backend;
  };

  compute::BackendFactory factory_;
  std::shared_ptr<ComputeState> compute_state_ = std::make_shared<ComputeState>();
  std::unordered_map<std::uint64_t, Reply<LoadResult>> pending_loads_;
  struct PendingStep {
    Reply<StepOutcome> reply;
    std::chrono::steady_clock::time_point arrived;  // for StepDone::executor_time
  };
  std::unordered_map<std::uint64_t, PendingStep> pending_steps_;
  // The sequences the backend holds as the strand knows them: started by a step's begin, forgotten by
  // ReleaseSequence (or a new load). Only counted, so a sequence the scheduler never releases shows in
  // the stats' bookkeeping.
  std::unordered_set<compute::SequenceId> started_;
  std::optional<LoadResult> model_;  // the last successful load, as the strand knows it
  ExecutorStats stats_;
  std::stop_source load_stop_;  // given to every load; requested when the actor stops
  // Declared last so it is destroyed first: the running job finishes before the rest goes.
  boost::asio::thread_pool compute_thread_{1};
};

}  // namespace loom::actors
