// SequenceProgress, driven on the Scheduler directly (the test plays the cache manager and the executor):
// a submit that asks for progress hears, after each prefill chunk, how many prompt positions are computed,
// up to the prompt's length and before its first token; one that does not ask hears none.
#include "loom/actors/engine/scheduler.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

namespace loom::actors {
namespace {

using Clock = Scheduler::Clock;

// What one sequence's sink would hear in a run to the end: "p<computed>/<prompt>" and "t" for a token.
std::vector<std::string> run_to_end(bool progress, std::size_t prompt_length, std::size_t chunk) {
  Scheduler scheduler(SchedulerConfig{.max_batch_tokens = chunk, .context_length = 256});
  SubmitSequence submit;
  submit.sequence = 1;
  submit.prompt.assign(prompt_length, 3);
  submit.params.max_tokens = 2;
  submit.sink = [](SequenceEvent) {};
  submit.progress = progress;
  EXPECT_FALSE(scheduler.submit(std::move(submit)).has_value());

  std::vector<std::string> heard;
  Clock::time_point now{};
  for (int step = 0; step < 64 && !scheduler.empty(); ++step) {
    const StepPlan plan = scheduler.plan_step();
    if (!plan.planned) break;
    ReserveResult granted;
    granted.reserved = true;
    for (std::size_t i = 0; i < plan.reserve.size(); ++i) {
      granted.reservations.push_back({});
      granted.block_tables.push_back({0});
    }
    const compute::StepBatch batch = scheduler.start_step(granted, now);
    StepDone done;
    for (const auto& s : batch.sequences) {
      if (s.sample) done.sampled.push_back(compute::SampledToken{.sequence = s.sequence, .token = 7, .logprob = 0, .top = {}});
    }
    for (const auto& action : scheduler.apply_step(std::move(done), now).actions) {
      const auto* event = std::get_if<SinkEvent>(&action);
      if (event == nullptr) continue;
      if (const auto* p = std::get_if<SequenceProgress>(&event->event)) {
        heard.push_back("p" + std::to_string(p->computed) + "/" + std::to_string(p->prompt_tokens));
      } else if (std::holds_alternative<SequenceToken>(event->event)) {
        heard.push_back("t");
      }
    }
  }
  return heard;
}

TEST(SchedulerProgress, EachPrefillChunkIsReportedUpToThePromptThenTokensFollow) {
  EXPECT_EQ(run_to_end(true, 10, 4), (std::vector<std::string>{"p4/10", "p8/10", "p10/10", "t", "t"}));
}

TEST(SchedulerProgress, NoneUnlessAskedFor) {
  EXPECT_EQ(run_to_end(false, 10, 4), (std::vector<std::string>{"t", "t"}));
}

}  // namespace
}  // namespace loom::actors
