// The session's chat side, apart from its actor: a conversation (system turns, the session's history, the
// request's turns) rendered with the model's ChatFormat and tokenized, the oldest exchanges dropped until it
// fits; and the JSON a template sees for a message and for the offered tools, as transformers passes them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "loom/actors/engine/engine_protocol.hpp"
#include "loom/compute/text/chat_format.hpp"
#include "loom/compute/text/reply_parser.hpp"
#include "loom/compute/text/tokenizer.hpp"
#include "loom/proto/chat_message.hpp"
#include "loom/proto/generate_request.hpp"

namespace loom::actors::detail {

// {"role", "content" (null when the client sent null or nothing), then where present "reasoning_content",
// "tool_calls" (OpenAI's shape; arguments that are a JSON object are given as that object, as the templates
// expect and as vLLM passes them; other text stays a string), "tool_call_id", "name"}.
nlohmann::ordered_json template_message(const proto::ChatMessage& message);
// OpenAI's tool list: [{"type": "function", "function": {"name", "description"?, "parameters"?}}], the
// parameters in the client's key order; null when no tools are offered.
nlohmann::ordered_json template_tools(const std::vector<proto::ToolDefinition>& tools);

struct ChatPromptInput {
  std::vector<proto::ChatMessage> system;        // rendered first, never dropped
  std::vector<proto::ChatMessage> conversation;  // the history, then the request's turns
  std::size_t kept = 1;                          // the last `kept` turns of the conversation are never dropped
  nlohmann::ordered_json tools;                  // template_tools()
  nlohmann::ordered_json kwargs;                 // chat_template_kwargs (an object, or null)
  std::int64_t capacity = 0;                     // tokens the prompt may have
};

// A chat request's input as a session renders it: the request's system turns (or, when it has none, the
// session's system prompt) first; then the session's history and the request's other turns, the last of
// those kept; the tools unless tool_choice is none; the template's kwargs. One path for a session's
// request and for the engine's apply-template.
ChatPromptInput chat_prompt_input(const proto::GenerateRequest& request, const std::vector<proto::ChatMessage>& history,
                                  const std::optional<std::string>& system_prompt, std::int64_t capacity);

struct ChatPrompt {
  std::vector<std::int32_t> tokens;
  std::string text;           // the rendering the tokens come from
  std::size_t dropped = 0;    // conversation turns dropped from the front to fit
};

// Why a chat request cannot become a prompt: the template refused it (its own message when it raised one),
// or even the kept turns do not fit.
struct ChatPromptError {
  std::string message;
  bool too_long = false;
  bool unsupported = false;  // a built-in layout cannot show it (a tool turn, tools)
  std::size_t tokens = 0;  // the shortest prompt's length when too_long
};

// Renders and tokenizes; drops whole exchanges from the front (a user turn with the turns after it up to the
// next user turn) while the prompt is over capacity. A rendering that starts with the vocabulary's BOS text
// is not given a second BOS.
std::variant<ChatPrompt, ChatPromptError> build_chat_prompt(const compute::ChatFormat& format,
                                                            const compute::Tokenizer& tokenizer,
                                                            const ChatPromptInput& input);

// A stand-alone chat request rendered (no history, no system prompt of a session), nothing dropped: the
// engine's apply-template. Errors as a session would refuse the request.
AppliedTemplate apply_template(const compute::ChatFormat& format, const compute::Tokenizer& tokenizer,
                               const proto::GenerateRequest& request);

// How a chat reply is split into content, reasoning and tool calls (reply_parser.hpp): the family's syntax
// from the template's text and the rendered prompt's end (a prompt that opens <think> starts in reasoning).
struct ReplySplit {
  compute::ReplyFormat format;
  compute::ReplyParseOptions options;
};
// nullopt when there is nothing to split (no tool syntax in use, no reasoning syntax, or reasoning_format
// none without tools): the reply is all content.
std::optional<ReplySplit> reply_split(const compute::ChatFormat& format, const proto::GenerateRequest& request,
                                      std::string_view prompt_text);

// The grammar that makes the reply a call (tool_choice required, or a named function), in the family's
// syntax with arguments valid under the tool's schema; nullopt for auto and none. Throws std::invalid_argument
// when the template has no tool-call syntax loom knows, and grammar::SchemaError for a schema the converter
// refuses.
std::optional<proto::OutputConstraint> tool_choice_constraint(const compute::ReplyFormat& format,
                                                              const proto::GenerateRequest& request,
                                                              const nlohmann::ordered_json& tools);

}  // namespace loom::actors::detail
