// The loom-gateway binary as a user runs it: --help, usage errors, and the Quick-start path: no --model
// serves the demo model (made on first run), logs the ready line, answers /health, and exits 0 on SIGTERM.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "http_get.hpp"
#include "run_process.hpp"
#include "test_files.hpp"

namespace loom::cli::testing {
namespace {


TEST(GatewayBinary, HelpListsTheOptionsWithDefaults) {
  const auto run = run_loom({"--help"}, gateway_binary());
  EXPECT_EQ(run.exit_code, 0);
  for (const char* option : {"--model", "--host", "--port", "--threads", "--kv-cache-mb", "--kv-cache-percent",
                             "--api-key", "--config", "--chat-template", "--device", "--vulkan-arithmetic",
                             "default 127.0.0.1", "default 8080"}) {
    EXPECT_NE(run.out.find(option), std::string::npos) << option;
  }
}

// Every option with a value is listed with its environment variable, at the end of its own entry.
TEST(GatewayBinary, HelpListsTheEnvironmentVariableBesideEachOption) {
  const auto run = run_loom({"--help"}, gateway_binary());
  ASSERT_EQ(run.exit_code, 0);
  const std::string& help = run.out;
  std::vector<std::size_t> entries;  // where each "  --option" line starts
  for (std::size_t at = help.find("\n  --"); at != std::string::npos; at = help.find("\n  --", at + 1)) {
    entries.push_back(at + 1);
  }
  ASSERT_GT(entries.size(), 30u);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const std::size_t name_start = entries[i] + 4;
    const std::string option = help.substr(name_start, help.find_first_of(" ,", name_start) - name_start);
    if (option == "help") continue;
    std::string variable = "LOOM_";
    for (const char c : option) variable += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    const std::size_t end = i + 1 < entries.size() ? entries[i + 1] : help.find("\n\n", entries[i]);
    EXPECT_NE(help.substr(entries[i], end - entries[i]).find("(env " + variable + ")"), std::string::npos) << option;
  }
  for (const char* variable : {"LOOM_PORT", "LOOM_MODEL", "LOOM_CORS_ORIGINS", "LOOM_SSE_PING_INTERVAL_MS"}) {
    EXPECT_NE(help.find(variable), std::string::npos) << variable;
  }
}

TEST(GatewayBinary, BadOptionsAreUsageErrorsNamingThem) {
  const auto port = run_loom({"--port", "99999"}, gateway_binary());
  EXPECT_EQ(port.exit_code, 2);
  EXPECT_NE(port.err.find("--port"), std::string::npos) << port.err;
  const auto unknown = run_loom({"--prot", "80"}, gateway_binary());
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("prot"), std::string::npos) << unknown.err;
  const auto host = run_loom({"--host", "localhost"}, gateway_binary());
  EXPECT_EQ(host.exit_code, 2);
  EXPECT_NE(host.err.find("host"), std::string::npos) << host.err;
  const auto missing = run_loom({"--model", "/nonexistent.gguf"}, gateway_binary());
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("/nonexistent.gguf"), std::string::npos) << missing.err;
  compute::testing::ScratchDir dir("gateway_binary");
  const auto config_path = dir.path("bad.json").string();
  { std::ofstream(config_path) << R"({"port": 8080, "colour": "blue"})"; }
  const auto config = run_loom({"--config", config_path}, gateway_binary());
  EXPECT_EQ(config.exit_code, 2);
  EXPECT_NE(config.err.find("colour"), std::string::npos) << config.err;
}

TEST(GatewayBinary, WithoutAModelItServesTheDemoAndStopsCleanlyOnSigterm) {
  compute::testing::ScratchDir dir("gateway_binary");
  const std::string demo = dir.path("cache/demo.gguf").string();
  int err_pipe[2];
  ASSERT_EQ(::pipe(err_pipe), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::dup2(err_pipe[1], STDERR_FILENO);
    ::close(err_pipe[0]);
    exec_loom({"--port", "0", "--threads", "2", "--compute-threads", "1", "--demo-model-path", demo}, gateway_binary());
  }
  ::close(err_pipe[1]);
  // Read stderr until the ready line (at most 60 s).
  std::string err;
  std::smatch match;
  const std::regex ready(R"(ready to serve on http://127\.0\.0\.1:(\d+) \(demo model)");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!std::regex_search(err, match, ready) && std::chrono::steady_clock::now() < deadline) {
    pollfd fd{err_pipe[0], POLLIN, 0};
    if (::poll(&fd, 1, 1000) <= 0) continue;
    char buffer[4096];
    const ssize_t n = ::read(err_pipe[0], buffer, sizeof buffer);
    if (n <= 0) break;
    err.append(buffer, static_cast<std::size_t>(n));
  }
  if (!std::regex_search(err, match, ready)) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    FAIL() << "no ready line; stderr:\n" << err;
  }
  const int port = std::stoi(match[1].str());
  EXPECT_NE(err.find("DEMO model"), std::string::npos) << err;
  EXPECT_TRUE(std::filesystem::exists(demo));
  const auto health = http_get(port, "/health");
  EXPECT_NE(health.find("200 OK"), std::string::npos) << health;
  EXPECT_NE(health.find(R"("demo":true)"), std::string::npos) << health;

  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_EQ(decode_status(status), 0);
  ::close(err_pipe[0]);
}

}  // namespace
}  // namespace loom::cli::testing
