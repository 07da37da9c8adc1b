// RequestPlan: what request number i asks for (its prompt, its max_tokens, its route), a pure function of
// the options and i, so that --seed repeats a run's choices whatever the concurrency and timing.
//
// A prompt is words drawn at random from common English words that are one token each in the usual large
// vocabularies (Llama's, GPT's), so that prompts differ from their first words (no prefix-cache hits).
// A server's tokenizer may still split them (a small vocabulary does) and adds its BOS token or chat
// template: PromptScale turns a token count into a word count, from the server's own counts when it
// reports them (calibration, see loadgen_main.cpp), else one word per token.
#pragma once

#include <cstdint>
#include <string>

#include "loadgen_options.hpp"

namespace loom::loadgen {

// prompt tokens ~= overhead_tokens + tokens_per_word * words.
struct PromptScale {
  double overhead_tokens = 0;
  double tokens_per_word = 1;
  bool calibrated = false;

  std::int64_t words_for(std::int64_t tokens) const;
};

// One scale per kind of prompt: a raw prompt, and a user message (the chat template adds its own tokens).
struct PromptScales {
  PromptScale prompt;
  PromptScale chat;

  const PromptScale& of(bool is_chat) const { return is_chat ? chat : prompt; }
};

struct RequestSpec {
  std::uint64_t index = 0;
  bool chat = false;  // the chat route (HTTP) or a user message (WebSocket) instead of a raw prompt
  std::int64_t prompt_tokens = 0;  // asked for
  std::int64_t prompt_words = 0;
  std::int64_t max_tokens = 0;
  std::string prompt;
};

class RequestPlan {
 public:
  RequestPlan(const Options& options, PromptScales scales);

  RequestSpec request(std::uint64_t index) const;

  // A request of `words` words and max_tokens `max_tokens` outside the numbered run (calibration).
  RequestSpec probe(std::uint64_t index, std::int64_t words, std::int64_t max_tokens, bool chat) const;

 private:
  Options options_;  // a copy: a plan may outlive the options it was made from
  PromptScales scales_;
};

}  // namespace loom::loadgen
