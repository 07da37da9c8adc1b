// loom-ws-client as a user runs it: against a real loom-gateway process (aidreams260K: the streamed text
// is the reference's greedy continuation; synth11M, whose 2048-token context leaves time for a Ctrl-C
// mid-stream), against a server that accepts the WebSocket but never answers (to see the frames the client
// sends, and that a second Ctrl-C exits at once), and against nothing at all.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/websocket.hpp>
#include <nlohmann/json.hpp>

#include "run_process.hpp"
#include "test_files.hpp"

namespace loom::cli::testing {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using nlohmann::json;

const char* ws_client_binary() { return LOOM_WS_CLIENT_PATH; }

constexpr const char* kPrompt = "Once upon a time";

// A child process with stdout and stderr on pipes (stdin: /dev/null), read while the test waits on it.
// Killed and reaped when the object goes, if it is still running.
class RunningProcess {
 public:
  RunningProcess(const char* binary, const std::vector<std::string>& args) {
    int out[2], err[2];
    if (::pipe(out) != 0 || ::pipe(err) != 0) throw std::runtime_error("pipe failed");
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      ::dup2(err[1], STDERR_FILENO);
      ::close(out[0]);
      ::close(err[0]);
      const int null_fd = ::open("/dev/null", O_RDONLY);
      if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
      exec_loom(args, binary);
    }
    ::close(out[1]);
    ::close(err[1]);
    fds_[0] = out[0];
    fds_[1] = err[0];
  }
  ~RunningProcess() {
    if (!reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    for (int fd : fds_) {
      if (fd >= 0) ::close(fd);
    }
  }
  RunningProcess(const RunningProcess&) = delete;
  RunningProcess& operator=(const RunningProcess&) = delete;

  // Reads output until `done()` holds or `limit` passes; returns done().
  bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done()) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || !read_some(left)) return done();
    }
    return true;
  }

  void signal(int number) { ::kill(pid_, number); }

  // Waits for the exit (reading the rest of the output); false when `limit` passed first.
  bool wait_exit(std::chrono::milliseconds limit) {
    wait_until([this] { return fds_[0] < 0 && fds_[1] < 0; }, limit);
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      if (::waitpid(pid_, &status_, WNOHANG) == pid_) {
        reaped_ = true;
        return true;
      }
      std::this_thread::sleep_for(5ms);
    }
    return false;
  }

  // After wait_exit: the exit status, or -1 when the process was killed by a signal.
  int exit_status() const { return WIFEXITED(status_) ? WEXITSTATUS(status_) : -1; }
  const std::string& out() const { return out_; }
  const std::string& err() const { return err_; }

 private:
  // One poll of both pipes; false when nothing more can come in time.
  bool read_some(std::chrono::milliseconds limit) {
    pollfd polled[2] = {{fds_[0], POLLIN, 0}, {fds_[1], POLLIN, 0}};
    if (fds_[0] < 0 && fds_[1] < 0) return false;
    if (::poll(polled, 2, static_cast<int>(limit.count())) <= 0) return false;
    std::string* sinks[2] = {&out_, &err_};
    for (int i = 0; i < 2; ++i) {
      if (fds_[i] < 0 || (polled[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      char buffer[4096];
      const ssize_t n = ::read(fds_[i], buffer, sizeof buffer);
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<std::size_t>(n));
      } else {
        ::close(fds_[i]);
        fds_[i] = -1;
      }
    }
    return true;
  }

  pid_t pid_ = -1;
  int fds_[2] = {-1, -1};
  std::string out_, err_;
  int status_ = 0;
  bool reaped_ = false;
};

// loom-gateway on 127.0.0.1 and a free port, serving `model`; SIGTERM when the object goes.
class Gateway {
 public:
  explicit Gateway(const std::string& model, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--model", model, "--port", "0", "--threads", "2", "--compute-threads", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    process_ = std::make_unique<RunningProcess>(gateway_binary(), args);
    const std::regex ready(R"(ready to serve on http://127\.0\.0\.1:(\d+))");
    std::smatch match;
    process_->wait_until([&] { return std::regex_search(process_->err(), match, ready); }, 60s);
    if (match.empty()) throw std::runtime_error("the gateway logged no ready line; stderr:\n" + process_->err());
    port_ = match[1].str();
  }
  ~Gateway() {
    process_->signal(SIGTERM);
    process_->wait_exit(30s);
  }
  const std::string& port() const { return port_; }

