// loom-loadgen: concurrent streaming requests against an LLM server, then a report of latency percentiles,
// throughput and errors (bench/README.md). Everything runs on one io_context driven by one thread: each
// stream is a coroutine with its own connection (StreamClient) taking the next request number until the
// count or the duration is used up; a progress coroutine prints a line on stderr once a second.
//
// Before the run, two small probes (8 and 24 words, max_tokens 1) per kind of prompt used (raw, chat) ask
// the server how many tokens a prompt word makes in its tokenizer and how many its BOS token or chat
// template add (from its usage counts), so that --prompt-tokens comes out close to what was asked;
// --no-calibrate skips them (one word per token is assumed then).
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange without it

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "loadgen_options.hpp"
#include "report.hpp"
#include "request_plan.hpp"
#include "run_results.hpp"
#include "stream_client.hpp"

namespace {

namespace asio = boost::asio;
using namespace loom::loadgen;
using boost::system::error_code;

constexpr int kExitCompleted = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;
constexpr int kExitInterrupted = 130;  // 128 + SIGINT, as a shell reports a program Ctrl-C ended

constexpr std::int64_t kProbeWordsSmall = 8;
constexpr std::int64_t kProbeWordsLarge = 24;
// After a failed connection, a stream of a --duration run waits this long before its next request, so that
// a dead server is not hammered in a tight loop.
constexpr auto kConnectRetryPause = std::chrono::milliseconds(100);

// Hands out request numbers until the count is reached or the duration is over.
class Dispatcher {
 public:
  explicit Dispatcher(const Options& options) : options_(options) {}

  void start() {
    if (options_.duration_s) {
      end_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(*options_.duration_s));
    }
  }

  // No request after this one (Ctrl-C): those in flight finish.
  void stop() { stopped_ = true; }

  std::optional<std::uint64_t> take() {
    if (stopped_) return std::nullopt;
    if (options_.requests && next_ >= static_cast<std::uint64_t>(*options_.requests)) return std::nullopt;
    if (end_ && Clock::now() >= *end_) return std::nullopt;
    return next_++;
  }

 private:
  const Options& options_;
  std::optional<Clock::time_point> end_;
  std::uint64_t next_ = 0;
  bool stopped_ = false;
};

asio::awaitable<void> run_stream(std::shared_ptr<StreamClient> client, Dispatcher& dispatcher, const RequestPlan& plan,
                                 RunResults& results, bool pause_after_connect_failure) {
  while (const auto index = dispatcher.take()) {
    const RequestSpec spec = plan.request(*index);
    RequestOutcome outcome = co_await client->run(spec);
    outcome.asked_prompt_tokens = spec.prompt_tokens;
    results.record(outcome);
    if (!outcome.ok && outcome.error == ErrorKind::connect && pause_after_connect_failure) {
      asio::steady_timer pause(co_await asio::this_coro::executor, kConnectRetryPause);
      error_code ignored;
      co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
    }
  }
}

// "12.0 s  done 120 (failed 0)  330.2 tokens/s  errors 0": streamed tokens (content events) so far.
class ProgressLine {
 public:
  ProgressLine(const RunResults& results, bool terminal) : results_(results), terminal_(terminal) {}

  void print(Clock::time_point start) {
    const double elapsed = milliseconds_between(start, Clock::now()) / 1000;
    const double rate = elapsed > 0 ? static_cast<double>(results_.streamed_events()) / elapsed : 0;
    std::fprintf(stderr, "%sloom-loadgen: %.1f s  done %llu  %.1f tokens/s  errors %llu%s", terminal_ ? "\r\033[K" : "",
                 elapsed, static_cast<unsigned long long>(results_.finished()), rate,
                 static_cast<unsigned long long>(results_.failed()), terminal_ ? "" : "\n");
    std::fflush(stderr);
    printed_ = true;
  }

  void finish() {
    if (printed_ && terminal_) std::fputc('\n', stderr);
  }

 private:
  const RunResults& results_;
  bool terminal_;
  bool printed_ = false;
};

