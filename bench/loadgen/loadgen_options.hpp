// loom-loadgen's command line: the server to load (a URL naming the protocol), the load's shape
// (concurrent streams, a request count or a duration, prompt and output length distributions, a seed) and
// the output (text or --json, the progress line). read_options checks every value and throws
// cli::UsageError naming the option at fault (exit status 2).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "command_line.hpp"

namespace loom::loadgen {

extern const char* const kUsage;

// A count drawn uniformly from [low, high] for each request: "128" (low == high) or "64:512".
struct CountRange {
  std::int64_t low = 0;
  std::int64_t high = 0;
};

// Parses "N" or "LOW:HIGH" with min <= LOW <= HIGH <= max; throws cli::UsageError naming `option`.
CountRange parse_count_range(std::string_view text, const std::string& option, std::int64_t min, std::int64_t max);

enum class Protocol { openai_http, loom_websocket };

// Which OpenAI route a request goes to; `both` alternates them by request number.
enum class Endpoint { completions, chat, both };

// The server, from --url: http://HOST:PORT[/PREFIX] (OpenAI routes under PREFIX/v1/...) or
// ws://HOST:PORT[/PATH] (loom's protocol on PATH, /v1/ws by default).
struct Target {
  Protocol protocol = Protocol::openai_http;
  std::string host = "127.0.0.1";
  std::uint16_t port = 8080;
  std::string path;  // http: the prefix before /v1 (often empty); ws: the WebSocket path
};

// Parses a --url value; throws cli::UsageError.
Target parse_url(std::string_view url);

enum class Progress { automatic, on, off };

struct Options {
  std::string url = "http://127.0.0.1:8080";
  Target target;
  Endpoint endpoint = Endpoint::completions;
  std::string api_key;
  std::optional<std::string> model;  // absent: the request names no model (loom, llama.cpp accept that)
  int concurrency = 1;
  std::optional<std::int64_t> requests;  // exactly one of requests and duration_s is set
  std::optional<double> duration_s;
  double timeout_s = 120;  // per request, connecting included
  CountRange prompt_tokens{128, 128};
  std::int64_t shared_prefix_tokens = 0;  // the first this many tokens of every prompt are the same text
  CountRange max_tokens{128, 128};
  double temperature = 0;
  bool ignore_eos = true;
  bool calibrate = true;  // probe the server's tokens per prompt word first
  std::uint64_t seed = 1;
  bool json = false;
  Progress progress = Progress::automatic;
  std::size_t max_message_bytes = 1u << 20;  // one SSE line or one WebSocket message from the server
};

// Reads every option; throws cli::UsageError naming the option at fault.
Options read_options(cli::CommandLine& args);

// The options that take no value.
inline const std::vector<std::string> kFlags = {"help", "version", "json", "quiet", "progress", "no-ignore-eos", "no-calibrate"};

std::string_view to_string(Endpoint endpoint);

}  // namespace loom::loadgen
