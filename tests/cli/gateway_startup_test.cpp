// loom-gateway (and the loom CLI) starting up against what users get wrong: a model path that is missing,
// a directory, a FIFO, a truncated or non-GGUF file; flags that are unknown or lack a value; a config file
// that is not JSON; a KV cache larger than the machine or smaller than the model's context; and SIGTERM
// while the model is still loading. Each is a clear message naming what is wrong and an exit code, within
// a bounded time, never a hang or a crash. Also options from LOOM_* environment variables, with their
// precedence (flag > environment > config file > default) and bad values named by their variable.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <utility>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "http_get.hpp"
#include "run_process.hpp"
#include "test_files.hpp"

namespace loom::cli::testing {
namespace {

using compute::testing::ScratchDir;
using compute::testing::shared_path;
using Clock = std::chrono::steady_clock;


const std::string kModel = shared_path("models/synth11M-f16.gguf");

// A binary started with stderr on a pipe, killed (SIGKILL) if still running when the object goes, so a
// test that fails by hanging ends anyway.
class Running {
 public:
  Running(const std::vector<std::string>& args, const char* binary) {
    int err_pipe[2];
    if (::pipe(err_pipe) != 0) throw std::runtime_error("pipe failed");
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      ::dup2(err_pipe[1], STDERR_FILENO);
      ::close(err_pipe[0]);
      const int null_fd = ::open("/dev/null", O_RDWR);
      ::dup2(null_fd, STDIN_FILENO);
      ::dup2(null_fd, STDOUT_FILENO);
      exec_loom(args, binary);
    }
    ::close(err_pipe[1]);
    err_fd_ = err_pipe[0];
  }
  ~Running() {
    if (pid_ > 0 && exit_code_ < 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(err_fd_);
  }
  Running(const Running&) = delete;
  Running& operator=(const Running&) = delete;

  // Reads stderr until `pattern` matches it or `limit` passes; the match, or nullopt.
  std::optional<std::smatch> wait_for(const std::regex& pattern, std::chrono::seconds limit) {
    const auto deadline = Clock::now() + limit;
    std::smatch match;
    while (!std::regex_search(err_, match, pattern)) {
      if (Clock::now() >= deadline || !read_some(deadline)) return std::nullopt;
    }
    return match;
  }

  // The exit code (128 + signal when killed by one), or -1 when it has not ended within `limit`.
  int wait_exit(std::chrono::milliseconds limit) {
    const auto deadline = Clock::now() + limit;
    while (exit_code_ < 0 && Clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        exit_code_ = decode_status(status);
        break;
      }
      read_some(std::min(deadline, Clock::now() + std::chrono::milliseconds(20)));
    }
    while (exit_code_ >= 0 && read_some(Clock::now() + std::chrono::milliseconds(200))) {
    }
    return exit_code_;
  }

  pid_t pid() const { return pid_; }
  const std::string& err() const { return err_; }

 private:
  // False at the end of the output or when nothing came before `deadline`.
  bool read_some(Clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd fd{err_fd_, POLLIN, 0};
    if (::poll(&fd, 1, static_cast<int>(std::max<long long>(left, 0))) <= 0) return false;
    char buffer[4096];
    const ssize_t n = ::read(err_fd_, buffer, sizeof buffer);
    if (n <= 0) return false;
    err_.append(buffer, static_cast<std::size_t>(n));
    return true;
  }

