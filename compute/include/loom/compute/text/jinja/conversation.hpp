// Template variables for a chat conversation, as transformers' apply_chat_template passes them: `messages`,
// `tools` and `documents` (none when absent), `add_generation_prompt` (false when absent), `bos_token` and
// `eos_token` only when given (else undefined), and every key of `kwargs` as a variable of its own.
#pragma once

#include <nlohmann/json.hpp>

namespace loom::compute::jinja {

// `conversation`: {"messages": [...], "tools"?: [...], "documents"?: [...], "add_generation_prompt"?: bool,
// "bos_token"?: str, "eos_token"?: str, "kwargs"?: {...}} (other keys, like "description", are ignored).
// Throws std::invalid_argument when it is not an object or `kwargs` is not an object.
nlohmann::ordered_json conversation_variables(const nlohmann::ordered_json& conversation);

}  // namespace loom::compute::jinja
