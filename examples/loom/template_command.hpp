// `loom template`: renders a chat template (a .jinja file, or a GGUF model's tokenizer.chat_template) over a
// conversation file with loom's Jinja interpreter and prints exactly the rendered bytes, as a model would
// receive them. Useful to check a model's prompt format against transformers' apply_chat_template.
#pragma once

#include "command_line.hpp"

namespace loom::cli {

// Returns the exit code: 0 rendered, 1 the template or an input failed (message on stderr).
int run_template(CommandLine& args);

}  // namespace loom::cli
