// The OpenAI-compatible routes' response half: engine events as OpenAI's error objects, completion objects
// and stream chunks (openai_translate.hpp).
#include "openai_translate.hpp"

#include <string>
#include <string_view>
#include <utility>

namespace loom::net::openai {

using nlohmann::json;

nlohmann::json Error::to_json() const {
  json error = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  if (param) error["param"] = *param;
  if (code) error["code"] = *code;
  return json{{"error", std::move(error)}};
}

Error from_error_event(const proto::ErrorEvent& event, const std::map<std::string, std::string>& client_names) {
  Error error;
  error.message = event.message;
  error.code = std::string(proto::to_string(event.code));
  switch (event.code) {
    case proto::ErrorCode::invalid_request:
      error.status = 400;
      if (!event.field.empty()) {
        error.param = client_field(event.field, client_names);
        error.message = *error.param + ": " + event.message;
      }
      break;
    case proto::ErrorCode::unsupported:  // well formed, but not offered: the client's to change
      error.status = 400;
      break;
    case proto::ErrorCode::not_found:
      error.status = 404;
      error.type = "not_found_error";
      break;
    case proto::ErrorCode::conflict:
      error.status = 409;
      break;
    case proto::ErrorCode::overloaded:
      error.status = 503;
      error.type = "overloaded_error";
      break;
    case proto::ErrorCode::unavailable:
      error.status = 503;
      error.type = "server_error";
      break;
    case proto::ErrorCode::internal:
      error.status = 500;
      error.type = "server_error";
      break;
  }
  return error;
}

std::optional<std::string> finish_reason(proto::FinishReason reason) {
  switch (reason) {
    case proto::FinishReason::eos:
    case proto::FinishReason::stop: return "stop";
    case proto::FinishReason::length: return "length";
    case proto::FinishReason::tool_calls: return "tool_calls";
    case proto::FinishReason::cancelled:
    case proto::FinishReason::error:
    case proto::FinishReason::timeout: return std::nullopt;
  }
  return std::nullopt;
}

Error from_failed_done(const proto::DoneEvent& done) {
  Error error;
  error.type = "server_error";
  const std::string generated = " (after " + std::to_string(done.usage.completion_tokens) + " generated tokens)";
  switch (done.finish_reason) {
    case proto::FinishReason::timeout:
      error.status = 504;
      error.code = "timeout";
      error.message = done.error_message.value_or("the request exceeded its time limit") + generated;
      break;
    case proto::FinishReason::cancelled:
      // Nobody but the server cancels an HTTP request that is still connected: it is shutting down.
      error.status = 503;
      error.code = "cancelled";
      error.message = "the request was cancelled by the server" + generated;
      break;
    default:
      error.status = 500;
      error.code = "internal";
      error.message = done.error_message.value_or("the request failed") + generated;
      break;
  }
  return error;
}

nlohmann::json usage_json(const proto::Usage& usage) {
  json out = {{"prompt_tokens", usage.prompt_tokens},
              {"completion_tokens", usage.completion_tokens},
              {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", usage.cached_tokens}}}};
  // loom's: the conversation was cut to fit the context (also the X-Loom-Trimmed-Messages header).
  if (usage.trimmed_messages > 0) out["trimmed_messages"] = usage.trimmed_messages;
  return out;
}

namespace {
json envelope(const ResponseIdentity& identity, std::string_view object) {
  return {{"id", identity.id}, {"object", object}, {"created", identity.created}, {"model", identity.model}};
}
bool is_chat(const ResponseIdentity& identity) { return identity.route == OpenAiRoute::chat_completions; }
std::string_view chunk_object(const ResponseIdentity& identity) {
  return is_chat(identity) ? "chat.completion.chunk" : "text_completion";
}
json chunk_choice(const ResponseIdentity& identity, const std::string& text, const json& finish_reason) {
  if (is_chat(identity)) {
    const json delta = text.empty() ? json::object() : json{{"content", text}};
    return {{"index", 0}, {"delta", delta}, {"finish_reason", finish_reason}, {"logprobs", nullptr}};
  }
  return {{"index", 0}, {"text", text}, {"finish_reason", finish_reason}, {"logprobs", nullptr}};
}
}  // namespace

nlohmann::json completion_choice(const ResponseIdentity& identity, std::int32_t index, const std::string& text,
                                 const std::string& finish_reason, const std::string& reasoning,
                                 const std::vector<proto::ToolCall>& tool_calls, const nlohmann::json& logprobs) {
  json choice = {{"index", index}, {"finish_reason", finish_reason}, {"logprobs", logprobs}};
  if (is_chat(identity)) {
    json message = {{"role", "assistant"}, {"content", text}};
    // OpenAI's message for a reply that only called tools has content null.
    if (text.empty() && !tool_calls.empty()) message["content"] = nullptr;
    if (!reasoning.empty()) message["reasoning_content"] = reasoning;
    if (!tool_calls.empty()) {
      json calls = json::array();
      for (const proto::ToolCall& call : tool_calls) {
        calls.push_back({{"id", call.id},
                         {"type", "function"},
                         {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
      }
      message["tool_calls"] = std::move(calls);
    }
    choice["message"] = std::move(message);
  } else {
    choice["text"] = text;
  }
  return choice;
}

nlohmann::json completion_object(const ResponseIdentity& identity, const std::string& text,
                                 const std::string& finish_reason, const proto::Usage& usage,
                                 const std::string& reasoning, const std::vector<proto::ToolCall>& tool_calls,
                                 const nlohmann::json& logprobs) {
  json object = envelope(identity, is_chat(identity) ? "chat.completion" : "text_completion");
  object["choices"] = json::array({completion_choice(identity, 0, text, finish_reason, reasoning, tool_calls, logprobs)});
  object["usage"] = usage_json(usage);
  return object;
}

std::vector<proto::ChoiceEnd> choice_ends(const proto::DoneEvent& done) {
  if (!done.choices.empty()) return done.choices;
  proto::ChoiceEnd only;
  only.finish_reason = done.finish_reason;
  only.stop = done.stop;
  only.tool_calls = done.tool_calls;
  only.completion_tokens = done.usage.completion_tokens;
  return {std::move(only)};
}

void set_choice_index(nlohmann::json& chunk, std::int32_t index) {
  for (json& choice : chunk["choices"]) choice["index"] = index;
}

nlohmann::json role_chunk(const ResponseIdentity& identity) {
  json chunk = envelope(identity, chunk_object(identity));
  chunk["choices"] = json::array({{{"index", 0},
                                   {"delta", {{"role", "assistant"}, {"content", ""}}},
                                   {"finish_reason", nullptr},
                                   {"logprobs", nullptr}}});
  return chunk;
}

nlohmann::json text_chunk(const ResponseIdentity& identity, const std::string& text) {
  json chunk = envelope(identity, chunk_object(identity));
  chunk["choices"] = json::array({chunk_choice(identity, text, nullptr)});
  return chunk;
}

nlohmann::json reasoning_chunk(const ResponseIdentity& identity, const std::string& reasoning) {
  json chunk = envelope(identity, chunk_object(identity));
  chunk["choices"] = json::array({{{"index", 0},
                                   {"delta", {{"reasoning_content", reasoning}}},
                                   {"finish_reason", nullptr},
                                   {"logprobs", nullptr}}});
  return chunk;
}

nlohmann::json tool_calls_chunk(const ResponseIdentity& identity, const std::vector<proto::ToolCallDelta>& deltas) {
  json calls = json::array();
  for (const proto::ToolCallDelta& delta : deltas) {
    json item = {{"index", delta.index}};
    if (delta.id || delta.name) {
      // A call's first delta: OpenAI sends its id, type and name once, with the arguments begun (often "").
      item["id"] = delta.id.value_or("");
      item["type"] = "function";
      item["function"] = {{"name", delta.name.value_or("")}, {"arguments", delta.arguments}};
    } else {
      item["function"] = {{"arguments", delta.arguments}};
    }
    calls.push_back(std::move(item));
  }
  json chunk = envelope(identity, chunk_object(identity));
  chunk["choices"] = json::array({{{"index", 0},
                                   {"delta", {{"tool_calls", std::move(calls)}}},
                                   {"finish_reason", nullptr},
                                   {"logprobs", nullptr}}});
  return chunk;
}

std::vector<nlohmann::json> token_chunks(const ResponseIdentity& identity, const proto::TokenEvent& token) {
  std::vector<json> chunks;
  if (!is_chat(identity)) {
    if (!token.text.empty()) chunks.push_back(text_chunk(identity, token.text));
    return chunks;
  }
  if (!token.reasoning.empty()) chunks.push_back(reasoning_chunk(identity, token.reasoning));
  if (!token.text.empty()) chunks.push_back(text_chunk(identity, token.text));
  if (!token.tool_calls.empty()) chunks.push_back(tool_calls_chunk(identity, token.tool_calls));
  return chunks;
}

void add_tool_call_deltas(std::vector<proto::ToolCall>& calls, const std::vector<proto::ToolCallDelta>& deltas) {
  for (const proto::ToolCallDelta& delta : deltas) {
    if (delta.index < 0) continue;
    const auto index = static_cast<std::size_t>(delta.index);
    if (index > calls.size()) continue;  // skips ahead: not a call this stream has begun or begins now
    if (index == calls.size()) calls.emplace_back();
    proto::ToolCall& call = calls[index];
    if (delta.id) call.id = *delta.id;
    if (delta.name) call.name = *delta.name;
    call.arguments += delta.arguments;
  }
}

std::vector<proto::ToolCallDelta> unstreamed_tool_calls(const std::vector<proto::ToolCall>& calls, std::size_t streamed) {
  std::vector<proto::ToolCallDelta> deltas;
  for (std::size_t i = streamed; i < calls.size(); ++i) {
    deltas.push_back({static_cast<std::int32_t>(i), calls[i].id, calls[i].name, calls[i].arguments});
  }
  return deltas;
}

nlohmann::json finish_chunk(const ResponseIdentity& identity, const std::string& finish_reason) {
  json chunk = envelope(identity, chunk_object(identity));
  chunk["choices"] = json::array({chunk_choice(identity, "", finish_reason)});
  return chunk;
}

nlohmann::json usage_chunk(const ResponseIdentity& identity, const proto::Usage& usage) {
  json chunk = envelope(identity, chunk_object(identity));
  chunk["choices"] = json::array();
  chunk["usage"] = usage_json(usage);
  return chunk;
}

std::string sse_event(const nlohmann::json& payload) {
  return "data: " + payload.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

}  // namespace loom::net::openai
