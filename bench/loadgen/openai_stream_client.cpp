#include "openai_stream_client.hpp"

#include <algorithm>
#include <optional>
#include <string_view>
#include <vector>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "run_results.hpp"
#include "sse_parser.hpp"

namespace loom::loadgen {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using boost::system::error_code;
using nlohmann::json;

constexpr std::size_t kHeaderLimit = 64 * 1024;
constexpr std::uint64_t kBodyLimit = std::uint64_t{1} << 30;  // a stream's whole body; time bounds it first
constexpr std::size_t kErrorBodyLimit = 64 * 1024;           // what is kept of a refusal's body
constexpr std::size_t kQuotedErrorBytes = 300;
constexpr auto kBodyEndAfterDone = std::chrono::seconds(1);

std::string cut(std::string text) {
  if (text.size() > kQuotedErrorBytes) text = text.substr(0, kQuotedErrorBytes) + "...";
  return text;
}

// OpenAI's {"error": {"message": ...}}, or the body's text.
std::string error_text(const std::string& body) {
  const json parsed = json::parse(body, nullptr, false);
  if (parsed.is_object() && parsed.contains("error")) {
    const json& error = parsed["error"];
    if (error.is_object() && error.contains("message") && error["message"].is_string()) {
      return cut(error["message"].get<std::string>());
    }
    if (error.is_string()) return cut(error.get<std::string>());
  }
  return cut(body);
}

// A request's progress through one response.
struct StreamState {
  Clock::time_point start;
  Clock::time_point deadline;
  std::optional<Clock::time_point> last_content;
  bool saw_done = false;
};

class OpenAiStreamClient final : public StreamClient {
 public:
  OpenAiStreamClient(asio::any_io_executor executor, const StreamContext& context)
      : executor_(std::move(executor)), context_(context), options_(context.options) {}

  asio::awaitable<RequestOutcome> run(const RequestSpec& spec) override {
    RequestOutcome outcome;
    outcome.asked_max_tokens = spec.max_tokens;
    StreamState state;
    state.start = Clock::now();
    state.deadline = state.start + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(options_.timeout_s));
    const auto deadline = state.deadline;
    const http::request<http::string_body> request = make_request(spec);
    // A reused connection may have been closed by the server since its last answer: one more try on a
    // fresh one when nothing of the answer came back.
    for (int attempt = 0; attempt < 2; ++attempt) {
      const bool reused = stream_.has_value();
      if (!reused) {
        stream_.emplace(executor_);
        stream_->expires_at(deadline);
        error_code ec;
        co_await stream_->async_connect(context_.endpoints, asio::redirect_error(asio::use_awaitable, ec));
        if (ec) {
          close();
          fail(outcome, ec == beast::error::timeout ? ErrorKind::timeout : ErrorKind::connect,
               "cannot connect to " + host_header(options_.target) + ": " + ec.message());
          break;
        }
      }
      stream_->expires_at(deadline);
      const bool retry = co_await exchange(request, spec, state, outcome);
      if (!retry || !reused) break;
      outcome = RequestOutcome{};
      outcome.asked_max_tokens = spec.max_tokens;
    }
    outcome.e2e_ms = milliseconds_between(state.start, Clock::now());
    if (stream_) stream_->expires_never();
    co_return outcome;
  }

 private:
  http::request<http::string_body> make_request(const RequestSpec& spec) const {
    const std::string target =
        options_.target.path + (spec.chat ? "/v1/chat/completions" : "/v1/completions");
    http::request<http::string_body> request{http::verb::post, target, 11};
    request.set(http::field::host, host_header(options_.target));
    request.set(http::field::user_agent, "loom-loadgen/" LOOM_VERSION);
    request.set(http::field::content_type, "application/json");
    request.set(http::field::accept, "text/event-stream");
    if (!options_.api_key.empty()) request.set(http::field::authorization, "Bearer " + options_.api_key);
    request.keep_alive(true);
    request.body() = openai_request_body(options_, spec);
    request.prepare_payload();
    return request;
  }

