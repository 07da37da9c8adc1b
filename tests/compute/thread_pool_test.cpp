// ThreadPool: every task runs exactly once, the caller takes part, small jobs stay on the caller, each
// thread streams through its own share and the others take what a slow thread leaves.
#include "loom/compute/cpu/thread_pool.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
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

// Each thread starts at the front of its own contiguous share and walks it in order (one memory stream per
// thread); tasks are stolen only from the back. Every task waits until all three threads have started one,
// so no thread can take another's whole share before its owner wakes.
TEST(ThreadPool, EachThreadWalksItsOwnShareInOrder) {
  ThreadPool pool(3);
  constexpr std::int64_t kTasks = 300;
  std::vector<std::vector<std::int64_t>> order(3);  // each thread appends only to its own list
  std::atomic<int> started{0};
  std::vector<std::atomic<bool>> seen(3);
  pool.parallel_for(kTasks, [&](std::int64_t task, int thread) {
    if (!seen[static_cast<std::size_t>(thread)].exchange(true)) ++started;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (started.load() < 3 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    order[static_cast<std::size_t>(thread)].push_back(task);
  });
  std::int64_t total = 0;
  for (int t = 0; t < 3; ++t) {
    const auto& ran = order[static_cast<std::size_t>(t)];
    total += static_cast<std::int64_t>(ran.size());
    ASSERT_FALSE(ran.empty()) << "thread " << t;
    const std::int64_t first = kTasks * t / 3, end = kTasks * (t + 1) / 3;
    EXPECT_EQ(ran.front(), first) << "thread " << t << " starts at the front of its share";
    std::size_t i = 1;
    for (; i < ran.size() && ran[i] >= first && ran[i] < end; ++i) EXPECT_EQ(ran[i], ran[i - 1] + 1) << "thread " << t;
    for (; i < ran.size(); ++i) EXPECT_TRUE(ran[i] < first || ran[i] >= end) << "after its share, thread " << t << " only steals";
  }
  EXPECT_EQ(total, kTasks);
}

// A thread that falls behind (here the caller, 2 ms a task) has the back of its share taken by the others.
TEST(ThreadPool, AFastThreadTakesTheBackOfASlowThreadsShare) {
  ThreadPool pool(2);
  std::atomic<bool> worker_started{false};
  std::vector<std::atomic<int>> runner(40);  // 1 + the thread that ran each task
  pool.parallel_for(40, ThreadPool::kMinSharedBytes, [&](std::int64_t task, int thread) {
    runner[static_cast<std::size_t>(task)] = thread + 1;
    if (thread != 0) {
      worker_started = true;
      return;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (!worker_started.load() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  });
  for (const auto& r : runner) EXPECT_NE(r.load(), 0);
  EXPECT_EQ(runner[0].load(), 1) << "the caller runs the front of its share";
  EXPECT_EQ(runner[19].load(), 2) << "the worker steals the caller's last task";
  EXPECT_EQ(runner[39].load(), 2);
}

TEST(ThreadPool, RefusesMoreTasksThanItCanCount) {
  ThreadPool pool(2);
  EXPECT_THROW(pool.parallel_for(std::int64_t{1} << 33, [](std::int64_t) {}), std::invalid_argument);
}

}  // namespace
}  // namespace loom::compute
