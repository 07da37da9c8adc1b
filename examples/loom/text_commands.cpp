#include "text_commands.hpp"

#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <future>
#include <iterator>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <boost/asio/use_future.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "device_option.hpp"
#include "kv_cache_options.hpp"
#include "loom/actors/runtime/logger.hpp"
#include "loom/compute/cpu/thread_pool.hpp"
#include "loom/compute/model/gguf_file.hpp"
#include "loom/compute/model/model_loader.hpp"
#include "loom/compute/text/chat_format.hpp"
#include "loom/compute/text/chat_template.hpp"
#include "loom/compute/text/tokenizer.hpp"
#include "loom/engine.hpp"

namespace loom::cli {
namespace {

using namespace loom::compute;

// The vocabulary from --tokenizer when given (a GGUF file or a llama2.c tokenizer file), else from the
// model's own GGUF metadata.
Vocabulary load_vocabulary(const std::string& model_path, const std::string& tokenizer_path) {
  if (!tokenizer_path.empty()) {
    if (GgufFile::has_magic(tokenizer_path)) return Vocabulary::from_gguf(GgufFile::open(tokenizer_path));
    if (model_path.empty()) throw UsageError("a llama2.c tokenizer file needs --model too (for the vocabulary size)");
    std::int64_t vocab_size = 0;
    if (GgufFile::has_magic(model_path)) {
      vocab_size = read_model_config(GgufFile::open(model_path)).vocab_size;
    } else {
      vocab_size = Llama2cCheckpoint::open(model_path).config().vocab_size;
    }
    return Vocabulary::from_llama2c_tokenizer(tokenizer_path, static_cast<std::int32_t>(vocab_size));
  }
  if (model_path.empty()) throw UsageError("needs --model PATH");
  if (!GgufFile::has_magic(model_path)) {
    throw UsageError(model_path + " is a llama2.c checkpoint, which holds no vocabulary: pass --tokenizer FILE");
  }
  return Vocabulary::from_gguf(GgufFile::open(model_path));
}

std::vector<std::int32_t> parse_ids(const std::string& text) {
  std::vector<std::int32_t> ids;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, ',')) {
    std::int32_t value = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || ec != std::errc{} || end != item.data() + item.size()) {
      throw UsageError("option --ids expects comma-separated token ids, got '" + item + "'");
    }
    ids.push_back(value);
  }
  return ids;
}

// A file's text, refused past `max_bytes` (the engine's own limit would refuse it anyway, after the load).
std::string read_text_file(const std::string& option, const std::string& path, std::size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError("option --" + option + ": cannot open " + path);
  std::string text;
  char buffer[65536];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    text.append(buffer, static_cast<std::size_t>(in.gcount()));
    if (text.size() > max_bytes) {
      throw UsageError("option --" + option + ": " + path + " is larger than " + std::to_string(max_bytes) + " bytes");
    }
  }
  return text;
}

// --grammar TEXT, --grammar-file FILE (GBNF), --json-schema FILE|JSON (a schema given inline when it
// starts with '{', else a file's path) or --json-object: at most one.
std::optional<proto::OutputConstraint> read_constraint(CommandLine& args) {
  using Kind = proto::OutputConstraint::Kind;
  const std::size_t max_bytes = proto::ParseOptions{}.max_constraint_bytes;
  const std::string grammar = args.text("grammar", "");
  const std::string grammar_file = args.text("grammar-file", "");
  const std::string schema = args.text("json-schema", "");
  const bool json_object = args.flag("json-object");
  if (!grammar.empty() + !grammar_file.empty() + !schema.empty() + json_object > 1) {
    throw UsageError("give at most one of --grammar, --grammar-file, --json-schema and --json-object");
  }
  if (!grammar.empty()) return proto::OutputConstraint{Kind::grammar, grammar};
  if (!grammar_file.empty()) return proto::OutputConstraint{Kind::grammar, read_text_file("grammar-file", grammar_file, max_bytes)};
  if (json_object) return proto::OutputConstraint{Kind::json_object, ""};
  if (schema.empty()) return std::nullopt;
  const std::string text = schema.front() == '{' ? schema : read_text_file("json-schema", schema, max_bytes);
  const auto parsed = nlohmann::ordered_json::parse(text, nullptr, false);  // properties in the file's order
  if (parsed.is_discarded() || !(parsed.is_object() || parsed.is_boolean())) {
    throw UsageError("option --json-schema: " + (schema.front() == '{' ? std::string("the text") : schema) +
                     " is not a JSON Schema (a JSON object or boolean)");
  }
  return proto::OutputConstraint{Kind::json_schema, parsed.dump()};
}

