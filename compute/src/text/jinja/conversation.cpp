// Conversation to template variables (conversation.hpp).
#include "loom/compute/text/jinja/conversation.hpp"

#include <stdexcept>

namespace loom::compute::jinja {

nlohmann::ordered_json conversation_variables(const nlohmann::ordered_json& conversation) {
  if (!conversation.is_object()) throw std::invalid_argument("a conversation must be a JSON object");
  nlohmann::ordered_json vars = nlohmann::ordered_json::object();
  auto get_or = [&](const char* key, nlohmann::ordered_json fallback) {
    auto it = conversation.find(key);
    return it == conversation.end() ? fallback : *it;
  };
  vars["messages"] = get_or("messages", nlohmann::ordered_json::array());
  vars["tools"] = get_or("tools", nullptr);
  vars["documents"] = get_or("documents", nullptr);
  vars["add_generation_prompt"] = get_or("add_generation_prompt", false);
  for (const char* key : {"bos_token", "eos_token"})
    if (auto it = conversation.find(key); it != conversation.end()) vars[key] = *it;
  if (auto it = conversation.find("kwargs"); it != conversation.end()) {
    if (!it->is_object()) throw std::invalid_argument("a conversation's \"kwargs\" must be a JSON object");
    for (auto kw = it->begin(); kw != it->end(); ++kw) vars[kw.key()] = kw.value();
  }
  return vars;
}

}  // namespace loom::compute::jinja
