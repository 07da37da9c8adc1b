// The command line of loom-ws-client: its options, --help's text, the prompt (the arguments or stdin),
// and the generate frame they make (proto::GenerateRequest in its JSON form, with only the sampling
// parameters the command line set, so the server's defaults apply to the others).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include "command_line.hpp"
#include "loom/proto/sampling_params.hpp"

namespace loom::ws_client {

// The id of the one request a run sends.
inline constexpr const char* kRequestId = "r1";

extern const char* const kUsage;

struct Options {
  std::string host = "127.0.0.1";
  std::uint16_t port = 8080;
  std::string api_key;
  std::size_t max_frame_bytes = 1u << 20;
  std::optional<std::string> session;
  bool chat = false;
  bool progress = false;  // --progress: the request asks for progress events, shown on stderr
  std::string system;
  std::string prompt;
  proto::SamplingParams params;
  std::set<std::string> given_params;  // the wire names of the parameters set on the command line
};

// Reads every option and the prompt (from stdin when there is no argument, or "-"); throws
// cli::UsageError naming the option at fault.
Options read_options(cli::CommandLine& args);

// The generate frame's text.
std::string generate_frame(const Options& options);

}  // namespace loom::ws_client