  // Sends the request and reads its answer into `outcome`. Returns true when the connection failed
  // before any of the answer arrived (worth one retry on a fresh connection).
  asio::awaitable<bool> exchange(const http::request<http::string_body>& request, const RequestSpec& spec,
                                 StreamState& state, RequestOutcome& outcome) {
    error_code ec;
    co_await http::async_write(*stream_, request, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return failed_early(outcome, ec, "cannot send the request");
    buffer_.clear();
    http::response_parser<http::buffer_body> parser;
    parser.header_limit(kHeaderLimit);
    parser.body_limit(kBodyLimit);
    co_await http::async_read_header(*stream_, buffer_, parser, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return failed_early(outcome, ec, "no answer to the request");
    if (parser.get().result_int() != 200) {
      co_await read_refusal(parser, outcome);
      co_return false;
    }
    const auto type = parser.get()[http::field::content_type];
    if (!type.starts_with("text/event-stream")) {
      fail(outcome, ErrorKind::protocol, "the answer is not an event stream (Content-Type: " + std::string(type) + ")");
      close();
      co_return false;
    }
    co_await read_events(parser, spec, state, outcome);
    co_return false;
  }

  bool failed_early(RequestOutcome& outcome, const error_code& ec, const std::string& what) {
    close();
    if (ec == beast::error::timeout) {
      fail(outcome, ErrorKind::timeout, "the request timed out (--timeout)");
      return false;
    }
    fail(outcome, ErrorKind::protocol, what + ": " + ec.message());
    return ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
           ec == asio::error::broken_pipe;
  }

  // A status other than 200: the error's message from its (bounded) body.
  asio::awaitable<void> read_refusal(http::response_parser<http::buffer_body>& parser, RequestOutcome& outcome) {
    const int status = parser.get().result_int();
    std::string body;
    char chunk[4096];
    error_code ec;
    while (!parser.is_done() && body.size() < kErrorBodyLimit) {
      parser.get().body().data = chunk;
      parser.get().body().size = sizeof chunk;
      co_await http::async_read_some(*stream_, buffer_, parser, asio::redirect_error(asio::use_awaitable, ec));
      if (ec == http::error::need_buffer) ec = {};
      if (ec) break;
      body.append(chunk, sizeof chunk - parser.get().body().size);
    }
    fail(outcome, ErrorKind::http_status, "HTTP " + std::to_string(status) + ": " + error_text(body));
    outcome.http_status = status;
    if (ec || !parser.is_done() || !parser.get().keep_alive()) close();
  }

  asio::awaitable<void> read_events(http::response_parser<http::buffer_body>& parser, const RequestSpec& spec,
                                    StreamState& state, RequestOutcome& outcome) {
    SseParser sse(options_.max_message_bytes);
    std::vector<std::string> events;
    char chunk[16384];
    bool failed = false;
    while (!parser.is_done() && !failed) {
      parser.get().body().data = chunk;
      parser.get().body().size = sizeof chunk;
      error_code ec;
      // read_some hands over what arrived; async_read would wait to fill the chunk, holding tokens back.
      co_await http::async_read_some(*stream_, buffer_, parser, asio::redirect_error(asio::use_awaitable, ec));
      if (ec == http::error::need_buffer) ec = {};
      if (ec) {
        close();
        if (state.saw_done) break;  // the stream was whole: only the connection is lost
        if (ec == beast::error::timeout) {
          fail(outcome, ErrorKind::timeout, "the request timed out (--timeout) while streaming");
        } else {
          fail(outcome, ErrorKind::protocol, "the stream broke off: " + ec.message());
        }
        co_return;
      }
      const std::size_t got = sizeof chunk - parser.get().body().size;
      events.clear();
      if (!sse.feed(std::string_view(chunk, got), events)) {
        fail(outcome, ErrorKind::protocol,
             "an event stream line over the limit of " + std::to_string(options_.max_message_bytes) +
                 " bytes (--max-message-bytes)");
        failed = true;
      }
      for (const auto& data : events) {
        if (!failed) failed = !on_event(data, spec, state, outcome);
      }
      // The body's end follows [DONE] at once; a server that holds it back (a body without a length that
      // stays open) costs the connection, not the request.
      if (state.saw_done && !parser.is_done() && stream_) {
        stream_->expires_at(std::min(state.deadline, Clock::now() + kBodyEndAfterDone));
      }
    }
    if (failed) {
      close();  // the rest of the body is unread
      co_return;
    }
    if (!state.saw_done) {
      fail(outcome, ErrorKind::protocol, "the event stream ended without \"data: [DONE]\"");
    } else {
      outcome.ok = true;
    }
    if (!parser.is_done() || !parser.get().keep_alive()) close();
  }

  // One event's data. Returns false once the request failed (an error event, data that is not JSON).
  bool on_event(const std::string& data, const RequestSpec& spec, StreamState& state, RequestOutcome& outcome) {
    if (state.saw_done) return true;  // nothing is expected after [DONE]; ignore it
    if (data == "[DONE]") {
      state.saw_done = true;
      return true;
    }
    const json chunk = json::parse(data, nullptr, false);
    if (!chunk.is_object()) {
      fail(outcome, ErrorKind::protocol, "an event that is not a JSON object: " + cut(data));
      return false;
    }
    if (chunk.contains("error") && !chunk["error"].is_null()) {
      fail(outcome, ErrorKind::server, "the server reported an error in the stream: " + error_text(data));
      return false;
    }
    if (const auto usage = chunk.find("usage"); usage != chunk.end() && usage->is_object()) {
      const auto count = [&](const char* name) -> std::optional<std::int64_t> {
        const auto it = usage->find(name);
        if (it == usage->end() || !it->is_number_integer()) return std::nullopt;
        return it->get<std::int64_t>();
      };
      outcome.usage_completion_tokens = count("completion_tokens");
      outcome.usage_prompt_tokens = count("prompt_tokens");
    }
    if (content_of(chunk, spec.chat)) on_content(state, outcome);
    return true;
  }

  // Whether the chunk carries generated text: choices[0].text, or choices[0].delta.content on chat.
  static bool content_of(const json& chunk, bool chat) {
    const auto choices = chunk.find("choices");
    if (choices == chunk.end() || !choices->is_array() || choices->empty()) return false;
    const json& choice = (*choices)[0];
    if (!choice.is_object()) return false;
    const json* text = nullptr;
    if (chat) {
      const auto delta = choice.find("delta");
      if (delta != choice.end() && delta->is_object() && delta->contains("content")) text = &(*delta)["content"];
    } else if (choice.contains("text")) {
      text = &choice["text"];
    }
    return text != nullptr && text->is_string() && !text->get_ref<const std::string&>().empty();
  }

  void on_content(StreamState& state, RequestOutcome& outcome) {
    const auto now = Clock::now();
    if (!state.last_content) {
      outcome.ttft_ms = milliseconds_between(state.start, now);
    } else {
      outcome.add_gap(milliseconds_between(*state.last_content, now));
    }
    state.last_content = now;
    ++outcome.content_events;
    context_.results.count_streamed_event();
  }

  static void fail(RequestOutcome& outcome, ErrorKind kind, std::string message) {
    outcome.ok = false;
    outcome.error = kind;
    outcome.error_message = std::move(message);
  }

  void close() {
    if (!stream_) return;
    error_code ignored;
    stream_->socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    stream_->close();
    stream_.reset();
  }

  asio::any_io_executor executor_;
  const StreamContext& context_;
  const Options& options_;
  std::optional<beast::tcp_stream> stream_;  // open while it holds a connection
  beast::flat_buffer buffer_;
};

}  // namespace

std::string openai_request_body(const Options& options, const RequestSpec& spec) {
  json body = json::object();
  if (options.model) body["model"] = *options.model;
  if (spec.chat) {
    body["messages"] = json::array({{{"role", "user"}, {"content", spec.prompt}}});
  } else {
    body["prompt"] = spec.prompt;
  }
  body["max_tokens"] = spec.max_tokens;
  body["temperature"] = options.temperature;
  body["seed"] = options.seed + spec.index;
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  if (options.ignore_eos) body["ignore_eos"] = true;
  return body.dump();
}

std::unique_ptr<StreamClient> make_openai_stream_client(asio::any_io_executor executor, const StreamContext& context) {
  return std::make_unique<OpenAiStreamClient>(std::move(executor), context);
}

}  // namespace loom::loadgen
