// The OpenAI-compatible routes' pure part: an OpenAI request body turned into a proto::GenerateRequest
// (validated by proto's own parser, so every bound is the WebSocket's), and the engine's events turned into
// OpenAI's response objects and stream chunks. No I/O here, so all of it is unit tested on its own
// (tests/net/openai_test.cpp); openai_routes.cpp does the HTTP and the engine.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "loom/proto/done_event.hpp"
#include "loom/proto/error_event.hpp"
#include "loom/proto/finish_reason.hpp"
#include "loom/proto/generate_request.hpp"
#include "loom/proto/parse_options.hpp"
#include "loom/proto/token_event.hpp"
#include "loom/proto/tool_call.hpp"
#include "loom/proto/usage.hpp"
#include "openai_routes.hpp"

namespace loom::net::openai {

// A request as the route runs it.
struct Request {
  proto::GenerateRequest generate;  // id set, stream false/true as asked
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk with usage
  // Log-probabilities to report (chat: logprobs true; completions: logprobs N): how many alternatives per
  // token to show, 0 for the sampled token's alone; nullopt: none. The engine is asked for at least one
  // alternative, since it reports the sampled token's log-probability only beside them.
  std::optional<std::int32_t> top_logprobs;
  std::int32_t n = 1;  // choices (the GenerateRequest's n)
  // proto's field name -> the client's spelling where they differ, for errors the engine reports later.
  std::map<std::string, std::string> client_names;
  // Fields loom cannot honour that a "lenient": true body had ignored (openai_unhonoured_fields.hpp).
  std::vector<std::string> ignored_fields;
};

// An answer that is not a completion: an HTTP status and OpenAI's error object.
struct Error {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::optional<std::string> param;  // the request field at fault, in the client's own spelling
  std::optional<std::string> code;

  nlohmann::json to_json() const;  // {"error":{"message","type","param","code"}}
};

// Parses and validates an OpenAI body for `route`. `request_id` becomes the GenerateRequest's id.
// Sampling fields the body leaves out take loom's own defaults (those of the WebSocket protocol), not
// OpenAI's temperature 1 with no top-k/min-p: a local model is far more coherent with them, and it is
// what llama.cpp's server does too, so users of OpenAI-compatible servers expect it.
std::variant<Request, Error> translate_request(std::string_view body, OpenAiRoute route, std::string request_id,
                                               const proto::ParseOptions& options);

// A request body that must be a JSON object, parsed within `max_depth` levels of nesting (the other routes
// that take JSON share the OpenAI routes' parser and its error messages).
std::variant<nlohmann::json, Error> parse_json_object(std::string_view body, std::size_t max_depth);

// proto's path of a refused value ("params.repetition_penalty", "params.stop[1]", "messages[0].role") in
// the client's spelling ("repeat_penalty", "stop[1]", "messages[0].role"): `client_names` maps proto's
// parameter names to the ones the client wrote where they differ.
std::string client_field(const std::string& field, const std::map<std::string, std::string>& client_names);

// An error event the engine sent instead of accepting the request, as an HTTP error; its field in the
// client's spelling (Request::client_names).
Error from_error_event(const proto::ErrorEvent& event, const std::map<std::string, std::string>& client_names = {});

// OpenAI's finish_reason for a request that completed: eos and stop are "stop", length is "length",
// tool_calls is "tool_calls". nullopt for cancelled, error and timeout, which the route answers as errors
// instead.
std::optional<std::string> finish_reason(proto::FinishReason reason);

// The error for a request that was accepted but ended cancelled, timed out or failed.
Error from_failed_done(const proto::DoneEvent& done);

// The identity every object of one response repeats.
struct ResponseIdentity {
  OpenAiRoute route = OpenAiRoute::completions;
  std::string id;
  std::int64_t created = 0;  // unix seconds
  std::string model;
};

nlohmann::json usage_json(const proto::Usage& usage);

// stream:false: the whole answer. For chat, the message's content is null when the reply is only tool
// calls (as OpenAI's), reasoning_content is there when the reply had reasoning, and tool_calls when it
// called tools: [{"id", "type": "function", "function": {"name", "arguments"}}].
nlohmann::json completion_object(const ResponseIdentity& identity, const std::string& text,
                                 const std::string& finish_reason, const proto::Usage& usage,
                                 const std::string& reasoning = {}, const std::vector<proto::ToolCall>& tool_calls = {},
                                 const nlohmann::json& logprobs = nullptr);

// One entry of `choices` as completion_object writes it, at `index` (a request with n > 1 has one per choice).
nlohmann::json completion_choice(const ResponseIdentity& identity, std::int32_t index, const std::string& text,
                                 const std::string& finish_reason, const std::string& reasoning = {},
                                 const std::vector<proto::ToolCall>& tool_calls = {},
                                 const nlohmann::json& logprobs = nullptr);

// How each choice of a finished request ended, index order: done.choices, or for n = 1 the event's own fields
// as choice 0.
std::vector<proto::ChoiceEnd> choice_ends(const proto::DoneEvent& done);
// The chunk functions below write choice 0: this puts a chunk under another choice's index.
void set_choice_index(nlohmann::json& chunk, std::int32_t index);

// stream:true, one chunk each. For chat, the first chunk carries the role (OpenAI sends
// delta {role:"assistant", content:""} before any text).
nlohmann::json role_chunk(const ResponseIdentity& identity);  // chat only
nlohmann::json text_chunk(const ResponseIdentity& identity, const std::string& text);
// Chat only: delta {"reasoning_content": piece}.
nlohmann::json reasoning_chunk(const ResponseIdentity& identity, const std::string& reasoning);
// Chat only: delta {"tool_calls": [...]}, OpenAI's shape: a call's first delta (the one with its id or
// name) is {"index", "id", "type": "function", "function": {"name", "arguments"}}, later ones
// {"index", "function": {"arguments": piece}}.
nlohmann::json tool_calls_chunk(const ResponseIdentity& identity, const std::vector<proto::ToolCallDelta>& deltas);
// The chunks one token event makes, in order: its reasoning, its content text, its tool calls (chat), each
// only when not empty; for completions, its text only. None for a token that releases nothing (half of a
// multi-byte character, or text the engine holds back while it decides whether it is a tool call).
std::vector<nlohmann::json> token_chunks(const ResponseIdentity& identity, const proto::TokenEvent& token);

// Tool calls put together from their streamed deltas: a delta for call i adds to calls[i] (a new call is
// index calls.size(); a delta that skips ahead is ignored).
void add_tool_call_deltas(std::vector<proto::ToolCall>& calls, const std::vector<proto::ToolCallDelta>& deltas);
// The calls of a done event that no delta streamed (those from index `streamed` on), as whole deltas, for a
// stream to send before its finish chunk.
std::vector<proto::ToolCallDelta> unstreamed_tool_calls(const std::vector<proto::ToolCall>& calls, std::size_t streamed);
nlohmann::json finish_chunk(const ResponseIdentity& identity, const std::string& finish_reason);
nlohmann::json usage_chunk(const ResponseIdentity& identity, const proto::Usage& usage);  // choices: []

// "data: JSON\n\n", the JSON written with invalid UTF-8 replaced (never throws on a bad byte).
std::string sse_event(const nlohmann::json& payload);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

}  // namespace loom::net::openai
