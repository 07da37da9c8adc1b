// SamplingParams: how one request turns the model's next-token distribution into a token, and when its
// generation stops. Every request carries its own, so sequences with different settings share a batch.
// The defaults are the usual llama.cpp-style chat settings (temperature 0.8 with top-k 40, top-p 0.95 and
// min-p 0.05), which keep small models coherent; every filter has a documented "off" value.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "loom/proto/parse_options.hpp"
#include "loom/proto/parsed.hpp"

namespace loom::proto {

// Constrained output: the generated text must follow a grammar. The session compiles it before the request
// is accepted (an error names the field and the grammar's line and column or the schema's keyword), so a
// request that reaches the scheduler carries a constraint known to compile; the backend masks, at every
// step, the tokens that would leave the grammar, and allows the end of sequence only where it may end.
struct OutputConstraint {
  enum class Kind {
    grammar,      // GBNF text with a `root` rule (llama.cpp's `grammar` field)
    json_schema,  // a JSON Schema (OpenAI's response_format json_schema, llama.cpp's `json_schema`)
    json_object,  // any JSON object (OpenAI's response_format json_object)
  };
  Kind kind = Kind::grammar;
  // grammar: the GBNF text; json_schema: the schema as compact JSON text; json_object: empty.
  std::string text;

  bool operator==(const OutputConstraint&) const = default;
};

struct SamplingParams {
  // Fixed bounds: these are properties of the maths, not of a deployment, so they are not in ParseOptions.
  static constexpr double kMaxTemperature = 100.0;
  static constexpr double kMaxRepetitionPenalty = 10.0;
  static constexpr double kMaxAbsPenalty = 2.0;  // frequency and presence penalties lie in [-2, 2]
  static constexpr std::int32_t kMaxLogprobs = 20;
  // The default of a SamplingParams built in code. On the wire an absent max_tokens means "until the
  // context is full", capped by ParseOptions::max_tokens_limit (the server's ceiling).
  static constexpr std::int32_t kDefaultMaxTokens = 256;
  static constexpr std::int32_t kMaxRepetitionLastN = 1 << 20;
  static constexpr double kMaxAbsLogitBias = 100.0;  // OpenAI's range for logit_bias values

  // Divides the logits; 0 means greedy (always the most likely token). Range [0, 100].
  double temperature = 0.8;
  // Keep only the k most likely tokens; 0 = off. Range [0, ParseOptions::max_top_k].
  std::int32_t top_k = 40;
  // Keep the smallest set of tokens whose probability sums to at least p; 1 = off. Range (0, 1].
  double top_p = 0.95;
  // Drop tokens less likely than min_p times the most likely one; 0 = off. Range [0, 1].
  double min_p = 0.05;
  // Divides positive logits (multiplies negative ones) of tokens already in the sequence; 1 = off.
  // Range (0, 10].
  double repetition_penalty = 1.0;
  // Subtracted from a token's logit once per earlier occurrence (frequency) or once if it occurred at all
  // (presence), as in the OpenAI API; 0 = off. Range [-2, 2].
  double frequency_penalty = 0.0;
  double presence_penalty = 0.0;
  // How many of the latest tokens (prompt included) the three penalties look at; -1 = the whole sequence.
  // Range [-1, kMaxRepetitionLastN].
  std::int32_t repetition_last_n = 64;
  // Added to a token's logit before the penalties and filters (token id -> bias), as OpenAI's logit_bias:
  // -100 all but bans a token, +100 all but forces it. Ids >= 0 (the session checks them against the
  // vocabulary); biases in [-100, 100]; at most ParseOptions::max_logit_bias entries.
  std::map<std::int32_t, double> logit_bias;
  // Seed of the request's random stream; absent = drawn at random, so equal requests may differ.
  std::optional<std::uint64_t> seed;
  // Most tokens to generate. Range [1, ParseOptions::max_tokens_limit]; absent on the wire:
  // max_tokens_limit (generation then ends at an end of sequence, a stop, or the end of the context).
  std::int32_t max_tokens = kDefaultMaxTokens;
  // Generation ends when the text contains one of these (the string itself is not streamed). Each is
  // non-empty; count and length are bounded by ParseOptions.
  std::vector<std::string> stop;
  // Generation ends when one of these token ids is sampled. Each >= 0; count bounded by ParseOptions.
  std::vector<std::int32_t> stop_token_ids;
  // Keep generating past the end-of-sequence token (benchmarks want exactly max_tokens tokens).
  bool ignore_eos = false;
  // How many most-likely alternatives to report per token; 0 = off. Any value > 0 makes each token event
  // carry the sampled token's log-probability. Range [0, 20].
  std::int32_t logprobs = 0;
  // The grammar the text must follow; absent = free text. Its text is bounded by
  // ParseOptions::max_constraint_bytes.
  std::optional<OutputConstraint> constraint;

  bool greedy() const noexcept { return temperature == 0.0; }

  bool operator==(const SamplingParams&) const = default;
};

// JSON object with every field; `seed` only when present. Found by nlohmann's ADL: `json j = params;`.
void to_json(nlohmann::json& j, const SamplingParams& params);

// Absent (or null) fields take their defaults; see PROTOCOL.md for every rule. Never throws (except
// std::bad_alloc).
Parsed<SamplingParams> parse_sampling_params(const nlohmann::json& j, const ParseOptions& options = {});

// An nlohmann::json object keeps its keys sorted, which loses the order of a schema's properties: the order
// the model is to write them in (OpenAI keeps it). `fields` is the object that held the constraint fields
// (a generate message's params, an OpenAI body) parsed again from the same text as an ordered_json: the
// json_schema constraint's text is taken from it, in the client's order. Nothing changes without one.
void keep_schema_order(SamplingParams& params, const nlohmann::ordered_json& fields);

}  // namespace loom::proto
