// The WebSocket protocol end to end (GET /v1/ws on a real gateway with aidreams260K): streaming, cancel,
// interleaved requests, sessions, refused messages and their error events, the frame size limit, the
// per-connection limit, what closing a connection does to its requests, a client that stops reading, and
// the close with 1001 on graceful shutdown.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <future>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/websocket.hpp>
#include <nlohmann/json.hpp>

#include "gateway_fixture.hpp"

namespace loom::net::test {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using json = nlohmann::json;
using namespace std::chrono_literals;

json generate_message(const std::string& id, const std::string& prompt, json params) {
  return json{{"type", "generate"}, {"id", id}, {"prompt", prompt}, {"params", std::move(params)}};
}

// Greedy, and long: aidreams260K's context is 128 tokens, so this runs to the end of the context.
json long_params() { return json{{"temperature", 0}, {"max_tokens", 4096}, {"ignore_eos", true}}; }

std::vector<json> tokens_of(const std::vector<json>& frames) {
  std::vector<json> tokens;
  for (const auto& frame : frames) {
    if (frame.value("type", "") == "token") tokens.push_back(frame);
  }
  return tokens;
}

// The count /metrics gives for WebSocket requests with `outcome`: the sample on a line that carries both
// labels (0 when there is none yet).
double websocket_outcome_count(unsigned short port, const std::string& outcome) {
  const HttpResult result = http_request(port, "GET", "/metrics");
  EXPECT_EQ(result.status, 200);
  std::istringstream lines(result.body);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line.find("endpoint=\"websocket\"") == std::string::npos) continue;
    if (line.find("outcome=\"" + outcome + "\"") == std::string::npos) continue;
    return std::stod(line.substr(line.rfind(' ') + 1));
  }
  return 0;
}

// Waits (bounded) until /metrics shows at least `count` WebSocket requests with `outcome`.
bool wait_for_outcome(unsigned short port, const std::string& outcome, double count,
                      std::chrono::milliseconds limit = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (websocket_outcome_count(port, outcome) >= count) return true;
    std::this_thread::sleep_for(20ms);  // polling an outside view: there is no event to wait on
  }
  return false;
}

std::string reference_text_after_prompt() {
  std::ifstream file(shared_file("reference/aidreams260K.llama2c-greedy.txt"));
  std::stringstream text;
  text << file.rdbuf();
  const std::string prompt = "Once upon a time";
  std::string all = text.str();
  EXPECT_EQ(all.rfind(prompt, 0), 0u);
  return all.substr(prompt.size());
}

std::vector<int> reference_greedy_ids() {
  std::ifstream file(shared_file("reference/aidreams260K.once.json"));
  return json::parse(file).at("greedy").get<std::vector<int>>();
}

class WebSocketTest : public ::testing::Test {
 protected:
  GatewayUnderTest gateway_{};
};

// "r7" from 'r' and 7 (appended: GCC 12 warns falsely, -Wrestrict, on "r" + std::to_string(i) here).
std::string request_id(char letter, int i) {
  std::string id(1, letter);
  id += std::to_string(i);
  return id;
}

TEST_F(WebSocketTest, StreamsAGreedyCompletionToItsDone) {
  WsClient client(gateway_.port());
  client.send(generate_message("r1", "Once upon a time", {{"temperature", 0}, {"max_tokens", 24}}));
  const auto frames = client.receive_until_end("r1");
  ASSERT_EQ(frames.back().value("type", ""), "done") << frames.back().dump();
  const auto tokens = tokens_of(frames);
  ASSERT_EQ(tokens.size() + 1, frames.size());
  ASSERT_EQ(tokens.size(), 24u);

  const auto greedy = reference_greedy_ids();
  std::string text;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    EXPECT_EQ(tokens[i].at("index").get<int>(), static_cast<int>(i));
    EXPECT_EQ(tokens[i].at("id"), "r1");
    EXPECT_EQ(tokens[i].at("token").get<int>(), greedy.at(i)) << "token " << i;
    text += tokens[i].at("text").get<std::string>();
  }
  EXPECT_EQ(reference_text_after_prompt().rfind(text, 0), 0u) << "streamed: " << text;

  const json& done = frames.back();
  EXPECT_EQ(done.at("id"), "r1");
  EXPECT_EQ(done.at("finish_reason"), "length");
  EXPECT_EQ(done.at("usage").at("completion_tokens"), 24);
  EXPECT_EQ(done.at("usage").at("prompt_tokens"), 13);  // BOS and the 12 tokens of the prompt
  for (const char* timing : {"queue_ms", "prefill_ms", "decode_ms", "first_token_ms", "tokens_per_second"}) {
    EXPECT_GE(done.at("timings").at(timing).get<double>(), 0.0) << timing;
  }
}

