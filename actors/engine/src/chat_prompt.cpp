#include "chat_prompt.hpp"

#include "loom/compute/text/reply_format.hpp"
#include "loom/compute/text/tool_call_grammar.hpp"

#include <limits>
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

ChatPromptInput chat_prompt_input(const proto::GenerateRequest& request, const std::vector<proto::ChatMessage>& history,
                                  const std::optional<std::string>& system_prompt, std::int64_t capacity) {
  ChatPromptInput input;
  input.conversation = history;
  for (const auto& message : std::get<std::vector<proto::ChatMessage>>(request.input)) {
    (message.role == proto::ChatRole::system ? input.system : input.conversation).push_back(message);
  }
  if (input.system.empty() && system_prompt) {
    proto::ChatMessage system;
    system.role = proto::ChatRole::system;
    system.content = *system_prompt;
    input.system.push_back(std::move(system));
  }
  input.kept = input.conversation.size() > history.size() ? 1 : 0;
  // tool_choice none: the model is not told of the tools, so it cannot try to call one.
  if (request.tool_choice.mode != proto::ToolChoice::Mode::none) input.tools = template_tools(request.tools);
  if (request.chat_template_kwargs) input.kwargs = ordered_json::parse(*request.chat_template_kwargs);
  input.capacity = capacity;
  return input;
}

AppliedTemplate apply_template(const compute::ChatFormat& format, const compute::Tokenizer& tokenizer,
                               const proto::GenerateRequest& request) {
  AppliedTemplate out;
  const auto error = [&](proto::ErrorCode code, std::string message, std::string field) {
    out.error = proto::ErrorEvent{request.id, code, std::move(message), std::move(field)};
    return out;
  };
  const auto* messages = std::get_if<std::vector<proto::ChatMessage>>(&request.input);
  if (messages == nullptr || messages->empty()) {
    return error(proto::ErrorCode::invalid_request, "a chat template renders at least one message", "messages");
  }
  const auto input = chat_prompt_input(request, {}, std::nullopt, std::numeric_limits<std::int64_t>::max());
  auto built = build_chat_prompt(format, tokenizer, input);
  if (auto* failed = std::get_if<ChatPromptError>(&built)) {
    return error(failed->unsupported ? proto::ErrorCode::unsupported : proto::ErrorCode::invalid_request,
                 std::move(failed->message), "messages");
  }
  auto& prompt = std::get<ChatPrompt>(built);
  out.prompt = std::move(prompt.text);
  out.prompt_tokens = static_cast<std::int32_t>(prompt.tokens.size());
  return out;
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
      if (format.is_builtin()) return ChatPromptError{.message = e.what(), .too_long = false, .unsupported = true};
      return ChatPromptError{e.raised() ? e.what() : std::string("the chat template failed: ") + e.what()};
    }
    prompt.tokens = tokenize(format, tokenizer, prompt.text);
    if (static_cast<std::int64_t>(prompt.tokens.size()) <= input.capacity) return prompt;
    const std::size_t next = next_exchange(turns, prompt.dropped);
    if (prompt.dropped >= droppable || next > droppable) {
      return ChatPromptError{.message = {}, .too_long = true, .unsupported = false, .tokens = prompt.tokens.size()};
    }
    prompt.dropped = next;
  }
}

std::optional<ReplySplit> reply_split(const compute::ChatFormat& format, const proto::GenerateRequest& request,
                                      std::string_view prompt_text) {
  if (format.source().empty()) return std::nullopt;
  constexpr std::size_t kTail = 256;  // the generation prompt's end is all detection reads
  const auto tail = prompt_text.substr(prompt_text.size() > kTail ? prompt_text.size() - kTail : 0);
  ReplySplit split{compute::detect_reply_format(format.source(), tail), {}};
  split.options.tools_offered = !request.tools.empty() && request.tool_choice.mode != proto::ToolChoice::Mode::none;
  split.options.extract_reasoning = request.reasoning_format != proto::ReasoningFormat::none;
  split.options.parallel_tool_calls = request.parallel_tool_calls;
  const bool calls = split.options.tools_offered && split.format.tools != compute::ToolCallFormat::none;
  const bool reasoning = split.options.extract_reasoning && !split.format.reasoning_open.empty();
  // gpt-oss replies are harmony messages: their headers are never content, whatever was asked.
  if (!calls && !reasoning && split.format.tools != compute::ToolCallFormat::gpt_oss) return std::nullopt;
  return split;
}

std::optional<proto::OutputConstraint> tool_choice_constraint(const compute::ReplyFormat& format,
                                                              const proto::GenerateRequest& request,
                                                              const nlohmann::ordered_json& tools) {
  using Mode = proto::ToolChoice::Mode;
  const auto& choice = request.tool_choice;
  if (choice.mode != Mode::required && choice.mode != Mode::function) return std::nullopt;
  if (format.tools == compute::ToolCallFormat::none) {
    throw std::invalid_argument("the model's chat template writes no tool calls in a syntax loom knows, so tool_choice " +
                                std::string(choice.mode == Mode::required ? "required" : "naming a function") +
                                " cannot be enforced");
  }
  std::optional<std::string> only;
  if (choice.mode == Mode::function) only = choice.function;
  return proto::OutputConstraint{proto::OutputConstraint::Kind::grammar,
                                 compute::tool_call_grammar(format, tools, only, request.parallel_tool_calls,
                                                            request.reasoning_format != proto::ReasoningFormat::none)};
}

}  // namespace loom::actors::detail
