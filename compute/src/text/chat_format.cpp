#include "loom/compute/text/chat_format.hpp"

#include <filesystem>
#include <fstream>

#include "loom/compute/text/jinja/template.hpp"

namespace loom::compute {

namespace {

using ordered_json = nlohmann::ordered_json;

// The variables the template sees. Keys of `extra` come first so that the fixed ones win a clash: a client's
// kwargs can add variables but never replace the conversation.
ordered_json template_variables(const ChatInput& input, const std::optional<std::string>& bos,
                                const std::optional<std::string>& eos) {
  ordered_json variables = ordered_json::object();
  if (input.extra.is_object()) {
    for (const auto& [key, value] : input.extra.items()) variables[key] = value;
  }
  variables["messages"] = input.messages;
  variables["tools"] = input.tools;
  variables["documents"] = nullptr;
  variables["add_generation_prompt"] = input.add_generation_prompt;
  if (bos) variables["bos_token"] = *bos; else variables.erase("bos_token");
  if (eos) variables["eos_token"] = *eos; else variables.erase("eos_token");
  return variables;
}

std::optional<ChatTurnRole> builtin_role(std::string_view role) {
  if (role == "system") return ChatTurnRole::system;
  if (role == "user") return ChatTurnRole::user;
  if (role == "assistant") return ChatTurnRole::assistant;
  return std::nullopt;
}

// A message's text for a built-in layout: a string, null (empty), or text parts joined.
std::string builtin_content(const ordered_json& message) {
  const auto it = message.find("content");
  if (it == message.end() || it->is_null()) return {};
  if (it->is_string()) return it->get<std::string>();
  std::string text;
  if (it->is_array()) {
    for (const auto& part : *it) {
      if (part.is_object() && part.value("type", "") == "text" && part.contains("text") && part["text"].is_string()) {
        text += part["text"].get<std::string>();
      }
    }
  }
  return text;
}

}  // namespace

ChatFormat::~ChatFormat() = default;

std::shared_ptr<const ChatFormat> ChatFormat::from_jinja(std::string_view source, std::string label,
                                                         std::optional<std::string> bos_token,
                                                         std::optional<std::string> eos_token) {
  std::shared_ptr<ChatFormat> format(new ChatFormat());
  try {
    format->jinja_ = jinja::Template::parse(source);
  } catch (const jinja::TemplateError& e) {
    throw std::invalid_argument(label + " does not parse: " + e.what());
  }
  format->source_ = std::string(source);
  format->description_ = "jinja (" + label + ")";
  format->bos_token_ = std::move(bos_token);
  format->eos_token_ = std::move(eos_token);
  if (const auto family = detect_chat_template(source)) {
    for (const auto marker : compute::end_of_turn_markers(*family)) format->markers_.emplace_back(marker);
  }
  return format;
}

std::shared_ptr<const ChatFormat> ChatFormat::from_builtin(ChatTemplate layout) {
  std::shared_ptr<ChatFormat> format(new ChatFormat());
  format->layout_ = layout;
  format->description_ = std::string(name(layout));
  for (const auto marker : compute::end_of_turn_markers(layout)) format->markers_.emplace_back(marker);
  return format;
}

std::string ChatFormat::render(const ChatInput& input) const {
  if (!jinja_) return render_builtin(input);
  jinja::RenderOptions options;
  options.now = input.now;
  try {
    return jinja_->render(template_variables(input, bos_token_, eos_token_), options);
  } catch (const jinja::TemplateError& e) {
    throw ChatRenderError(e.what(), e.kind() == jinja::ErrorKind::raised);
  }
}

std::string ChatFormat::render_builtin(const ChatInput& input) const {
  if (!input.tools.is_null()) {
    throw ChatRenderError("the chat template " + description_ + " cannot show tools: use the model's own template", false);
  }
  std::vector<ChatTurn> turns;
  for (std::size_t i = 0; i < input.messages.size(); ++i) {
    const auto& message = input.messages[i];
    const auto role = message.is_object() ? builtin_role(message.value("role", "")) : std::nullopt;
    if (!role) {
      throw ChatRenderError("message " + std::to_string(i) + ": the chat template " + description_ +
                                " has no turn for role '" + (message.is_object() ? message.value("role", "") : "") + "'",
                            false);
    }
    turns.push_back({*role, builtin_content(message)});
  }
  return render_chat(*layout_, turns, input.add_generation_prompt);
}

std::string read_chat_template_file(const std::string& path) {
  constexpr std::uintmax_t kMaxBytes = 1 << 20;
  std::error_code error;
  const auto size = std::filesystem::file_size(path, error);
  if (error) throw std::runtime_error("chat template file " + path + ": " + error.message());
  if (size == 0) throw std::runtime_error("chat template file " + path + " is empty");
  if (size > kMaxBytes) {
    throw std::runtime_error("chat template file " + path + " is " + std::to_string(size) + " bytes; at most " +
                             std::to_string(kMaxBytes) + " are read");
  }
  std::ifstream in(path, std::ios::binary);
  std::string text(static_cast<std::size_t>(size), '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(size))) {
    throw std::runtime_error("chat template file " + path + " could not be read");
  }
  return text;
}

}  // namespace loom::compute
