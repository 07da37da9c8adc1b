// The baseline the actor runtime is measured against: the classic std::mutex + condition_variable queue
// drained by one consumer thread. Same work per message as the actor benchmarks (add to a total).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace loom::bench {

class MutexQueue {
 public:
  MutexQueue() : consumer_([this] { drain(); }) {}
  ~MutexQueue() {
    push({});  // an empty job ends the consumer
    consumer_.join();
  }

  void push(std::function<void()> job) {
    {
      std::lock_guard lock(mutex_);
      jobs_.push_back(std::move(job));
    }
    ready_.notify_one();
  }

 private:
  void drain() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock lock(mutex_);
        ready_.wait(lock, [this] { return !jobs_.empty(); });
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      if (!job) return;
      job();
    }
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> jobs_;
  std::thread consumer_;
};

}  // namespace loom::bench
