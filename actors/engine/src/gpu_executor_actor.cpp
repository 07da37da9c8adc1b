#include "loom/actors/engine/gpu_executor_actor.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <utility>
#include <vector>

#include <boost/asio/post.hpp>

#include "loom/actors/runtime/logger.hpp"
#include "loom/compute/cpu/cpu_backend.hpp"
#include "loom/compute/devices.hpp"

namespace loom::actors {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::duration_cast;
using std::chrono::nanoseconds;

// Unique across the actor's incarnations, so that a job finished by an incarnation that has since
// restarted is never taken for a job of the new one.
std::uint64_t next_job_id() {
  static std::atomic<std::uint64_t> next{0};
  return next.fetch_add(1, std::memory_order_relaxed);
}

std::vector<compute::SequenceId> ids_of(const compute::StepBatch& batch) {
  std::vector<compute::SequenceId> ids;
  ids.reserve(batch.sequences.size());
  for (const auto& s : batch.sequences) ids.push_back(s.sequence);
  return ids;
}

// On the compute thread: the step's outcome, never an exception.
StepOutcome compute_step(compute::Backend* backend, const compute::StepBatch& batch, Clock::time_point arrived,
                         Clock::time_point began) {
  if (backend == nullptr) return StepFailed{"no model is loaded", ids_of(batch)};
  try {
    compute::StepResult result = backend->run(batch);
    StepDone done;
    done.sampled = std::move(result.sampled);
    done.embeddings = std::move(result.embeddings);
    for (const auto& s : batch.sequences) done.tokens_computed += s.tokens.size();
    done.queued_time = duration_cast<nanoseconds>(began - arrived);
    done.compute_time = duration_cast<nanoseconds>(Clock::now() - began);
    return done;
  } catch (const std::exception& e) {
    return StepFailed{e.what(), ids_of(batch)};
  } catch (...) {
    return StepFailed{"the backend failed with an unknown exception", ids_of(batch)};
  }
}

}  // namespace

GpuExecutorActor::GpuExecutorActor(compute::BackendFactory factory)
    : factory_(factory ? std::move(factory) : compute::BackendFactory(compute::load_backend)) {}

void GpuExecutorActor::on(LoadModel m) {
  const std::uint64_t job = next_job_id();
  started_.clear();  // the load replaces the backend, and the sequences it held go with it
  pending_loads_.emplace(job, std::move(m.reply));
  m.options.stop = load_stop_.get_token();
  asio::post(compute_thread_, [state = compute_state_, factory = factory_, options = std::move(m.options),
                               done = continuation("LoadFinished", [this](std::uint64_t id, LoadResult result,
                                                                          nanoseconds busy) {
                                 load_finished(id, std::move(result), busy);
                               }),
                               job, actor = name()] {
    const auto began = Clock::now();
    LoadResult result;
    logger().info("actor={} loading model={} tokenizer=\"{}\"", actor, options.model_path, options.tokenizer_path);
    state->backend.reset();  // the old model goes first: two never hold memory together
    try {
      state->backend = factory(options);
      result.info = state->backend->info();
      result.tokenizer = state->backend->tokenizer();
      const auto& c = result.info.config;
      logger().info("actor={} loaded model={} architecture={} layers={} dim={} vocab={} kv_blocks={} kv_block_size={} "
                    "kv_mib={:.1f} max_batch_tokens={} seconds={:.3f}",
                    actor, options.model_path, compute::to_string(c.architecture), c.layers, c.dim, c.vocab_size,
                    result.info.kv_blocks, result.info.kv_block_size,
                    static_cast<double>(result.info.kv_bytes) / (1024.0 * 1024.0), result.info.max_batch_tokens,
                    std::chrono::duration<double>(Clock::now() - began).count());
    } catch (const std::exception& e) {
      state->backend.reset();
      result.error = e.what();
    } catch (...) {
      state->backend.reset();
      result.error = "the backend failed to load with an unknown exception";
    }
    if (result.loaded()) {
    } else if (options.stop.stop_requested()) {
      logger().info("actor={} load cancelled model={}: the executor is stopping", actor, options.model_path);
    } else {
      logger().error("actor={} load failed model={} error=\"{}\"", actor, options.model_path, result.error);
    }
    done(job, std::move(result), duration_cast<nanoseconds>(Clock::now() - began));
  });
}

