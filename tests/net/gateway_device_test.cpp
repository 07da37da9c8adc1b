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

// vulkan_arithmetic (flag --vulkan-arithmetic, LOOM_VULKAN_ARITHMETIC, config key): auto, pinned or fast, and
// only auto on the CPU, which has one arithmetic; the config file's key reaches the config.
TEST(GatewayDevice, TheVulkanArithmeticIsAutoPinnedOrFastAndOnlyAutoOnTheCpu) {
  GatewayConfig config = test_config();
  config.device = "vulkan";
  for (const char* good : {"auto", "pinned", "fast"}) {
    config.vulkan_arithmetic = good;
    EXPECT_NO_THROW(config.validate()) << good;
  }
  const auto refused = [&](const std::string& device, const std::string& arithmetic) {
    config.device = device;
    config.vulkan_arithmetic = arithmetic;
    try {
      config.validate();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string bad = refused("vulkan", "exact");
  EXPECT_NE(bad.find("vulkan_arithmetic must be auto, pinned or fast, got 'exact'"), std::string::npos) << bad;
  const std::string on_cpu = refused("cpu", "fast");
  EXPECT_NE(on_cpu.find("vulkan_arithmetic is for a Vulkan device"), std::string::npos) << on_cpu;
  EXPECT_EQ(refused("cpu", "auto"), "accepted");

  GatewayConfig from_file = test_config();
  apply_json(from_file, json{{"device", "vulkan:1"}, {"vulkan_arithmetic", "fast"}});
  EXPECT_EQ(from_file.device, "vulkan:1");
  EXPECT_EQ(from_file.vulkan_arithmetic, "fast");
}

}  // namespace
}  // namespace loom::net::test
