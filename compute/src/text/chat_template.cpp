#include "loom/compute/text/chat_template.hpp"

#include <array>
#include <initializer_list>

namespace loom::compute {

namespace {

constexpr std::array<ChatTemplate, 9> all_templates{
    ChatTemplate::chatml,  ChatTemplate::llama2, ChatTemplate::llama3,
    ChatTemplate::mistral, ChatTemplate::gemma,  ChatTemplate::phi3,
    ChatTemplate::zephyr,  ChatTemplate::alpaca, ChatTemplate::vicuna,
};

constexpr std::string_view alpaca_default_system =
    "Below is an instruction that describes a task. Write a response that appropriately completes the "
    "request.";
constexpr std::string_view vicuna_default_system =
    "A chat between a curious user and an artificial intelligence assistant. The assistant gives helpful, "
    "detailed, and polite answers to the user's questions.";

// Jinja's `trim` / Python's `strip()`, on ASCII whitespace (they also strip Unicode spaces; we do not).
std::string_view trim(std::string_view text) {
  constexpr std::string_view whitespace = " \t\n\r\f\v";
  const std::size_t first = text.find_first_not_of(whitespace);
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(whitespace) - first + 1);
}

std::string_view role_name(ChatTurnRole role) {
  switch (role) {
    case ChatTurnRole::system:
      return "system";
    case ChatTurnRole::user:
      return "user";
    case ChatTurnRole::assistant:
      return "assistant";
  }
  return "user";
}

void append(std::string& out, std::initializer_list<std::string_view> parts) {
  for (const std::string_view part : parts) out.append(part);
}

// Templates that write every turn the same way under its role's name.
std::string render_role_tagged(std::span<const ChatTurn> turns, bool add_generation_prompt, ChatTemplate t) {
  std::string out;
  for (const ChatTurn& turn : turns) {
    const std::string_view role = role_name(turn.role);
    switch (t) {
      case ChatTemplate::chatml:
        append(out, {"<|im_start|>", role, "\n", turn.content, "<|im_end|>\n"});
        break;
      case ChatTemplate::llama3:
        append(out, {"<|start_header_id|>", role, "<|end_header_id|>\n\n", trim(turn.content), "<|eot_id|>"});
        break;
      case ChatTemplate::phi3:
        append(out, {"<|", role, "|>\n", turn.content, "<|end|>\n"});
        break;
      default:  // zephyr
        append(out, {"<|", role, "|>\n", turn.content, "</s>\n"});
        break;
    }
  }
  if (add_generation_prompt) {
    switch (t) {
      case ChatTemplate::chatml:
        out += "<|im_start|>assistant\n";
        break;
      case ChatTemplate::llama3:
        out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
        break;
      default:  // phi3, zephyr
        out += "<|assistant|>\n";
        break;
    }
  }
  return out;
}

// Templates without a system turn: system text waits for the next user turn, which writes it.
void render_user_turn(ChatTemplate t, std::string& out, std::string_view content, const std::string* system) {
  switch (t) {
    case ChatTemplate::llama2: {
      // Meta's template strips "<<SYS>>...<</SYS>>\n\n" + user as one string: only its two ends lose space.
      std::string body;
      if (system != nullptr) append(body, {"<<SYS>>\n", *system, "\n<</SYS>>\n\n"});
      body += content;
      append(out, {out.empty() ? "" : "<s>", "[INST] ", trim(body), " [/INST]"});
      break;
    }
    case ChatTemplate::mistral:
      append(out, {"[INST] ", system != nullptr ? std::string_view(*system) : "",
                   system != nullptr ? "\n\n" : "", content, " [/INST]"});
      break;
    default:  // gemma
      append(out, {"<start_of_turn>user\n", system != nullptr ? std::string_view(*system) : "",
                   system != nullptr ? "\n\n" : "", trim(content), "<end_of_turn>\n"});
      break;
  }
}

std::string render_system_folded(std::span<const ChatTurn> turns, bool add_generation_prompt,
                                 ChatTemplate t) {
  std::string out;
  std::string system;
  bool has_system = false;
  auto flush_system = [&] {
    if (!has_system) return;
    render_user_turn(t, out, "", &system);
    has_system = false;
  };
  for (const ChatTurn& turn : turns) {
    switch (turn.role) {
      case ChatTurnRole::system:
        if (has_system) {
          append(system, {"\n\n", turn.content});
        } else {
          system = turn.content;
          has_system = true;
        }
        break;
      case ChatTurnRole::user:
        render_user_turn(t, out, turn.content, has_system ? &system : nullptr);
        has_system = false;
        break;
      case ChatTurnRole::assistant:
        flush_system();
        if (t == ChatTemplate::llama2) {
          append(out, {" ", trim(turn.content), " </s>"});
        } else if (t == ChatTemplate::mistral) {
          append(out, {turn.content, "</s>"});
        } else {
          append(out, {"<start_of_turn>model\n", trim(turn.content), "<end_of_turn>\n"});
        }
        break;
    }
  }
  flush_system();
  if (add_generation_prompt && t == ChatTemplate::gemma) out += "<start_of_turn>model\n";
  return out;
}

// Plain-text layouts with a default system preamble.
std::string render_plain(std::span<const ChatTurn> turns, bool add_generation_prompt, ChatTemplate t) {
  const bool alpaca = t == ChatTemplate::alpaca;
  std::string out;
  if (turns.empty() || turns.front().role != ChatTurnRole::system) {
    append(out, {alpaca ? alpaca_default_system : vicuna_default_system, alpaca ? "\n\n" : " "});
  }
  for (const ChatTurn& turn : turns) {
    switch (turn.role) {
      case ChatTurnRole::system:
        append(out, {turn.content, alpaca ? "\n\n" : " "});
        break;
      case ChatTurnRole::user:
        if (alpaca) {
          append(out, {"### Instruction:\n", turn.content, "\n\n"});
        } else {
          append(out, {"USER: ", turn.content, " "});
        }
        break;
      case ChatTurnRole::assistant:
        if (alpaca) {
          append(out, {"### Response:\n", turn.content, "\n\n"});
        } else {
          append(out, {"ASSISTANT: ", turn.content, "</s>"});
        }
        break;
    }
  }
  if (add_generation_prompt) out += alpaca ? "### Response:\n" : "ASSISTANT:";
  return out;
}

bool contains(std::string_view text, std::string_view marker) {
  return text.find(marker) != std::string_view::npos;
}

}  // namespace