asio::awaitable<void> print_progress(ProgressLine& line, Clock::time_point start, asio::steady_timer& timer) {
  for (;;) {
    timer.expires_after(std::chrono::seconds(1));
    error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;  // the run is over
    line.print(start);
  }
}

// The server's prompt tokens for a probe of `words` words; nullopt when it failed or gave no usage.
asio::awaitable<std::optional<std::int64_t>> probe_prompt_tokens(StreamClient& client, const RequestSpec& probe) {
  const RequestOutcome outcome = co_await client.run(probe);
  if (!outcome.ok || !outcome.usage_prompt_tokens) co_return std::nullopt;
  co_return outcome.usage_prompt_tokens;
}

// The scale of one kind of prompt (raw or chat) from two probes; uncalibrated when either fails.
asio::awaitable<PromptScale> calibrate_one(StreamClient& client, const RequestPlan& plan, bool chat) {
  const std::uint64_t first_index = chat ? 2 : 0;
  const auto small = co_await probe_prompt_tokens(client, plan.probe(first_index, kProbeWordsSmall, 1, chat));
  if (!small) co_return PromptScale{};
  const auto large = co_await probe_prompt_tokens(client, plan.probe(first_index + 1, kProbeWordsLarge, 1, chat));
  if (!large || *large <= *small) co_return PromptScale{};
  PromptScale scale;
  scale.tokens_per_word = static_cast<double>(*large - *small) / static_cast<double>(kProbeWordsLarge - kProbeWordsSmall);
  scale.overhead_tokens = std::max(0.0, static_cast<double>(*small) - scale.tokens_per_word * kProbeWordsSmall);
  scale.calibrated = true;
  co_return scale;
}

asio::awaitable<PromptScales> calibrate(std::shared_ptr<StreamClient> client, const Options& options) {
  const RequestPlan plan(options, PromptScales{});
  PromptScales scales;
  if (options.endpoint != Endpoint::chat) scales.prompt = co_await calibrate_one(*client, plan, false);
  if (options.endpoint != Endpoint::completions) scales.chat = co_await calibrate_one(*client, plan, true);
  co_return scales;
}

std::string endpoint_text(const Options& options) {
  const std::string base = "://" + host_header(options.target) + options.target.path;
  if (options.target.protocol == Protocol::loom_websocket) return "ws" + base;
  switch (options.endpoint) {
    case Endpoint::completions: return "http" + base + "/v1/completions";
    case Endpoint::chat: return "http" + base + "/v1/chat/completions";
    case Endpoint::both: return "http" + base + "/v1/{completions,chat/completions}";
  }
  return "http" + base;
}

// Runs `task` on `io` to its end; rethrows what it threw.
template <class T>
T run_to_end(asio::io_context& io, asio::awaitable<T> task) {
  std::optional<T> result;
  std::exception_ptr failure;
  asio::co_spawn(io, std::move(task), [&](std::exception_ptr error, T value) {
    failure = error;
    if (!error) result = std::move(value);
  });
  io.restart();
  io.run();
  if (failure) std::rethrow_exception(failure);
  return std::move(*result);
}

