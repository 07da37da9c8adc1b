#include "loadgen_options.hpp"

#include <charconv>
#include <cstdlib>
#include <system_error>

namespace loom::loadgen {

const char* const kUsage = R"(loom-loadgen: load an LLM server with concurrent streaming requests and report latency and throughput.

Usage: loom-loadgen [options]

It speaks OpenAI's streaming HTTP API (any OpenAI-compatible server: loom, llama.cpp, vLLM, ...) or loom's
WebSocket protocol, chosen by the URL's scheme. Each of --concurrency streams holds one connection
(reused across its requests while the server keeps it alive) and sends one request at a time.

Server:
  --url URL              http://HOST:PORT[/PREFIX]: POST PREFIX/v1/completions (or chat) with "stream": true;
                         a trailing /v1 is allowed (an OpenAI base URL).
                         ws://HOST:PORT[/PATH]: loom's WebSocket protocol on PATH (default /v1/ws).
                         Default http://127.0.0.1:8080. TLS (https, wss) is not supported.
  --endpoint E           completions (default), chat, or both (alternating); HTTP only
  --api-key KEY          sent as "Authorization: Bearer KEY" (default: $LOOM_API_KEY, else none)
  --model NAME           the request's "model" (default: none sent; servers that need one say so)

Load:
  --concurrency N        concurrent streams (default 1, at most 4096)
  --requests N           stop after N requests in all (default 100 when --duration is not given)
  --duration SECONDS     send requests for this long instead; those in flight at the end finish
  --prompt-tokens N|A:B  prompt length per request: N, or uniform in [A, B] (default 128)
  --shared-prefix-tokens N
                         every prompt starts with the same text of about N tokens (less than the shortest
                         prompt), then goes on with its own words: measures a server's prefix cache
                         (time to first token with and without it). Default 0: nothing shared.
  --max-tokens N|A:B     max_tokens per request: N, or uniform in [A, B] (default 128)
  --temperature T        sampling temperature (default 0: greedy)
  --no-ignore-eos        do not send "ignore_eos": true (sent by default so that every request generates
                         max_tokens; leave it out for a server that refuses unknown fields)
  --no-calibrate         skip the probes (two per kind of prompt, max_tokens 1) that measure the server's
                         tokens per prompt word before the run; one word per token is assumed then
  --seed N               makes the lengths and prompts repeatable (default 1)
  --timeout SECONDS      per request, connecting included (default 120)
  --max-message-bytes N  the largest SSE line or WebSocket message accepted (default 1048576)

Output:
  --json                 print the report as one JSON object on stdout
  --progress             a progress line on stderr about once a second (default: when stderr is a terminal)
  --quiet                no progress line
  --help, --version

Prompts are text of about the asked number of tokens: words that are one token in common vocabularies,
drawn at random per request (so the server's prefix cache does not serve them, unless
--shared-prefix-tokens asks for a common beginning), as many as the server's
tokens per word (measured by the probes, from its usage counts) make the asked count. The count is
approximate, as prompts are text (loom takes no token ids); the report's prompt tokens are the server's
own count where it reports usage. Output tokens are the server's usage counts where given (HTTP asks for
them with "stream_options": {"include_usage": true}), else the number of streamed content chunks.

Ctrl-C (or SIGTERM) stops sending: the requests in flight finish and the report covers what was
measured; a second Ctrl-C quits at once.

Exit status: 0 when every request completed; 1 when any failed (the report says how) or the host cannot be
resolved; 2 for a usage error; 130 after a Ctrl-C.
)";

namespace {

std::int64_t parse_integer(std::string_view text, const std::string& option, std::int64_t min, std::int64_t max) {
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || text.empty()) {
    throw cli::UsageError("option --" + option + " expects an integer or LOW:HIGH, got '" + std::string(text) + "'");
  }
  if (value < min || value > max) {
    throw cli::UsageError("option --" + option + " must be in [" + std::to_string(min) + ", " + std::to_string(max) +
                          "], got " + std::string(text));
  }
  return value;
}

Endpoint parse_endpoint(const std::string& text) {
  if (text == "completions") return Endpoint::completions;
  if (text == "chat") return Endpoint::chat;
  if (text == "both") return Endpoint::both;
  throw cli::UsageError("option --endpoint must be completions, chat or both, got '" + text + "'");
}

// "HOST:PORT", "[V6]:PORT" or "HOST" (port 80).
void parse_authority(std::string_view authority, Target& target, std::string_view url) {
  const auto bad = [&](const std::string& why) { return cli::UsageError("option --url: " + why + ": " + std::string(url)); };
  std::string_view port_text;
  if (authority.starts_with('[')) {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) throw bad("an IPv6 address needs its closing ']'");
    target.host = std::string(authority.substr(1, close - 1));
    const auto rest = authority.substr(close + 1);
    if (!rest.empty()) {
      if (!rest.starts_with(':')) throw bad("expected ':PORT' after the IPv6 address");
      port_text = rest.substr(1);
    }
  } else {
    const auto colon = authority.rfind(':');
    target.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port_text = authority.substr(colon + 1);
  }
  if (target.host.empty()) throw bad("no host");
  target.port = 80;
  if (port_text.empty()) return;
  int port = 0;
  const auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc{} || end != port_text.data() + port_text.size() || port < 1 || port > 65535) {
    throw bad("the port must be a number in [1, 65535]");
  }
  target.port = static_cast<std::uint16_t>(port);
}

}  // namespace

