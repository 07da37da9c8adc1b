// Actor runtime throughput and latency, each beside the mutex + condition_variable queue baseline
// (mutex_queue.hpp) doing the same work in the same binary. Numbers and how to read them: bench/README.md.
#include <benchmark/benchmark.h>

#include <future>
#include <thread>
#include <variant>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include "loom/actors/runtime/actor.hpp"
#include "mutex_queue.hpp"

using namespace std::chrono_literals;
namespace asio = boost::asio;

namespace {

constexpr int kMessagesPerIteration = 100'000;

struct Add {
  long value;
};
struct Total {
  loom::actors::Reply<long> reply;
};

class Summer : public loom::actors::Actor<Summer, std::variant<Add, Total>> {
 public:
  void on(Add m) { total_ += m.value; }
  void on(Total m) { m.reply(total_); }

 private:
  long total_ = 0;
};

// One io_context thread: the actor gets exactly one consumer, like the baseline.
class ActorFixture {
 public:
  ActorFixture() : work_(io_.get_executor()), runner_([this] { io_.run(); }) {
    summer_ = loom::actors::spawn<Summer>(io_.get_executor(), {.name = "summer"});
  }
  ~ActorFixture() {
    summer_.async_stop(asio::use_future).get();
    summer_ = {};
    work_.reset();
    runner_.join();
  }
  const loom::actors::ActorHandle<Summer::protocol_type>& summer() const { return summer_; }

 private:
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::thread runner_;
  loom::actors::ActorHandle<Summer::protocol_type> summer_;
};

// Runs `send(count)` on `senders` threads at once, each sending its share.
template <class Send>
void from_threads(int senders, Send send) {
  std::vector<std::thread> threads;
  for (int s = 0; s < senders; ++s) threads.emplace_back([&] { send(kMessagesPerIteration / senders); });
  for (auto& t : threads) t.join();
}

void BM_ActorTell(benchmark::State& state) {
  const int senders = static_cast<int>(state.range(0));
  ActorFixture fixture;
  auto address = fixture.summer().address();
  for (auto _ : state) {
    from_threads(senders, [&](int count) {
      for (int i = 0; i < count; ++i) address.tell(Add{1});
    });
    // Wait until every message has been handled: the reply comes after all of them.
    benchmark::DoNotOptimize(address.ask(Total{}, 60s, asio::use_future).get());
  }
  state.SetItemsProcessed(state.iterations() * kMessagesPerIteration);
}

void BM_MutexQueueTell(benchmark::State& state) {
  const int senders = static_cast<int>(state.range(0));
  loom::bench::MutexQueue queue;
  long total = 0;  // touched only by the consumer thread
  for (auto _ : state) {
    from_threads(senders, [&](int count) {
      for (int i = 0; i < count; ++i) queue.push([&total] { total += 1; });
    });
    std::promise<long> flushed;
    queue.push([&] { flushed.set_value(total); });
    benchmark::DoNotOptimize(flushed.get_future().get());
  }
  state.SetItemsProcessed(state.iterations() * kMessagesPerIteration);
}

void BM_ActorAskRoundTrip(benchmark::State& state) {
  ActorFixture fixture;
  auto address = fixture.summer().address();
  for (auto _ : state) benchmark::DoNotOptimize(address.ask(Total{}, 60s, asio::use_future).get());
}

void BM_MutexQueueRoundTrip(benchmark::State& state) {
  loom::bench::MutexQueue queue;
  long total = 0;
  for (auto _ : state) {
    std::promise<long> answer;
    queue.push([&] { answer.set_value(total); });
    benchmark::DoNotOptimize(answer.get_future().get());
  }
}

}  // namespace

BENCHMARK(BM_ActorTell)->Arg(1)->Arg(2)->Arg(4)->ArgName("senders")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MutexQueueTell)->Arg(1)->Arg(2)->Arg(4)->ArgName("senders")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ActorAskRoundTrip)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MutexQueueRoundTrip)->UseRealTime()->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
