// GenerateRequest: one client request to generate text, either continuing a raw prompt or answering a list
// of chat messages. It is what the gateway hands to the engine; its JSON form is the body of the WebSocket
// `generate` message (and the engine API's input for the HTTP routes, which translate to it).
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "loom/proto/chat_message.hpp"
#include "loom/proto/parse_options.hpp"
#include "loom/proto/parsed.hpp"
#include "loom/proto/sampling_params.hpp"
#include "loom/proto/tool_call.hpp"

namespace loom::proto {

// Whether the session splits the model's reasoning ("thinking", e.g. <think>...</think>) from its content.
enum class ReasoningFormat {
  auto_,  // split it when the model's template has a reasoning syntax: token events carry it as `reasoning`
  none,   // leave it in the content text
};
// The wire spelling: "auto", "none". parse also takes "deepseek" (llama.cpp's name) as auto.
std::string_view to_string(ReasoningFormat format) noexcept;
std::optional<ReasoningFormat> parse_reasoning_format(std::string_view text) noexcept;

struct GenerateRequest {
  // Priorities order waiting requests and decide who is paused first under thermal pressure: higher runs
  // first, negative values are background work.
  static constexpr std::int32_t kMinPriority = -10;
  static constexpr std::int32_t kMaxPriority = 10;

  // Chosen by the client, echoed in every event about this request and used to cancel it. Non-empty, at
  // most ParseOptions::max_id_bytes, no control characters.
  std::string id;
  // The session (conversation) this request belongs to; absent = a stand-alone request. Same rules as id.
  std::optional<std::string> session_id;
  // true when the client named the session with the short field `session` instead of `session_id`: the
  // gateway then opens it (no system prompt) the first time a request names it, where `session_id` needs
  // an earlier `session.open`.
  bool open_session = false;
  // Exactly one of: a raw prompt continued as-is (may be empty), or chat messages (at least one) rendered
  // with the model's chat template. A variant, so "both" and "neither" cannot be represented.
  std::variant<std::string, std::vector<ChatMessage>> input;
  SamplingParams params;
  // Range [kMinPriority, kMaxPriority], default 0.
  std::int32_t priority = 0;
  // true: a token event per generated token. false is parsed and carried: on the WebSocket tokens still
  // stream; the HTTP routes answer with one JSON response.
  bool stream = true;
  // true: `progress` events report how much of the prompt has been computed, after each prefill chunk.
  bool progress = false;

  // Tool calling (chat messages only; issue 22). The functions the model may call, at most
  // ParseOptions::max_tools, names unique; their text (names, descriptions, parameters) at most
  // ParseOptions::max_prompt_bytes in all.
  std::vector<ToolDefinition> tools{};
  // required and function need tools; function must name one of them.
  ToolChoice tool_choice{};
  // Whether the model may make more than one call in a reply.
  bool parallel_tool_calls = true;
  // Extra variables for the chat template (e.g. {"enable_thinking": false}), the JSON text of an object in
  // the client's key order (keep_key_order); chat messages only; at most ParseOptions::max_constraint_bytes.
  std::optional<std::string> chat_template_kwargs{};
  ReasoningFormat reasoning_format = ReasoningFormat::auto_;
  // Choices generated from the one prompt (OpenAI's n), [1, kMaxChoices]; more than one only in a stand-alone
  // request (a session's history keeps one reply). The prompt is computed once and the choices share its KV
  // blocks; choice i samples with seed + i, so choice 0 is what the request with n = 1 gives.
  std::int32_t n = 1;
  static constexpr std::int32_t kMaxChoices = 16;

  bool is_chat() const noexcept { return input.index() == 1; }

  bool operator==(const GenerateRequest&) const = default;
};

// Writes `prompt` or `messages` according to the variant; the session only when present, as `session` when
// open_session is set and as `session_id` otherwise; the tool fields only when not their defaults.
void to_json(nlohmann::json& j, const GenerateRequest& request);
// On failure the error's request_id holds the request's id when that was well formed.
Parsed<GenerateRequest> parse_generate_request(const nlohmann::json& j, const ParseOptions& options = {});

// The wire rules (every type, range and size rule parse_generate_request applies) for a request built in
// code rather than parsed, checked by that same parser on the request's JSON form: a request an embedding
// application builds is held to exactly the rules a client's is, and the rules are written once. The
// engine checks with ParseOptions::unbounded() (the fixed ranges, not a deployment's size limits).
std::optional<ValidationError> check_generate_request(const GenerateRequest& request, const ParseOptions& options = {});

// An nlohmann::json object keeps its keys sorted; the order of a tool's parameters (the order the model is
// told its arguments), of chat_template_kwargs and of a message's tool call arguments given as an object is
// the client's. `fields` is the object the request was read from (a generate message, or an OpenAI chat
// body: the same shape for these fields) parsed again from the same text as an ordered_json: those texts
// are taken from it, in the client's order. A text whose counterpart is missing or differs in size is left
// as it is. (keep_schema_order does the same for params' json_schema.)
void keep_key_order(GenerateRequest& request, const nlohmann::ordered_json& fields);

}  // namespace loom::proto
