// ScriptedBackend: a compute::Backend for the engine's fault and load tests that runs no model. It takes
// the model's shape, KV pool and tokenizer from the real CPU backend (loaded from the tiny shared model,
// so sessions tokenize and detokenize as usual), follows its sequences through compute::HeldSequences (so
// a step that does not follow from the last one still fails, as it would on a real backend), and samples
// a fixed token for every sequence that asks. The test's BackendScript can fail a chosen step, hold every
// step at a gate until the test lets it go, and read what each step carried. A step takes microseconds,
// so a test can push a hundred thousand requests through the engine in seconds.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "loom/compute/backend.hpp"
#include "loom/compute/cpu/cpu_backend.hpp"
#include "loom/compute/held_sequences.hpp"

namespace loom::actors::testing {

// One step as the backend saw it: the sequences that sampled a token, in batch order.
struct ScriptedStep {
  std::vector<compute::SequenceId> sequences;
  std::vector<compute::SequenceId> sampled;
};

// Shared by the test (any thread) and the backend (the executor's compute thread).
class BackendScript {
 public:
  // The run() call (0-based) that throws; -1: none.
  void fail_step(int index) {
    std::lock_guard lock(mutex_);
    fail_at_ = index;
  }
  // The run() call (0-based) that computes its step but answers no sampled token; -1: none.
  void answer_without_tokens_at(int index) {
    std::lock_guard lock(mutex_);
    tokenless_at_ = index;
  }

  // release() throws something that is not a std::exception (after forgetting the sequence).
  void throw_on_release() {
    std::lock_guard lock(mutex_);
    release_throws_ = true;
  }
  bool release_throws() {
    std::lock_guard lock(mutex_);
    return release_throws_;
  }

  // Gated: every step waits in run() until the test lets it go (allow(n) lets n more steps through).
  void hold_steps() {
    std::lock_guard lock(mutex_);
    gated_ = true;
  }
  void allow(int steps) {
    {
      std::lock_guard lock(mutex_);
      permits_ += steps;
    }
    changed_.notify_all();
  }
  void open() {
    {
      std::lock_guard lock(mutex_);
      gated_ = false;
    }
    changed_.notify_all();
  }
  // Waits (bounded) until `count` steps have entered run() (the last may be waiting at the gate).
  bool wait_for_steps(std::size_t count, std::chrono::milliseconds limit) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, limit, [&] { return entered_ >= count; });
  }
  std::size_t steps_entered() {
    std::lock_guard lock(mutex_);
    return entered_;
  }
  std::vector<ScriptedStep> steps() {
    std::lock_guard lock(mutex_);
    return steps_;
  }
  // Sequences the backend holds now (started and not released).
  std::size_t held() {
    std::lock_guard lock(mutex_);
    return held_count_;
  }
  void keep_step_log(bool keep) {
    std::lock_guard lock(mutex_);
    keep_log_ = keep;
  }
  // Every step takes at least this long in run(), as a forward pass would (after the gate).
  void take_per_step(std::chrono::nanoseconds duration) {
    std::lock_guard lock(mutex_);
    per_step_ = duration;
  }

 private:
  friend class ScriptedBackend;

  enum class Outcome { tokens, throws, no_tokens };

  // Called by run() on the compute thread: records the step, waits at the gate, then says how it ends.
  Outcome enter(ScriptedStep step) {
    std::unique_lock lock(mutex_);
    const int index = static_cast<int>(entered_++);
    if (keep_log_) steps_.push_back(std::move(step));
    changed_.notify_all();
    changed_.wait(lock, [&] { return !gated_ || permits_ > 0; });
    if (gated_) --permits_;
    const Outcome outcome = index == fail_at_        ? Outcome::throws
                            : index == tokenless_at_ ? Outcome::no_tokens
                                                     : Outcome::tokens;
    const auto busy = per_step_;
    lock.unlock();
    if (busy.count() > 0) std::this_thread::sleep_for(busy);
    return outcome;
  }
  void set_held(std::size_t count) {
    std::lock_guard lock(mutex_);
    held_count_ = count;
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  int fail_at_ = -1;
  int tokenless_at_ = -1;
  bool release_throws_ = false;
  bool gated_ = false;
  int permits_ = 0;
  std::size_t entered_ = 0;
  bool keep_log_ = true;
  std::vector<ScriptedStep> steps_;
  std::size_t held_count_ = 0;
  std::chrono::nanoseconds per_step_{0};
};

class ScriptedBackend final : public compute::Backend {
 public:
  ScriptedBackend(const compute::LoadOptions& options, std::shared_ptr<BackendScript> script)
      : real_(compute::load_cpu_backend(options)), info_(real_->info()), script_(std::move(script)) {
    token_ = static_cast<std::int32_t>(std::min<std::int64_t>(300, info_.config.vocab_size - 1));
  }

  compute::BackendInfo info() const override { return info_; }
  std::shared_ptr<const compute::Tokenizer> tokenizer() const override { return real_->tokenizer(); }

  compute::StepResult run(const compute::StepBatch& batch) override {
    ScriptedStep record;
    for (const auto& s : batch.sequences) {
      record.sequences.push_back(s.sequence);
      if (s.sample) record.sampled.push_back(s.sequence);
    }
    const BackendScript::Outcome outcome = script_->enter(std::move(record));
    for (const auto& s : batch.sequences) held_.check(s, info_.kv_block_size);
    if (outcome == BackendScript::Outcome::throws) throw std::runtime_error("scripted backend failure");
    compute::StepResult result;
    for (const auto& s : batch.sequences) {
      held_.apply(s);
      if (!s.sample || outcome != BackendScript::Outcome::tokens) continue;
      result.sampled.push_back(compute::SampledToken{.sequence = s.sequence, .token = token_, .logprob = 0.0f, .top = {}});
    }
    script_->set_held(held_.size());
    return result;
  }

  void release(compute::SequenceId sequence) override {
    held_.release(sequence);
    script_->set_held(held_.size());
    if (script_->release_throws()) throw 42;  // not a std::exception
  }

 private:
  std::unique_ptr<compute::Backend> real_;  // only for its shape, KV pool and tokenizer; never run
  compute::BackendInfo info_;
  std::shared_ptr<BackendScript> script_;
  compute::HeldSequences held_;
  std::int32_t token_ = 0;
};

inline compute::BackendFactory scripted_backend(std::shared_ptr<BackendScript> script) {
  return [script](const compute::LoadOptions& options) -> std::unique_ptr<compute::Backend> {
    return std::make_unique<ScriptedBackend>(options, script);
  };
}

}  // namespace loom::actors::testing