 private:
  std::unique_ptr<RunningProcess> process_;
  std::string port_;
};

std::string shared_model(const std::string& name) {
  const std::string path = compute::testing::shared_path("models/" + name);
  if (!std::filesystem::exists(path)) throw std::runtime_error("missing shared test file: " + path);
  return path;
}

// The reference's greedy continuation of kPrompt with aidreams260K (the llama2.c runner's text).
std::string reference_continuation() {
  const std::string path = compute::testing::shared_path("reference/aidreams260K.llama2c-greedy.txt");
  std::ifstream file(path);
  if (!file) throw std::runtime_error("missing shared test file: " + path);
  std::stringstream text;
  text << file.rdbuf();
  const std::string all = text.str();
  if (all.rfind(kPrompt, 0) != 0) throw std::runtime_error(path + " does not start with the prompt");
  return all.substr(std::string_view(kPrompt).size());
}

// What the client streamed: its stdout without the newline it ends the text with.
std::string streamed_text(const std::string& out) {
  return !out.empty() && out.back() == '\n' ? out.substr(0, out.size() - 1) : out;
}

// A WebSocket server on 127.0.0.1 that accepts one connection (the WebSocket handshake too, unless told
// not to), records every frame it receives and never answers.
class SilentServer {
 public:
  explicit SilentServer(bool accept_websocket = true)
      : acceptor_(io_, {asio::ip::make_address("127.0.0.1"), 0}), accept_websocket_(accept_websocket) {
    asio::co_spawn(io_, serve(), [](std::exception_ptr) {});  // the client went away: the server ends
    thread_ = std::thread([this] { io_.run(); });
  }
  ~SilentServer() {
    io_.stop();
    thread_.join();
  }
  std::string port() const { return std::to_string(acceptor_.local_endpoint().port()); }

  // Waits until `count` frames have arrived (a TCP connection counts as frame 0 when accept_websocket
  // is false); returns the frames so far.
  std::vector<std::string> wait_frames(std::size_t count, std::chrono::milliseconds limit) {
    std::unique_lock lock(mutex_);
    arrived_.wait_for(lock, limit, [&] { return frames_.size() >= count; });
    return frames_;
  }

 private:
  asio::awaitable<void> serve() {
    auto socket = co_await acceptor_.async_accept(asio::use_awaitable);
    if (!accept_websocket_) {
      record("(connected)");
      char bytes[1024];
      for (;;) co_await socket.async_read_some(asio::buffer(bytes), asio::use_awaitable);  // never answered
    }
    boost::beast::websocket::stream<asio::ip::tcp::socket> ws(std::move(socket));
    co_await ws.async_accept(asio::use_awaitable);
    for (;;) {
      boost::beast::flat_buffer buffer;
      co_await ws.async_read(buffer, asio::use_awaitable);
      record(boost::beast::buffers_to_string(buffer.data()));
    }
  }
  void record(std::string frame) {
    std::lock_guard lock(mutex_);
    frames_.push_back(std::move(frame));
    arrived_.notify_all();
  }

  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_;
  bool accept_websocket_;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable arrived_;
  std::vector<std::string> frames_;
};

TEST(WsClient, HelpNamesTheOptionsAndBadOnesAreUsageErrors) {
  const auto help = run_loom({"--help"}, ws_client_binary());
  EXPECT_EQ(help.exit_code, 0);
  for (const char* option : {"--host", "--port", "--api-key", "--session", "--max-tokens", "--temperature", "--seed",
                             "--max-frame-bytes", "--progress", "Ctrl-C"}) {
    EXPECT_NE(help.out.find(option), std::string::npos) << option;
  }
  const auto port = run_loom({"--port", "70000", kPrompt}, ws_client_binary());
  EXPECT_EQ(port.exit_code, 2);
  EXPECT_NE(port.err.find("--port"), std::string::npos) << port.err;
  const auto unknown = run_loom({"--max-tokenz", "5", kPrompt}, ws_client_binary());
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("max-tokenz"), std::string::npos) << unknown.err;
}