// The engine's refusal of a request, with the option it came from for the fields a user sets by option.
std::string refusal_text(const proto::ErrorEvent& error) {
  if (error.field == "params.grammar") return "the grammar (--grammar/--grammar-file): " + error.message;
  if (error.field == "params.json_schema") return "the schema (--json-schema): " + error.message;
  return error.field.empty() ? error.message : error.field + ": " + error.message;
}

// The sampling and stopping options shared by generate and chat, read straight into the request's
// parameters (the engine validates them like any request's).
proto::SamplingParams read_sampling_params(CommandLine& args, std::int64_t default_max_tokens) {
  proto::SamplingParams p;
  p.max_tokens = static_cast<std::int32_t>(args.integer("max-tokens", default_max_tokens, 1, 1 << 20));
  p.temperature = args.real("temperature", p.temperature, 0.0, proto::SamplingParams::kMaxTemperature);
  p.top_k = static_cast<std::int32_t>(args.integer("top-k", p.top_k, 0, 1 << 24));
  p.top_p = args.real("top-p", p.top_p, 0.0, 1.0);
  if (p.top_p == 0.0) throw UsageError("option --top-p must be in (0, 1], got 0");
  p.min_p = args.real("min-p", p.min_p, 0.0, 1.0);
  p.repetition_penalty = args.real("repeat-penalty", p.repetition_penalty, 0.01, proto::SamplingParams::kMaxRepetitionPenalty);
  p.repetition_last_n = static_cast<std::int32_t>(args.integer("repeat-last-n", p.repetition_last_n, -1, 1 << 20));
  p.frequency_penalty = args.real("frequency-penalty", p.frequency_penalty, -2.0, 2.0);
  p.presence_penalty = args.real("presence-penalty", p.presence_penalty, -2.0, 2.0);
  const auto seed = args.integer("seed", -1, -1, INT64_MAX);
  if (seed >= 0) p.seed = static_cast<std::uint64_t>(seed);  // absent: the engine draws one
  for (auto& stop : args.all("stop")) {
    if (stop.empty()) throw UsageError("option --stop needs a non-empty string");
    p.stop.push_back(std::move(stop));
  }
  p.ignore_eos = args.flag("ignore-eos");
  p.constraint = read_constraint(args);
  return p;
}

// What generate and chat load: the files, the compute threads, the context and the KV storage.
struct EngineOptions {
  std::string model_path;
  std::string tokenizer_path;
  int threads = 0;
  std::int64_t context = 0;  // 0: the model's own
  compute::KvCacheOptions kv;
  DeviceOption device;  // --device and --vulkan-arithmetic
};

// The files must be there and usable before the engine loads: a model without a vocabulary needs
// --tokenizer, and a budget too small for one block is the user's option at fault.
void check_model_files(const std::string& model_path, const std::string& tokenizer_path,
                       const compute::KvCacheOptions& kv) {
  if (model_path.empty()) throw UsageError("needs --model PATH");
  const bool gguf = GgufFile::has_magic(model_path);
  if (tokenizer_path.empty() && !gguf) {
    throw UsageError(model_path + " is not a GGUF file (a llama2.c checkpoint holds no vocabulary): pass --tokenizer FILE");
  }
  check_kv_budget(kv, gguf ? read_model_config(GgufFile::open(model_path))
                           : read_model_config(Llama2cCheckpoint::open(model_path)));
}

