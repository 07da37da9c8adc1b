// ChatFormat: how a model's conversations become prompt text. Either the model's own chat template (Jinja
// source from the GGUF key `tokenizer.chat_template`, or a file the operator gives), rendered by our Jinja
// interpreter exactly as Hugging Face transformers renders it, or one of the nine built-in layouts
// (chat_template.hpp), kept as an override and as the fallback for a model without a template.
//
// The template is parsed once, when the format is made, and the format is immutable afterwards: one
// instance is shared by every session of a model and rendered from many threads at once.
//
// The inputs reach the template as transformers passes them (see ../shared/templates/README.md):
// `messages` (the list as given, dicts in key order), `tools` (a list, or none when the request offers
// none), `add_generation_prompt`, `bos_token` / `eos_token` (the vocabulary's texts; undefined when the
// vocabulary has no such token), and every key of the request's `chat_template_kwargs` as a variable of its
// own. A built-in layout reads only the roles and texts of the messages and cannot render tools.
#pragma once

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "loom/compute/text/chat_template.hpp"

namespace loom::compute {

namespace jinja {
class Template;
}

// What one rendering takes. `messages` must be a JSON array and `extra` a JSON object (or null).
struct ChatInput {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;  // null: no tools offered (the template sees none)
  nlohmann::ordered_json extra;  // chat_template_kwargs: each key becomes a template variable
  bool add_generation_prompt = true;
  // The time strftime_now() reads; nullopt: now. Tests and `loom template --now` fix it.
  std::optional<std::chrono::sys_seconds> now;
};

// A rendering the format cannot do: the template raised an error (raise_exception, or an operation Python's
// Jinja refuses), or the input has something a built-in layout cannot show (a tool turn, tools).
// `raised()` is true when the template itself called raise_exception: its message is then meant for the
// client (e.g. "Conversation roles must alternate user/assistant/user/assistant/...").
class ChatRenderError : public std::runtime_error {
 public:
  ChatRenderError(const std::string& message, bool raised) : std::runtime_error(message), raised_(raised) {}
  bool raised() const noexcept { return raised_; }

 private:
  bool raised_;
};

class ChatFormat {
 public:
  // The Jinja template `source`; `label` says where it came from ("the model's template", a file name).
  // bos/eos: the vocabulary's special-token texts, nullopt when it has none. Throws std::invalid_argument
  // naming `label` when the template does not parse.
  static std::shared_ptr<const ChatFormat> from_jinja(std::string_view source, std::string label,
                                                      std::optional<std::string> bos_token,
                                                      std::optional<std::string> eos_token);
  static std::shared_ptr<const ChatFormat> from_builtin(ChatTemplate layout);

  ChatFormat(const ChatFormat&) = delete;
  ChatFormat& operator=(const ChatFormat&) = delete;
  ~ChatFormat();

  // The prompt text; special-token markers are written literally (tokenize with parse_special = true).
  // Throws ChatRenderError.
  std::string render(const ChatInput& input) const;

  // The Jinja source, empty for a built-in layout (reply parsing detects its format from this text).
  const std::string& source() const noexcept { return source_; }
  // "jinja (the model's template)", "chatml", ... for logs and `loom info`.
  const std::string& description() const noexcept { return description_; }
  bool is_builtin() const noexcept { return !jinja_; }
  // Texts that end an assistant turn when the vocabulary has no token for them, as stop strings: the
  // built-in layout's markers, or those of the family a Jinja template is recognised as (none otherwise).
  std::span<const std::string> end_of_turn_markers() const noexcept { return markers_; }
  // The vocabulary's BOS text as the template sees it; nullopt when there is none. A rendering that starts
  // with it already has its BOS (the tokenizer must then not add another).
  const std::optional<std::string>& bos_token() const noexcept { return bos_token_; }

 private:
  ChatFormat() = default;
  std::string render_builtin(const ChatInput& input) const;

  std::shared_ptr<const jinja::Template> jinja_;
  std::optional<ChatTemplate> layout_;
  std::string source_;
  std::string description_;
  std::optional<std::string> bos_token_;
  std::optional<std::string> eos_token_;
  std::vector<std::string> markers_;
};

// The text of a Jinja template file, for --chat-template-file. Throws std::runtime_error naming the path when
// it cannot be read, is empty, or is larger than a template can sensibly be (1 MiB, the parser's bound).
std::string read_chat_template_file(const std::string& path);

}  // namespace loom::compute
