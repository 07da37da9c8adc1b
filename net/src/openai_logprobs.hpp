// OpenAI's log-probability objects (choice.logprobs) from the engine's token events: chat's
// {content: [{token, logprob, bytes, top_logprobs}]} and the completions route's older
// {tokens, token_logprobs, top_logprobs, text_offset}. Pure, like openai_translate.hpp.
#pragma once

#include <cstddef>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "loom/proto/token_event.hpp"
#include "openai_routes.hpp"

namespace loom::net::openai {

// The most alternatives per token each route reports: OpenAI's own bounds (chat's top_logprobs 20, the
// completions route's logprobs 5), or the engine's (proto::SamplingParams::kMaxLogprobs) when smaller.
std::int32_t max_top_logprobs(OpenAiRoute route);

// What OpenAI writes for a token the model rules out (log-probability -inf, which JSON cannot hold).
inline constexpr double kImpossibleLogprob = -9999.0;

// Gathers the entries of a choice's logprobs, one per token event that carries a logprob.
class LogprobsBuilder {
 public:
  // `top`: alternatives shown per token (the engine may have been asked for more: at least one).
  LogprobsBuilder(OpenAiRoute route, std::int32_t top);

  // `text_offset`: the byte offset in the choice's text at which the text released with this token begins.
  void add(const proto::TokenEvent& token, std::size_t text_offset);
  bool empty() const noexcept { return count_ == 0; }
  // The entries gathered since the last take, as choice.logprobs, and forgets them: a stream's chunk carries
  // the entries of its own tokens; a whole answer takes them all at the end.
  nlohmann::json take();

 private:
  OpenAiRoute route_;
  std::size_t top_;
  std::size_t count_ = 0;
  nlohmann::json entries_;  // chat: content; completions: the four parallel arrays
};

}  // namespace loom::net::openai
