// loom: the command-line tool. This first version knows --help and --version; the commands of the design
// (generate, logits, tokenize, synth, info, bench) arrive with the compute and text issues.
#include <cstdio>
#include <string>

#include "command_line.hpp"

namespace {

constexpr const char* kUsage = R"(loom: run and inspect LLMs from the command line.

Usage: loom [--help | --version]
       loom COMMAND [options]

Options:
  --help      print this help and exit
  --version   print the version and exit

Commands: none yet. Model loading, generation and the other tools (logits, tokenize, synth, info, bench)
arrive in later releases; see README.md.
)";

}  // namespace

int main(int argc, char** argv) {
  try {
    loom::cli::CommandLine args(argc, argv, {"help", "version"});
    if (args.flag("help") || argc == 1) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (args.flag("version")) {
      std::printf("loom %s\n", LOOM_VERSION);
      return 0;
    }
    args.reject_unknown();
    if (!args.positional().empty()) throw loom::cli::UsageError("unknown command '" + args.positional()[0] + "'");
    return 0;
  } catch (const loom::cli::UsageError& e) {
    std::fprintf(stderr, "loom: %s\nRun 'loom --help' for usage.\n", e.what());
    return 2;
  }
}