CountRange parse_count_range(std::string_view text, const std::string& option, std::int64_t min, std::int64_t max) {
  const auto colon = text.find(':');
  if (colon == std::string_view::npos) {
    const auto value = parse_integer(text, option, min, max);
    return {value, value};
  }
  const CountRange range{parse_integer(text.substr(0, colon), option, min, max),
                         parse_integer(text.substr(colon + 1), option, min, max)};
  if (range.low > range.high) {
    throw cli::UsageError("option --" + option + ": LOW must not exceed HIGH in LOW:HIGH, got " + std::string(text));
  }
  return range;
}

Target parse_url(std::string_view url) {
  Target target;
  std::string_view rest;
  if (url.starts_with("http://")) {
    target.protocol = Protocol::openai_http;
    rest = url.substr(7);
  } else if (url.starts_with("ws://")) {
    target.protocol = Protocol::loom_websocket;
    rest = url.substr(5);
  } else if (url.starts_with("https://") || url.starts_with("wss://")) {
    throw cli::UsageError("option --url: TLS is not supported (use http:// or ws://), got " + std::string(url));
  } else {
    throw cli::UsageError("option --url must start with http:// or ws://, got '" + std::string(url) + "'");
  }
  const auto slash = rest.find('/');
  parse_authority(rest.substr(0, slash), target, url);
  std::string path = slash == std::string_view::npos ? "" : std::string(rest.substr(slash));
  if (path.find_first_of("?# \t\r\n") != std::string::npos) {
    throw cli::UsageError("option --url: the path must not hold a query, a fragment or spaces: " + std::string(url));
  }
  while (path.ends_with('/')) path.pop_back();
  if (target.protocol == Protocol::openai_http) {
    if (path.ends_with("/v1")) path.resize(path.size() - 3);  // an OpenAI base URL names /v1 itself
  } else if (path.empty()) {
    path = "/v1/ws";
  }
  target.path = std::move(path);
  return target;
}

std::string_view to_string(Endpoint endpoint) {
  switch (endpoint) {
    case Endpoint::completions: return "completions";
    case Endpoint::chat: return "chat";
    case Endpoint::both: return "both";
  }
  return "completions";
}

Options read_options(cli::CommandLine& args) {
  Options options;
  options.url = args.text("url", options.url);
  options.target = parse_url(options.url);
  options.endpoint = parse_endpoint(args.text("endpoint", "completions"));
  if (options.target.protocol == Protocol::loom_websocket && options.endpoint == Endpoint::both) {
    throw cli::UsageError("option --endpoint both is for HTTP; over ws:// use completions (a prompt) or chat");
  }
  const char* key = std::getenv("LOOM_API_KEY");
  options.api_key = args.text("api-key", key != nullptr ? key : "");
  if (auto model = args.text("model", ""); !model.empty()) options.model = std::move(model);

  options.concurrency = static_cast<int>(args.integer("concurrency", 1, 1, 4096));
  const auto requests = args.integer("requests", -1, 1, std::int64_t{1} << 40);
  const auto duration = args.real("duration", -1, 0.001, 30 * 24 * 3600.0);
  if (requests > 0 && duration > 0) throw cli::UsageError("give --requests or --duration, not both");
  if (duration > 0) {
    options.duration_s = duration;
  } else {
    options.requests = requests > 0 ? requests : 100;
  }
  options.timeout_s = args.real("timeout", options.timeout_s, 0.001, 24 * 3600.0);
  constexpr std::int64_t kMaxCount = 1 << 20;
  options.prompt_tokens = parse_count_range(args.text("prompt-tokens", "128"), "prompt-tokens", 1, kMaxCount);
  options.shared_prefix_tokens = args.integer("shared-prefix-tokens", 0, 0, kMaxCount);
  if (options.shared_prefix_tokens >= options.prompt_tokens.low && options.shared_prefix_tokens > 0) {
    throw cli::UsageError("option --shared-prefix-tokens must be less than the shortest prompt (--prompt-tokens " +
                          std::to_string(options.prompt_tokens.low) + "), got " +
                          std::to_string(options.shared_prefix_tokens));
  }
  options.max_tokens = parse_count_range(args.text("max-tokens", "128"), "max-tokens", 1, kMaxCount);
  options.temperature = args.real("temperature", options.temperature, 0, 100);
  options.ignore_eos = !args.flag("no-ignore-eos");
  options.calibrate = !args.flag("no-calibrate");
  options.seed = static_cast<std::uint64_t>(args.integer("seed", 1, 0, INT64_MAX));
  options.max_message_bytes = static_cast<std::size_t>(
      args.integer("max-message-bytes", static_cast<std::int64_t>(options.max_message_bytes), 1024, 1 << 30));

  options.json = args.flag("json");
  const bool quiet = args.flag("quiet");
  const bool progress = args.flag("progress");
  if (quiet && progress) throw cli::UsageError("give --quiet or --progress, not both");
  options.progress = quiet ? Progress::off : progress ? Progress::on : Progress::automatic;
  args.reject_unknown();
  if (!args.positional().empty()) {
    throw cli::UsageError("unexpected argument '" + args.positional().front() + "' (every option starts with --)");
  }
  return options;
}

}  // namespace loom::loadgen