// The streams, the progress line and Ctrl-C on the io_context until every stream is done; returns the wall
// time in seconds. The first Ctrl-C (or SIGTERM) stops new requests and lets those in flight finish (each
// within --timeout), so the report covers what was measured; a second one exits at once.
double run_load(asio::io_context& io, const StreamContext& context, const RequestPlan& plan, bool& interrupted) {
  const Options& options = context.options;
  Dispatcher dispatcher(options);
  const bool terminal = ::isatty(STDERR_FILENO) != 0;
  const bool show_progress = options.progress == Progress::on || (options.progress == Progress::automatic && terminal);
  ProgressLine progress(context.results, terminal);
  asio::steady_timer progress_timer(io);
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const error_code& ec, int) {
    if (ec) return;
    interrupted = true;
    dispatcher.stop();
    std::fputs("\nloom-loadgen: interrupted: finishing the requests in flight (again to quit at once)\n", stderr);
    signals.async_wait([](const error_code& again, int) {
      if (!again) std::_Exit(kExitInterrupted);
    });
  });

  const auto start = Clock::now();
  dispatcher.start();
  int running = options.concurrency;
  std::exception_ptr failure;
  for (int i = 0; i < options.concurrency; ++i) {
    std::shared_ptr<StreamClient> client = make_stream_client(io.get_executor(), context);
    asio::co_spawn(io, run_stream(client, dispatcher, plan, context.results, options.duration_s.has_value()),
                   [&](std::exception_ptr error) {
                     if (error && !failure) failure = error;
                     if (--running > 0) return;
                     progress_timer.cancel();
                     signals.cancel();
                   });
  }
  if (show_progress) asio::co_spawn(io, print_progress(progress, start, progress_timer), asio::detached);
  io.restart();
  io.run();
  if (show_progress) progress.finish();
  if (failure) std::rethrow_exception(failure);
  return milliseconds_between(start, Clock::now()) / 1000;
}

// One line on stderr: how many requests failed, by kind, with an example of each.
void explain_failures(const Options& options, const RunResults& results) {
  std::fprintf(stderr, "loom-loadgen: %llu of %llu requests failed",
               static_cast<unsigned long long>(results.failed()), static_cast<unsigned long long>(results.finished()));
  for (int kind = 0; kind < kErrorKinds; ++kind) {
    const auto error_kind = static_cast<ErrorKind>(kind);
    if (results.errors(error_kind) == 0) continue;
    std::fprintf(stderr, "; %s %llu, e.g. %s", std::string(to_string(error_kind)).c_str(),
                 static_cast<unsigned long long>(results.errors(error_kind)), results.example(error_kind).c_str());
  }
  std::fputc('\n', stderr);
  if (results.completed() == 0 && results.errors(ErrorKind::connect) == results.failed()) {
    std::fprintf(stderr, "loom-loadgen: no request reached the server at %s (is it running?)\n",
                 host_header(options.target).c_str());
  }
}

int run(const Options& options) {
  asio::io_context io;
  asio::ip::tcp::resolver resolver(io);
  error_code ec;
  const auto endpoints = resolver.resolve(options.target.host, std::to_string(options.target.port), ec);
  if (ec) {
    std::fprintf(stderr, "loom-loadgen: cannot resolve %s: %s\n", options.target.host.c_str(), ec.message().c_str());
    return kExitFailed;
  }
  RunResults results;
  const StreamContext context{options, endpoints, results};

  PromptScales scales;
  if (options.calibrate) {
    scales = run_to_end(io, calibrate(make_stream_client(io.get_executor(), context), options));
  }
  results = RunResults{};  // the probes' streamed tokens were counted: start afresh

  const RequestPlan plan(options, scales);
  bool interrupted = false;
  const double seconds = run_load(io, context, plan, interrupted);
  const RunInfo info{options, seconds, scales, endpoint_text(options)};
  if (options.json) {
    std::printf("%s\n", json_report(info, results).dump(2).c_str());
  } else {
    std::fputs(text_report(info, results).c_str(), stdout);
  }
  std::fflush(stdout);
  const bool all_completed = results.failed() == 0 && results.completed() > 0;
  if (!all_completed) explain_failures(options, results);
  if (interrupted) return kExitInterrupted;
  return all_completed ? kExitCompleted : kExitFailed;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  try {
    loom::cli::CommandLine args(argc, argv, kFlags);
    if (args.flag("help")) {
      std::fputs(kUsage, stdout);
      return kExitCompleted;
    }
    if (args.flag("version")) {
      std::printf("loom-loadgen %s\n", LOOM_VERSION);
      return kExitCompleted;
    }
    options = read_options(args);
  } catch (const loom::cli::UsageError& e) {
    std::fprintf(stderr, "loom-loadgen: %s\nRun 'loom-loadgen --help' for the options.\n", e.what());
    return kExitUsage;
  }
  try {
    return run(options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loom-loadgen: %s\n", e.what());
    return kExitFailed;
  }
}
