// GpuExecutorActor: the one owner of the compute backend and the model it has loaded. Loading a model and
// running a step are long computations, so they never run on the io_context's threads: the actor owns one
// compute thread and posts each job to it, in the order the messages arrived; the job reports back by a
// message to the actor, which updates its counters and answers the asker. One job runs at a time, so a RunStep
// sent while another runs waits its turn, and the backend needs no lock.
//
// Failures are answers: a load that fails answers an error (the executor then has no model), a step that
// fails (bad input, a backend error) answers StepFailed naming its sequences, and the next step runs as
// usual. A RunStep with no model loaded (none yet, or the last load failed) answers StepFailed.
//
// When the actor stops, the job running finishes (the io thread destroying the actor waits for it); jobs
// not yet started are dropped and their askers hear no_reply.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <variant>

#include <boost/asio/thread_pool.hpp>

#include "loom/actors/actor.hpp"
#include "loom/actors/executor_backend.hpp"
#include "loom/actors/llama_backend.hpp"
#include "loom/actors/reply.hpp"
#include "loom/actors/step_batch.hpp"

namespace loom::actors {

struct LoadResult {
  std::string error;  // empty: loaded
  BackendInfo info;
  std::shared_ptr<const compute::Tokenizer> tokenizer;
  bool loaded() const noexcept { return error.empty(); }
};

struct ExecutorStats {
  bool model_loaded = false;
  std::uint64_t loads = 0;            // successful loads
  std::uint64_t steps_run = 0;        // answered StepDone
  std::uint64_t steps_failed = 0;     // answered StepFailed
  std::uint64_t tokens_computed = 0;  // positions run through the model by successful steps
  std::uint64_t tokens_sampled = 0;
  std::chrono::nanoseconds busy_time{0};  // on the compute thread: loads and steps, failed ones included
  std::size_t queued_jobs = 0;            // loads and steps posted and not yet reported back
};

// Replaces the loaded model (the old one, with every sequence's sampler, is released first, so two models
// never hold memory together; a failed load leaves none). Progress goes to the log.
struct LoadModel {
  LoadOptions options;
  Reply<LoadResult> reply;
};
// Runs one step after the jobs already queued.
struct RunStep {
  StepBatch batch;
  Reply<StepOutcome> reply;
};
// Forgets the sequence's sampler, after the steps already queued.
struct ReleaseSequence {
  cache::SequenceId sequence = 0;
};
// The model loaded now, or an error when there is none.
struct GetLoadedModel {
  Reply<LoadResult> reply;
};
struct GetExecutorStats {
  Reply<ExecutorStats> reply;
};

namespace executor_detail {
// From the compute thread back to the actor: a job is over.
struct LoadFinished {
  std::uint64_t job = 0;
  LoadResult result;
  std::chrono::nanoseconds busy{0};
};
struct StepFinished {
  std::uint64_t job = 0;
  StepOutcome outcome;
  std::chrono::nanoseconds busy{0};
};
}  // namespace executor_detail

using GpuExecutorProtocol =
    std::variant<LoadModel, RunStep, ReleaseSequence, GetLoadedModel, GetExecutorStats, executor_detail::LoadFinished,
                 executor_detail::StepFinished>;

class GpuExecutorActor : public Actor<GpuExecutorActor, GpuExecutorProtocol> {
 public:
  // `factory` builds the backend for a LoadModel (on the compute thread).
  explicit GpuExecutorActor(BackendFactory factory = load_llama_backend);

  void on(LoadModel m);
  void on(RunStep m);
  void on(ReleaseSequence m);
  void on(GetLoadedModel m);
  void on(GetExecutorStats m);
  void on(executor_detail::LoadFinished m);
  void on(executor_detail::StepFinished m);

 private:
  // What the compute thread owns; only its jobs touch it, one at a time.
  struct ComputeState {
    std::unique_ptr<ExecutorBackend> backend;
  };

  BackendFactory factory_;
  std::shared_ptr<ComputeState> compute_state_ = std::make_shared<ComputeState>();
  std::unordered_map<std::uint64_t, Reply<LoadResult>> pending_loads_;
  std::unordered_map<std::uint64_t, Reply<StepOutcome>> pending_steps_;
  std::optional<LoadResult> model_;  // the last successful load, as the strand knows it
  ExecutorStats stats_;
  // Declared last so it is destroyed first: the running job finishes before the rest goes.
  boost::asio::thread_pool compute_thread_{1};
};

}  // namespace loom::actors
