// A stream:false request whose client leaves while the answer is computed is cancelled: nothing is
// written to its socket until the end, so only a read kept pending on it notices the close.
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

// The gateway's requests in flight, from /metrics (which takes no place of its own).
int requests_in_flight(unsigned short port) {
  const HttpResult metrics = http_request(port, "GET", "/metrics");
  std::istringstream lines(metrics.body);
  std::string line;
  const std::string name = "loom_gateway_requests_in_flight ";
  while (std::getline(lines, line)) {
    if (line.rfind(name, 0) == 0) return static_cast<int>(std::stod(line.substr(name.size())));
  }
  ADD_FAILURE() << "no " << name << "in /metrics";
  return -1;
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

// synth11M takes milliseconds per token, so the 2000 tokens asked for would keep the request in flight
// for seconds if it ran on after its client left; it must end well before that.
void expect_leaving_client_cancels(const std::string& path, const json& long_request) {
  GatewayConfig config = test_config();
  config.model = shared_file("models/synth11M-f16.gguf");
  config.chat_template = "chatml";
  GatewayUnderTest gateway(config);

  auto connection = std::make_unique<RawHttpConnection>(gateway.port());
  const std::string body = long_request.dump();
  ASSERT_FALSE(connection->send("POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                                "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body));
  ASSERT_TRUE(wait_for_in_flight(gateway.port(), 1, 10s)) << "the long request never started";

  connection.reset();  // the client leaves without reading
  const auto left = std::chrono::steady_clock::now();
  EXPECT_TRUE(wait_for_in_flight(gateway.port(), 0, 5s)) << "the request still runs 5 s after its client left";
  EXPECT_LT(std::chrono::steady_clock::now() - left, 1500ms) << "the request ran on after its client left";
}

TEST(OpenAiDisconnect, AWholeCompletionIsCancelledWhenItsClientLeaves) {
  expect_leaving_client_cancels(
      "/v1/completions", {{"prompt", "Once"}, {"max_tokens", 2000}, {"ignore_eos", true}, {"stream", false}});
}

TEST(OpenAiDisconnect, AWholeChatCompletionIsCancelledWhenItsClientLeaves) {
  expect_leaving_client_cancels(
      "/v1/chat/completions",
      {{"messages", {{{"role", "user"}, {"content", "Once"}}}}, {"max_tokens", 2000}, {"ignore_eos", true}});
}

}  // namespace
}  // namespace loom::net::test
