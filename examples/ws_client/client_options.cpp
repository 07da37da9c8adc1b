#include "client_options.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "loom/proto/client_message.hpp"

namespace loom::ws_client {

const char* const kUsage = R"(loom-ws-client: stream one completion from a loom gateway over its WebSocket (/v1/ws).

Usage: loom-ws-client [options] [PROMPT...]

The prompt is the arguments joined by spaces; without any (or with -) it is read from stdin, one trailing
newline removed. The generated text streams to stdout as it arrives; the done event's reason, token
counts and speed go to stderr.

Connection:
  --host HOST            the gateway's address (default 127.0.0.1)
  --port N               its port (default 8080)
  --api-key KEY          sent as "Authorization: Bearer KEY" (default: $LOOM_API_KEY, else none)
  --max-frame-bytes N    the largest message accepted from the server (default 1048576)

Request (proto/PROTOCOL.md; a parameter not given takes the server's default):
  --session NAME         the request's session (the protocol's short form "session": this request opens
                         it; it closes with the connection)
  --chat                 send the prompt as a user message, rendered with the model's chat template
  --system TEXT          a system message before it (implies --chat)
  --max-tokens N         most tokens to generate
  --temperature T        0 = greedy
  --top-k K              keep the K most likely tokens (0 = off)
  --top-p P              nucleus sampling (1 = off)
  --min-p M              drop tokens less likely than M x the most likely (0 = off)
  --seed S               the request's random seed
  --stop TEXT            end when the text contains TEXT (repeatable)
  --ignore-eos           keep generating past the end-of-sequence token
  --progress             report on stderr how much of the prompt is computed, a line per prefill chunk,
                         before the text starts (for long prompts)

Other:
  --help, --version

Ctrl-C cancels the request: the client sends a cancel and exits after the done event (reason
cancelled); a second Ctrl-C exits at once.

Exit status: 0 after the done event (eos, length, stop or cancelled); 1 when the server refuses the
request (an error event), the request fails (done with reason error or timeout) or the connection fails;
2 for a usage error; 130 when a Ctrl-C ends it at once.
)";

// A failure to report on stderr (exit status 1).

namespace {

std::string read_stdin() {
  if (::isatty(STDIN_FILENO)) std::fputs("loom-ws-client: reading the prompt from stdin (Ctrl-D ends it)\n", stderr);
  std::string text{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  if (text.ends_with('\n')) text.pop_back();
  if (text.ends_with('\r')) text.pop_back();
  return text;
}

std::string prompt_from(const std::vector<std::string>& words) {
  if (words.empty() || (words.size() == 1 && words[0] == "-")) return read_stdin();
  std::string prompt;
  for (const auto& word : words) prompt.append(prompt.empty() ? "" : " ").append(word);
  return prompt;
}

// Only what the command line sets: an absent value is a sentinel outside the option's range.
void read_sampling_options(cli::CommandLine& args, Options& options) {
  auto& params = options.params;
  auto& given = options.given_params;
  const auto integer = [&](const char* option, const char* field, auto& value, std::int64_t low, std::int64_t high) {
    const std::int64_t read = args.integer(option, low - 1, low, high);
    if (read == low - 1) return;
    value = static_cast<std::remove_reference_t<decltype(value)>>(read);
    given.insert(field);
  };
  const auto real = [&](const char* option, const char* field, double& value, double low, double high) {
    const double read = args.real(option, low - 1, low, high);
    if (read == low - 1) return;
    value = read;
    given.insert(field);
  };
  integer("max-tokens", "max_tokens", params.max_tokens, 1, 1 << 24);
  real("temperature", "temperature", params.temperature, 0, proto::SamplingParams::kMaxTemperature);
  integer("top-k", "top_k", params.top_k, 0, 1 << 24);
  real("top-p", "top_p", params.top_p, 0, 1);
  real("min-p", "min_p", params.min_p, 0, 1);
  std::uint64_t seed = 0;
  integer("seed", "seed", seed, 0, INT64_MAX);
  if (given.contains("seed")) params.seed = seed;
  params.stop = args.all("stop");
  if (!params.stop.empty()) given.insert("stop");
  params.ignore_eos = args.flag("ignore-eos");
  if (params.ignore_eos) given.insert("ignore_eos");
}

}  // namespace

Options read_options(cli::CommandLine& args) {
  Options options;
  const char* key = std::getenv("LOOM_API_KEY");
  options.host = args.text("host", options.host);
  options.port = static_cast<std::uint16_t>(args.integer("port", options.port, 1, 65535));
  options.api_key = args.text("api-key", key != nullptr ? key : "");
  options.max_frame_bytes =
      static_cast<std::size_t>(args.integer("max-frame-bytes", options.max_frame_bytes, 1024, std::int64_t{1} << 30));
  if (auto session = args.text("session", ""); !session.empty()) options.session = std::move(session);
  options.system = args.text("system", "");
  options.chat = args.flag("chat") || !options.system.empty();
  options.progress = args.flag("progress");
  read_sampling_options(args, options);
  args.reject_unknown();
  options.prompt = prompt_from(args.positional());
  return options;
}

// The generate frame. Parameters the command line left out are left out of the frame too, so that the
// server's defaults (and its max_tokens limit) apply to them.
std::string generate_frame(const Options& options) {
  proto::GenerateRequest request;
  request.id = kRequestId;
  if (options.session) {
    request.session_id = options.session;
    request.open_session = true;
  }
  if (options.chat) {
    std::vector<proto::ChatMessage> messages;
    if (!options.system.empty()) messages.push_back({proto::ChatRole::system, options.system});
    messages.push_back({proto::ChatRole::user, options.prompt});
    request.input = std::move(messages);
  } else {
    request.input = options.prompt;
  }
  request.params = options.params;
  request.progress = options.progress;
  nlohmann::json frame;
  proto::to_json(frame, proto::ClientMessage{std::move(request)});
  auto& params = frame["params"];
  for (auto field = params.begin(); field != params.end();) {
    field = options.given_params.contains(field.key()) ? std::next(field) : params.erase(field);
  }
  if (params.empty()) frame.erase("params");
  return frame.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace loom::ws_client