  pid_t pid_ = -1;
  int err_fd_ = -1;
  int exit_code_ = -1;
  std::string err_;
};

// GET path on 127.0.0.1:port; the response's body (parsed as JSON).
nlohmann::json get_json(int port, const std::string& path) {
  const std::string response = http_get(port, path);
  const auto body = response.find("\r\n\r\n");
  return body == std::string::npos ? nlohmann::json() : nlohmann::json::parse(response.substr(body + 4), nullptr, false);
}

// Runs the gateway on `model` (and the flags) and expects it to end by itself, within 30 s, with a
// non-zero exit and `text` in its message; returns stderr.
std::string expect_refused(const std::vector<std::string>& args, const std::string& text, int exit_code) {
  std::vector<std::string> all = {"--port", "0", "--threads", "1", "--compute-threads", "1"};
  all.insert(all.end(), args.begin(), args.end());
  Running gateway(all, gateway_binary());
  EXPECT_EQ(gateway.wait_exit(std::chrono::seconds(30)), exit_code) << gateway.err();
  EXPECT_NE(gateway.err().find(text), std::string::npos) << gateway.err();
  EXPECT_EQ(gateway.err().find("ready to serve"), std::string::npos) << gateway.err();
  return gateway.err();
}

TEST(GatewayStartup, AModelPathThatIsNotAFileIsRefusedAtOnceNamingIt) {
  ScratchDir dir("gateway_startup");
  const std::string missing = dir.path("missing.gguf").string();
  expect_refused({"--model", missing}, missing + " does not exist", 2);
  expect_refused({"--model", dir.path("").string()}, "is a directory", 2);
  const std::string fifo = dir.path("model.fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Nobody ever writes the FIFO: a gateway that opened it would wait for ever.
  expect_refused({"--model", fifo}, fifo + " is a FIFO", 2);
  expect_refused({"--model", kModel, "--tokenizer", fifo}, "tokenizer path " + fifo + " is a FIFO", 2);
}

TEST(GatewayStartup, AFileThatIsNotAModelFailsTheLoadNamingIt) {
  REQUIRE_SHARED_FILE(kModel);
  ScratchDir dir("gateway_startup");
  const std::string text = dir.path("notes.txt").string();
  { std::ofstream(text) << "these are not the weights you are looking for\n"; }
  expect_refused({"--model", text}, text, 1);
  // The first 100 KiB of a real GGUF: a header that promises tensors the file does not hold.
  const std::string truncated = dir.path("truncated.gguf").string();
  {
    std::ifstream in(kModel, std::ios::binary);
    std::vector<char> head(100 * 1024);
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    std::ofstream(truncated, std::ios::binary).write(head.data(), in.gcount());
  }
  const std::string err = expect_refused({"--model", truncated}, truncated, 1);
  EXPECT_NE(err.find("the model failed to load"), std::string::npos) << err;
}

TEST(GatewayStartup, TheCliRefusesTheSamePathsNamingThem) {
  ScratchDir dir("gateway_startup");
  const std::string fifo = dir.path("model.fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {fifo, dir.path("").string(), dir.path("missing.gguf").string()}) {
    Running loom({"info", "--model", path}, loom_binary());
    EXPECT_EQ(loom.wait_exit(std::chrono::seconds(30)), 1) << path << "\n" << loom.err();
    EXPECT_NE(loom.err().find(path), std::string::npos) << loom.err();
  }
}

TEST(GatewayStartup, SigtermWhileTheModelLoadsExitsZeroPromptly) {
  REQUIRE_SHARED_FILE(kModel);
  Running gateway({"--model", kModel, "--port", "0", "--threads", "1", "--compute-threads", "1"}, gateway_binary());
  // The executor's log line as the load begins (the load itself takes a few hundred milliseconds).
  ASSERT_TRUE(gateway.wait_for(std::regex("gpu-executor loading model="), std::chrono::seconds(30))) << gateway.err();
  const auto signalled = Clock::now();
  ASSERT_EQ(::kill(gateway.pid(), SIGTERM), 0);
  EXPECT_EQ(gateway.wait_exit(std::chrono::seconds(30)), 0) << gateway.err();
  // The load is cut short at its next check (LoadOptions::stop; EngineFaults and LoadCancel test that
  // directly); the bound leaves room for a slow machine under sanitizers, far below the 10 s grace period.
  EXPECT_LT(Clock::now() - signalled, std::chrono::seconds(8)) << gateway.err();
  EXPECT_EQ(gateway.err().find("failed to load"), std::string::npos) << gateway.err();
}

TEST(GatewayStartup, FlagMistakesAreNamedForWhatTheyAre) {
  const auto unknown = run_loom({"--bogus"}, gateway_binary());
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("unknown option --bogus"), std::string::npos) << unknown.err;
  EXPECT_NE(unknown.err.find("--help"), std::string::npos) << unknown.err;
  const auto unknown_before_another = run_loom({"--bogus", "--port", "0"}, gateway_binary());
  EXPECT_NE(unknown_before_another.err.find("unknown option --bogus"), std::string::npos) << unknown_before_another.err;
  const auto no_value = run_loom({"--port", "0", "--model"}, gateway_binary());
  EXPECT_EQ(no_value.exit_code, 2);
  EXPECT_NE(no_value.err.find("option --model needs a value"), std::string::npos) << no_value.err;
  // Not a model called "--port".
  const auto value_is_a_flag = run_loom({"--model", "--port", "0"}, gateway_binary());
  EXPECT_EQ(value_is_a_flag.exit_code, 2);
  EXPECT_NE(value_is_a_flag.err.find("option --model needs a value"), std::string::npos) << value_is_a_flag.err;
}

TEST(GatewayStartup, AKvCacheLargerThanTheMachineSaysHowMuchWasAskedAndIsAvailable) {
  const std::vector<std::string> flags = {"--kv-cache-mb", "1048576", "--model", kModel};
  std::vector<std::string> generate = {"generate", "--prompt", "x"};
  generate.insert(generate.end(), flags.begin(), flags.end());
  for (const auto& [binary, args] : {std::pair{gateway_binary(), flags}, std::pair{loom_binary(), generate}}) {
    const auto run = run_loom(args, binary);
    EXPECT_EQ(run.exit_code, 2) << run.err;
    EXPECT_NE(run.err.find("asks for 1048576 MiB"), std::string::npos) << run.err;
    EXPECT_NE(run.err.find("MiB available"), std::string::npos) << run.err;
    EXPECT_EQ(run.err.find("bad_alloc"), std::string::npos) << run.err;
  }
}

TEST(GatewayStartup, AConfigFileThatIsNotJsonIsReportedByLineAndColumn) {
  ScratchDir dir("gateway_startup");
  const std::string path = dir.path("config.json").string();
  { std::ofstream(path) << "{\n  \"port\": 8080,\n  \"host\": \n}\n"; }
  const auto run = run_loom({"--config", path}, gateway_binary());
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find(path + " is not valid JSON: line 4, column 1"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("unexpected '}'"), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("json.exception"), std::string::npos) << run.err;
  // What follows a NUL byte is not ignored.
  { std::ofstream(path, std::ios::binary) << std::string("{\"port\": 8080}\0{\"colour\": 1}", 28); }
  const auto nul = run_loom({"--config", path}, gateway_binary());
  EXPECT_EQ(nul.exit_code, 2);
  EXPECT_NE(nul.err.find("line 1, column 15 (byte 14): a NUL byte"), std::string::npos) << nul.err;
}

// Without --kv-cache-mb the cache is a share of the memory left after the weights, and the log says so.
TEST(GatewayStartup, WithoutKvCacheMbTheCacheIsSizedFromTheMachineAndTheLogSaysHow) {
  REQUIRE_SHARED_FILE(kModel);
  Running gateway({"--model", kModel, "--port", "0", "--threads", "1", "--compute-threads", "1", "--kv-cache-percent", "10"},
                  gateway_binary());
  const auto ready = gateway.wait_for(std::regex(R"(ready to serve on http://127\.0\.0\.1:(\d+))"), std::chrono::seconds(60));
  ASSERT_TRUE(ready) << gateway.err();
  EXPECT_TRUE(std::regex_search(gateway.err(),
                                std::regex(R"(kv cache: [0-9,.]+ MiB[:=] 10 % of [0-9,]+ MiB available after the weights)")))
      << gateway.err();
  ASSERT_EQ(::kill(gateway.pid(), SIGTERM), 0);
  EXPECT_EQ(gateway.wait_exit(std::chrono::seconds(30)), 0) << gateway.err();
}

TEST(GatewayStartup, AKvCacheSmallerThanTheContextIsWarnedAndTheEffectiveContextReported) {
  REQUIRE_SHARED_FILE(kModel);
  Running gateway({"--model", kModel, "--port", "0", "--threads", "1", "--compute-threads", "1", "--kv-cache-mb", "1"},
                  gateway_binary());
  const auto ready = gateway.wait_for(std::regex(R"(ready to serve on http://127\.0\.0\.1:(\d+))"), std::chrono::seconds(60));
  ASSERT_TRUE(ready) << gateway.err();
  const int port = std::stoi((*ready)[1].str());
  std::smatch loaded;
  ASSERT_TRUE(std::regex_search(gateway.err(), loaded, std::regex(R"(model loaded model_id=\S+ context_length=(\d+))")))
      << gateway.err();
  const std::int64_t context = std::stoll(loaded[1].str());
  EXPECT_LT(context, 2048) << "the model's context is 2048; 1 MiB of KV cache holds less";
  EXPECT_GT(context, 0);
  EXPECT_NE(gateway.err().find("less than the model's context of 2048"), std::string::npos) << gateway.err();
  EXPECT_NE(gateway.err().find("MiB (--kv-cache-mb) holds one full context"), std::string::npos) << gateway.err();
  EXPECT_EQ(get_json(port, "/health").value("context_length", std::int64_t{-1}), context);
  const auto models = get_json(port, "/v1/models");
  ASSERT_TRUE(models.contains("data") && models["data"].size() == 1) << models.dump();
  EXPECT_EQ(models["data"][0].value("max_model_len", std::int64_t{-1}), context) << models.dump();
  ASSERT_EQ(::kill(gateway.pid(), SIGTERM), 0);
  EXPECT_EQ(gateway.wait_exit(std::chrono::seconds(30)), 0) << gateway.err();
}

// Sets environment variables for the test's lifetime (the children it starts inherit them), then
// removes them. Tests run one at a time in this process, so nothing else reads the environment meanwhile.
class ScopedEnvironment {
 public:
  explicit ScopedEnvironment(std::initializer_list<std::pair<std::string, std::string>> variables)
      : variables_(variables) {
    for (const auto& [name, value] : variables_) ::setenv(name.c_str(), value.c_str(), 1);
  }
  ~ScopedEnvironment() {
    for (const auto& [name, value] : variables_) ::unsetenv(name.c_str());
  }
  ScopedEnvironment(const ScopedEnvironment&) = delete;
  ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;

