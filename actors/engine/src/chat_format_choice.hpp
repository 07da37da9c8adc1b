// How the engine chooses a loaded model's chat format (EngineConfig's chat_template, chat_template_source and
// fallback_chat_template, then the model's own tokenizer.chat_template).
#pragma once

#include <memory>

#include "loom/actors/engine/engine_protocol.hpp"
#include "loom/compute/backend.hpp"
#include "loom/compute/text/chat_format.hpp"
#include "loom/compute/text/tokenizer.hpp"

namespace loom::actors {

// The configured built-in, the configured Jinja text, the model's template, then the fallback; null when none
// applies (chat requests are then `unsupported`). Throws std::runtime_error for a configured template that is
// unknown or does not parse; a model template that does not parse is logged and passed over.
std::shared_ptr<const compute::ChatFormat> choose_chat_format(const EngineConfig& config,
                                                              const compute::BackendInfo& info,
                                                              const compute::Tokenizer& tokenizer);

}  // namespace loom::actors
