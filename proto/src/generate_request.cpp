#include "loom/proto/generate_request.hpp"

#include "readers.hpp"

namespace loom::proto {

void to_json(nlohmann::json& j, const GenerateRequest& request) {
  j = nlohmann::json{{"id", request.id}};
  if (request.session_id) j[request.open_session ? "session" : "session_id"] = *request.session_id;
  if (const auto* prompt = std::get_if<std::string>(&request.input)) {
    j["prompt"] = *prompt;
  } else {
    j["messages"] = std::get<std::vector<ChatMessage>>(request.input);
  }
  j["params"] = request.params;
  j["priority"] = request.priority;
  j["stream"] = request.stream;
  if (request.progress) j["progress"] = true;
  if (!request.tools.empty()) j["tools"] = request.tools;
  if (request.tool_choice.mode != ToolChoice::Mode::auto_) j["tool_choice"] = request.tool_choice;
  if (!request.parallel_tool_calls) j["parallel_tool_calls"] = false;
  if (request.chat_template_kwargs) {
    // Parsed back from its text, as a tool's parameters (a text that is not JSON stays a string, refused).
    j["chat_template_kwargs"] = nlohmann::json::parse(*request.chat_template_kwargs, nullptr, false);
    if (j["chat_template_kwargs"].is_discarded()) j["chat_template_kwargs"] = *request.chat_template_kwargs;
  }
  if (request.reasoning_format != ReasoningFormat::auto_) j["reasoning_format"] = to_string(request.reasoning_format);
  if (request.n != 1) j["n"] = request.n;
}

std::string_view to_string(ReasoningFormat format) noexcept {
  switch (format) {
    case ReasoningFormat::auto_:
      return "auto";
    case ReasoningFormat::none:
      return "none";
  }
  return "unknown";
}

std::optional<ReasoningFormat> parse_reasoning_format(std::string_view text) noexcept {
  if (text == "auto" || text == "deepseek") return ReasoningFormat::auto_;
  if (text == "none") return ReasoningFormat::none;
  return std::nullopt;
}

namespace {

// The compact text of `ordered` replaces `text` when it is the same value in another order: the same
// bytes in all, so every size bound checked already holds.
void take_order(std::string& text, const nlohmann::ordered_json* ordered) {
  if (ordered == nullptr || !ordered->is_object()) return;
  std::string reordered = ordered->dump();
  if (reordered.size() == text.size()) text = std::move(reordered);
}

const nlohmann::ordered_json* member(const nlohmann::ordered_json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

const nlohmann::ordered_json* element(const nlohmann::ordered_json* array, std::size_t index) {
  if (array == nullptr || !array->is_array() || index >= array->size()) return nullptr;
  return &(*array)[index];
}

}  // namespace

void keep_key_order(GenerateRequest& request, const nlohmann::ordered_json& fields) {
  if (!fields.is_object()) return;
  const auto* tools = member(fields, "tools");
  for (std::size_t i = 0; i < request.tools.size(); ++i) {
    auto& parameters = request.tools[i].parameters;
    const auto* tool = element(tools, i);
    const auto* function = tool != nullptr ? member(*tool, "function") : nullptr;
    if (parameters && function != nullptr) take_order(*parameters, member(*function, "parameters"));
  }
  if (request.chat_template_kwargs) take_order(*request.chat_template_kwargs, member(fields, "chat_template_kwargs"));
  if (auto* messages = std::get_if<std::vector<ChatMessage>>(&request.input)) {
    const auto* ordered_messages = member(fields, "messages");
    for (std::size_t i = 0; i < messages->size(); ++i) {
      const auto* message = element(ordered_messages, i);
      const auto* calls = message != nullptr ? member(*message, "tool_calls") : nullptr;
      auto& tool_calls = (*messages)[i].tool_calls;
      for (std::size_t k = 0; k < tool_calls.size(); ++k) {
        const auto* call = element(calls, k);
        const auto* function = call != nullptr ? member(*call, "function") : nullptr;
        // Arguments given as a string are kept as they are; only an object's text was written by us.
        if (function != nullptr) take_order(tool_calls[k].arguments, member(*function, "arguments"));
      }
    }
  }
}

Parsed<GenerateRequest> parse_generate_request(const nlohmann::json& j, const ParseOptions& options) {
  return detail::guarded<GenerateRequest>([&] { return detail::read_generate_request(j, "", options); }, &j, options);
}

std::optional<ValidationError> check_generate_request(const GenerateRequest& request, const ParseOptions& options) {
  const nlohmann::json j = request;
  auto parsed = parse_generate_request(j, options);
  if (parsed.ok()) return std::nullopt;
  return parsed.error();
}

namespace detail {

namespace {

std::vector<ChatMessage> read_messages(const Json& value, const std::string& path, const ParseOptions& options) {
  if (!value.is_array()) fail(path, "must be an array of messages, got " + describe(value));
  if (value.empty()) fail(path, "must not be empty");
  if (value.size() > options.max_messages) {
    fail(path,
         "must have at most " + std::to_string(options.max_messages) + " entries, got " + std::to_string(value.size()));
  }
  std::vector<ChatMessage> messages;
  messages.reserve(value.size());
  std::size_t total_bytes = 0;
  for (std::size_t i = 0; i < value.size(); ++i) {
    messages.push_back(read_chat_message(value[i], index_path(path, i), options));
    const ChatMessage& message = messages.back();
    total_bytes += message.content.size();
    if (message.reasoning_content) total_bytes += message.reasoning_content->size();
    for (const ToolCall& call : message.tool_calls) total_bytes += call.arguments.size();
  }
  // Each content is bounded alone; the sum is what the tokenizer and the KV cache actually face (reasoning
  // and tool call arguments are rendered too, so they count).
  if (total_bytes > options.max_prompt_bytes) {
    fail(path, "must have at most " + std::to_string(options.max_prompt_bytes) + " bytes of content in total, got " +
                   std::to_string(total_bytes));
  }
  return messages;
}

std::vector<ToolDefinition> read_tools(const Json& value, const std::string& path, const ParseOptions& options) {
  auto tools = read_array<ToolDefinition>(value, path, options.max_tools, [&](const Json& item, const std::string& p) {
    return read_tool_definition(item, p, options);
  });
  std::size_t total_bytes = 0;
  for (std::size_t i = 0; i < tools.size(); ++i) {
    const ToolDefinition& tool = tools[i];
    for (std::size_t k = 0; k < i; ++k) {
      if (tools[k].name == tool.name) {
        fail(index_path(path, i) + ".function.name",
             "must be unique, got " + echo_text(tool.name) + " again (first at " + index_path(path, k) + ")");
      }
    }
    total_bytes += tool.name.size() + (tool.description ? tool.description->size() : 0) +
                   (tool.parameters ? tool.parameters->size() : 0);
  }
  // The tools are rendered into the prompt: bounded as prompt text.
  if (total_bytes > options.max_prompt_bytes) {
    fail(path, "must have at most " + std::to_string(options.max_prompt_bytes) +
                   " bytes of names, descriptions and parameters in total, got " + std::to_string(total_bytes));
  }
  return tools;
}

}  // namespace

GenerateRequest read_generate_request(const Json& j, const std::string& path, const ParseOptions& options,
                                      std::string_view envelope_key) {
  ObjectReader r(j, path, options);
  r.check_known({"id", "session_id", "session", "prompt", "messages", "params", "priority", "stream", "progress",
                 "tools", "tool_choice", "parallel_tool_calls", "chat_template_kwargs", "reasoning_format", "n"},
                envelope_key);
  GenerateRequest request;
  request.id = read_id(r.require("id"), r.path("id"), options);
  const Json* session_id = r.find("session_id");
  const Json* session = r.find("session");
  if (session_id != nullptr && session != nullptr) {
    fail(r.path("session"), "give the session as session (opened on first use) or as session_id (opened with "
                            "session.open), not both");
  }
  if (session_id != nullptr) request.session_id = read_id(*session_id, r.path("session_id"), options);
  if (session != nullptr) {
    request.session_id = read_id(*session, r.path("session"), options);
    request.open_session = true;
  }

  const Json* prompt = r.find("prompt");
  const Json* messages = r.find("messages");
  if (prompt != nullptr && messages != nullptr) {
    fail(r.path("prompt"), "exactly one of prompt and messages must be given, got both");
  }
  if (prompt == nullptr && messages == nullptr) {
    fail(r.path("prompt"), "exactly one of prompt and messages must be given, got neither");
  }
  if (prompt != nullptr) {
    const std::string prompt_path = r.path("prompt");
    std::string text = read_string(*prompt, prompt_path);
    check_max_bytes(text, prompt_path, options.max_prompt_bytes);
    request.input = std::move(text);
  } else {
    request.input = read_messages(*messages, r.path("messages"), options);
  }

  if (const Json* v = r.find("params")) {
    request.params = read_sampling_params(*v, r.path("params"), options);
  } else {
    // Absent params are all defaults, with the same max_tokens clamp as a present-but-empty object.
    request.params = read_sampling_params(Json::object(), r.path("params"), options);
  }
  if (const Json* v = r.find("priority")) {
    request.priority = static_cast<std::int32_t>(
        read_integer(*v, r.path("priority"), GenerateRequest::kMinPriority, GenerateRequest::kMaxPriority));
  }
  if (const Json* v = r.find("stream")) request.stream = read_bool(*v, r.path("stream"));
  if (const Json* v = r.find("progress")) request.progress = read_bool(*v, r.path("progress"));

  // Tool calling and the template's extras: a raw prompt is not rendered with the chat template, so they
  // would be dropped silently.
  const auto chat_only = [&](const char* key) {
    if (!request.is_chat()) fail(r.path(key), "may only be given with messages (a raw prompt is not rendered with the chat template)");
  };
  if (const Json* v = r.find("tools")) {
    chat_only("tools");
    request.tools = read_tools(*v, r.path("tools"), options);
  }
  if (const Json* v = r.find("tool_choice")) {
    const std::string choice_path = r.path("tool_choice");
    request.tool_choice = read_tool_choice(*v, choice_path, options);
    const auto mode = request.tool_choice.mode;
    if ((mode == ToolChoice::Mode::required || mode == ToolChoice::Mode::function) && request.tools.empty()) {
      fail(choice_path, std::string("cannot be ") + (mode == ToolChoice::Mode::required ? "\"required\"" : "a function") +
                            " without tools");
    }
    if (mode == ToolChoice::Mode::function) {
      const std::string& name = request.tool_choice.function;
      bool found = false;
      for (const ToolDefinition& tool : request.tools) found = found || tool.name == name;
      if (!found) fail(choice_path + ".function.name", "must name one of the tools, got " + echo_text(name));
    }
  }
  if (const Json* v = r.find("parallel_tool_calls")) {
    request.parallel_tool_calls = read_bool(*v, r.path("parallel_tool_calls"));
  }
  if (const Json* v = r.find("chat_template_kwargs")) {
    chat_only("chat_template_kwargs");
    request.chat_template_kwargs =
        read_json_object_text(*v, r.path("chat_template_kwargs"), options.max_constraint_bytes);
  }
  if (const Json* v = r.find("reasoning_format")) {
    const std::string format_path = r.path("reasoning_format");
    const std::string text = read_string(*v, format_path);
    const auto format = parse_reasoning_format(text);
    if (!format) fail(format_path, "must be \"auto\" (or \"deepseek\", the same) or \"none\", got " + echo_text(text));
    request.reasoning_format = *format;
  }
  if (const Json* v = r.find("n")) {
    request.n = static_cast<std::int32_t>(read_integer(*v, r.path("n"), 1, GenerateRequest::kMaxChoices));
    if (request.n > 1 && request.session_id) {
      fail(r.path("n"), "must be 1 in a session (its history keeps one reply); send n > 1 as a stand-alone request");
    }
  }
  return request;
}

}  // namespace detail

}  // namespace loom::proto
