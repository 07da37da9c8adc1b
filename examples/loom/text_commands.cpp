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
#include <future>
#include <iterator>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <boost/asio/use_future.hpp>
#include <nlohmann/json.hpp>

#include "kv_cache_options.hpp"
#include "loom/actors/runtime/logger.hpp"
#include "loom/compute/cpu/llama_model.hpp"
#include "loom/compute/cpu/thread_pool.hpp"
#include "loom/compute/generator.hpp"
#include "loom/compute/model/gguf_file.hpp"
#include "loom/compute/model/model_loader.hpp"
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

// The sampling and stopping options shared by generate and chat.
GenerationSettings read_generation_settings(CommandLine& args, std::int64_t default_max_tokens) {
  GenerationSettings s;
  s.max_tokens = static_cast<std::int32_t>(args.integer("max-tokens", default_max_tokens, 1, 1 << 20));
  auto& c = s.sampler;
  c.temperature = static_cast<float>(args.real("temperature", c.temperature, 0.0, 100.0));
  c.top_k = static_cast<std::int32_t>(args.integer("top-k", c.top_k, 0, 1 << 24));
  c.top_p = static_cast<float>(args.real("top-p", c.top_p, 0.0, 1.0));
  if (c.top_p == 0.0f) throw UsageError("option --top-p must be in (0, 1], got 0");
  c.min_p = static_cast<float>(args.real("min-p", c.min_p, 0.0, 1.0));
  c.repetition_penalty = static_cast<float>(args.real("repeat-penalty", c.repetition_penalty, 0.01, 10.0));
  c.penalty_last_n = static_cast<std::int32_t>(args.integer("repeat-last-n", c.penalty_last_n, -1, 1 << 24));
  c.frequency_penalty = static_cast<float>(args.real("frequency-penalty", c.frequency_penalty, -2.0, 2.0));
  c.presence_penalty = static_cast<float>(args.real("presence-penalty", c.presence_penalty, -2.0, 2.0));
  const auto seed = args.integer("seed", -1, -1, INT64_MAX);
  c.seed = seed >= 0 ? static_cast<std::uint64_t>(seed) : std::random_device{}();
  for (auto& stop : args.all("stop")) {
    if (stop.empty()) throw UsageError("option --stop needs a non-empty string");
    s.stop.push_back(std::move(stop));
  }
  s.ignore_eos = args.flag("ignore-eos");
  return s;
}

struct Runtime {
  std::unique_ptr<LoadedModel> loaded;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<LlamaModel> model;
};

Runtime open_runtime(const std::string& model_path, const std::string& tokenizer_path, int threads) {
  if (model_path.empty()) throw UsageError("needs --model PATH");
  Runtime r;
  r.tokenizer = std::make_unique<Tokenizer>(load_vocabulary(model_path, tokenizer_path));
  r.loaded = LoadedModel::open(model_path);
  r.pool = std::make_unique<ThreadPool>(threads);
  r.model = std::make_unique<LlamaModel>(r.loaded->config(), r.loaded->weights(), *r.pool, 512);
  return r;
}

