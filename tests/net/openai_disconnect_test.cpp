// A stream:false request whose client leaves while the answer is computed is cancelled: nothing is
// written to its socket until the end, so only a read kept pending on it notices the close.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "gateway_fixture.hpp"

namespace loom::net::test {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

// Polls (bounded) until a small completion gets `status`; returns the last status seen.
int poll_small_completion(unsigned short port, int status, std::chrono::milliseconds limit) {
  const json small = {{"prompt", "Once"}, {"max_tokens", 1}};
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int last = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    last = http_request(port, "POST", "/v1/completions", small.dump()).status;
    if (last == status) break;
    std::this_thread::sleep_for(10ms);  // polling an outside view: there is nothing to wait on
  }
  return last;
}

// A gateway with room for one request. synth11M takes milliseconds per token, so the 2000 tokens asked
// for would hold the place for seconds if the request ran on after its client left; it must come back
// well before that.
void expect_leaving_client_gives_its_place_back(const std::string& path, const json& long_request) {
  GatewayConfig config = test_config();
  config.model = shared_file("models/synth11M-f16.gguf");
  config.chat_template = "chatml";
  config.max_requests_total = 1;
  GatewayUnderTest gateway(config);

  auto connection = std::make_unique<RawHttpConnection>(gateway.port());
  const std::string body = long_request.dump();
  ASSERT_FALSE(connection->send("POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                                "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body));
  // The long request holds the only place once others are refused.
  ASSERT_EQ(poll_small_completion(gateway.port(), 503, 10s), 503) << "the long request never took the place";

  connection.reset();  // the client leaves without reading
  const auto left = std::chrono::steady_clock::now();
  EXPECT_EQ(poll_small_completion(gateway.port(), 200, 3s), 200) << "the place did not come back within 3 s";
  EXPECT_LT(std::chrono::steady_clock::now() - left, 1500ms) << "the request ran on after its client left";
}

TEST(OpenAiDisconnect, AWholeCompletionIsCancelledWhenItsClientLeaves) {
  expect_leaving_client_gives_its_place_back(
      "/v1/completions", {{"prompt", "Once"}, {"max_tokens", 2000}, {"ignore_eos", true}, {"stream", false}});
}

TEST(OpenAiDisconnect, AWholeChatCompletionIsCancelledWhenItsClientLeaves) {
  expect_leaving_client_gives_its_place_back(
      "/v1/chat/completions",
      {{"messages", {{{"role", "user"}, {"content", "Once"}}}}, {"max_tokens", 2000}, {"ignore_eos", true}});
}

}  // namespace
}  // namespace loom::net::test
