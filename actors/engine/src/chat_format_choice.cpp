#include "chat_format_choice.hpp"

#include <optional>
#include <stdexcept>
#include <string>

#include "loom/actors/runtime/logger.hpp"
#include "loom/compute/text/chat_template.hpp"

namespace loom::actors {

namespace {

// The vocabulary's text for a special token, as a template's bos_token / eos_token; nullopt without one.
std::optional<std::string> special_text(const compute::Vocabulary& vocabulary, std::int32_t id) {
  if (!vocabulary.valid(id)) return std::nullopt;
  return vocabulary.tokens[static_cast<std::size_t>(id)];
}

}  // namespace

// The configured built-in, the configured Jinja text, the model's template, then the fallback (see
// EngineConfig). A model template that does not parse is logged and passed over, since the model still
// serves raw prompts; a configured one that does not parse refuses the load, as the operator asked for it.
std::shared_ptr<const compute::ChatFormat> choose_chat_format(const EngineConfig& config,
                                                              const compute::BackendInfo& info,
                                                              const compute::Tokenizer& tokenizer) {
  if (!config.chat_template.empty()) {
    const auto layout = compute::find_chat_template(config.chat_template);
    if (!layout) throw std::runtime_error("unknown chat template '" + config.chat_template + "'");
    return compute::ChatFormat::from_builtin(*layout);
  }
  const auto& vocabulary = tokenizer.vocabulary();
  const auto bos = special_text(vocabulary, vocabulary.bos);
  const auto eos = special_text(vocabulary, vocabulary.eos);
  if (!config.chat_template_source.empty()) {
    return compute::ChatFormat::from_jinja(config.chat_template_source, config.chat_template_label, bos, eos);
  }
  if (!info.chat_template_source.empty()) {
    try {
      return compute::ChatFormat::from_jinja(info.chat_template_source, "the model's template", bos, eos);
    } catch (const std::exception& e) {
      logger().warn("actor=engine {}", e.what());
    }
  }
  if (config.fallback_chat_template.empty()) return nullptr;
  const auto layout = compute::find_chat_template(config.fallback_chat_template);
  if (!layout) throw std::runtime_error("unknown chat template '" + config.fallback_chat_template + "'");
  logger().warn("actor=engine the model has no usable chat template; chat requests use the built-in {}",
                config.fallback_chat_template);
  return compute::ChatFormat::from_builtin(*layout);
}

}  // namespace loom::actors
