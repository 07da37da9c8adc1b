// The issue's done-criterion: the gateway serves a chat with --device vulkan, and says the same as on the CPU
// (greedy, through a real socket). The device option's values: cpu, vulkan, vulkan:N; anything else refused.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "gateway_fixture.hpp"
#include "loom/compute/devices.hpp"

namespace loom::net::test {
namespace {

using nlohmann::json;

std::string greedy_chat_reply(const std::string& device) {
  GatewayConfig config = test_config();
  config.device = device;
  GatewayUnderTest gateway(config);
  const json body = json::parse(R"({"max_tokens": 16, "temperature": 0,
      "messages": [{"role": "user", "content": "Once upon a time"}]})");
  const auto reply = http_request(gateway.port(), "POST", "/v1/chat/completions", body.dump());
  EXPECT_EQ(reply.status, 200) << reply.body;
  const json answer = reply.json();
  EXPECT_EQ(answer["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(answer["usage"]["completion_tokens"], 16);
  return answer["choices"][0]["message"]["content"].get<std::string>();
}

TEST(GatewayDevice, ServesAChatOnVulkanWithTheCpusGreedyReply) {
  if (!compute::has_vulkan_backend()) GTEST_SKIP() << "skipped: " << compute::kNoVulkanBuild;
  if (compute::list_vulkan_devices().empty()) GTEST_SKIP() << "skipped: no Vulkan device on this machine";
  const std::string on_vulkan = greedy_chat_reply("vulkan");
  EXPECT_FALSE(on_vulkan.empty());
  EXPECT_EQ(on_vulkan, greedy_chat_reply("cpu"));
}

TEST(GatewayDevice, TheDeviceIsCpuVulkanOrVulkanN) {
  GatewayConfig config = test_config();
  for (const char* good : {"cpu", "vulkan", "vulkan:0", "vulkan:12"}) {
    config.device = good;
    EXPECT_NO_THROW(config.validate()) << good;
  }
  for (const char* bad : {"gpu", "vulkan:", "vulkan:x", "vulkan:-1", "cuda", ""}) {
    config.device = bad;
    try {
      config.validate();
      ADD_FAILURE() << "device '" << bad << "' accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("device"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("vulkan:N"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace loom::net::test
