// A stream:false request (a completion, a chat completion, embeddings) whose client leaves while the answer is
// computed is cancelled: nothing is written to its socket until the end, so only a read kept pending on it
// notices the close.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "gateway_fixture.hpp"

namespace loom::net::test {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

// One unlabelled sample of the gateway's /metrics (which takes no place of its own).
double metric(unsigned short port, const std::string& sample) {
  const HttpResult metrics = http_request(port, "GET", "/metrics");
  std::istringstream lines(metrics.body);
  std::string line;
  const std::string name = sample + " ";
  while (std::getline(lines, line)) {
    if (line.rfind(name, 0) == 0) return std::stod(line.substr(name.size()));
  }
  ADD_FAILURE() << "no " << name << "in /metrics";
  return -1;
}

int requests_in_flight(unsigned short port) {
  return static_cast<int>(metric(port, "loom_gateway_requests_in_flight"));
}

// Polls (bounded) until `in_flight` requests are in flight; true when it saw it.
bool wait_for_in_flight(unsigned short port, int in_flight, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (requests_in_flight(port) == in_flight) return true;
    std::this_thread::sleep_for(10ms);  // polling an outside view: there is nothing to wait on
  }
  return false;
}

// The request asks for 2000 tokens (ignore_eos) and its client leaves as soon as it is in flight. Had it run
// on, it would end with all 2000 generated; cancelled, it ends after a few steps. The check counts tokens, not
// seconds, so a slow machine (a sanitizer build on a loaded CI box) cannot fail it: what varies with speed is
// only how long the count takes to come.
constexpr int kTokensAsked = 2000;

void expect_leaving_client_cancels(const std::string& path, json long_request) {
  long_request["max_tokens"] = kTokensAsked;
  long_request["ignore_eos"] = true;
  GatewayConfig config = test_config();
  config.model = shared_file("models/synth11M-f16.gguf");
  config.chat_template = "chatml";
  GatewayUnderTest gateway(config);

  auto connection = std::make_unique<RawHttpConnection>(gateway.port());
  const std::string body = long_request.dump();
  ASSERT_FALSE(connection->send("POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                                "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body));
  ASSERT_TRUE(wait_for_in_flight(gateway.port(), 1, 10s)) << "the long request never started";
  const double generated_when_left = metric(gateway.port(), "loom_generated_tokens_total");

  connection.reset();  // the client leaves without reading
  ASSERT_TRUE(wait_for_in_flight(gateway.port(), 0, 120s)) << "the request still runs 120 s after its client left";
  const double generated = metric(gateway.port(), "loom_generated_tokens_total");
  EXPECT_LT(generated, kTokensAsked / 2) << "the request ran on after its client left: " << generated << " of its "
                                         << kTokensAsked << " tokens were generated (" << generated_when_left
                                         << " when it left)";
  EXPECT_EQ(metric(gateway.port(), "loom_engine_active_requests"), 0) << "the engine still holds the request";
}

TEST(OpenAiDisconnect, AWholeCompletionIsCancelledWhenItsClientLeaves) {
  expect_leaving_client_cancels(
      "/v1/completions", {{"prompt", "Once"}, {"stream", false}});
}

TEST(OpenAiDisconnect, AWholeChatCompletionIsCancelledWhenItsClientLeaves) {
  expect_leaving_client_cancels(
      "/v1/chat/completions",
      {{"messages", {{{"role", "user"}, {"content", "Once"}}}}});
}

// An embeddings request whose client leaves is cancelled too: 64 inputs of 1,000 tokens (64,000 positions to
// prefill: seconds of work) end after a few steps, counted as endpoint "embeddings", outcome "cancelled".
TEST(OpenAiDisconnect, AnEmbeddingsRequestIsCancelledWhenItsClientLeaves) {
  GatewayConfig config = test_config();
  config.model = shared_file("models/synth11M-f16.gguf");
  GatewayUnderTest gateway(config);
  constexpr int kInputs = 64, kTokens = 1000;
  json inputs = json::array();
  for (int i = 0; i < kInputs; ++i) inputs.push_back(std::vector<int>(kTokens, 100 + i));
  const std::string body = json{{"input", inputs}}.dump();

  auto connection = std::make_unique<RawHttpConnection>(gateway.port());
  ASSERT_FALSE(connection->send("POST /v1/embeddings HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                                "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body));
  ASSERT_TRUE(wait_for_in_flight(gateway.port(), 1, 10s)) << "the embeddings request never started";
  connection.reset();  // the client leaves without reading
  ASSERT_TRUE(wait_for_in_flight(gateway.port(), 0, 120s)) << "the request still runs 120 s after its client left";
  const double prefilled = metric(gateway.port(), "loom_prefill_tokens_total");
  EXPECT_LT(prefilled, kInputs * kTokens / 2) << "the embeddings ran on after their client left";
  EXPECT_EQ(metric(gateway.port(), R"(loom_gateway_requests_total{endpoint="embeddings",outcome="cancelled"})"), 1);
}

}  // namespace
}  // namespace loom::net::test