TEST_F(WebSocketTest, CancelEndsTheRequestWithCancelled) {
  WsClient client(gateway_.port());
  client.send(generate_message("long", "Once upon a time", long_params()));
  const json first = client.receive();
  ASSERT_EQ(first.value("type", ""), "token") << first.dump();
  const auto cancelled_at = std::chrono::steady_clock::now();
  client.send(json{{"type", "cancel"}, {"id", "long"}});
  const auto frames = client.receive_until_end("long", 5s);
  EXPECT_LT(std::chrono::steady_clock::now() - cancelled_at, 2s);
  const json& done = frames.back();
  ASSERT_EQ(done.value("type", ""), "done") << done.dump();
  // The model is fast: the request may have reached the end of the context before the cancel arrived.
  EXPECT_TRUE(done.at("finish_reason") == "cancelled" || done.at("finish_reason") == "length") << done.dump();
  // A cancel of an unknown or finished id is no error and gets no answer: the next frame is this request's.
  client.send(json{{"type", "cancel"}, {"id", "long"}});
  client.send(json{{"type", "cancel"}, {"id", "never-sent"}});
  client.send(generate_message("after", "Once", {{"temperature", 0}, {"max_tokens", 2}}));
  const auto after = client.receive_until_end("after");
  EXPECT_EQ(after.front().at("id"), "after");
  EXPECT_EQ(after.back().value("type", ""), "done");
}

TEST_F(WebSocketTest, TwoInterleavedRequestsBothComplete) {
  WsClient client(gateway_.port());
  client.send(generate_message("a", "Once upon a time", {{"temperature", 0}, {"max_tokens", 20}}));
  client.send(generate_message("b", "The quick brown fox", {{"temperature", 0}, {"max_tokens", 12}}));
  const auto a = client.receive_until_end("a");
  const auto b = client.receive_until_end("b");
  for (const auto* frames : {&a, &b}) {
    ASSERT_EQ(frames->back().value("type", ""), "done") << frames->back().dump();
    const auto tokens = tokens_of(*frames);
    for (std::size_t i = 0; i < tokens.size(); ++i) EXPECT_EQ(tokens[i].at("index"), static_cast<int>(i));
  }
  EXPECT_EQ(tokens_of(a).size(), 20u);
  EXPECT_EQ(tokens_of(b).size(), 12u);
  // The same greedy prompt alone gives the same tokens: the interleaving did not mix the requests.
  const auto greedy = reference_greedy_ids();
  const auto a_tokens = tokens_of(a);
  for (std::size_t i = 0; i < a_tokens.size(); ++i) EXPECT_EQ(a_tokens[i].at("token"), greedy.at(i));
}

TEST_F(WebSocketTest, ASessionKeepsTheConversation) {
  WsClient client(gateway_.port());
  client.send(json{{"type", "session.open"}, {"session_id", "chat"}});
  EXPECT_EQ(client.receive(), (json{{"type", "session.opened"}, {"session_id", "chat"}}));
  // Without an id the server picks one.
  client.send(json{{"type", "session.open"}});
  const json picked = client.receive();
  ASSERT_EQ(picked.value("type", ""), "session.opened") << picked.dump();
  EXPECT_FALSE(picked.at("session_id").get<std::string>().empty());
  EXPECT_EQ(picked.at("session_id").get<std::string>().find(':'), std::string::npos) << "no connection prefix";
  // The same id twice is a conflict.
  client.send(json{{"type", "session.open"}, {"session_id", "chat"}});
  const json again = client.receive();
  EXPECT_EQ(again.value("code", ""), "conflict") << again.dump();

  auto turn = [&](const std::string& id, const std::string& prompt) {
    json message = generate_message(id, prompt, {{"temperature", 0}, {"max_tokens", 8}});
    message["session_id"] = "chat";
    client.send(message);
    const auto frames = client.receive_until_end(id);
    EXPECT_EQ(frames.back().value("type", ""), "done") << frames.back().dump();
    return frames.back();
  };
  const json first = turn("t1", "Once upon a time");
  const json second = turn("t2", " and then");
  const int first_prompt = first.at("usage").at("prompt_tokens");
  const int second_prompt = second.at("usage").at("prompt_tokens");
  // The second turn's prompt holds the first turn (prompt and reply) before its own few tokens.
  EXPECT_GT(second_prompt, first_prompt + first.at("usage").at("completion_tokens").get<int>() - 1)
      << first.dump() << "\n" << second.dump();

  // A session of another connection (or none at all) is not found.
  WsClient other(gateway_.port());
  json foreign = generate_message("x", "Hi", {{"max_tokens", 2}});
  foreign["session_id"] = "chat";
  other.send(foreign);
  const json refused = other.receive();
  EXPECT_EQ(refused.value("type", ""), "error");
  EXPECT_EQ(refused.value("code", ""), "not_found");
  EXPECT_EQ(refused.value("id", ""), "x");
}