Engine::Config engine_config(const EngineOptions& options) {
  spdlog::set_level(spdlog::level::warn);  // the engine's and the backends' progress lines are for servers,
  actors::logger().set_level(spdlog::level::warn);  // not this output
  Engine::Config config;
  config.model.model_path = options.model_path;
  config.model.tokenizer_path = options.tokenizer_path;
  config.model.threads = options.threads;
  config.model.kv = options.kv;
  config.model.device = options.device.device;
  config.model.arithmetic = options.device.arithmetic;
  // One stream: one context is all it can use, so no kv_auto (the gateway's memory-sized default for many
  // streams would only commit memory and the time to write it at load).
  config.model.kv_tokens = options.context;
  config.io_threads = 1;
  return config;
}

// How chat renders: a built-in layout by name, a Jinja file, else the model's own template (chatml for a
// model without one, as the gateway does). Fills the engine config; returns what the banner names.
std::string choose_chat_template(Engine::Config& config, const std::string& model_path,
                                 const std::string& template_name, const std::string& template_file) {
  if (!template_name.empty() && !template_file.empty()) {
    throw UsageError("--chat-template and --chat-template-file: give one of them");
  }
  if (!template_name.empty()) {
    if (!find_chat_template(template_name)) {
      std::string names;
      for (const auto t : all_chat_templates()) names += (names.empty() ? "" : ", ") + std::string(name(t));
      throw UsageError("unknown chat template '" + template_name + "' (known: " + names + ")");
    }
    config.chat_template = template_name;
    return "the built-in " + template_name + " template";
  }
  if (!template_file.empty()) {
    config.chat_template_source = read_chat_template_file(template_file);
    config.chat_template_label = template_file;
    return "the template " + template_file;
  }
  config.fallback_chat_template = "chatml";
  if (GgufFile::has_magic(model_path) && GgufFile::open(model_path).find_string("tokenizer.chat_template")) {
    return "the model's chat template";
  }
  return "chatml (the model has no chat template)";
}

bool write_out(std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  return true;
}

// SIGINT while a reply streams cancels the reply; at the chat prompt it only interrupts the read.
std::atomic<bool> g_interrupted{false};
extern "C" void on_interrupt(int) { g_interrupted.store(true); }

// Lines from standard input that a Ctrl-C can interrupt reliably: the interrupt flag is checked between
// short polls, so a signal that lands just before a blocking read cannot leave the reader waiting (as it
// can with a plain read(), which only returns early when the signal interrupts the call itself).
class StdinLines {
 public:
  enum class Result { line, interrupted, end };
  static constexpr std::size_t kMaxLine = 1 << 20;  // a longer line is cut into pieces of this size

  Result next(std::string& line, const std::atomic<bool>& interrupted) {
    for (;;) {
      if (const auto newline = pending_.find('\n'); newline != std::string::npos || pending_.size() >= kMaxLine) {
        const std::size_t length = newline != std::string::npos ? newline : kMaxLine;
        line.assign(pending_, 0, length);
        pending_.erase(0, newline != std::string::npos ? length + 1 : length);
        return Result::line;
      }
      if (interrupted.load()) return Result::interrupted;
      if (at_end_) {
        if (pending_.empty()) return Result::end;
        line = std::move(pending_);
        pending_.clear();
        return Result::line;
      }
      pollfd ready{STDIN_FILENO, POLLIN, 0};
      const int polled = ::poll(&ready, 1, 50);
      if (polled < 0 && errno != EINTR) return Result::end;
      if (polled <= 0) continue;
      char buffer[4096];
      const ssize_t n = ::read(STDIN_FILENO, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        at_end_ = true;
        continue;
      }
      pending_.append(buffer, static_cast<std::size_t>(n));
    }
  }

 private:
  std::string pending_;
  bool at_end_ = false;
};

