// loom-gateway: the loom server. For now it parses and logs its configuration, runs its io_context
// and exits cleanly on SIGINT or SIGTERM; the engine and the HTTP/WebSocket routes arrive with later issues.
#include <cstdio>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/signal_set.hpp>
#include <spdlog/spdlog.h>

#include "command_line.hpp"

namespace {

constexpr const char* kUsage = R"(loom-gateway: the loom LLM inference server.

Usage: loom-gateway [options]

Options:
  --host ADDRESS     address to listen on (default 127.0.0.1; use 0.0.0.0 to accept remote clients)
  --port N           TCP port, 1-65535 (default 8080)
  --threads N        I/O threads, 1-256 (default: the number of hardware threads, at least 1)
  --log-level LEVEL  trace, debug, info, warn, error, critical or off (default info)
  --help             print this help and exit
  --version          print the version and exit

The gateway stops cleanly on SIGINT (Ctrl-C) or SIGTERM.
)";

struct GatewayConfig {
  std::string host;
  int port = 0;
  int threads = 0;
  std::string log_level;
};

}  // namespace

int main(int argc, char** argv) {
  GatewayConfig config;
  try {
    loom::cli::CommandLine args(argc, argv, {"help", "version"});
    if (args.flag("help")) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (args.flag("version")) {
      std::printf("loom-gateway %s\n", LOOM_VERSION);
      return 0;
    }
    const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    config.host = args.text("host", "127.0.0.1");
    config.port = static_cast<int>(args.integer("port", 8080, 1, 65535));
    config.threads = static_cast<int>(args.integer("threads", hardware, 1, 256));
    config.log_level = args.text("log-level", "info");
    args.reject_unknown();
    if (!args.positional().empty()) throw loom::cli::UsageError("unexpected argument '" + args.positional()[0] + "'");

    boost::system::error_code ec;
    boost::asio::ip::make_address(config.host, ec);
    if (ec) throw loom::cli::UsageError("option --host expects an IP address, got '" + config.host + "'");
    const auto level = spdlog::level::from_str(config.log_level);
    if (level == spdlog::level::off && config.log_level != "off") {
      throw loom::cli::UsageError("option --log-level expects trace, debug, info, warn, error, critical or off, got '" +
                                  config.log_level + "'");
    }
    spdlog::set_level(level);
  } catch (const loom::cli::UsageError& e) {
    std::fprintf(stderr, "loom-gateway: %s\nRun 'loom-gateway --help' for the options.\n", e.what());
    return 2;
  }

  try {
    boost::asio::io_context io(config.threads);
    boost::asio::signal_set signals(io, SIGINT, SIGTERM);
    signals.async_wait([&](const boost::system::error_code& error, int signal) {
      if (error) return;
      spdlog::info("gateway stopping signal={}", signal == SIGINT ? "SIGINT" : "SIGTERM");
      io.stop();
    });
    spdlog::info("gateway starting version={} host={} port={} threads={} log_level={}", LOOM_VERSION, config.host,
                 config.port, config.threads, config.log_level);
    spdlog::info("gateway ready: no routes are served yet (the engine and HTTP/WebSocket routes come next)");

    std::vector<std::thread> workers;
    for (int i = 1; i < config.threads; ++i) workers.emplace_back([&io] { io.run(); });
    io.run();
    for (auto& worker : workers) worker.join();
    spdlog::info("gateway stopped");
    return 0;
  } catch (const std::exception& e) {
    spdlog::critical("gateway failed error=\"{}\"", e.what());
    return 1;
  }
}
