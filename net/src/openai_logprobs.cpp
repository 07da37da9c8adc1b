#include "openai_logprobs.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "loom/proto/sampling_params.hpp"

namespace loom::net::openai {

namespace {

using nlohmann::json;

constexpr std::int32_t kOpenAiChatTopLogprobs = 20;
constexpr std::int32_t kOpenAiCompletionLogprobs = 5;

double shown(double logprob) { return std::isinf(logprob) ? kImpossibleLogprob : logprob; }

json empty_entries(OpenAiRoute route) {
  if (route == OpenAiRoute::chat_completions) return json::array();
  return {{"tokens", json::array()},
          {"token_logprobs", json::array()},
          {"top_logprobs", json::array()},
          {"text_offset", json::array()}};
}

}  // namespace

std::int32_t max_top_logprobs(OpenAiRoute route) {
  const std::int32_t openai = route == OpenAiRoute::chat_completions ? kOpenAiChatTopLogprobs : kOpenAiCompletionLogprobs;
  return std::min(openai, proto::SamplingParams::kMaxLogprobs);
}

LogprobsBuilder::LogprobsBuilder(OpenAiRoute route, std::int32_t top)
    : route_(route), top_(static_cast<std::size_t>(std::max(top, 0))), entries_(empty_entries(route)) {}

void LogprobsBuilder::add(const proto::TokenEvent& token, std::size_t text_offset) {
  if (!token.logprob) return;
  const std::size_t shown_count = std::min(top_, token.top_logprobs.size());
  ++count_;
  if (route_ == OpenAiRoute::chat_completions) {
    json alternatives = json::array();
    for (std::size_t i = 0; i < shown_count; ++i) {
      const auto& a = token.top_logprobs[i];
      alternatives.push_back({{"token", a.text}, {"logprob", shown(a.logprob)}, {"bytes", a.bytes}});
    }
    entries_.push_back({{"token", token.piece},
                        {"logprob", shown(*token.logprob)},
                        {"bytes", token.bytes},
                        {"top_logprobs", std::move(alternatives)}});
    return;
  }
  json alternatives = json::object();
  for (std::size_t i = 0; i < shown_count; ++i) {
    const auto& a = token.top_logprobs[i];
    // Pieces that read the same (two ids for one text) share a key; the more likely one is kept.
    if (!alternatives.contains(a.text)) alternatives[a.text] = shown(a.logprob);
  }
  entries_["tokens"].push_back(token.piece);
  entries_["token_logprobs"].push_back(shown(*token.logprob));
  entries_["top_logprobs"].push_back(std::move(alternatives));
  entries_["text_offset"].push_back(text_offset);
}

json LogprobsBuilder::take() {
  json taken = std::exchange(entries_, empty_entries(route_));
  count_ = 0;
  if (route_ == OpenAiRoute::chat_completions) return {{"content", std::move(taken)}};
  return taken;
}

}  // namespace loom::net::openai