// The short form: `"session":"s1"` on generate opens s1 the first time (no session.open, no
// session.opened) and continues it afterwards; the done event carries the reason under both names.
TEST_F(WebSocketTest, ASessionNamedOnGenerateIsOpenedOnFirstUse) {
  WsClient client(gateway_.port());
  auto turn = [&](const std::string& id, const std::string& prompt) {
    json message = generate_message(id, prompt, {{"temperature", 0}, {"max_tokens", 8}});
    message["session"] = "s1";
    client.send(message);
    const auto frames = client.receive_until_end(id);
    for (const json& frame : frames) EXPECT_NE(frame.value("type", ""), "session.opened") << frame.dump();
    EXPECT_EQ(frames.back().value("type", ""), "done") << frames.back().dump();
    return frames.back();
  };
  const json first = turn("t1", "Once upon a time");
  EXPECT_EQ(first.value("reason", ""), first.value("finish_reason", "-")) << first.dump();
  const json second = turn("t2", " and then");
  const int first_prompt = first.at("usage").at("prompt_tokens");
  EXPECT_GT(second.at("usage").at("prompt_tokens").get<int>(),
            first_prompt + first.at("usage").at("completion_tokens").get<int>() - 1)
      << "the second turn continues the first: " << first.dump() << "\n" << second.dump();
  // The session it opened is this connection's like any other: session.open of the same id conflicts.
  client.send(json{{"type", "session.open"}, {"session_id", "s1"}});
  EXPECT_EQ(client.receive().value("code", ""), "conflict");
  // Both names at once is refused, naming the field.
  json both = generate_message("t3", "x", {{"max_tokens", 1}});
  both["session"] = "s1";
  both["session_id"] = "s1";
  client.send(both);
  const json refused = client.receive();
  EXPECT_EQ(refused.value("code", ""), "invalid_request") << refused.dump();
  EXPECT_EQ(refused.value("field", ""), "session") << refused.dump();
}

TEST_F(WebSocketTest, MalformedJsonIsAnsweredAndTheConnectionStaysOpen) {
  WsClient client(gateway_.port());
  client.send(std::string(R"({"type":"cancel","id":"r5")"));
  const json error = client.receive();
  EXPECT_EQ(error.value("type", ""), "error");
  EXPECT_EQ(error.value("id", "missing"), "");
  EXPECT_EQ(error.value("code", ""), "invalid_request");
  EXPECT_FALSE(error.contains("field"));
  EXPECT_NE(error.value("message", "").find("invalid JSON"), std::string::npos) << error.dump();

  // A binary frame is refused the same way.
  client.stream().binary(true);
  client.send(std::string("\x01\x02"));
  client.stream().text(true);
  const json binary = client.receive();
  EXPECT_EQ(binary.value("code", ""), "invalid_request") << binary.dump();

  client.send(generate_message("ok", "Once", {{"temperature", 0}, {"max_tokens", 3}}));
  const auto frames = client.receive_until_end("ok");
  EXPECT_EQ(frames.back().value("type", ""), "done");
  EXPECT_EQ(tokens_of(frames).size(), 3u);
}

TEST_F(WebSocketTest, AnInvalidFieldIsNamed) {
  WsClient client(gateway_.port());
  client.send(generate_message("r3", "Hi", {{"top_p", 1.5}}));
  const json error = client.receive();
  EXPECT_EQ(error.value("type", ""), "error");
  EXPECT_EQ(error.value("id", ""), "r3");
  EXPECT_EQ(error.value("code", ""), "invalid_request");
  EXPECT_EQ(error.value("field", ""), "params.top_p");
  client.send(generate_message("r4", "Hi", {{"temprature", 0}}));
  const json unknown = client.receive();
  EXPECT_EQ(unknown.value("field", ""), "params.temprature") << unknown.dump();
}

