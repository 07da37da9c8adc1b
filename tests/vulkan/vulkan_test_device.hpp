// The device the Vulkan suite runs on: one VulkanContext for the whole test binary (the default choice, as
// `--device vulkan` makes it), with its PipelineCache. A test calls LOOM_REQUIRE_VULKAN() first: it skips,
// saying so, only when the machine has no Vulkan device at all; any other failure to open one fails the test.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "loom/compute/vulkan/vulkan_commands.hpp"
#include "loom/compute/vulkan/vulkan_context.hpp"
#include "loom/compute/vulkan/vulkan_matmul.hpp"
#include "loom/compute/vulkan/vulkan_pipeline.hpp"

namespace loom::compute::vulkan::testing {

struct TestDevice {
  std::unique_ptr<VulkanContext> context;
  std::unique_ptr<PipelineCache> pipelines;
  std::string missing;  // non-empty: there is no Vulkan device on this machine (why)
};

// Opened on first use, kept until the binary exits.
inline TestDevice& test_device() {
  static TestDevice device = [] {
    TestDevice d;
    if (list_devices().empty()) {
      d.missing = "no Vulkan device on this machine (install mesa-vulkan-drivers for lavapipe)";
      return d;
    }
    d.context = VulkanContext::open();
    d.pipelines = std::make_unique<PipelineCache>(*d.context);
    return d;
  }();
  return device;
}

// Records what `record` asks for into a fresh recording on the test device, submits it and waits.
inline void run_ops(const std::function<void(OpContext&)>& record) {
  auto& device = test_device();
  CommandRecording recording(*device.context);
  recording.begin();
  OpContext op{*device.pipelines, recording};
  record(op);
  recording.end();
  recording.submit_and_wait();
}

}  // namespace loom::compute::vulkan::testing

#define LOOM_REQUIRE_VULKAN()                                                              \
  do {                                                                                     \
    auto& loom_device_ = ::loom::compute::vulkan::testing::test_device();                  \
    if (!loom_device_.missing.empty()) GTEST_SKIP() << "skipped: " << loom_device_.missing; \
  } while (false)
