// embed_asio: loom's engine inside an application's own io_context. The application has other timed work
// (a heartbeat every 100 ms) and streams two generations at once through one loom::Engine running on the
// same io_context: one delivered by callback, one read by a coroutine as a stream. Then it shuts the engine
// down (letting anything still running finish), stops its timer and returns from io_context::run().
//
// The io_context is run by this one thread; the engine's actors share it with the heartbeat, and the
// forward passes run on the engine's own compute thread, so the heartbeat keeps its pace while tokens
// are computed.
//
//   embed_asio MODEL.gguf [--tokenizer FILE] [--max-tokens N] [--threads N]
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <variant>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include "loom/engine.hpp"

namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

constexpr const char* kUsage =
    "usage: embed_asio MODEL.gguf [--tokenizer FILE] [--max-tokens N] [--threads N]\n"
    "  Runs a loom::Engine on the application's own io_context beside a 100 ms heartbeat, streams two\n"
    "  generations at once (one by callback, one by coroutine), then shuts the engine down.\n";

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The example's own small option reader (it builds out of tree against an installed loom, so it carries
// what it needs): `--name value`, `--name=value`, the flag `--help`, positional arguments; the last value
// of a repeated option wins; every error names the option.
class Arguments {
 public:
  Arguments(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
      std::string_view arg = argv[i];
      if (!arg.starts_with("--")) {
        positional_.emplace_back(arg);
        continue;
      }
      arg.remove_prefix(2);
      const auto equals = arg.find('=');
      std::string name(arg.substr(0, equals));
      if (equals != std::string_view::npos) {
        values_[name] = std::string(arg.substr(equals + 1));
      } else if (name == "help") {
        values_[name] = "true";
      } else if (i + 1 < argc) {
        values_[name] = argv[++i];
      } else {
        throw UsageError("option --" + name + " needs a value");
      }
    }
  }

  bool flag(const std::string& name) { return take(name).has_value(); }

  std::string text(const std::string& name, std::string fallback) {
    auto value = take(name);
    return value ? *value : std::move(fallback);
  }

  std::int64_t integer(const std::string& name, std::int64_t fallback, std::int64_t min, std::int64_t max) {
    auto value = take(name);
    if (!value) return fallback;
    std::int64_t parsed = 0;
    const auto [end, ec] = std::from_chars(value->data(), value->data() + value->size(), parsed);
    if (ec != std::errc{} || end != value->data() + value->size()) {
      throw UsageError("option --" + name + " expects an integer, got '" + *value + "'");
    }
    if (parsed < min || parsed > max) {
      throw UsageError("option --" + name + " must be in [" + std::to_string(min) + ", " + std::to_string(max) +
                       "], got " + *value);
    }
    return parsed;
  }

  const std::vector<std::string>& positional() const { return positional_; }

  // Called after reading every known option: anything left over is a mistake worth reporting.
  void reject_unknown() const {
    if (!values_.empty()) throw UsageError("unknown option --" + values_.begin()->first);
  }

 private:
  std::optional<std::string> take(const std::string& name) {
    auto it = values_.find(name);
    if (it == values_.end()) return std::nullopt;
    auto value = std::move(it->second);
    values_.erase(it);
    return value;
  }

  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

struct Options {
  std::string model;
  std::string tokenizer;
  int max_tokens = 32;
  int threads = 2;
};

// The application's own periodic work: it must keep its pace while the engine generates.
class Heartbeat {
 public:
  explicit Heartbeat(asio::io_context& io) : timer_(io) {}
  void start() { arm(); }
  void stop() {
    stopped_ = true;
    timer_.cancel();
  }
  int beats() const { return beats_; }

 private:
  void arm() {
    timer_.expires_after(100ms);
    timer_.async_wait([this](boost::system::error_code ec) {
      if (ec || stopped_) return;
      ++beats_;
      std::printf("[other work] heartbeat %d\n", beats_);
      arm();
    });
  }

  asio::steady_timer timer_;
  bool stopped_ = false;
  int beats_ = 0;
};

loom::proto::GenerateRequest make_request(std::string id, std::string prompt, int max_tokens) {
  loom::proto::GenerateRequest request;
  request.id = std::move(id);
  request.input = std::move(prompt);
  request.params.max_tokens = max_tokens;
  request.params.temperature = 0.0;  // greedy: the same text every run
  return request;
}

