// RunResults: every finished request's outcome folded into what the report shows: counts, the latency
// distributions (LatencySamples), token totals, errors by kind with HTTP statuses and one example message
// per kind. Also the live counters the progress line reads. Used from the io_context's one thread.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "latency_samples.hpp"
#include "request_outcome.hpp"

namespace loom::loadgen {

class RunResults {
 public:
  void record(const RequestOutcome& outcome);
  // A content event streamed (before its request finished): for the progress line.
  void count_streamed_event() { ++streamed_events_; }

  std::uint64_t completed() const { return completed_; }
  std::uint64_t failed() const { return failed_; }
  std::uint64_t finished() const { return completed_ + failed_; }
  std::uint64_t streamed_events() const { return streamed_events_; }

  const LatencySamples& ttft_ms() const { return ttft_ms_; }
  const LatencySamples& itl_ms() const { return itl_ms_; }
  const LatencySamples& e2e_ms() const { return e2e_ms_; }
  // Per request: (e2e - ttft) / (output tokens - 1), requests with 2+ tokens.
  const LatencySamples& tpot_ms() const { return tpot_ms_; }

  // Completed requests only.
  std::int64_t output_tokens() const { return output_tokens_; }
  std::int64_t asked_output_tokens() const { return asked_output_tokens_; }
  std::int64_t asked_prompt_tokens() const { return asked_prompt_tokens_; }
  // The sum of the server's prompt counts; nullopt unless every completed request reported one.
  std::optional<std::int64_t> prompt_tokens() const;
  // "usage" (every completed request's count came from the server), "chunks" (none did), "mixed", "none".
  std::string token_count_source() const;

  std::uint64_t errors(ErrorKind kind) const { return errors_[static_cast<int>(kind)]; }
  const std::map<int, std::uint64_t>& http_statuses() const { return http_statuses_; }
  // The first message seen of each kind ("" when none).
  const std::string& example(ErrorKind kind) const { return examples_[static_cast<int>(kind)]; }

 private:
  std::uint64_t completed_ = 0;
  std::uint64_t failed_ = 0;
  std::uint64_t streamed_events_ = 0;
  LatencySamples ttft_ms_;
  LatencySamples itl_ms_;
  LatencySamples e2e_ms_;
  LatencySamples tpot_ms_;
  std::int64_t output_tokens_ = 0;
  std::int64_t asked_output_tokens_ = 0;
  std::int64_t asked_prompt_tokens_ = 0;
  std::int64_t prompt_tokens_ = 0;
  std::uint64_t with_prompt_count_ = 0;
  std::uint64_t with_usage_ = 0;
  std::array<std::uint64_t, kErrorKinds> errors_{};
  std::array<std::string, kErrorKinds> examples_{};
  std::map<int, std::uint64_t> http_statuses_;
};

}  // namespace loom::loadgen