TEST(WsClient, NoServerIsAConnectionErrorNamingTheAddress) {
  std::string port;
  { port = SilentServer().port(); }  // a port that was free a moment ago and is closed now
  const auto run = run_loom({"--port", port, kPrompt}, ws_client_binary());
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("cannot connect to 127.0.0.1:" + port), std::string::npos) << run.err;
  EXPECT_EQ(run.out, "");
}

TEST(WsClient, StreamsTheGreedyContinuationAndExitsZeroOnTheDoneEvent) {
  Gateway gateway(shared_model("aidreams260K.gguf"));
  const auto run = run_loom({"--port", gateway.port(), "--max-tokens", "16", "--temperature", "0", kPrompt},
                            ws_client_binary());
  EXPECT_EQ(run.exit_code, 0) << run.err;
  const std::string text = streamed_text(run.out);
  EXPECT_GT(text.size(), 16u) << run.out;
  EXPECT_EQ(reference_continuation().rfind(text, 0), 0u) << "streamed: " << text;
  EXPECT_NE(run.err.find("done reason=length"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("completion_tokens=16"), std::string::npos) << run.err;
}

// --progress: a prompt computed in chunks of 16 tokens is reported chunk by chunk on stderr, up to its whole
// length, before the text (which is unchanged) ends with the done line.
TEST(WsClient, ProgressReportsEachPrefillChunkOnStderr) {
  Gateway gateway(shared_model("aidreams260K.gguf"), {"--max-batch-tokens", "16"});
  std::string prompt;
  for (int i = 0; i < 6; ++i) prompt += std::string(i ? " " : "") + kPrompt;
  const auto run = run_loom({"--port", gateway.port(), "--max-tokens", "4", "--temperature", "0", "--progress", prompt},
                            ws_client_binary());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::vector<std::pair<long, long>> reports;
  std::istringstream lines(run.err);
  for (std::string line; std::getline(lines, line);) {
    long done = 0, total = 0;
    if (std::sscanf(line.c_str(), "loom-ws-client: prompt %ld of %ld tokens computed", &done, &total) == 2) {
      reports.emplace_back(done, total);
    }
  }
  ASSERT_GE(reports.size(), 2u) << "a prompt of several chunks: " << run.err;
  for (std::size_t i = 0; i < reports.size(); ++i) {
    EXPECT_EQ(reports[i].second, reports.back().second) << run.err;
    if (i > 0) {
      EXPECT_GT(reports[i].first, reports[i - 1].first) << run.err;
    }
  }
  EXPECT_EQ(reports.back().first, reports.back().second) << "the last report is the whole prompt: " << run.err;
  EXPECT_GT(reports.back().second, 16) << run.err;
  EXPECT_LT(run.err.find("tokens computed"), run.err.find("done reason=length")) << run.err;
  EXPECT_FALSE(streamed_text(run.out).empty());

  const auto quiet = run_loom({"--port", gateway.port(), "--max-tokens", "4", "--temperature", "0", prompt},
                              ws_client_binary());
  EXPECT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_EQ(quiet.err.find("tokens computed"), std::string::npos) << "progress only when asked: " << quiet.err;
}

TEST(WsClient, ReadsThePromptFromStdinAndSendsTheApiKey) {
  Gateway gateway(shared_model("aidreams260K.gguf"), {"--api-key", "test-key"});
  const std::string client = ws_client_binary();
  const auto piped = run_loom({"-c", "printf 'Once upon a time\\n' | '" + client + "' --port " + gateway.port() +
                                         " --api-key test-key --max-tokens 8 --temperature 0"},
                              "/bin/sh");
  EXPECT_EQ(piped.exit_code, 0) << piped.err;
  const std::string text = streamed_text(piped.out);
  EXPECT_FALSE(text.empty());
  EXPECT_EQ(reference_continuation().rfind(text, 0), 0u) << "streamed: " << text;

  const auto started = std::chrono::steady_clock::now();
  const auto refused = run_loom({"--port", gateway.port(), kPrompt}, ws_client_binary());
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s) << "the client lingered after the refusal";
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("refused the WebSocket upgrade: HTTP 401"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("API key"), std::string::npos) << refused.err;
}