std::string describe_end(const loom::proto::ServerMessage& event) {
  if (const auto* done = std::get_if<loom::proto::DoneEvent>(&event)) {
    return "done (" + std::string(loom::proto::to_string(done->finish_reason)) + ", " +
           std::to_string(done->usage.completion_tokens) + " tokens)";
  }
  if (const auto* error = std::get_if<loom::proto::ErrorEvent>(&event)) {
    return "error (" + std::string(loom::proto::to_string(error->code)) + ": " + error->message + ")";
  }
  return "?";
}

// The application's main flow, on its io_context.
asio::awaitable<int> run_app(std::optional<loom::Engine>& engine, Heartbeat& heartbeat, const Options& options) {
  auto executor = co_await asio::this_coro::executor;

  const loom::actors::LoadResult loaded = co_await engine->async_load(asio::use_awaitable);
  if (!loaded.loaded()) {
    std::fprintf(stderr, "embed_asio: %s\n", loaded.error.c_str());
    co_await engine->async_shutdown(loom::Engine::ShutdownMode::cancel, asio::use_awaitable);
    engine.reset();
    heartbeat.stop();
    co_return 1;
  }
  std::printf("[app] model loaded: %lld layers, context %lld\n",
              static_cast<long long>(loaded.info.config.layers), static_cast<long long>(loaded.info.config.context_length));

  // Generation 1, by callback. The handler runs on an engine strand; it only prints, and hands its end to
  // the application's flow by posting to the io_context (where `callback_finished` lives).
  asio::steady_timer callback_finished(executor, asio::steady_timer::time_point::max());
  bool callback_done = false;
  auto request = make_request("by-callback", "Once upon a time", options.max_tokens);
  engine->generate(std::move(request), [&, executor](loom::proto::ServerMessage event) {
    if (const auto* token = std::get_if<loom::proto::TokenEvent>(&event)) {
      std::printf("[callback]  token %2d: \"%s\"\n", token->index, token->text.c_str());
      return;
    }
    std::printf("[callback]  %s\n", describe_end(event).c_str());
    asio::post(executor, [&] {
      callback_done = true;
      callback_finished.cancel();
    });
  });

  // Generation 2, as a stream this coroutine reads while the first one runs.
  auto stream_request = make_request("by-coroutine", "The quick brown fox", options.max_tokens);
  auto stream = engine->generate_stream(std::move(stream_request));
  while (auto event = co_await stream.async_next(asio::use_awaitable)) {
    if (const auto* token = std::get_if<loom::proto::TokenEvent>(&*event)) {
      std::printf("[coroutine] token %2d: \"%s\"\n", token->index, token->text.c_str());
    } else {
      std::printf("[coroutine] %s\n", describe_end(*event).c_str());
    }
  }

  if (!callback_done) {
    boost::system::error_code ignored;  // cancelled is the signal
    co_await callback_finished.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
  }

  const bool shut_down = co_await engine->async_shutdown(loom::Engine::ShutdownMode::drain, asio::use_awaitable);
  std::printf("[app] engine shut down: %s; heartbeats meanwhile: %d\n", shut_down ? "yes" : "no", heartbeat.beats());
  engine.reset();  // its actors stop on this io_context, which keeps running until they have
  heartbeat.stop();
  co_return shut_down ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  try {
    Arguments args(argc, argv);
    if (args.flag("help")) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    options.tokenizer = args.text("tokenizer", "");
    options.max_tokens = static_cast<int>(args.integer("max-tokens", options.max_tokens, 1, 4096));
    options.threads = static_cast<int>(args.integer("threads", options.threads, 1, 1024));
    args.reject_unknown();
    const auto& positional = args.positional();
    if (positional.size() != 1) {
      std::fputs(kUsage, stderr);
      return 2;
    }
    options.model = positional.front();
  } catch (const UsageError& e) {
    std::fprintf(stderr, "embed_asio: %s\n%s", e.what(), kUsage);
    return 2;
  }
  spdlog::set_level(spdlog::level::warn);  // the engine's info logs would drown the example's output

  asio::io_context io;  // the application's; declared first so that it outlives everything on it
  Heartbeat heartbeat(io);
  heartbeat.start();

  loom::Engine::Config config;
  config.model.model_path = options.model;
  config.model.tokenizer_path = options.tokenizer;
  config.model.threads = options.threads;
  std::optional<loom::Engine> engine;
  engine.emplace(io.get_executor(), config);

  int exit_code = 1;
  asio::co_spawn(io, run_app(engine, heartbeat, options), [&](std::exception_ptr failure, int code) {
    if (failure) {
      try {
        std::rethrow_exception(failure);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "embed_asio: %s\n", e.what());
      }
      engine.reset();
      heartbeat.stop();
      return;
    }
    exit_code = code;
  });
  io.run();  // returns once the heartbeat has stopped and the engine's actors are gone
  return exit_code;
}