void install_interrupt_handler() {
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;  // no SA_RESTART: a blocked read returns, so the prompt can be shown again
  sigaction(SIGINT, &action, nullptr);
}

}  // namespace

int run_tokenize(CommandLine& args) {
  const std::string model_path = args.text("model", "");
  const std::string tokenizer_path = args.text("tokenizer", "");
  const auto text = args.all("text");
  const std::string file = args.text("file", "");
  const bool no_bos = args.flag("no-bos");
  const bool special = args.flag("special");
  args.reject_unknown();
  if (text.empty() == file.empty()) throw UsageError("tokenize needs exactly one of --text T or --file F");
  std::string input;
  if (!file.empty()) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw std::runtime_error("cannot open " + file);
    input.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } else {
    input = text.back();
  }
  const Tokenizer tokenizer(load_vocabulary(model_path, tokenizer_path));
  const auto ids = tokenizer.encode(input, {.add_special = !no_bos, .parse_special = special});
  std::string line;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) line += ' ';
    line += std::to_string(ids[i]);
  }
  std::printf("%s\n", line.c_str());
  return 0;
}

int run_detokenize(CommandLine& args) {
  const std::string model_path = args.text("model", "");
  const std::string tokenizer_path = args.text("tokenizer", "");
  const std::string ids_text = args.text("ids", "");
  const bool special = args.flag("special");
  args.reject_unknown();
  if (ids_text.empty()) throw UsageError("detokenize needs --ids ID,ID,...");
  const Tokenizer tokenizer(load_vocabulary(model_path, tokenizer_path));
  const auto ids = parse_ids(ids_text);
  for (const auto id : ids) {
    if (!tokenizer.vocabulary().valid(id)) {
      throw UsageError("token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                       std::to_string(tokenizer.vocabulary().size() - 1) + ")");
    }
  }
  const std::string text = tokenizer.decode(ids, {.render_special = special, .strip_leading_space = true});
  std::printf("%s\n", text.c_str());
  return 0;
}

// A request's last event, and the tokens and text streamed before it.
struct StreamOutcome {
  std::vector<std::int32_t> tokens;
  std::string text;
  std::optional<proto::DoneEvent> done;
  std::optional<proto::ErrorEvent> error;
};

// Sends the request and streams its text to `write` as the engine's token events arrive (on the engine's
// thread); the calling thread waits for the last event, polling the interrupt flag so that a Ctrl-C
// becomes a cancel.
// `write_reasoning`, when given, gets the reasoning a reasoning model's template marks (<think>...).
StreamOutcome stream_request(Engine& engine, const proto::GenerateRequest& request,
                             const std::function<bool(std::string_view)>& write,
                             const std::function<bool(std::string_view)>& write_reasoning = {}) {
  auto outcome = std::make_shared<StreamOutcome>();
  auto finished = std::make_shared<std::promise<void>>();
  auto over = finished->get_future();
  engine.generate(request, [outcome, finished, write, write_reasoning](proto::ServerMessage message) {
    if (auto* token = std::get_if<proto::TokenEvent>(&message)) {
      outcome->tokens.push_back(token->token);
      outcome->text += token->text;
      if (write_reasoning && !token->reasoning.empty()) write_reasoning(token->reasoning);
      if (write) write(token->text);
      return;
    }
    if (auto* done = std::get_if<proto::DoneEvent>(&message)) outcome->done = std::move(*done);
    if (auto* error = std::get_if<proto::ErrorEvent>(&message)) outcome->error = std::move(*error);
    finished->set_value();
  });
  bool cancelled = false;
  while (over.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
    if (g_interrupted.load() && !cancelled) {
      engine.cancel(request.id);
      cancelled = true;
    }
  }
  return std::move(*outcome);
}