TEST(WsClient, AnErrorEventIsAFailureNamingTheField) {
  Gateway gateway(shared_model("aidreams260K.gguf"));
  const auto started = std::chrono::steady_clock::now();
  const auto run = run_loom({"--port", gateway.port(), "--max-tokens", "100000", kPrompt}, ws_client_binary());
  // At once: a connection left open by the failure (its ping timer) must not keep the client waiting.
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s) << "the client lingered after the error event";
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("refused the request: invalid_request: params.max_tokens"), std::string::npos) << run.err;
}

TEST(WsClient, CtrlCMidStreamCancelsTheRequestAndExitsAfterItsDone) {
  // 2048 tokens of context and no end-of-sequence: the stream runs far longer than a cancel takes.
  Gateway gateway(shared_model("synth11M-q8_0.gguf"));
  RunningProcess client(ws_client_binary(), {"--port", gateway.port(), "--max-tokens", "4096", "--ignore-eos",
                                             "--temperature", "0", kPrompt});
  ASSERT_TRUE(client.wait_until([&] { return !client.out().empty(); }, 60s)) << client.err();
  client.signal(SIGINT);
  ASSERT_TRUE(client.wait_exit(30s)) << client.err();
  EXPECT_EQ(client.exit_status(), 0) << client.err();
  EXPECT_NE(client.err().find("cancelling the request"), std::string::npos) << client.err();
  EXPECT_NE(client.err().find("done reason=cancelled"), std::string::npos) << client.err();
}

TEST(WsClient, CtrlCSendsACancelForTheRequestAndASecondOneExitsAtOnce) {
  SilentServer server;
  RunningProcess client(ws_client_binary(),
                        {"--port", server.port(), "--max-tokens", "7", "--session", "s1", "--stop", "END", kPrompt});
  auto frames = server.wait_frames(1, 30s);
  ASSERT_EQ(frames.size(), 1u) << client.err();
  // The generate frame, with only the parameters given (the server's defaults apply to the rest).
  const json generate = json::parse(frames[0]);
  EXPECT_EQ(generate.at("type"), "generate");
  EXPECT_EQ(generate.at("prompt"), kPrompt);
  EXPECT_EQ(generate.at("session"), "s1");
  EXPECT_EQ(generate.at("params"), (json{{"max_tokens", 7}, {"stop", {"END"}}})) << frames[0];

  client.signal(SIGINT);
  frames = server.wait_frames(2, 30s);
  ASSERT_EQ(frames.size(), 2u) << client.err();
  EXPECT_EQ(json::parse(frames[1]), (json{{"type", "cancel"}, {"id", generate.at("id")}})) << frames[1];

  // No done event ever comes: the client waits for it until the second Ctrl-C.
  EXPECT_FALSE(client.wait_exit(300ms));
  const auto second = std::chrono::steady_clock::now();
  client.signal(SIGINT);
  ASSERT_TRUE(client.wait_exit(5s)) << client.err();
  EXPECT_LT(std::chrono::steady_clock::now() - second, 2s);
  EXPECT_EQ(client.exit_status(), 130) << client.err();  // it exited: the signal was handled, not fatal
  EXPECT_NE(client.err().find("interrupted"), std::string::npos) << client.err();
}

TEST(WsClient, CtrlCBeforeTheRequestIsSentExitsAtOnce) {
  SilentServer server(/*accept_websocket=*/false);
  RunningProcess client(ws_client_binary(), {"--port", server.port(), kPrompt});
  ASSERT_EQ(server.wait_frames(1, 30s).size(), 1u) << client.err();  // connected; the handshake hangs
  client.signal(SIGINT);
  ASSERT_TRUE(client.wait_exit(5s)) << client.err();
  EXPECT_EQ(client.exit_status(), 130) << client.err();
  EXPECT_NE(client.err().find("interrupted"), std::string::npos) << client.err();
  EXPECT_EQ(client.err().find("cancelling"), std::string::npos) << client.err();
}

}  // namespace
}  // namespace loom::cli::testing
