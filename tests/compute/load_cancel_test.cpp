// A model load ends early when its stop is requested (LoadOptions::stop): at its stage checks and between
// the slices of the KV cache it commits, with LoadCancelled, so a shutdown never waits for a whole load.
#include <gtest/gtest.h>

#include <stop_token>

#include "loom/compute/cpu/cpu_backend.hpp"
#include "loom/compute/cpu/paged_kv_cache.hpp"
#include "loom/compute/load_cancelled.hpp"
#include "test_files.hpp"

namespace loom::compute {
namespace {

TEST(LoadCancel, ALoadWhoseStopIsRequestedEndsWithLoadCancelled) {
  std::stop_source stop;
  LoadOptions options;
  options.model_path = testing::shared_path("models/aidreams260K.gguf");
  options.threads = 1;
  options.stop = stop.get_token();
  EXPECT_NE(CpuBackend::load(options), nullptr);  // the same load, not stopped, succeeds

  stop.request_stop();
  EXPECT_THROW(CpuBackend::load(options), LoadCancelled);
}

TEST(LoadCancel, TheKvCacheStopsCommittingWhenItsStopIsRequested) {
  std::stop_source stop;
  stop.request_stop();
  // 2 layers x 256 values x 16 slots x 4096 blocks of F16: 64 MiB of keys, one slice or more.
  EXPECT_THROW(PagedKvCache(2, 256, 16, 4096, TensorType::f16, stop.get_token()), LoadCancelled);
  EXPECT_EQ(PagedKvCache(2, 256, 16, 4096, TensorType::f16, std::stop_token{}).bytes(), std::uint64_t{128} << 20);
}

TEST(LoadCancel, TheMessageSaysWhereTheLoadWasCancelled) {
  std::stop_source stop;
  stop.request_stop();
  try {
    throw_if_stopped(stop.get_token(), "the vocabulary was read");
    FAIL() << "no LoadCancelled";
  } catch (const LoadCancelled& e) {
    EXPECT_STREQ(e.what(), "the load was cancelled while the vocabulary was read");
  }
}

}  // namespace
}  // namespace loom::compute
