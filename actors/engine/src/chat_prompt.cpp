#include "chat_prompt.hpp"

#include <string_view>
#include <utility>
#include <variant>

namespace loom::actors::detail {

namespace {

using ordered_json = nlohmann::ordered_json;

// JSON text as a value when it is an object; otherwise nullopt (the caller keeps the text).
std::optional<ordered_json> json_object(const std::string& text) {
  auto value = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded() || !value.is_object()) return std::nullopt;
  return value;
}

// Where the next exchange starts after `from`: the next user turn past it, or the end.
std::size_t next_exchange(const std::vector<proto::ChatMessage>& turns, std::size_t from) {
  std::size_t i = from + 1;
  while (i < turns.size() && turns[i].role != proto::ChatRole::user) ++i;
  return i;
}

// The rendering's tokens; BOS is added by encode_prompt when the vocabulary asks for it, so a rendering that
// writes the BOS text first gives it up here rather than have two.
std::vector<std::int32_t> tokenize(const compute::ChatFormat& format, const compute::Tokenizer& tokenizer,
                                   std::string_view text) {
  const auto& bos = format.bos_token();
  const auto& vocabulary = tokenizer.vocabulary();
  if (bos && !bos->empty() && vocabulary.add_bos && text.starts_with(*bos)) text.remove_prefix(bos->size());
  return compute::encode_prompt(tokenizer, text, true);
}

}  // namespace

ordered_json template_message(const proto::ChatMessage& message) {
  ordered_json out = ordered_json::object();
  out["role"] = std::string(proto::to_string(message.role));
  if (message.content_null) {
    out["content"] = nullptr;
  } else {
    out["content"] = message.content;
  }
  if (message.reasoning_content) out["reasoning_content"] = *message.reasoning_content;
  if (!message.tool_calls.empty()) {
    ordered_json calls = ordered_json::array();
    for (const auto& call : message.tool_calls) {
      ordered_json function = ordered_json::object();
      function["name"] = call.name;
      if (auto object = json_object(call.arguments)) {
        function["arguments"] = std::move(*object);
      } else {
        function["arguments"] = call.arguments;
      }
      ordered_json entry = ordered_json::object();
      entry["id"] = call.id;
      entry["type"] = "function";
      entry["function"] = std::move(function);
      calls.push_back(std::move(entry));
    }
    out["tool_calls"] = std::move(calls);
  }
  if (message.tool_call_id) out["tool_call_id"] = *message.tool_call_id;
  if (message.name) out["name"] = *message.name;
  return out;
}

ordered_json template_tools(const std::vector<proto::ToolDefinition>& tools) {
  if (tools.empty()) return nullptr;
  ordered_json list = ordered_json::array();
  for (const auto& tool : tools) {
    ordered_json function = ordered_json::object();
    function["name"] = tool.name;
    if (tool.description) function["description"] = *tool.description;
    if (tool.parameters) {
      auto parameters = ordered_json::parse(*tool.parameters, nullptr, /*allow_exceptions=*/false);
      if (!parameters.is_discarded()) function["parameters"] = std::move(parameters);
    }
    ordered_json entry = ordered_json::object();
    entry["type"] = "function";
    entry["function"] = std::move(function);
    list.push_back(std::move(entry));
  }
  return list;
}

std::variant<ChatPrompt, ChatPromptError> build_chat_prompt(const compute::ChatFormat& format,
                                                            const compute::Tokenizer& tokenizer,
                                                            const ChatPromptInput& input) {
  const auto& turns = input.conversation;
  const std::size_t droppable = turns.size() > input.kept ? turns.size() - input.kept : 0;
  ChatPrompt prompt;
  for (;;) {
    compute::ChatInput chat;
    chat.tools = input.tools;
    chat.extra = input.kwargs;
    for (const auto& message : input.system) chat.messages.push_back(template_message(message));
    for (std::size_t i = prompt.dropped; i < turns.size(); ++i) chat.messages.push_back(template_message(turns[i]));
    try {
      prompt.text = format.render(chat);
    } catch (const compute::ChatRenderError& e) {
      return ChatPromptError{e.raised() ? e.what() : std::string("the chat template failed: ") + e.what()};
    }
    prompt.tokens = tokenize(format, tokenizer, prompt.text);
    if (static_cast<std::int64_t>(prompt.tokens.size()) <= input.capacity) return prompt;
    const std::size_t next = next_exchange(turns, prompt.dropped);
    if (prompt.dropped >= droppable || next > droppable) {
      return ChatPromptError{{}, true, prompt.tokens.size()};
    }
    prompt.dropped = next;
  }
}

}  // namespace loom::actors::detail