 private:
  std::vector<std::pair<std::string, std::string>> variables_;
};

// A TCP port the test holds (listening), so that a gateway told to use it fails to start.
class HeldPort {
 public:
  HeldPort() : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    ::inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
    socklen_t size = sizeof address;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&address), size) != 0 || ::listen(fd_, 1) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &size) != 0) {
      throw std::runtime_error("cannot hold a port");
    }
    port_ = ntohs(address.sin_port);
  }
  ~HeldPort() { ::close(fd_); }
  HeldPort(const HeldPort&) = delete;
  HeldPort& operator=(const HeldPort&) = delete;
  int port() const { return port_; }

 private:
  int fd_;
  int port_ = 0;
};

// The status code of an HTTP response text ("HTTP/1.1 400 Bad Request" -> 400), 0 when there is none.
int status_of(const std::string& response) {
  return response.size() > 12 && response.rfind("HTTP/1.", 0) == 0 ? std::stoi(response.substr(9, 3)) : 0;
}

int completion_status(int port, int max_tokens) {
  return status_of(http_post_json(port, "/v1/completions",
                                  R"({"prompt":"a","temperature":0,"max_tokens":)" + std::to_string(max_tokens) + "}"));
}

// The config file says port P (held by the test: a gateway on it would not start), a missing model, a
// model id and max_tokens_limit 7; the environment gives the config file itself, port 0, the real model
// and a limit of 9; a flag gives a limit of 5. The gateway starts (environment over file), answers with the
// file's model id (file over default), and takes max_tokens 5 but not 6 (flag over environment). Without
// the flag it takes 8 (environment over file).
TEST(GatewayEnvironment, OptionsComeFromLoomVariablesBetweenFlagsAndTheConfigFile) {
  ScratchDir dir("gateway_environment");
  HeldPort held;
  const std::string config = dir.path("gateway.json").string();
  {
    std::ofstream(config) << nlohmann::json{{"port", held.port()},
                                            {"model", dir.path("missing.gguf").string()},
                                            {"model_id", "from-the-file"},
                                            {"max_tokens_limit", 7}}
                                 .dump();
  }
  ScopedEnvironment environment({{"LOOM_CONFIG", config}, {"LOOM_PORT", "0"}, {"LOOM_MODEL", kModel},
                                 {"LOOM_MAX_TOKENS", "9"}, {"LOOM_THREADS", "1"}, {"LOOM_COMPUTE_THREADS", "1"}});
  const std::regex ready(R"(ready to serve on http://127\.0\.0\.1:(\d+))");
  {
    Running gateway({"--max-tokens", "5"}, gateway_binary());
    const auto match = gateway.wait_for(ready, std::chrono::seconds(60));
    ASSERT_TRUE(match) << gateway.err();
    const int port = std::stoi((*match)[1].str());
    EXPECT_NE(port, held.port());
    EXPECT_EQ(get_json(port, "/v1/models")["data"][0].value("id", ""), "from-the-file");
    EXPECT_EQ(completion_status(port, 5), 200);
    EXPECT_EQ(completion_status(port, 6), 400);
    ASSERT_EQ(::kill(gateway.pid(), SIGTERM), 0);
    EXPECT_EQ(gateway.wait_exit(std::chrono::seconds(30)), 0) << gateway.err();
  }
  Running gateway({}, gateway_binary());
  const auto match = gateway.wait_for(ready, std::chrono::seconds(60));
  ASSERT_TRUE(match) << gateway.err();
  const int port = std::stoi((*match)[1].str());
  EXPECT_EQ(completion_status(port, 8), 200);
  EXPECT_EQ(completion_status(port, 10), 400);
  ASSERT_EQ(::kill(gateway.pid(), SIGTERM), 0);
  EXPECT_EQ(gateway.wait_exit(std::chrono::seconds(30)), 0) << gateway.err();
}

