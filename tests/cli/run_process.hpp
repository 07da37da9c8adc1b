// Helpers for the CLI tests: run the loom binary with arguments and collect its output, either through
// pipes (stdout and stderr apart) or through a pseudo-terminal (as a person at a terminal would see it).
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_files.hpp"

namespace loom::cli::testing {

inline const char* loom_binary() { return LOOM_CLI_PATH; }

struct ProcessResult {
  int exit_code = -1;  // the exit status, or 128 + signal
  std::string out;
  std::string err;
};

[[noreturn]] inline void exec_loom(const std::vector<std::string>& args, const char* binary = loom_binary()) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(binary));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execv(binary, argv.data());
  ::_exit(127);
}

inline int decode_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// Runs loom (or another of our binaries) with `args` (stdin: /dev/null) and waits for it.
inline ProcessResult run_loom(const std::vector<std::string>& args, const char* binary = loom_binary()) {
  int out_pipe[2], err_pipe[2];
  if (::pipe(out_pipe) != 0 || ::pipe(err_pipe) != 0) throw std::runtime_error("pipe failed");
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    const int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
    exec_loom(args, binary);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  ProcessResult result;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 2;
  char buffer[4096];
  while (open_fds > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<std::size_t>(n));
      } else {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  result.exit_code = decode_status(status);
  return result;
}

// loom running in a pseudo-terminal: what it prints (stdout and stderr together, as on a screen) is read
// with a deadline; keys are typed into it.
class PtySession {
 public:
  explicit PtySession(const std::vector<std::string>& args) {
    pid_ = ::forkpty(&master_, nullptr, nullptr, nullptr);
    if (pid_ < 0) throw std::runtime_error(std::string("forkpty failed: ") + std::strerror(errno));
    if (pid_ == 0) exec_loom(args);
  }
  ~PtySession() {
    if (pid_ > 0 && exit_code_ < 0) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
    if (master_ >= 0) ::close(master_);
  }
  PtySession(const PtySession&) = delete;
  PtySession& operator=(const PtySession&) = delete;

  void type(const std::string& keys) {
    if (::write(master_, keys.data(), keys.size()) != static_cast<ssize_t>(keys.size())) {
      throw std::runtime_error("writing to the terminal failed");
    }
  }

  // Reads until the screen output (from the start) holds `text` at or after `from`, or the deadline
  // passes; returns whether it appeared.
  bool wait_for(const std::string& text, std::size_t from, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (screen_.find(text, from) == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || !read_some(left)) return false;
    }
    return true;
  }

  // Waits for the process to end (reading its output meanwhile); returns its exit code or -1 on timeout.
  int wait_exit(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        while (read_some(std::chrono::milliseconds(50))) {
        }
        exit_code_ = decode_status(status);
        return exit_code_;
      }
      if (std::chrono::steady_clock::now() > deadline) return -1;
      read_some(std::chrono::milliseconds(50));
    }
  }

  // Reads whatever arrives for `duration`.
  void pump(std::chrono::milliseconds duration) {
    const auto deadline = std::chrono::steady_clock::now() + duration;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return;
      read_some(left);
    }
  }

  bool alive() {
    int status = 0;
    return exit_code_ < 0 && ::waitpid(pid_, &status, WNOHANG) == 0;
  }

  const std::string& screen() const { return screen_; }

 private:
  bool read_some(std::chrono::milliseconds timeout) {
    pollfd fd{master_, POLLIN, 0};
    const int ready = ::poll(&fd, 1, static_cast<int>(timeout.count()));
    if (ready <= 0) return false;
    char buffer[4096];
    const ssize_t n = ::read(master_, buffer, sizeof buffer);
    if (n <= 0) return false;  // EIO once the child is gone
    screen_.append(buffer, static_cast<std::size_t>(n));
    return true;
  }

  int master_ = -1;
  pid_t pid_ = -1;
  int exit_code_ = -1;
  std::string screen_;
};

// Shared by several test files (one copy each would clash in the suite's unity build).
inline const std::string kGguf = loom::compute::testing::shared_path("models/aidreams260K.gguf");
inline const char* gateway_binary() { return LOOM_GATEWAY_PATH; }
inline bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace loom::cli::testing
