#include "loom/compute/cpu/thread_pool.hpp"

#include <algorithm>
#include <fstream>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

namespace loom::compute {

namespace {
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}
}  // namespace

int physical_core_count() {
  // Linux topology: each distinct (package, core) pair is one physical core.
  std::set<std::pair<int, int>> cores;
  for (int cpu = 0;; ++cpu) {
    const std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    std::ifstream package_file(base + "physical_package_id");
    std::ifstream core_file(base + "core_id");
    int package = 0, core = 0;
    if (!(package_file >> package) || !(core_file >> core)) break;
    cores.emplace(package, core);
  }
  if (!cores.empty()) return static_cast<int>(cores.size());
  const unsigned hardware = std::thread::hardware_concurrency();
  return hardware == 0 ? 1 : static_cast<int>(hardware);
}

ThreadPool::ThreadPool(int threads) : shares_(std::make_unique<Share[]>(static_cast<std::size_t>(std::max(threads, 1)))) {
  if (threads < 1) throw std::invalid_argument("ThreadPool needs at least 1 thread, got " + std::to_string(threads));
  workers_.reserve(static_cast<std::size_t>(threads - 1));
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { work_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& worker : workers_) worker.join();
}

namespace {
constexpr std::uint64_t pack(std::uint64_t next, std::uint64_t end) { return next | end << 32; }
constexpr std::uint64_t next_of(std::uint64_t bounds) { return bounds & 0xFFFFFFFFu; }
constexpr std::uint64_t end_of(std::uint64_t bounds) { return bounds >> 32; }
}  // namespace

// Runs the tasks of one share until it is empty: from its front (its owner, one stream) or from its back
// (another thread, which leaves the owner its stream).
void ThreadPool::drain(int share, bool from_front, int thread) {
  std::atomic<std::uint64_t>& bounds = shares_[static_cast<std::size_t>(share)].bounds;
  for (std::uint64_t b = bounds.load(std::memory_order_relaxed); next_of(b) < end_of(b);) {
    const std::uint64_t task = from_front ? next_of(b) : end_of(b) - 1;
    const std::uint64_t rest = from_front ? pack(task + 1, end_of(b)) : pack(next_of(b), task);
    if (bounds.compare_exchange_weak(b, rest, std::memory_order_relaxed)) {
      fn_(context_, static_cast<std::int64_t>(task), thread);
      b = bounds.load(std::memory_order_relaxed);
    }
  }
}

void ThreadPool::take_tasks(int thread) {
  drain(thread, true, thread);
  const int n = size();
  for (int k = 1; k < n; ++k) drain((thread + k) % n, false, thread);
}

void ThreadPool::run(std::int64_t tasks, TaskFn fn, void* context) {
  if (tasks <= 0) return;
  if (workers_.empty() || tasks == 1) {
    for (std::int64_t t = 0; t < tasks; ++t) fn(context, t, 0);
    return;
  }
  if (static_cast<std::uint64_t>(tasks) > 0xFFFFFFFFu) {
    throw std::invalid_argument("ThreadPool: " + std::to_string(tasks) + " tasks in one job, at most 2^32 - 1");
  }
  fn_ = fn;
  context_ = context;
  const auto n = static_cast<std::uint64_t>(size());
  const auto total = static_cast<std::uint64_t>(tasks);
  for (std::uint64_t i = 0; i < n; ++i) {
    shares_[i].bounds.store(pack(total * i / n, total * (i + 1) / n), std::memory_order_relaxed);
  }
  busy_.store(static_cast<int>(workers_.size()));
  generation_.fetch_add(1);  // seq_cst: publishes the job, and orders against sleepers_ below
  if (sleepers_.load() > 0) {
    std::lock_guard lock(mutex_);
    wake_.notify_all();
  }
  take_tasks(0);
  // Spin while the workers finish their last tasks; yield when that takes long, which means a worker
  // lost its core (more runnable threads than cores) and spinning would only keep it waiting.
  for (int spin = 0; busy_.load(std::memory_order_acquire) != 0; ++spin) {
    if (spin < 4000) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
}

bool ThreadPool::wait_for_generation(std::uint64_t seen) {
  // Spin first (~1 ms): consecutive parallel_for calls of a forward pass come microseconds apart.
  for (int spin = 0; spin < 20000; ++spin) {
    if (generation_.load(std::memory_order_acquire) != seen) return true;
    if (stopping_.load(std::memory_order_relaxed)) return false;
    cpu_relax();
  }
  std::unique_lock lock(mutex_);
  ++sleepers_;
  wake_.wait(lock, [&] { return stopping_.load() || generation_.load() != seen; });
  --sleepers_;
  return !stopping_.load();
}

void ThreadPool::work_loop(int thread) {
  std::uint64_t seen = 0;
  while (wait_for_generation(seen)) {
    seen = generation_.load(std::memory_order_acquire);
    take_tasks(thread);
    busy_.fetch_sub(1, std::memory_order_release);
  }
}

}  // namespace loom::compute