Generator make_generator(Runtime& runtime, std::int64_t context, const compute::KvCacheOptions& kv) {
  check_kv_budget(kv, runtime.model->config());
  return Generator(*runtime.model, *runtime.tokenizer, context, kv);
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

// The request `loom generate` sends to the engine: the prompt as raw text, and the sampling options.
proto::GenerateRequest generate_request(const std::string& prompt, const GenerationSettings& settings) {
  proto::GenerateRequest request;
  request.id = "loom-generate";
  request.input = prompt;
  proto::SamplingParams& p = request.params;
  const SamplerConfig& c = settings.sampler;
  p.temperature = c.temperature;
  p.top_k = c.top_k;
  p.top_p = c.top_p;
  p.min_p = c.min_p;
  p.repetition_penalty = c.repetition_penalty;
  p.repetition_last_n = c.penalty_last_n;
  p.frequency_penalty = c.frequency_penalty;
  p.presence_penalty = c.presence_penalty;
  p.seed = c.seed;
  p.max_tokens = settings.max_tokens;
  p.stop = settings.stop;
  p.stop_token_ids = settings.stop_token_ids;
  p.ignore_eos = settings.ignore_eos;
  return request;
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
  GenerationSettings settings = read_generation_settings(args, 256);
  args.reject_unknown();
  if (prompt_values.empty()) throw UsageError("generate needs --prompt TEXT");
  if (model_path.empty()) throw UsageError("needs --model PATH");
  if (tokenizer_path.empty() && !GgufFile::has_magic(model_path)) {
    throw UsageError(model_path + " is not a GGUF file (a llama2.c checkpoint holds no vocabulary): pass --tokenizer FILE");
  }
  const std::string& prompt = prompt_values.back();
  // A budget too small for one block is the user's option at fault: say so before the engine loads.
  check_kv_budget(kv, GgufFile::has_magic(model_path) ? read_model_config(GgufFile::open(model_path))
                                                      : read_model_config(Llama2cCheckpoint::open(model_path)));

  actors::logger().set_level(spdlog::level::warn);  // the engine's progress lines are for servers, not this output
  Engine::Config config;
  config.model.model_path = model_path;
  config.model.tokenizer_path = tokenizer_path;
  config.model.threads = threads;
  config.model.kv = kv;
  config.model.kv_tokens = context;
  config.io_threads = 1;
  Engine engine(config);
  const auto loaded = engine.async_load(boost::asio::use_future).get();
  if (!loaded.loaded()) throw std::runtime_error(loaded.error);

  // The engine calls back on its own thread; the main thread waits for the last event, polling the
  // interrupt flag so that a Ctrl-C becomes a cancel.
  struct Outcome {
    std::vector<std::int32_t> tokens;
    std::string text;
    std::optional<proto::DoneEvent> done;
    std::optional<proto::ErrorEvent> error;
  };
  auto outcome = std::make_shared<Outcome>();
  std::promise<void> finished;
  auto over = finished.get_future();
  install_interrupt_handler();
  if (!json && !no_echo) write_out(prompt);
  const proto::GenerateRequest request = generate_request(prompt, settings);
  engine.generate(request, [outcome, json, &finished](proto::ServerMessage message) {
    if (auto* token = std::get_if<proto::TokenEvent>(&message)) {
      outcome->tokens.push_back(token->token);
      outcome->text += token->text;
      if (!json) write_out(token->text);
      return;
    }
    if (auto* done = std::get_if<proto::DoneEvent>(&message)) outcome->done = std::move(*done);
    if (auto* error = std::get_if<proto::ErrorEvent>(&message)) outcome->error = std::move(*error);
    finished.set_value();
  });
  bool cancelled = false;
  while (over.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
    if (g_interrupted.load() && !cancelled) {
      engine.cancel(request.id);
      cancelled = true;
    }
  }
  if (outcome->error) throw std::runtime_error(outcome->error->message);
  const proto::DoneEvent& done = *outcome->done;
  if (done.finish_reason == proto::FinishReason::error || done.finish_reason == proto::FinishReason::timeout) {
    if (!json) write_out("\n");
    throw std::runtime_error("generation failed: " + done.error_message.value_or(std::string(to_string(done.finish_reason))));
  }
  const auto& usage = done.usage;
  if (json) {
    nlohmann::json out;
    out["text"] = outcome->text;
    out["tokens"] = outcome->tokens;  // the tokens shown: an ending EOS or stop token is not among them
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

int run_chat(CommandLine& args) {
  const std::string model_path = args.text("model", "");
  const std::string tokenizer_path = args.text("tokenizer", "");
  const std::string system = args.text("system", "");
  const std::string template_name = args.text("chat-template", "");
  const int threads = static_cast<int>(args.integer("threads", physical_core_count(), 1, 1024));
  const auto context = args.integer("context", 0, 0, 1 << 24);
  const compute::KvCacheOptions kv = read_kv_cache_options(args);
  GenerationSettings settings = read_generation_settings(args, 1024);
  args.reject_unknown();

  Runtime runtime = open_runtime(model_path, tokenizer_path, threads);
  std::optional<ChatTemplate> chat_template;
  auto known_names = [] {
    std::string names;
    for (const auto t : all_chat_templates()) names += (names.empty() ? "" : ", ") + std::string(name(t));
    return names;
  };
  if (!template_name.empty()) {
    chat_template = find_chat_template(template_name);
    if (!chat_template) throw UsageError("unknown chat template '" + template_name + "' (known: " + known_names() + ")");
  } else if (const GgufFile* gguf = runtime.loaded->gguf(); gguf != nullptr) {
    if (auto source = gguf->find_string("tokenizer.chat_template")) chat_template = detect_chat_template(*source);
  }
  if (!chat_template) {
    throw UsageError("the model names no chat template that loom recognises; pass --chat-template NAME (one of " +
                     known_names() + ")");
  }
  for (const auto marker : end_of_turn_markers(*chat_template)) settings.stop.emplace_back(marker);

  Generator generator = make_generator(runtime, context, kv);
  std::vector<ChatTurn> history;
  if (!system.empty()) history.push_back({ChatTurnRole::system, system});
  const std::size_t fixed_turns = history.size();
  const bool interactive = ::isatty(STDIN_FILENO) != 0;
  install_interrupt_handler();
  std::fprintf(stderr, "loom chat: %s template; Ctrl-C stops a reply, Ctrl-D or /quit leaves, /reset forgets the history\n",
               std::string(name(*chat_template)).c_str());

  StdinLines input;
  std::string line;
  for (;;) {
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
      history.resize(fixed_turns);
      generator.reset();
      continue;
    }
    if (line.empty()) continue;
    history.push_back({ChatTurnRole::user, line});
    // Forget the oldest exchanges while the conversation does not fit (keeping room for a reply).
    std::vector<std::int32_t> ids;
    for (;;) {
      ids = encode_prompt(*runtime.tokenizer, render_chat(*chat_template, history, true), true);
      if (static_cast<std::int64_t>(ids.size()) + 16 < generator.context_length() || history.size() <= fixed_turns + 1) break;
      history.erase(history.begin() + static_cast<std::ptrdiff_t>(fixed_turns));
    }
    if (static_cast<std::int64_t>(ids.size()) >= generator.context_length()) {
      std::fprintf(stderr, "loom: that message (%zu tokens with the template) does not fit the context of %lld\n",
                   ids.size(), static_cast<long long>(generator.context_length()));
      history.pop_back();
      continue;
    }
    const auto result = generator.generate(ids, settings, write_out, &g_interrupted);
    write_out("\n");
    if (result.finish == FinishReason::cancelled) std::fprintf(stderr, "loom: reply stopped\n");
    if (result.finish == FinishReason::length) std::fprintf(stderr, "loom: reply cut at the length limit\n");
    history.push_back({ChatTurnRole::assistant, result.text});
  }
  if (interactive) write_out("\n");
  return 0;
}

}  // namespace loom::cli