void GpuExecutorActor::on_stop() { load_stop_.request_stop(); }

void GpuExecutorActor::on(RunStep m) {
  const std::uint64_t job = next_job_id();
  for (const compute::StepSequence& s : m.batch.sequences) {
    if (s.begin) started_.insert(s.sequence);
    for (const compute::SequenceFork& fork : s.forks) started_.insert(fork.sequence);
  }
  const auto arrived = Clock::now();
  pending_steps_.emplace(job, PendingStep{std::move(m.reply), arrived});
  asio::post(compute_thread_, [state = compute_state_, batch = std::move(m.batch), job, arrived,
                               done = continuation("StepFinished", [this](std::uint64_t id, StepOutcome outcome,
                                                                          nanoseconds busy) {
                                 step_finished(id, std::move(outcome), busy);
                               })] {
    const auto began = Clock::now();
    StepOutcome outcome = compute_step(state->backend.get(), batch, arrived, began);
    done(job, std::move(outcome), duration_cast<nanoseconds>(Clock::now() - began));
  });
}

void GpuExecutorActor::on(ReleaseSequence m) {
  started_.erase(m.sequence);
  asio::post(compute_thread_, [state = compute_state_, sequence = m.sequence, actor = name()] {
    if (!state->backend) return;
    try {
      state->backend->release(sequence);
    } catch (const std::exception& e) {
      // A release is told, not asked: nobody to answer, so it is logged.
      logger().error("actor={} message=ReleaseSequence sequence={} error=\"{}\"", actor, sequence, e.what());
    } catch (...) {
      // Anything else escaping a job would end the compute thread (and the process) with it.
      logger().error("actor={} message=ReleaseSequence sequence={} error=\"a non-standard exception\"", actor, sequence);
    }
  });
}

void GpuExecutorActor::on(GetLoadedModel m) {
  if (model_) return m.reply(*model_);
  m.reply(LoadResult{.error = "no model is loaded", .info = {}, .tokenizer = nullptr});
}

void GpuExecutorActor::on(GetExecutorStats m) {
  ExecutorStats stats = stats_;
  stats.model_loaded = model_.has_value();
  stats.queued_jobs = pending_loads_.size() + pending_steps_.size();
  stats.bookkeeping.sequences = started_.size();
  stats.bookkeeping.pending_jobs = stats.queued_jobs;
  m.reply(stats);
}

void GpuExecutorActor::load_finished(std::uint64_t job, LoadResult result, nanoseconds busy) {
  auto it = pending_loads_.find(job);
  // A job of an earlier incarnation (the actor restarted since) has nobody waiting here.
  if (it == pending_loads_.end()) return;
  auto reply = std::move(it->second);
  pending_loads_.erase(it);
  stats_.busy_time += busy;
  if (result.loaded()) {
    ++stats_.loads;
    model_ = result;
  } else {
    model_.reset();
  }
  reply(std::move(result));
}

void GpuExecutorActor::step_finished(std::uint64_t job, StepOutcome&& outcome, nanoseconds busy) {
  auto it = pending_steps_.find(job);
  if (it == pending_steps_.end()) return;
  auto reply = std::move(it->second.reply);
  const auto arrived = it->second.arrived;
  pending_steps_.erase(it);
  stats_.busy_time += busy;
  if (auto* done = std::get_if<StepDone>(&outcome)) {
    ++stats_.steps_run;
    stats_.tokens_computed += done->tokens_computed;
    // A sequence that could not go on (its entry carries an error) sampled nothing.
    stats_.tokens_sampled += static_cast<std::uint64_t>(std::count_if(
        done->sampled.begin(), done->sampled.end(), [](const compute::SampledToken& t) { return t.error.empty(); }));
    done->executor_time = std::max(nanoseconds{0}, duration_cast<nanoseconds>(Clock::now() - arrived) - done->compute_time);
  } else {
    ++stats_.steps_failed;
  }
  reply(std::move(outcome));
}

}  // namespace loom::actors
