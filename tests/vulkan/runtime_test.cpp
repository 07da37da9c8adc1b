// The Vulkan runtime under the backend: device listing and choice, buffers and the staging uploader, pipelines
// from the embedded SPIR-V, and a recording submitted more than once (what the backend does every step).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "loom/compute/vulkan/vulkan_buffer.hpp"
#include "loom/compute/vulkan/vulkan_commands.hpp"
#include "vulkan_test_device.hpp"

namespace loom::compute::vulkan {
namespace {

using testing::test_device;

struct FillPush {
  std::uint32_t count;
  float a;
  float b;
};

TEST(VulkanDeviceSpec, NamesTheDefaultOrAnIndex) {
  EXPECT_EQ(parse_device_spec("vulkan"), std::nullopt);
  EXPECT_EQ(parse_device_spec("vulkan:0"), 0);
  EXPECT_EQ(parse_device_spec("vulkan:12"), 12);
  for (const char* bad : {"vulkan:", "vulkan:-1", "vulkan:x", "vulkan:1x", "gpu", "vulkan:99999", "cpu"}) {
    EXPECT_THROW(parse_device_spec(bad), std::invalid_argument) << bad;
  }
}

TEST(VulkanDevices, ListsTheOneTheDefaultChoiceOpens) {
  LOOM_REQUIRE_VULKAN();
  const auto devices = list_devices();
  ASSERT_FALSE(devices.empty());
  const auto& opened = test_device().context->description();
  EXPECT_TRUE(opened.unusable.empty()) << opened.unusable;
  EXPECT_FALSE(opened.name.empty());
  EXPECT_GT(opened.max_workgroup_invocations, 0u);
  EXPECT_TRUE(opened.push_descriptors);
  bool discrete = false;
  for (const auto& d : devices) discrete = discrete || (d.type == "discrete" && d.unusable.empty());
  if (discrete) {
    EXPECT_EQ(opened.type, "discrete") << "a usable discrete GPU comes first";
  }
  for (std::size_t i = 0; i < devices.size(); ++i) EXPECT_EQ(devices[i].index, static_cast<int>(i));
}

TEST(VulkanDevices, AnIndexPastTheLastSaysHowManyThereAre) {
  LOOM_REQUIRE_VULKAN();
  const auto count = list_devices().size();
  try {
    VulkanContext::open(static_cast<int>(count));
    FAIL() << "opened a device past the last";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("has " + std::to_string(count) + " Vulkan device"), std::string::npos) << e.what();
  }
}

TEST(VulkanBuffers, UploadAndDownloadRoundTripThroughSmallStaging) {
  LOOM_REQUIRE_VULKAN();
  auto& context = *test_device().context;
  Buffer device(context, 10000, MemoryKind::device_local, "test buffer");
  Uploader uploader(context, 4096);  // three chunks each way
  std::vector<std::byte> bytes(10000);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>(i * 7 + 3);
  uploader.upload(device.range(), bytes);
  std::vector<std::byte> back(bytes.size());
  uploader.download(device.range(), back);
  EXPECT_EQ(back, bytes);
  uploader.fill(device.range(4, 8), 0xdeadbeefu);
  uploader.download(device.range(), back);
  std::uint32_t word = 0;
  std::memcpy(&word, back.data() + 8, 4);
  EXPECT_EQ(word, 0xdeadbeefu);
  EXPECT_EQ(back[3], bytes[3]);
  EXPECT_EQ(back[12], bytes[12]);
  EXPECT_THROW(uploader.upload(device.range(0, 16), bytes), std::out_of_range);
  EXPECT_THROW(device.range(9990, 100), std::out_of_range);
}

TEST(VulkanBuffers, AnImpossibleAllocationSaysHowMuchWasAsked) {
  LOOM_REQUIRE_VULKAN();
  auto& context = *test_device().context;
  const std::uint64_t huge = std::uint64_t{1} << 50;  // a petabyte
  try {
    Buffer buffer(context, huge, MemoryKind::device_local, "weights");
    FAIL() << "allocated a petabyte";
  } catch (const DeviceMemoryError& e) {
    EXPECT_GE(e.requested(), huge);
    EXPECT_NE(std::string(e.what()).find("weights"), std::string::npos) << e.what();
  }
}

TEST(VulkanRecording, AResubmittedRecordingReadsTheNewInputs) {
  LOOM_REQUIRE_VULKAN();
  auto& device = test_device();
  const std::uint32_t count = 1000;
  Buffer input(*device.context, count * 4, MemoryKind::host_visible, "input");
  Buffer output(*device.context, count * 4, MemoryKind::host_visible, "output");
  const std::uint32_t workgroup[] = {64};
  const auto& pipeline = device.pipelines->get("fill_test", 2, sizeof(FillPush), workgroup);
  EXPECT_EQ(&pipeline, &device.pipelines->get("fill_test", 2, sizeof(FillPush), workgroup)) << "made once";
  CommandRecording recording(*device.context);
  recording.begin();
  recording.dispatch(pipeline, {input.range(), output.range()}, FillPush{count, 2.0f, 1.0f}, groups_for(count, 64));
  recording.end();
  EXPECT_EQ(recording.dispatches(), 1u);
  auto* in = static_cast<float*>(input.mapped());
  const auto* out = static_cast<const float*>(output.mapped());
  for (int round = 0; round < 2; ++round) {
    for (std::uint32_t i = 0; i < count; ++i) in[i] = static_cast<float>(i) + 1000.0f * static_cast<float>(round);
    recording.submit_and_wait();
    for (std::uint32_t i = 0; i < count; ++i) {
      ASSERT_EQ(out[i], in[i] * 2.0f + 1.0f) << "round " << round << " value " << i;
    }
  }
}

TEST(VulkanRecording, RefusesAMismatchedDispatch) {
  LOOM_REQUIRE_VULKAN();
  auto& device = test_device();
  Buffer buffer(*device.context, 256, MemoryKind::host_visible, "buffer");
  const std::uint32_t workgroup[] = {64};
  const auto& pipeline = device.pipelines->get("fill_test", 2, sizeof(FillPush), workgroup);
  CommandRecording recording(*device.context);
  EXPECT_THROW(recording.dispatch(pipeline, {buffer.range(), buffer.range()}, FillPush{1, 1, 1}, 1), std::logic_error);
  recording.begin();
  EXPECT_THROW(recording.dispatch(pipeline, {buffer.range()}, FillPush{1, 1, 1}, 1), std::invalid_argument);
  EXPECT_THROW(recording.dispatch(pipeline, {buffer.range(), buffer.range()}, std::uint32_t{1}, 1), std::invalid_argument);
  EXPECT_THROW(recording.dispatch(pipeline, {buffer.range(), buffer.range()}, FillPush{1, 1, 1}, 0), std::invalid_argument);
  EXPECT_THROW(recording.dispatch(pipeline, {buffer.range(), BufferRange{}}, FillPush{1, 1, 1}, 1), std::invalid_argument);
  recording.end();
  EXPECT_THROW(device.pipelines->get("no_such_shader", 1, 0), std::out_of_range);
  const auto names = shader_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "fill_test"), names.end());
}

}  // namespace
}  // namespace loom::compute::vulkan