TEST_F(WebSocketTest, DuplicateInFlightIdIsAConflict) {
  WsClient client(gateway_.port());
  // Both frames go out before the first token can come back; the second reaches the gateway while the
  // first request runs (it runs to the end of the context).
  client.send(generate_message("dup", "Once upon a time", long_params()));
  client.send(generate_message("dup", "Once upon a time", long_params()));
  const auto frames = client.receive_until_end("dup");
  ASSERT_EQ(frames.back().value("type", ""), "error") << frames.back().dump();
  EXPECT_EQ(frames.back().value("code", ""), "conflict");
  EXPECT_EQ(frames.back().value("field", ""), "id");
  // The first request is unaffected and ends normally.
  const auto rest = client.receive_until_end("dup");
  EXPECT_EQ(rest.back().value("type", ""), "done") << rest.back().dump();
  EXPECT_EQ(rest.back().value("finish_reason", ""), "length");
}

TEST(WebSocketLimits, OversizeFrameClosesWith1009) {
  GatewayConfig config = test_config();
  config.max_frame_bytes = 1024;
  GatewayUnderTest gateway(config);
  WsClient client(gateway.port());
  client.send(generate_message("big", std::string(2000, 'a'), json::object()));
  EXPECT_EQ(client.wait_close(), 1009);
}

TEST(WebSocketLimits, PerConnectionLimitIsOverloaded) {
  GatewayConfig config = test_config();
  config.max_requests_per_connection = 2;
  GatewayUnderTest gateway(config);
  WsClient client(gateway.port());
  client.send(generate_message("one", "Once upon a time", long_params()));
  client.send(generate_message("two", "Once upon a time", long_params()));
  client.send(generate_message("three", "Once upon a time", long_params()));
  const auto third = client.receive_until_end("three");
  ASSERT_EQ(third.size(), 1u);
  EXPECT_EQ(third.back().value("type", ""), "error");
  EXPECT_EQ(third.back().value("code", ""), "overloaded") << third.back().dump();
  // The message names the limit as the configuration and the hello do.
  EXPECT_NE(third.back().value("message", "").find("max_requests_per_connection"), std::string::npos);
  EXPECT_EQ(client.receive_until_end("one").back().value("type", ""), "done");
  EXPECT_EQ(client.receive_until_end("two").back().value("type", ""), "done");
  // Their places are free again.
  client.send(generate_message("four", "Once", {{"max_tokens", 2}}));
  EXPECT_EQ(client.receive_until_end("four").back().value("type", ""), "done");
}

TEST(WebSocketLimits, TheGatewayBudgetIsOverloaded) {
  GatewayConfig config = test_config();
  config.max_requests_total = 1;
  GatewayUnderTest gateway(config);
  WsClient first(gateway.port());
  WsClient second(gateway.port());
  first.send(generate_message("hold", "Once upon a time", long_params()));
  ASSERT_EQ(first.receive().value("type", ""), "token");  // accepted: it holds the only place
  second.send(generate_message("refused", "Once", {{"max_tokens", 2}}));
  const json refused = second.receive();
  EXPECT_EQ(refused.value("code", ""), "overloaded") << refused.dump();
  EXPECT_NE(refused.value("message", "").find("max_requests_total"), std::string::npos) << refused.dump();
  EXPECT_EQ(first.receive_until_end("hold").back().value("type", ""), "done");
}

// One connection cannot take every engine session: past max_sessions_per_connection its session.open
// (and the implicit open of a generate's `session`) is overloaded; another connection still opens one.
TEST(WebSocketLimits, PerConnectionSessionLimitIsOverloaded) {
  GatewayConfig config = test_config();
  config.max_sessions_per_connection = 2;
  GatewayUnderTest gateway(config);
  WsClient client(gateway.port());
  for (const std::string id : {"a", "b"}) {
    client.send(json{{"type", "session.open"}, {"session_id", id}});
    EXPECT_EQ(client.receive().value("type", ""), "session.opened");
  }
  client.send(json{{"type", "session.open"}, {"session_id", "c"}});
  const json refused = client.receive();
  EXPECT_EQ(refused.value("type", ""), "error") << refused.dump();
  EXPECT_EQ(refused.value("code", ""), "overloaded") << refused.dump();
  EXPECT_EQ(refused.value("field", ""), "session_id") << refused.dump();
  EXPECT_EQ(refused.value("session_id", ""), "c") << refused.dump();
  EXPECT_NE(refused.value("message", "").find("max_sessions_per_connection"), std::string::npos) << refused.dump();
  json implicit = generate_message("r1", "Once", {{"max_tokens", 1}});
  implicit["session"] = "d";
  client.send(implicit);
  const auto frames = client.receive_until_end("r1");
  EXPECT_EQ(frames.back().value("code", ""), "overloaded") << frames.back().dump();
  // The open ones still work, and the limit is per connection.
  client.send(json{{"type", "generate"}, {"id", "r2"}, {"session_id", "a"}, {"prompt", "Once"},
                   {"params", {{"max_tokens", 1}}}});
  EXPECT_EQ(client.receive_until_end("r2").back().value("type", ""), "done");
  WsClient other(gateway.port());
  other.send(json{{"type", "session.open"}, {"session_id", "c"}});
  EXPECT_EQ(other.receive().value("type", ""), "session.opened");
}

