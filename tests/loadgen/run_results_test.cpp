// RunResults: what completed and failed requests add to the report.
#include "run_results.hpp"

#include <gtest/gtest.h>

namespace loom::loadgen {
namespace {

RequestOutcome completed(double ttft, std::vector<double> gaps, double e2e, std::int64_t events,
                         std::optional<std::int64_t> usage_output, std::optional<std::int64_t> usage_prompt) {
  RequestOutcome outcome;
  outcome.ok = true;
  outcome.ttft_ms = ttft;
  outcome.itl_ms = std::move(gaps);
  outcome.e2e_ms = e2e;
  outcome.content_events = events;
  outcome.usage_completion_tokens = usage_output;
  outcome.usage_prompt_tokens = usage_prompt;
  outcome.asked_max_tokens = 4;
  outcome.asked_prompt_tokens = 10;
  return outcome;
}

RequestOutcome failed(ErrorKind kind, std::string message, int status = 0) {
  RequestOutcome outcome;
  outcome.error = kind;
  outcome.error_message = std::move(message);
  outcome.http_status = status;
  return outcome;
}

TEST(RunResults, CompletedRequestsGiveLatenciesAndTokens) {
  RunResults results;
  results.record(completed(10, {1, 2, 3}, 16, 4, 4, 11));
  results.record(completed(20, {4}, 30, 2, 5, 12));  // usage says 5 tokens: chunks may carry several
  EXPECT_EQ(results.completed(), 2u);
  EXPECT_EQ(results.failed(), 0u);
  EXPECT_EQ(results.ttft_ms().count(), 2u);
  EXPECT_EQ(results.itl_ms().count(), 4u);
  EXPECT_EQ(results.itl_ms().max(), 4.0);
  EXPECT_EQ(results.e2e_ms().percentile(100), 30.0);
  EXPECT_EQ(results.output_tokens(), 9);
  EXPECT_EQ(results.asked_output_tokens(), 8);
  EXPECT_EQ(results.prompt_tokens(), 23);
  EXPECT_EQ(results.asked_prompt_tokens(), 20);
  EXPECT_EQ(results.token_count_source(), "usage");
  // Time per output token: (16 - 10) / 3 and (30 - 20) / 4.
  EXPECT_DOUBLE_EQ(*results.tpot_ms().min(), 2.0);
  EXPECT_DOUBLE_EQ(*results.tpot_ms().max(), 2.5);
}

TEST(RunResults, WithoutUsageTheChunksAreCountedAndPromptTokensAreUnknown) {
  RunResults results;
  results.record(completed(10, {1}, 12, 2, std::nullopt, std::nullopt));
  EXPECT_EQ(results.output_tokens(), 2);
  EXPECT_EQ(results.token_count_source(), "chunks");
  EXPECT_FALSE(results.prompt_tokens());
  results.record(completed(10, {1}, 12, 2, 2, 10));
  EXPECT_EQ(results.token_count_source(), "mixed");
  EXPECT_FALSE(results.prompt_tokens());  // not every request reported one
  EXPECT_EQ(RunResults().token_count_source(), "none");
}

TEST(RunResults, FailuresAreCountedByKindWithStatusesAndTheFirstMessage) {
  RunResults results;
  results.record(failed(ErrorKind::http_status, "HTTP 401: bad key", 401));
  results.record(failed(ErrorKind::http_status, "HTTP 503: busy", 503));
  results.record(failed(ErrorKind::http_status, "HTTP 401: again", 401));
  results.record(failed(ErrorKind::connect, "refused"));
  results.record(failed(ErrorKind::timeout, "slow"));
  EXPECT_EQ(results.failed(), 5u);
  EXPECT_EQ(results.completed(), 0u);
  EXPECT_EQ(results.errors(ErrorKind::http_status), 3u);
  EXPECT_EQ(results.errors(ErrorKind::connect), 1u);
  EXPECT_EQ(results.errors(ErrorKind::timeout), 1u);
  EXPECT_EQ(results.errors(ErrorKind::protocol), 0u);
  EXPECT_EQ(results.http_statuses().at(401), 2u);
  EXPECT_EQ(results.http_statuses().at(503), 1u);
  EXPECT_EQ(results.example(ErrorKind::http_status), "HTTP 401: bad key");
  EXPECT_EQ(results.example(ErrorKind::server), "");
  // A failed request adds nothing to the latencies or token totals.
  EXPECT_TRUE(results.e2e_ms().empty());
  EXPECT_EQ(results.output_tokens(), 0);
}

}  // namespace
}  // namespace loom::loadgen
