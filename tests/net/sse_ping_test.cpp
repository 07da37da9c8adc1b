// SSE keep-alive through a real socket: a streamed request whose long prompt prefills for far longer than
// sse_ping_interval gets ": ping" comment lines before its first data line, and its data is what the
// same request answers whole (the pings add nothing else); a chat stream still opens with the role. With
// the interval at 0 no ping is written.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway_fixture.hpp"
#include "loom/net/gateway_config.hpp"

namespace loom::net::test {
namespace {

using json = nlohmann::json;

// synth11M prefills this prompt (about 1500 byte tokens) in a good fraction of a second on one thread:
// dozens of 10 ms intervals.
std::string long_prompt() {
  std::string prompt;
  for (int i = 0; i < 300; ++i) prompt += "tick ";
  return prompt;
}

GatewayConfig ping_config(std::chrono::milliseconds interval) {
  GatewayConfig config = test_config();
  config.model = shared_file("models/synth11M-q8_0.gguf");  // aidreams260K's context of 128 is too short
  config.sse_ping_interval = interval;
  return config;
}

std::vector<std::string> lines_of(const std::string& body) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < body.size()) {
    const auto end = body.find('\n', start);
    lines.push_back(body.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return lines;
}

std::string streamed_text(const std::string& body) {
  std::string text;
  for (const auto& payload : sse_data(body)) {
    if (payload == "[DONE]") continue;
    const auto chunk = json::parse(payload);
    if (!chunk["choices"].empty()) text += chunk["choices"][0].value("text", "");
  }
  return text;
}

TEST(GatewaySsePing, AWaitingStreamGetsPingCommentsBeforeItsFirstDataAndIsOtherwiseUnchanged) {
  GatewayUnderTest gateway(ping_config(std::chrono::milliseconds(10)));
  // Streamed first: its prompt is in no cache yet, so all of it prefills.
  json request = {{"prompt", long_prompt()}, {"max_tokens", 3}, {"temperature", 0}, {"stream", true}};
  const auto streamed = http_request(gateway.port(), "POST", "/v1/completions", request.dump());
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  int pings_before_data = 0;
  bool data_seen = false;
  for (const auto& line : lines_of(streamed.body)) {
    if (line == ": ping") {
      if (!data_seen) ++pings_before_data;
    } else if (line.rfind("data: ", 0) == 0) {
      data_seen = true;
    } else {
      EXPECT_TRUE(line.empty()) << "unexpected line: " << line;
    }
  }
  EXPECT_GE(pings_before_data, 1) << streamed.body;
  ASSERT_TRUE(data_seen);
  EXPECT_EQ(sse_data(streamed.body).back(), "[DONE]");

  // The same request whole: the same text (greedy), so the pings changed nothing else.
  request.erase("stream");
  const auto whole = http_request(gateway.port(), "POST", "/v1/completions", request.dump());
  ASSERT_EQ(whole.status, 200) << whole.body;
  EXPECT_EQ(streamed_text(streamed.body), whole.json()["choices"][0]["text"].get<std::string>());
}

// Chat: the pings come before the chunk that names the role, which is still the first data.
TEST(GatewaySsePing, AChatStreamStillOpensWithTheRoleAfterItsPings) {
  GatewayUnderTest gateway(ping_config(std::chrono::milliseconds(10)));
  const json request = {{"messages", {{{"role", "user"}, {"content", long_prompt()}}}},
                        {"max_tokens", 2},
                        {"stream", true}};
  const auto streamed = http_request(gateway.port(), "POST", "/v1/chat/completions", request.dump());
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  const auto first_data = streamed.body.find("data: ");
  ASSERT_NE(first_data, std::string::npos);
  EXPECT_NE(streamed.body.substr(0, first_data).find(": ping\n\n"), std::string::npos) << streamed.body;
  const auto payloads = sse_data(streamed.body);
  ASSERT_GE(payloads.size(), 2u);
  EXPECT_EQ(json::parse(payloads[0])["choices"][0]["delta"].value("role", ""), "assistant") << payloads[0];
  EXPECT_EQ(payloads.back(), "[DONE]");
}

TEST(GatewaySsePing, AnIntervalOfZeroWritesNoPing) {
  GatewayUnderTest gateway(ping_config(std::chrono::milliseconds(0)));
  const json request = {{"prompt", long_prompt()}, {"max_tokens", 2}, {"stream", true}};
  const auto streamed = http_request(gateway.port(), "POST", "/v1/completions", request.dump());
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  EXPECT_EQ(streamed.body.find(": ping"), std::string::npos);
  EXPECT_EQ(sse_data(streamed.body).back(), "[DONE]");
}

}  // namespace
}  // namespace loom::net::test