// Opens the chat's session (the n-th), with the system prompt when there is one.
std::string open_chat_session(Engine& engine, const std::string& system, std::uint64_t& opened) {
  proto::SessionOpen open;
  open.session_id = "chat-session-" + std::to_string(++opened);
  if (!system.empty()) open.system_prompt = system;
  const proto::ServerMessage answer = engine.async_open_session(open, boost::asio::use_future).get();
  if (const auto* error = std::get_if<proto::ErrorEvent>(&answer)) throw std::runtime_error(error->message);
  return *open.session_id;
}

// Runs through loom::Engine (the same actors the gateway uses), on a thread pool of its own: the prompt
// streams to stdout as the engine's token events arrive; Ctrl-C cancels the request.
int run_generate(CommandLine& args) {
  const std::string model_path = args.text("model", "");
  const std::string tokenizer_path = args.text("tokenizer", "");
  const auto prompt_values = args.all("prompt");
  const bool json = args.flag("json");
  const bool no_echo = args.flag("no-echo");
  const int threads = static_cast<int>(args.integer("threads", physical_core_count(), 1, 1024));
  const auto context = args.integer("context", 0, 0, 1 << 24);
  const compute::KvCacheOptions kv = read_kv_cache_options(args);
  const proto::SamplingParams params = read_sampling_params(args, 256);
  const DeviceOption device = read_device(args);
  args.reject_unknown();
  if (prompt_values.empty()) throw UsageError("generate needs --prompt TEXT");
  check_model_files(model_path, tokenizer_path, kv);
  const std::string& prompt = prompt_values.back();

  Engine engine(engine_config(EngineOptions{model_path, tokenizer_path, threads, context, kv, device}));
  const auto loaded = engine.async_load(boost::asio::use_future).get();
  if (!loaded.loaded()) throw std::runtime_error(loaded.error);

  install_interrupt_handler();
  if (!json && !no_echo) write_out(prompt);
  proto::GenerateRequest request;
  request.id = "loom-generate";
  request.input = prompt;
  request.params = params;
  const StreamOutcome outcome = stream_request(engine, request, json ? nullptr : write_out);
  if (outcome.error) throw std::runtime_error(refusal_text(*outcome.error));
  const proto::DoneEvent& done = *outcome.done;
  if (done.finish_reason == proto::FinishReason::error || done.finish_reason == proto::FinishReason::timeout) {
    if (!json) write_out("\n");
    throw std::runtime_error("generation failed: " + done.error_message.value_or(std::string(to_string(done.finish_reason))));
  }
  const auto& usage = done.usage;
  if (json) {
    nlohmann::json out;
    out["text"] = outcome.text;
    out["tokens"] = outcome.tokens;  // the tokens shown: an ending EOS or stop token is not among them
    out["finish_reason"] = std::string(to_string(done.finish_reason));
    out["usage"] = {{"prompt_tokens", usage.prompt_tokens},
                    {"completion_tokens", usage.completion_tokens},
                    {"cached_tokens", usage.cached_tokens},
                    {"total_tokens", usage.prompt_tokens + usage.completion_tokens}};
    out["timings"] = {{"time_to_first_token_ms", done.timings.first_token_ms},
                      {"queue_ms", done.timings.queue_ms},
                      {"prefill_ms", done.timings.prefill_ms},
                      {"decode_ms", done.timings.decode_ms},
                      {"decode_tokens_per_second", done.timings.tokens_per_second}};
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    write_out("\n");
    std::fprintf(stderr,
                 "loom: prompt %d tokens (%d cached), generated %d tokens, time to first token %.1f ms, %.1f tokens/s, "
                 "finish: %s\n",
                 usage.prompt_tokens, usage.cached_tokens, usage.completion_tokens, done.timings.first_token_ms,
                 done.timings.tokens_per_second, std::string(to_string(done.finish_reason)).c_str());
  }
  return 0;
}