TEST(GatewayEnvironment, AVariableThatDoesNotParseIsAnErrorNamingIt) {
  {
    ScopedEnvironment environment({{"LOOM_PORT", "eighty"}});
    const auto result = run_loom({"--model", kModel}, gateway_binary());
    EXPECT_EQ(result.exit_code, 2);
    EXPECT_NE(result.err.find("environment variable LOOM_PORT expects an integer, got 'eighty'"), std::string::npos)
        << result.err;
  }
  {
    ScopedEnvironment environment({{"LOOM_MAX_REQUESTS", "0"}});
    const auto result = run_loom({"--model", kModel}, gateway_binary());
    EXPECT_EQ(result.exit_code, 2);
    EXPECT_NE(result.err.find("environment variable LOOM_MAX_REQUESTS must be in [1, "), std::string::npos)
        << result.err;
  }
  {
    // A flag given wins: the bad variable is never read.
    ScopedEnvironment environment({{"LOOM_PORT", "eighty"}});
    const auto result = run_loom({"--model", kModel, "--port", "99999"}, gateway_binary());
    EXPECT_EQ(result.exit_code, 2);
    EXPECT_NE(result.err.find("option --port must be in [0, 65535], got 99999"), std::string::npos) << result.err;
  }
}

}  // namespace
}  // namespace loom::cli::testing
