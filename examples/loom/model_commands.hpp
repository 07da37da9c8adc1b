// The `loom` subcommands that work on model files: logits, info, synth. Each takes the command line
// after its name and returns the process exit code (0 ok, 1 failure, 2 usage error).
#pragma once

#include <string>

#include "command_line.hpp"

namespace loom::cli {

int run_logits(CommandLine& args);
int run_info(CommandLine& args);
// `loom info --devices`: the devices a model can run on (devices_command.cpp).
int run_info_devices();
int run_synth(CommandLine& args);

}  // namespace loom::cli