std::string_view name(ChatTemplate t) noexcept {
  switch (t) {
    case ChatTemplate::chatml:
      return "chatml";
    case ChatTemplate::llama2:
      return "llama2";
    case ChatTemplate::llama3:
      return "llama3";
    case ChatTemplate::mistral:
      return "mistral";
    case ChatTemplate::gemma:
      return "gemma";
    case ChatTemplate::phi3:
      return "phi3";
    case ChatTemplate::zephyr:
      return "zephyr";
    case ChatTemplate::alpaca:
      return "alpaca";
    case ChatTemplate::vicuna:
      return "vicuna";
  }
  return "unknown";
}

std::optional<ChatTemplate> find_chat_template(std::string_view template_name) noexcept {
  for (const ChatTemplate t : all_templates) {
    if (name(t) == template_name) return t;
  }
  return std::nullopt;
}

std::span<const ChatTemplate> all_chat_templates() noexcept { return all_templates; }

std::optional<ChatTemplate> detect_chat_template(std::string_view source) noexcept {
  struct Rule {
    std::string_view marker;
    std::string_view also_required;  // "" = nothing more
    std::string_view excluded;       // "" = nothing
    ChatTemplate family;
  };
  // Most specific first: Phi-3 and Zephyr share "<|assistant|>", Llama 2 and Mistral share "[INST]".
  static constexpr std::array<Rule, 9> rules{{
      {"<|start_header_id|>", "", "", ChatTemplate::llama3},
      {"<|im_start|>", "", "<|im_sep|>", ChatTemplate::chatml},
      {"<start_of_turn>", "", "", ChatTemplate::gemma},
      {"<|assistant|>", "<|end|>", "", ChatTemplate::phi3},
      {"<|user|>", "<|assistant|>", "[gMASK]", ChatTemplate::zephyr},
      {"[INST]", "<<SYS>>", "", ChatTemplate::llama2},
      {"[INST]", "", "", ChatTemplate::mistral},
      {"USER:", "ASSISTANT:", "", ChatTemplate::vicuna},
      {"### Instruction:", "### Response:", "", ChatTemplate::alpaca},
  }};
  for (const Rule& rule : rules) {
    if (contains(source, rule.marker) &&
        (rule.also_required.empty() || contains(source, rule.also_required)) &&
        (rule.excluded.empty() || !contains(source, rule.excluded))) {
      return rule.family;
    }
  }
  return std::nullopt;
}

std::string render_chat(ChatTemplate t, std::span<const ChatTurn> turns, bool add_generation_prompt) {
  switch (t) {
    case ChatTemplate::chatml:
    case ChatTemplate::llama3:
    case ChatTemplate::phi3:
    case ChatTemplate::zephyr:
      return render_role_tagged(turns, add_generation_prompt, t);
    case ChatTemplate::llama2:
    case ChatTemplate::mistral:
    case ChatTemplate::gemma:
      return render_system_folded(turns, add_generation_prompt, t);
    case ChatTemplate::alpaca:
    case ChatTemplate::vicuna:
      return render_plain(turns, add_generation_prompt, t);
  }
  return render_role_tagged(turns, add_generation_prompt, ChatTemplate::chatml);
}

std::span<const std::string_view> end_of_turn_markers(ChatTemplate t) noexcept {
  static constexpr std::array<std::string_view, 1> chatml{"<|im_end|>"};
  static constexpr std::array<std::string_view, 2> inst{"</s>", "[INST]"};
  static constexpr std::array<std::string_view, 1> llama3{"<|eot_id|>"};
  static constexpr std::array<std::string_view, 1> gemma{"<end_of_turn>"};
  static constexpr std::array<std::string_view, 1> phi3{"<|end|>"};
  static constexpr std::array<std::string_view, 2> zephyr{"</s>", "<|user|>"};
  static constexpr std::array<std::string_view, 1> alpaca{"### Instruction:"};
  static constexpr std::array<std::string_view, 2> vicuna{"</s>", "USER:"};
  switch (t) {
    case ChatTemplate::chatml:
      return chatml;
    case ChatTemplate::llama2:
    case ChatTemplate::mistral:
      return inst;
    case ChatTemplate::llama3:
      return llama3;
    case ChatTemplate::gemma:
      return gemma;
    case ChatTemplate::phi3:
      return phi3;
    case ChatTemplate::zephyr:
      return zephyr;
    case ChatTemplate::alpaca:
      return alpaca;
    case ChatTemplate::vicuna:
      return vicuna;
  }
  return {};
}

}  // namespace loom::compute
