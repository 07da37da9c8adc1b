// ThreadPool: the persistent compute threads of the CPU backend. A forward pass calls parallel_for about
// ten times per layer per step, so threads are created once (at model load), and between calls they spin
// for a moment before sleeping: waking a sleeping thread costs tens of microseconds, a spinning one well
// under one. The calling thread works too, so `threads` = 2 means one extra thread. No allocation per call.
//
// This is compute code, not an actor: it uses a mutex and condition variable (for sleeping only) on
// purpose, because a parallel_for is a fork-join barrier that must finish before the caller continues.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace loom::compute {

// The number of physical cores (hyper-threads of one core counted once), at least 1.
int physical_core_count();

class ThreadPool {
 public:
  explicit ThreadPool(int threads);  // threads >= 1, counting the caller
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const noexcept { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn(task) or fn(task, thread) for task in [0, tasks), spread over all threads; returns when every
  // task is done. `thread` in [0, size()) identifies the running thread (for per-thread scratch). Each
  // thread owns a contiguous share of the tasks and runs it in order, so consecutive tasks (a matrix's
  // consecutive rows) form one memory stream per thread that its prefetches run ahead in; a thread that
  // finishes its share takes the others' last tasks, so uneven tasks and a slow thread still balance.
  // `fn` must not throw, and must not call parallel_for on the same pool (one job at a time; the pool
  // belongs to one model's forward pass).
  // Below this much memory traffic a job runs on the calling thread alone: handing it out and waiting for
  // the slowest thread (~0.5 us with spinning workers, far more when a worker has lost its core) costs
  // more than half of a job this small saves (~3 us alone at 20 GB/s). 64 KiB rather than 256 made the
  // synth11M Q4_K_M decode (dim 256: every layer product 36-221 KB) 7 % faster; the 260K toy model, whose
  // only shared product is then its 128 KB output, 15 % slower (31 -> 36 us a token).
  static constexpr std::uint64_t kMinSharedBytes = 64 * 1024;

  // parallel_for, or the same tasks on the calling thread (thread 0) when the job touches fewer than
  // kMinSharedBytes.
  template <class Fn>
  void parallel_for(std::int64_t tasks, std::uint64_t bytes_touched, Fn&& fn) {
    if (bytes_touched < kMinSharedBytes) {
      for (std::int64_t t = 0; t < tasks; ++t) {
        if constexpr (std::is_invocable_v<Fn&, std::int64_t, int>) {
          fn(t, 0);
        } else {
          fn(t);
        }
      }
      return;
    }
    parallel_for(tasks, std::forward<Fn>(fn));
  }

  template <class Fn>
  void parallel_for(std::int64_t tasks, Fn&& fn) {
    using F = std::remove_reference_t<Fn>;
    run(tasks,
        [](void* context, std::int64_t task, int thread) {
          if constexpr (std::is_invocable_v<F&, std::int64_t, int>) {
            (*static_cast<F*>(context))(task, thread);
          } else {
            (void)thread;
            (*static_cast<F*>(context))(task);
          }
        },
        &fn);
  }

 private:
  using TaskFn = void (*)(void*, std::int64_t, int);
  void run(std::int64_t tasks, TaskFn fn, void* context);
  void work_loop(int thread);
  void take_tasks(int thread);
  void drain(int share, bool from_front, int thread);

  bool wait_for_generation(std::uint64_t seen);

  std::vector<std::thread> workers_;
  std::mutex mutex_;  // only for sleeping and waking
  std::condition_variable wake_;
  std::atomic<std::uint64_t> generation_{0};  // bumped once per parallel_for
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stopping_{false};
  std::atomic<int> busy_{0};  // workers still inside the current generation

  // The current job; written before the generation is bumped (which publishes it).
  TaskFn fn_ = nullptr;
  void* context_ = nullptr;
  // Thread i's share: tasks [next, end) packed as next | end << 32. The owner takes from the front, the
  // others from the back, each with one compare-exchange.
  struct alignas(64) Share {
    std::atomic<std::uint64_t> bounds{0};
  };
  std::unique_ptr<Share[]> shares_;
};

}  // namespace loom::compute
