// ThreadPool: every task runs exactly once, the caller takes part, and small jobs stay on the caller.
#include "loom/compute/thread_pool.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace loom::compute {
namespace {

TEST(ThreadPool, RunsEveryTaskExactlyOnceWithThreadIdsInRange) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> runs(1000);
  std::atomic<bool> bad_thread{false};
  for (int round = 0; round < 20; ++round) {
    pool.parallel_for(static_cast<std::int64_t>(runs.size()), [&](std::int64_t task, int thread) {
      if (thread < 0 || thread >= pool.size()) bad_thread = true;
      runs[static_cast<std::size_t>(task)].fetch_add(1);
    });
  }
  for (const auto& r : runs) EXPECT_EQ(r.load(), 20);
  EXPECT_FALSE(bad_thread.load());
}

TEST(ThreadPool, SmallJobsRunOnTheCallingThreadAlone) {
  ThreadPool pool(2);
  const auto caller = std::this_thread::get_id();
  std::atomic<int> elsewhere{0}, runs{0};
  pool.parallel_for(64, ThreadPool::kMinSharedBytes - 1, [&](std::int64_t, int thread) {
    if (thread != 0 || std::this_thread::get_id() != caller) ++elsewhere;
    ++runs;
  });
  EXPECT_EQ(runs.load(), 64);
  EXPECT_EQ(elsewhere.load(), 0);
}

TEST(ThreadPool, LargeJobsAreShared) {
  ThreadPool pool(2);
  // Tasks long enough that the other thread, spinning or woken, takes some: each waits until two
  // different threads have started a task (bounded, so a broken pool fails instead of hanging).
  std::atomic<int> started_by_worker{0};
  pool.parallel_for(8, ThreadPool::kMinSharedBytes, [&](std::int64_t, int thread) {
    if (thread != 0) ++started_by_worker;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (started_by_worker.load() == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  });
  EXPECT_GT(started_by_worker.load(), 0);
}

}  // namespace
}  // namespace loom::compute
