// `loom bench`: how fast this machine runs a model, in the form users of such engines expect (one line per
// configuration: prompt processing, single-stream generation, and decode of several sequences batched
// together), with the machine's bandwidth and compute peaks measured first so each figure can be read as a
// fraction of what the hardware allows. It drives the compute library directly (LoadedModel, LlamaModel),
// no engine or actors, so it measures the forward pass alone. With --device vulkan[:N] it times the Backend's
// steps on that device instead (bench_backend.hpp).
#pragma once

#include <string>
#include <vector>

#include "command_line.hpp"

namespace loom::cli {

// The command line with bench's short options (-p -n -b -r -t) spelled as their long forms
// (--n-prompt --n-gen --batch --repetitions --threads), which CommandLine reads; other arguments unchanged.
std::vector<std::string> expand_bench_short_options(int argc, char** argv);

int run_bench(CommandLine& args);

}  // namespace loom::cli