// Runs through loom::Engine like generate: one engine session holds the conversation (its history, the
// chat template, trimming the oldest turns to fit the context); each line is a chat request in it.
int run_chat(CommandLine& args) {
  const std::string model_path = args.text("model", "");
  const std::string tokenizer_path = args.text("tokenizer", "");
  const std::string system = args.text("system", "");
  const std::string template_name = args.text("chat-template", "");
  const std::string template_file = args.text("chat-template-file", "");
  const int threads = static_cast<int>(args.integer("threads", physical_core_count(), 1, 1024));
  const auto context = args.integer("context", 0, 0, 1 << 24);
  const compute::KvCacheOptions kv = read_kv_cache_options(args);
  const proto::SamplingParams params = read_sampling_params(args, 1024);
  const DeviceOption device = read_device(args);
  args.reject_unknown();
  check_model_files(model_path, tokenizer_path, kv);

  EngineOptions options{model_path, tokenizer_path, threads, context, kv, device};
  Engine::Config config = engine_config(options);
  const std::string template_label = choose_chat_template(config, model_path, template_name, template_file);
  Engine engine(config);
  const auto loaded = engine.async_load(boost::asio::use_future).get();
  if (!loaded.loaded()) throw std::runtime_error(loaded.error);

  const bool interactive = ::isatty(STDIN_FILENO) != 0;
  install_interrupt_handler();
  std::fprintf(stderr, "loom chat: %s; Ctrl-C stops a reply, Ctrl-D or /quit leaves, /reset forgets the history\n",
               template_label.c_str());

  std::uint64_t sessions = 0;
  std::string session_id = open_chat_session(engine, system, sessions);
  StdinLines input;
  std::string line;
  for (std::uint64_t turn = 1;; ++turn) {
    // The flag is cleared before the prompt is shown, so a Ctrl-C typed at the prompt is always seen.
    g_interrupted.store(false);
    if (interactive) write_out("> ");
    const auto got = input.next(line, g_interrupted);
    if (got == StdinLines::Result::interrupted) {  // Ctrl-C at the prompt: a fresh prompt, not an exit
      write_out("\n");
      continue;
    }
    if (got == StdinLines::Result::end) break;
    if (line == "/quit" || line == "/exit") break;
    if (line == "/reset") {
      engine.close_session(session_id);
      session_id = open_chat_session(engine, system, sessions);
      continue;
    }
    if (line.empty()) continue;
    proto::GenerateRequest request;
    request.id = "chat-" + std::to_string(turn);
    request.session_id = session_id;
    request.input = std::vector<proto::ChatMessage>{{proto::ChatRole::user, line}};
    request.params = params;
    // At a terminal a reasoning model's thinking shows dimmed before the answer; piped, only the answer.
    bool thinking = false;
    const auto write_thinking = [&thinking](std::string_view text) {
      if (!thinking) write_out("\x1b[2m");
      thinking = true;
      return write_out(text);
    };
    const auto write_answer = [&thinking](std::string_view text) {
      if (thinking && !text.empty()) {
        write_out("\x1b[0m\n");
        thinking = false;
      }
      return write_out(text);
    };
    const StreamOutcome outcome =
        interactive ? stream_request(engine, request, write_answer, write_thinking) : stream_request(engine, request, write_out);
    write_out(thinking ? "\x1b[0m\n" : "\n");
    if (outcome.error) {
      std::fprintf(stderr, "loom: %s\n", refusal_text(*outcome.error).c_str());
      continue;
    }
    const auto reason = outcome.done->finish_reason;
    if (reason == proto::FinishReason::cancelled) std::fprintf(stderr, "loom: reply stopped\n");
    if (reason == proto::FinishReason::length) std::fprintf(stderr, "loom: reply cut at the length limit\n");
    if (reason == proto::FinishReason::error || reason == proto::FinishReason::timeout) {
      std::fprintf(stderr, "loom: the reply failed: %s\n",
                   outcome.done->error_message.value_or(std::string(to_string(reason))).c_str());
    }
  }
  if (interactive) write_out("\n");
  engine.async_shutdown(Engine::ShutdownMode::cancel, boost::asio::use_future).get();
  return 0;
}

}  // namespace loom::cli
