// loom-gateway: the loom server. Flags (or a JSON config file) become a net::GatewayConfig; the Gateway
// serves the WebSocket protocol, the OpenAI-compatible API, /health, /metrics and the web chat page.
// Without --model it serves a demo model with random weights, made on first run, so that the Quick-start
// command works on a machine that has nothing but the repository.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "available_memory.hpp"
#include "command_line.hpp"
#include "loom/compute/model_synth.hpp"
#include "loom/net/gateway.hpp"
#include "loom/net/gateway_config.hpp"

namespace {

constexpr const char* kUsage = R"(loom-gateway: the loom LLM inference server.

Usage: loom-gateway [--model FILE.gguf] [options]

Serves, on http://HOST:PORT:
  /                      a web chat page (streams over the WebSocket)
  /v1/ws                 the WebSocket protocol (proto/PROTOCOL.md)
  /v1/completions        OpenAI-compatible, with stream: true for server-sent events
  /v1/chat/completions   OpenAI-compatible, with stream: true for server-sent events
  /v1/models             the model served
  /health, /metrics      readiness (200 ready, 503 loading) and Prometheus metrics

Model:
  --model PATH           a GGUF model (llama, qwen2, qwen3, gemma, gemma2, gemma3, phi3, MoE) or a llama2.c checkpoint (default: a demo model
                         with random weights, made on first run: it streams gibberish)
  --tokenizer PATH       a separate tokenizer file (llama2.c checkpoints)
  --model-id NAME        the model's name in the API (default: the file name without extension)
  --chat-template-file F a Jinja chat template to use instead of the model's own (tokenizer.chat_template)
  --chat-template NAME   a built-in layout instead: chatml, llama2, llama3, mistral, gemma, phi3, zephyr,
                         alpaca or vicuna (default: the model's own template; chatml, with a warning in the
                         log, for a model without one)
  --device D             where the forward pass runs: cpu (default), vulkan (the first discrete GPU, else
                         the first usable Vulkan device) or vulkan:N (device N as `loom info --devices`
                         lists them)
  --vulkan-arithmetic A  on a Vulkan device: pinned (the CPU backend's arithmetic, bit for bit; needs 64-bit
                         floats in shaders, slow on a GPU), fast (the device's own kernels) or auto (default:
                         pinned on a CPU device such as lavapipe, fast on a GPU)
  --compute-threads N    forward-pass threads (default: the physical cores)
  --max-batch-tokens N   tokens of one step, all requests together: a long prompt is computed in chunks of
                         at most this many (default 512)
  --kv-cache-mb M        KV cache size in MiB (default: sized from the machine, see --kv-cache-percent);
                         less than one context is warned, and requests are limited to what it holds
                         (/health says how much)
  --kv-cache-percent P   without --kv-cache-mb: the KV cache takes P % (1-100, default 25) of the memory
                         available after the weights (MemAvailable - model file - 256 MiB), capped at a
                         full context for each sequence that can run at once (--max-requests, at most 64)
                         and at 16 GiB, and at least one full context where memory allows; the log says
                         the size chosen and why
  --demo-model-path P    where the demo model is made (default: $XDG_CACHE_HOME/loom or ~/.cache/loom)

Network:
  --host ADDRESS         address to listen on (default 127.0.0.1; 0.0.0.0 accepts remote clients)
  --port N               TCP port, 0-65535 (default 8080; 0 picks a free one, printed when ready)
  --threads N            network I/O threads, 1-256 (default: the hardware threads)
  --api-key KEY          require "Authorization: Bearer KEY" on /v1 routes (the web page and WebSocket
                         clients may pass ?access_token=KEY instead)
  --cors-origins LIST    comma-separated browser Origins (scheme://host[:port]) whose pages may call the
                         HTTP API (CORS), or * for any (default: none: only the server's own page); they
                         may open the WebSocket too
  --allowed-origins LIST comma-separated browser Origins allowed to open WebSockets, or * for any
                         (default: none besides the server's own page and --cors-origins)
  --allowed-hosts LIST   comma-separated host names the Host header may name when no --api-key is set,
                         or * for any (default: none besides IP literals, localhost and *.localhost;
                         others get 403, which keeps DNS-rebinding pages out)

Limits:
  --max-body-bytes N     HTTP request body (default 2097152; 413 past it)
  --max-frame-bytes N    one WebSocket message (default 4194304; closed with 1009 past it)
  --max-prompt-tokens N  a prompt after templating (default 0: the model's context)
  --max-tokens N         the largest max_tokens a request may ask for, and what one without max_tokens
                         gets (default 4096; it also stops at the end of the context)
  --max-requests-per-connection N   in flight on one WebSocket (default 16)
  --max-sessions-per-connection N   open sessions of one WebSocket (default 16; overloaded past it)
  --max-requests N       in flight on the whole server (default 256; 503 / overloaded past it)
  --max-connections N    open connections (default 1024)
  --ws-send-queue-bytes N  unsent bytes of one WebSocket before its requests are cancelled (default 4194304)
  --request-timeout-ms N   per request; 0: none (default 0)
  --shutdown-grace-ms N    on SIGTERM/SIGINT, in-flight requests may finish this long (default 10000)
  --ws-ping-interval-ms N  ping idle WebSockets this often (default 20000)
  --sse-ping-interval-ms N a streamed HTTP response that has written nothing for this long (waiting in
                           the queue, prefilling) gets a ": ping" comment line; 0: never (default 10000)
  --http-idle-timeout-ms N close idle keep-alive connections after this long (default 60000)

Other:
  --config FILE.json     read every option above from a JSON object ("kv_cache_mb": 512, ...)
  --log-level LEVEL      trace, debug, info, warn, error, critical or off (default info)
  --help, --version

Every option with a value may also come from the environment variable shown beside it: LOOM_ and the
option's name in upper case with '_' for '-' (--kv-cache-mb: LOOM_KV_CACHE_MB; an empty variable counts as
unset). A flag given wins over the environment, which wins over the config file, which wins over the default.

On SIGTERM or SIGINT the gateway stops accepting, lets running requests finish within the grace period
(then cancels them), closes WebSockets with 1001, and exits 0.
)";

std::string default_demo_path() {
  if (const char* cache = std::getenv("XDG_CACHE_HOME"); cache != nullptr && *cache != '\0') {
    return std::string(cache) + "/loom/demo-model-v1.gguf";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return std::string(home) + "/.cache/loom/demo-model-v1.gguf";
  }
  return "loom-demo-model-v1.gguf";
}

// The demo: a small llama with random weights and loom's own byte-level vocabulary, written once.
void make_demo_model(const std::string& path) {
  if (std::filesystem::exists(path)) return;
  spdlog::info("making the demo model (random weights, about 10 MB) at {}", path);
  std::filesystem::create_directories(std::filesystem::path(path).parent_path().empty()
                                          ? std::filesystem::path(".")
                                          : std::filesystem::path(path).parent_path());
  loom::compute::SynthSpec spec;
  spec.dim = 256;
  spec.ffn_dim = 688;
  spec.layers = 4;
  spec.heads = 8;
  spec.kv_heads = 4;
  spec.context_length = 2048;
  spec.type = loom::compute::TensorType::f16;
  spec.builtin_vocabulary = true;
  spec.seed = 2026;
  // Written next to its final name, then renamed: a half-written file is never mistaken for the model.
  const std::string partial = path + ".partial";
  loom::compute::write_synthetic_model(spec, partial);
  std::filesystem::rename(partial, path);
}

// The usage with each option's environment variable at the end of its entry (an entry: the line naming the
// option and the indented lines that continue its description). --help and --version are not variables.
std::string usage_with_environment_names(std::string_view usage) {
  constexpr std::size_t kDescriptionColumn = 25;
  constexpr std::size_t kMaxLineWidth = 118;
  std::string out;
  std::string pending;  // the variable of the entry being copied, written once the entry ends
  const auto end_entry = [&](std::string& line) {
    if (pending.empty()) return;
    const std::string note = "(env " + pending + ")";
    if (line.size() + 1 + note.size() <= kMaxLineWidth) {
      line += " " + note;
    } else {
      line += "\n" + std::string(kDescriptionColumn, ' ') + note;
    }
    pending.clear();
  };
  std::string previous;
  bool have_previous = false;
  std::size_t start = 0;
  while (start < usage.size()) {
    const auto newline = usage.find('\n', start);
    std::string line(usage.substr(start, newline == std::string_view::npos ? std::string_view::npos : newline - start));
    start = newline == std::string_view::npos ? usage.size() : newline + 1;
    const bool continues = line.size() > kDescriptionColumn && line.find_first_not_of(' ') >= kDescriptionColumn - 2;
    if (have_previous && !continues) end_entry(previous);
    if (have_previous) out += previous + "\n";
    if (!continues && line.rfind("  --", 0) == 0) {
      const std::string option = line.substr(4, line.find_first_of(" ,", 4) - 4);
      if (option != "help" && option != "version") pending = loom::cli::environment_name("LOOM_", option);
    }
    previous = std::move(line);
    have_previous = true;
  }
  if (have_previous) {
    end_entry(previous);
    out += previous + "\n";
  }
  return out;
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> items;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) items.push_back(std::move(item));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return items;
}

// Why `path` cannot be a model (or tokenizer) file, or "" when it may be one. Checked before the gateway
// starts, so that a typo fails at once, with exit 2; the loader checks again as it opens the file.
std::string model_file_problem(const std::string& what, const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (status.type() == std::filesystem::file_type::not_found) return "the " + what + " file " + path + " does not exist";
  if (ec) return "cannot read the " + what + " file " + path + ": " + ec.message();
  if (status.type() == std::filesystem::file_type::regular) return "";
  const char* kind = status.type() == std::filesystem::file_type::directory ? "a directory"
                     : status.type() == std::filesystem::file_type::fifo    ? "a FIFO (named pipe)"
                     : status.type() == std::filesystem::file_type::socket  ? "a socket"
                                                                            : "a device or other special file";
  return "the " + what + " path " + path + " is " + kind + ", not a file";
}

}  // namespace

int main(int argc, char** argv) {
  loom::net::GatewayConfig config;
  try {
    loom::cli::CommandLine args(argc, argv, {"help", "version"});
    args.with_environment("LOOM_");
    if (args.flag("help")) {
      std::fputs(usage_with_environment_names(kUsage).c_str(), stdout);
      return 0;
    }
    if (args.flag("version")) {
      std::printf("loom-gateway %s\n", LOOM_VERSION);
      return 0;
    }
    const std::string config_file = args.text("config", "");
    if (!config_file.empty()) loom::net::apply_json_file(config, config_file);

    const auto count = [&](const char* name, auto& field, std::int64_t low, std::int64_t high) {
      using T = std::remove_reference_t<decltype(field)>;
      field = static_cast<T>(args.integer(name, static_cast<std::int64_t>(field), low, high));
    };
    const auto millis = [&](const char* name, std::chrono::milliseconds& field, std::int64_t low) {
      field = std::chrono::milliseconds(args.integer(name, field.count(), low, std::int64_t{1} << 40));
    };
    config.model = args.text("model", config.model);
    config.tokenizer = args.text("tokenizer", config.tokenizer);
    config.model_id = args.text("model-id", config.model_id);
    config.chat_template = args.text("chat-template", config.chat_template);
    config.chat_template_file = args.text("chat-template-file", config.chat_template_file);
    config.device = args.text("device", config.device);
    config.vulkan_arithmetic = args.text("vulkan-arithmetic", config.vulkan_arithmetic);
    count("compute-threads", config.compute_threads, 0, 1024);
    count("max-batch-tokens", config.max_batch_tokens, 1, 1 << 20);
    count("kv-cache-mb", config.kv_cache_mb, 0, 1 << 20);
    count("kv-cache-percent", config.kv_cache_percent, 1, 100);
    config.demo_model_path = args.text("demo-model-path", config.demo_model_path);
    config.host = args.text("host", config.host);
    count("port", config.port, 0, 65535);
    count("threads", config.threads, 0, 256);
    config.api_key = args.text("api-key", config.api_key);
    if (auto origins = args.text("allowed-origins", ""); !origins.empty()) config.allowed_origins = split_commas(origins);
    if (auto hosts = args.text("allowed-hosts", ""); !hosts.empty()) config.allowed_hosts = split_commas(hosts);
    if (auto origins = args.text("cors-origins", ""); !origins.empty()) config.cors_origins = split_commas(origins);
    count("max-body-bytes", config.max_body_bytes, 1024, std::int64_t{1} << 30);
    count("max-frame-bytes", config.max_frame_bytes, 1024, std::int64_t{1} << 30);
    count("max-prompt-tokens", config.max_prompt_tokens, 0, 1 << 24);
    count("max-tokens", config.max_tokens_limit, 1, 1 << 20);
    count("max-requests-per-connection", config.max_requests_per_connection, 1, 1 << 16);
    count("max-sessions-per-connection", config.max_sessions_per_connection, 1, 1 << 16);
    count("max-requests", config.max_requests_total, 1, 1 << 20);
    count("max-connections", config.max_connections, 1, 1 << 20);
    count("ws-send-queue-bytes", config.ws_send_queue_bytes, 1024, std::int64_t{1} << 30);
    millis("request-timeout-ms", config.request_timeout, 0);
    millis("shutdown-grace-ms", config.shutdown_grace, 0);
    millis("ws-ping-interval-ms", config.ws_ping_interval, 100);
    millis("http-idle-timeout-ms", config.http_idle_timeout, 100);
    millis("sse-ping-interval-ms", config.sse_ping_interval, 0);
    config.log_level = args.text("log-level", config.log_level);
    args.reject_unknown();
    if (!args.positional().empty()) throw loom::cli::UsageError("unexpected argument '" + args.positional()[0] + "'");
    if (config.threads == 0) config.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    config.validate();
    loom::cli::check_kv_cache_fits_memory(config.kv_cache_mb);
  } catch (const loom::cli::UsageError& e) {
    std::fprintf(stderr, "loom-gateway: %s\nRun 'loom-gateway --help' for the options.\n", e.what());
    return 2;
  } catch (const std::invalid_argument& e) {  // the config file's and the config's own checks
    std::fprintf(stderr, "loom-gateway: %s\nRun 'loom-gateway --help' for the options.\n", e.what());
    return 2;
  }
  // Every log line goes to stderr, like the libraries' own loggers.
  spdlog::set_default_logger(spdlog::stderr_color_mt("gateway"));
  spdlog::set_level(spdlog::level::from_str(config.log_level));

  try {
    if (config.model.empty()) {
      if (config.demo_model_path.empty()) config.demo_model_path = default_demo_path();
      make_demo_model(config.demo_model_path);
      config.model = config.demo_model_path;
      config.model_is_demo = true;
      spdlog::warn("no --model given: serving the DEMO model (random weights: it streams gibberish). "
                   "Serve a real model with --model FILE.gguf");
    } else if (const auto problem = model_file_problem("model", config.model); !problem.empty()) {
      std::fprintf(stderr, "loom-gateway: %s\n", problem.c_str());
      return 2;
    }
    if (const auto problem = config.tokenizer.empty() ? "" : model_file_problem("tokenizer", config.tokenizer);
        !problem.empty()) {
      std::fprintf(stderr, "loom-gateway: %s\n", problem.c_str());
      return 2;
    }

    boost::asio::io_context io;
    loom::net::Gateway gateway(io, config);
    int exit_code = 0;
    gateway.start([&gateway, &config, &exit_code, &io](const std::string& error) {
      if (!error.empty()) {
        spdlog::critical("loom-gateway: the model failed to load: {}", error);
        exit_code = 1;
        gateway.async_shutdown([&io] { io.stop(); });
        return;
      }
      const auto endpoint = gateway.local_endpoint();
      // The one line that says the server is up (scripts and tests wait for it).
      std::fprintf(stderr, "loom-gateway: ready to serve on http://%s:%u%s\n", config.host.c_str(),
                   static_cast<unsigned>(endpoint.port()), config.model_is_demo ? " (demo model: random weights)" : "");
      std::fflush(stderr);
    });
    spdlog::info("listening on {}:{} threads={} (the model is loading)", config.host, gateway.local_endpoint().port(),
                 config.threads);

    boost::asio::signal_set signals(io, SIGINT, SIGTERM);
    signals.async_wait([&](const boost::system::error_code& error, int signal) {
      if (error) return;
      spdlog::info("{} received: shutting down", signal == SIGINT ? "SIGINT" : "SIGTERM");
      gateway.async_shutdown([&io] { io.stop(); });
    });

    std::vector<std::thread> workers;
    for (int i = 1; i < config.threads; ++i) workers.emplace_back([&io] { io.run(); });
    io.run();
    for (auto& worker : workers) worker.join();
    return exit_code;
  } catch (const std::exception& e) {
    spdlog::critical("loom-gateway failed: {}", e.what());
    return 1;
  }
}
