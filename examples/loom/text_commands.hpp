// The `loom` subcommands that work with text: tokenize, detokenize, generate and chat. Each takes the
// command line after its name and returns the process exit code (0 ok, 1 failure, 2 usage error).
#pragma once

#include "command_line.hpp"

namespace loom::cli {

int run_tokenize(CommandLine& args);
int run_detokenize(CommandLine& args);
int run_generate(CommandLine& args);
int run_chat(CommandLine& args);

}  // namespace loom::cli