// RFC 6455 section 7.4: a close code outside 1000-1003, 1007-1014 and 3000-4999 is a protocol error,
// answered with 1002, not echoed; a valid one is echoed.
int close_reply_code(unsigned short port, std::uint16_t code) {
  WsClient client(port);
  client.stream().close(websocket::close_reason(code));
  return static_cast<int>(client.stream().reason().code);
}

TEST_F(WebSocketTest, AnInvalidCloseCodeIsAnsweredWith1002) {
  EXPECT_EQ(close_reply_code(gateway_.port(), 5000), 1002);
  EXPECT_EQ(close_reply_code(gateway_.port(), 65535), 1002);
  EXPECT_EQ(close_reply_code(gateway_.port(), 1004), 1002);  // Beast's own check
  EXPECT_EQ(close_reply_code(gateway_.port(), 1000), 1000);
  EXPECT_EQ(close_reply_code(gateway_.port(), 4000), 4000);
}

TEST_F(WebSocketTest, ClosingTheConnectionCancelsItsRequests) {
  const double cancelled_before = websocket_outcome_count(gateway_.port(), "cancelled");
  {
    WsClient client(gateway_.port());
    // Several long requests, so that some are still running or waiting when the connection goes.
    for (int i = 0; i < 8; ++i) client.send(generate_message(request_id('r', i), "Once upon a time", long_params()));
    ASSERT_EQ(client.receive().value("type", ""), "token");
    client.stream().close(websocket::close_code::normal);
  }
  // Every request of the closed connection ends, the unfinished ones as cancelled; the budget is free.
  EXPECT_TRUE(wait_for_outcome(gateway_.port(), "cancelled", cancelled_before + 1))
      << "no WebSocket request ended as cancelled after its connection closed";
}

TEST(WebSocketSlowClient, AClientThatStopsReadingHasItsRequestsCancelled) {
  GatewayConfig config = test_config();
  config.ws_send_queue_bytes = 4096;
  GatewayUnderTest gateway(config);

  // A client with a small receive window, so that what it does not read piles up at the gateway soon.
  asio::io_context io;
  websocket::stream<beast::tcp_stream> ws(io);
  auto& socket = beast::get_lowest_layer(ws).socket();
  socket.open(asio::ip::tcp::v4());
  socket.set_option(asio::socket_base::receive_buffer_size(2048));
  socket.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), gateway.port()));
  ws.handshake("127.0.0.1:" + std::to_string(gateway.port()), "/v1/ws");
  ws.text(true);
  constexpr int kRequests = 16;
  for (int i = 0; i < kRequests; ++i) {
    const std::string frame =
        generate_message(request_id('s', i), "Once upon a time", long_params()).dump();
    ws.write(asio::buffer(frame));
  }
  // Not reading: every request would stream ~115 tokens, far more than the socket and the queue hold.
  // Waiting for the outcome, without reading, through another connection.
  EXPECT_TRUE(wait_for_outcome(gateway.port(), "cancelled", 1))
      << "no request of the stalled connection was cancelled";

  // Reading now: every request ends with its done; some as cancelled, with fewer tokens than the others.
  int cancelled = 0;
  int done = 0;
  while (done < kRequests) {
    beast::flat_buffer buffer;
    ws.read(buffer);
    const json frame = json::parse(beast::buffers_to_string(buffer.data()));
    if (frame.value("type", "") != "done") continue;
    ++done;
    if (frame.value("finish_reason", "") == "cancelled") ++cancelled;
  }
  EXPECT_GE(cancelled, 1);
}

TEST(WebSocketShutdown, GracefulShutdownClosesWith1001) {
  GatewayUnderTest gateway;
  WsClient client(gateway.port());
  // The connection is known to be up and served before the shutdown starts.
  client.send(generate_message("r", "Once", {{"temperature", 0}, {"max_tokens", 2}}));
  ASSERT_EQ(client.receive_until_end("r").back().value("type", ""), "done");
  auto shutdown = std::async(std::launch::async, [&gateway] { return gateway.shutdown(10s); });
  EXPECT_EQ(client.wait_close(10s), 1001);
  EXPECT_TRUE(shutdown.get());
}

}  // namespace
}  // namespace loom::net::test
