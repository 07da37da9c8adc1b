// --device as a user meets it: `loom info --devices` lists the Vulkan devices (lavapipe in CI), `loom generate
// --device vulkan` gives the CPU's greedy text, and a device the build or the machine lacks is a clear error.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loom/compute/devices.hpp"
#include "run_process.hpp"
#include "test_files.hpp"

namespace loom::cli::testing {
namespace {

using loom::compute::testing::shared_path;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Skips (saying why) where this build or machine has no Vulkan device.
#define REQUIRE_VULKAN_DEVICE()                                                                         \
  do {                                                                                                  \
    if (!compute::has_vulkan_backend()) GTEST_SKIP() << "skipped: " << compute::kNoVulkanBuild;         \
    if (compute::list_vulkan_devices().empty()) GTEST_SKIP() << "skipped: no Vulkan device on this machine"; \
  } while (false)

TEST(DeviceOption, InfoDevicesListsEveryVulkanDeviceWithWhatTheBackendNeeds) {
  REQUIRE_VULKAN_DEVICE();
  const auto run = run_loom({"info", "--devices"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(has(run.out, "cpu: the CPU backend")) << run.out;
  for (const auto& device : compute::list_vulkan_devices()) {
    EXPECT_TRUE(has(run.out, "vulkan:" + std::to_string(device.index) + ": " + device.name + " (" + device.type + ")"))
        << run.out;
  }
  EXPECT_TRUE(has(run.out, "  device-local memory: ")) << run.out;
  EXPECT_TRUE(has(run.out, "  max workgroup invocations: ")) << run.out;
  EXPECT_TRUE(has(run.out, "  push descriptors: yes")) << run.out;
  EXPECT_TRUE(has(run.out, "  usable: yes")) << run.out;
  // CI's device is Mesa's lavapipe (llvmpipe): check it by name where it is the machine's device.
  if (has(run.out, "llvmpipe")) {
    EXPECT_TRUE(has(run.out, "(cpu)")) << run.out;
  }
}

TEST(DeviceOption, GenerateOnVulkanGivesTheCpusGreedyText) {
  REQUIRE_VULKAN_DEVICE();
  const std::string model = shared_path("models/aidreams260K.gguf");
  REQUIRE_SHARED_FILE(model);
  const std::vector<std::string> common{"generate", "--model", model, "--prompt", "Once upon a time",
                                        "--temperature", "0", "--max-tokens", "40", "--threads", "1", "--device"};
  auto on_cpu = common, on_vulkan = common;
  on_cpu.push_back("cpu");
  on_vulkan.push_back("vulkan");
  const auto cpu = run_loom(on_cpu);
  const auto vulkan = run_loom(on_vulkan);
  ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
  ASSERT_EQ(vulkan.exit_code, 0) << vulkan.err;
  EXPECT_GT(vulkan.out.size(), 80u) << vulkan.out;
  EXPECT_EQ(vulkan.out, cpu.out);
  EXPECT_TRUE(has(vulkan.err, "generated 40 tokens")) << vulkan.err;
}

// `loom logits --device vulkan`: the same greedy continuation as on the CPU, each top logit within the F32
// reference tolerance (aidreams260K is F32).
TEST(DeviceOption, LogitsOnVulkanFollowTheCpus) {
  REQUIRE_VULKAN_DEVICE();
  const std::string model = shared_path("models/aidreams260K.gguf");
  REQUIRE_SHARED_FILE(model);
  const std::vector<std::string> common{"logits", "--model", model, "--tokens", "1,429,491,433", "--greedy", "6",
                                        "--top", "3", "--threads", "1", "--device"};
  auto on_cpu = common, on_vulkan = common;
  on_cpu.push_back("cpu");
  on_vulkan.push_back("vulkan");
  const auto cpu = run_loom(on_cpu);
  const auto vulkan = run_loom(on_vulkan);
  ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
  ASSERT_EQ(vulkan.exit_code, 0) << vulkan.err;
  const auto a = nlohmann::json::parse(cpu.out), b = nlohmann::json::parse(vulkan.out);
  EXPECT_EQ(b.at("continue"), a.at("continue"));
  for (const char* part : {"prompt_top", "continue_top"}) {
    ASSERT_EQ(b.at(part).size(), a.at(part).size());
    for (std::size_t i = 0; i < a.at(part).size(); ++i) {
      for (std::size_t k = 0; k < a.at(part)[i].size(); ++k) {
        EXPECT_EQ(b.at(part)[i][k][0], a.at(part)[i][k][0]) << part << " " << i;
        EXPECT_NEAR(b.at(part)[i][k][1].get<double>(), a.at(part)[i][k][1].get<double>(), 5e-3) << part << " " << i;
      }
    }
  }
}

TEST(DeviceOption, AnUnknownDeviceIsAUsageErrorAndAMissingOneSaysWhatExists) {
  const std::string model = shared_path("models/aidreams260K.gguf");
  REQUIRE_SHARED_FILE(model);
  const auto bad = run_loom({"generate", "--model", model, "--prompt", "x", "--device", "gpu"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_TRUE(has(bad.err, "device 'gpu' is not cpu, vulkan or vulkan:N")) << bad.err;
  const auto missing = run_loom({"generate", "--model", model, "--prompt", "x", "--device", "vulkan:999"});
  EXPECT_EQ(missing.exit_code, 1) << missing.err;
  EXPECT_TRUE(has(missing.err, compute::has_vulkan_backend() ? "vulkan:999" : std::string(compute::kNoVulkanBuild)))
      << missing.err;
}

// --vulkan-arithmetic: fast still gives the CPU's greedy text on this F32 model (its logits are well apart), and the
// arithmetic a device runs is named in `loom bench`'s output; a bad value, or a Vulkan arithmetic for the CPU, is a
// usage error.
TEST(DeviceOption, TheVulkanArithmeticIsChosenAndNamed) {
  const std::string model = shared_path("models/aidreams260K.gguf");
  REQUIRE_SHARED_FILE(model);
  const auto bad = run_loom({"generate", "--model", model, "--prompt", "x", "--device", "vulkan", "--vulkan-arithmetic", "exact"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_TRUE(has(bad.err, "--vulkan-arithmetic 'exact' is not auto, pinned or fast")) << bad.err;
  const auto on_cpu = run_loom({"generate", "--model", model, "--prompt", "x", "--vulkan-arithmetic", "fast"});
  EXPECT_EQ(on_cpu.exit_code, 2) << on_cpu.err;
  EXPECT_TRUE(has(on_cpu.err, "--vulkan-arithmetic is for --device vulkan[:N]")) << on_cpu.err;

  REQUIRE_VULKAN_DEVICE();
  const std::vector<std::string> common{"generate", "--model", model, "--prompt", "Once upon a time", "--temperature",
                                        "0", "--max-tokens", "24", "--threads", "1", "--device"};
  auto fast = common;
  fast.insert(fast.end(), {"vulkan", "--vulkan-arithmetic", "fast"});
  auto cpu = common;
  cpu.push_back("cpu");
  const auto on_fast = run_loom(fast);
  const auto reference = run_loom(cpu);
  ASSERT_EQ(on_fast.exit_code, 0) << on_fast.err;
  ASSERT_EQ(reference.exit_code, 0) << reference.err;
  EXPECT_EQ(on_fast.out, reference.out);

  for (const char* arithmetic : {"fast", "pinned"}) {
    const auto bench = run_loom({"bench", "--model", model, "-p", "8", "-n", "4", "-b", "none", "-r", "1", "--json",
                                 "--device", "vulkan", "--vulkan-arithmetic", arithmetic});
    if (std::string(arithmetic) == "pinned" && bench.exit_code != 0) {
      // A device without 64-bit floats in shaders refuses the pinned arithmetic, saying so.
      EXPECT_TRUE(has(bench.err, "shaderFloat64")) << bench.err;
      continue;
    }
    ASSERT_EQ(bench.exit_code, 0) << bench.err;
    const auto doc = nlohmann::json::parse(bench.out);
    EXPECT_TRUE(has(doc.at("device_name").get<std::string>(), std::string(arithmetic) + " arithmetic")) << bench.out;
  }
}

}  // namespace
}  // namespace loom::cli::testing
