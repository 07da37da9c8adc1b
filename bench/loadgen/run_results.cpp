#include "run_results.hpp"

namespace loom::loadgen {

std::string_view to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::connect: return "connect";
    case ErrorKind::http_status: return "http_status";
    case ErrorKind::protocol: return "protocol";
    case ErrorKind::timeout: return "timeout";
    case ErrorKind::server: return "server";
  }
  return "protocol";
}

void RunResults::record(const RequestOutcome& outcome) {
  if (!outcome.ok) {
    ++failed_;
    const auto kind = static_cast<int>(outcome.error);
    ++errors_[kind];
    if (outcome.error == ErrorKind::http_status) ++http_statuses_[outcome.http_status];
    if (examples_[kind].empty()) examples_[kind] = outcome.error_message;
    return;
  }
  ++completed_;
  if (outcome.ttft_ms) ttft_ms_.add(*outcome.ttft_ms);
  for (const double gap : outcome.itl_ms) itl_ms_.add(gap);
  e2e_ms_.add(outcome.e2e_ms);
  const std::int64_t tokens = outcome.output_tokens();
  if (outcome.ttft_ms && tokens >= 2) tpot_ms_.add((outcome.e2e_ms - *outcome.ttft_ms) / static_cast<double>(tokens - 1));
  output_tokens_ += tokens;
  asked_output_tokens_ += outcome.asked_max_tokens;
  asked_prompt_tokens_ += outcome.asked_prompt_tokens;
  if (outcome.usage_completion_tokens) ++with_usage_;
  if (outcome.usage_prompt_tokens) {
    prompt_tokens_ += *outcome.usage_prompt_tokens;
    ++with_prompt_count_;
  }
}

std::optional<std::int64_t> RunResults::prompt_tokens() const {
  if (completed_ == 0 || with_prompt_count_ != completed_) return std::nullopt;
  return prompt_tokens_;
}

std::string RunResults::token_count_source() const {
  if (completed_ == 0) return "none";
  if (with_usage_ == completed_) return "usage";
  return with_usage_ == 0 ? "chunks" : "mixed";
}

}  // namespace loom::loadgen
