// The thermal monitor: thresholds with hysteresis, the three providers (file and sysfs over fake trees in a
// temporary folder), and the actor through its messages, with a recording actor as its subscriber.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <unistd.h>
#include <utility>
#include <variant>
#include <vector>

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_future.hpp>

#include "loom/actors/engine/thermal_monitor_actor.hpp"
#include "loom/actors/engine/thermal_provider.hpp"
#include "loom/actors/engine/thermal_state.hpp"
#include "loom/actors/engine/thermal_thresholds.hpp"
#include "test_support.hpp"

namespace loom::actors {
namespace {

using namespace std::chrono_literals;
using testing::eventually;
using testing::RunningContext;
namespace asio = boost::asio;
namespace fs = std::filesystem;

// --- ThermalState ---

TEST(ThermalStateTest, NamesRoundTripAndOnlyExactNamesParse) {
  for (auto state : {ThermalState::nominal, ThermalState::fair, ThermalState::serious, ThermalState::critical}) {
    EXPECT_EQ(parse_thermal_state(to_string(state)), state);
  }
  EXPECT_EQ(to_string(ThermalState::critical), "critical");
  for (const char* wrong : {"", "Critical", " critical", "hot", "nominal\n"}) {
    EXPECT_FALSE(parse_thermal_state(wrong).has_value()) << wrong;
  }
  EXPECT_LT(ThermalState::fair, ThermalState::serious);  // ordered by heat
}

// --- Thresholds ---

struct ThermalStep {
  double celsius;
  ThermalState expected;
};

// Feeds the readings in order, each from the state the previous one left.
void walk(ThermalState start, const std::vector<ThermalStep>& steps, const ThermalThresholds& thresholds = {}) {
  ThermalState state = start;
  for (const auto& step : steps) {
    state = next_thermal_state(state, step.celsius, thresholds);
    EXPECT_EQ(state, step.expected) << "at " << step.celsius << " C: got " << to_string(state) << ", expected "
                                    << to_string(step.expected);
  }
}

TEST(ThermalThresholdsTest, RisingEntersEachStateAtItsThreshold) {
  // Defaults 70 / 80 / 90: a state is entered at exactly its threshold, not a hair below.
  walk(ThermalState::nominal, {{20, ThermalState::nominal},
                               {69.9, ThermalState::nominal},
                               {70, ThermalState::fair},
                               {79.9, ThermalState::fair},
                               {80, ThermalState::serious},
                               {89.9, ThermalState::serious},
                               {90, ThermalState::critical},
                               {120, ThermalState::critical}});
}

TEST(ThermalThresholdsTest, FallingLeavesEachStateOnlyAMarginBelowItsThreshold) {
  // Margin 5: critical is held above 85, serious above 75, fair above 65; each is left at exactly
  // threshold - 5.
  walk(ThermalState::critical, {{89.9, ThermalState::critical},
                                {85.1, ThermalState::critical},
                                {85, ThermalState::serious},
                                {75.1, ThermalState::serious},
                                {75, ThermalState::fair},
                                {65.1, ThermalState::fair},
                                {65, ThermalState::nominal},
                                {20, ThermalState::nominal}});
}

TEST(ThermalThresholdsTest, JumpsCrossSeveralStatesAtOnce) {
  EXPECT_EQ(next_thermal_state(ThermalState::nominal, 95, {}), ThermalState::critical);
  EXPECT_EQ(next_thermal_state(ThermalState::fair, 85, {}), ThermalState::serious);
  // From critical at 78: below critical's 85 and serious' 80, but above 75, so serious is held.
  EXPECT_EQ(next_thermal_state(ThermalState::critical, 78, {}), ThermalState::serious);
  // At 72: above fair's 65 only.
  EXPECT_EQ(next_thermal_state(ThermalState::critical, 72, {}), ThermalState::fair);
  EXPECT_EQ(next_thermal_state(ThermalState::critical, 40, {}), ThermalState::nominal);
}

TEST(ThermalThresholdsTest, ASensorHoveringAtAThresholdDoesNotFlap) {
  // Jitter of less than the margin around 70 enters fair once and stays; only 65 leaves it, and then
  // jitter just under 70 does not re-enter.
  const std::vector<double> readings = {69.9, 70.0, 69.9, 70.1, 68, 66, 70, 65.5, 69.9, 65, 69.9, 67, 69.99};
  ThermalState state = ThermalState::nominal;
  std::vector<ThermalState> changes;
  for (double celsius : readings) {
    const auto next = next_thermal_state(state, celsius, {});
    if (next != state) changes.push_back(next);
    state = next;
  }
  EXPECT_EQ(changes, (std::vector<ThermalState>{ThermalState::fair, ThermalState::nominal}));
  // The same readings without a margin flap at every crossing of 70: up at 70.0, down at 69.9, up at 70.1,
  // down at 68, up at 70, down at 65.5, and nothing after (all below 70): 6 changes.
  ThermalThresholds no_margin;
  no_margin.hysteresis = 0;
  state = ThermalState::nominal;
  int flips = 0;
  for (double celsius : readings) {
    const auto next = next_thermal_state(state, celsius, no_margin);
    flips += next != state;
    state = next;
  }
  EXPECT_EQ(flips, 6);
}

TEST(ThermalThresholdsTest, CustomThresholdsAreHonoured) {
  const ThermalThresholds custom{.fair = 50, .serious = 60, .critical = 65, .hysteresis = 2};
  walk(ThermalState::nominal, {{49, ThermalState::nominal},
                               {50, ThermalState::fair},
                               {65, ThermalState::critical},
                               {63.5, ThermalState::critical},  // above 65 - 2
                               {63, ThermalState::serious},     // left critical; above 60 - 2
                               {58, ThermalState::fair},        // left serious; above 50 - 2
                               {48, ThermalState::nominal}},
       custom);
}

TEST(ThermalThresholdsTest, ValidationNamesTheBadField) {
  auto message_of = [](ThermalThresholds t) {
    try {
      t.validate();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message_of({}), "no error");
  EXPECT_NE(message_of({.fair = 80, .serious = 80}).find("strictly increasing"), std::string::npos);
  EXPECT_NE(message_of({.critical = 75}).find("strictly increasing"), std::string::npos);
  EXPECT_NE(message_of({.hysteresis = -1}).find("hysteresis"), std::string::npos);
  EXPECT_NE(message_of({.serious = std::nan("")}).find("serious is not a finite number"), std::string::npos);
}

// --- Providers ---

// A fresh folder under the system's temporary directory, removed with everything in it at the end.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() /
            ("loom-thermal-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Written beside and renamed over, as an operator should, so a concurrent read sees the old or the new
// content, never half of it.
void write_file(const fs::path& path, const std::string& content) {
  fs::create_directories(path.parent_path());
  const auto staging = path.string() + ".new";
  {
    std::ofstream out(staging, std::ios::binary | std::ios::trunc);
    out << content;
    ASSERT_TRUE(out.good()) << staging;
  }
  fs::rename(staging, path);
}

std::string error_of(const ThermalReading& reading) {
  const auto* error = std::get_if<ThermalReadError>(&reading);
  return error ? error->message : "no error";
}

TEST(FileThermalProviderTest, ReadsTemperaturesInDegrees) {
  TempDir dir;
  const auto file = dir.path() / "thermal";
  FileThermalProvider provider(file);
  for (const auto& [content, expected] : std::vector<std::pair<std::string, double>>{
           {"71.5", 71.5}, {"  42\n", 42.0}, {"-10", -10.0}, {"\t90.25\r\n", 90.25}}) {
    write_file(file, content);
    const auto reading = provider.read();
    ASSERT_TRUE(std::holds_alternative<Celsius>(reading)) << content << ": " << error_of(reading);
    EXPECT_DOUBLE_EQ(std::get<Celsius>(reading).value, expected);
  }
}

TEST(FileThermalProviderTest, ReadsStateNamesAsIs) {
  TempDir dir;
  const auto file = dir.path() / "thermal";
  FileThermalProvider provider(file);
  for (auto state : {ThermalState::nominal, ThermalState::fair, ThermalState::serious, ThermalState::critical}) {
    write_file(file, std::string(to_string(state)) + "\n");
    const auto reading = provider.read();
    ASSERT_TRUE(std::holds_alternative<ThermalState>(reading)) << error_of(reading);
    EXPECT_EQ(std::get<ThermalState>(reading), state);
  }
}

TEST(FileThermalProviderTest, GarbageIsAReadErrorNamingTheFile) {
  TempDir dir;
  const auto file = dir.path() / "thermal";
  FileThermalProvider provider(file);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"hot", "neither a temperature in degrees C nor a thermal state name"},
      {"71.5C", "\"71.5C\""},
      {"CRITICAL", "\"CRITICAL\""},
      {"", "is empty"},
      {" \n", "is empty"},
      {"nan", "implausible temperature"},
      {"inf", "implausible temperature"},
      {"1e9", "implausible temperature"},
      {"-300", "implausible temperature"},
      {std::string("\x01\xff", 2), "\"\\x01\\xff\""},                  // bytes shown escaped
      {std::string(kMaxThermalFileBytes + 1, '7'), "is longer than 64 bytes"},  // bounded read
  };
  for (const auto& [content, expected] : cases) {
    write_file(file, content);
    const auto message = error_of(provider.read());
    EXPECT_NE(message.find(expected), std::string::npos) << "content " << content << ": " << message;
    EXPECT_NE(message.find(file.string()), std::string::npos) << message;
  }
  // Exactly the limit is still read (a number padded with spaces).
  write_file(file, "55" + std::string(kMaxThermalFileBytes - 2, ' '));
  EXPECT_TRUE(std::holds_alternative<Celsius>(provider.read()));

  const auto missing = error_of(FileThermalProvider(dir.path() / "absent").read());
  EXPECT_NE(missing.find("cannot open " + (dir.path() / "absent").string()), std::string::npos) << missing;
}

TEST(SysfsThermalProviderTest, TheHottestReadableZoneWins) {
  TempDir dir;
  const auto& root = dir.path();
  write_file(root / "thermal_zone0" / "temp", "45000\n");
  write_file(root / "thermal_zone1" / "temp", "71500\n");  // the hottest, in the middle of the listing
  write_file(root / "thermal_zone2" / "temp", "garbage\n");
  fs::create_directories(root / "thermal_zone3");                // no temp file
  fs::create_directories(root / "thermal_zone4" / "temp");       // unreadable: a directory
  write_file(root / "thermal_zone5" / "temp", "-273200\n");      // a sensor's "no value" sentinel
  write_file(root / "thermal_zone10" / "temp", "63000\n");
  write_file(root / "cooling_device0" / "temp", "99000\n");      // not a thermal zone: ignored
  const auto reading = SysfsThermalProvider(root).read();
  ASSERT_TRUE(std::holds_alternative<Celsius>(reading)) << error_of(reading);
  EXPECT_DOUBLE_EQ(std::get<Celsius>(reading).value, 71.5);
}

TEST(SysfsThermalProviderTest, NoReadableZoneIsAnErrorNamingTheFirstFailure) {
  TempDir dir;
  const auto& root = dir.path();
  fs::create_directories(root / "thermal_zone0" / "temp");
  write_file(root / "thermal_zone1" / "temp", "warm\n");
  const auto message = error_of(SysfsThermalProvider(root).read());
  EXPECT_NE(message.find("no readable thermal zone under " + root.string()), std::string::npos) << message;
  EXPECT_NE(message.find("cannot read " + (root / "thermal_zone0" / "temp").string()), std::string::npos)
      << message;

  TempDir empty;
  EXPECT_NE(error_of(SysfsThermalProvider(empty.path()).read()).find("no thermal zones under"), std::string::npos);
  EXPECT_NE(error_of(SysfsThermalProvider(empty.path() / "absent").read()).find("cannot list"), std::string::npos);
}

TEST(FixedThermalProviderTest, AlwaysTheSameState) {
  FixedThermalProvider provider(ThermalState::serious);
  EXPECT_EQ(std::get<ThermalState>(provider.read()), ThermalState::serious);
  EXPECT_EQ(std::get<ThermalState>(provider.read()), ThermalState::serious);
}

// --- The actor ---

// Plays its readings in order, then repeats the last one; counts the reads.
class ScriptedProvider final : public ThermalProvider {
 public:
  explicit ScriptedProvider(std::vector<ThermalReading> script) : script_(std::move(script)) {}
  ThermalReading read() const override {
    const std::size_t i = reads_++;
    return script_[std::min(i, script_.size() - 1)];
  }
  std::size_t reads() const { return reads_; }

 private:
  std::vector<ThermalReading> script_;
  mutable std::atomic<std::size_t> reads_{0};
};

// Takes 5 ms per read and remembers how many reads ever overlapped.
class SlowProvider final : public ThermalProvider {
 public:
  ThermalReading read() const override {
    const int now = ++under_way_;
    int most = most_;
    while (now > most && !most_.compare_exchange_weak(most, now)) {
    }
    std::this_thread::sleep_for(5ms);
    --under_way_;
    ++reads_;
    return Celsius{40};
  }
  int reads() const { return reads_; }
  int most_at_once() const { return most_; }

 private:
  mutable std::atomic<int> under_way_{0};
  mutable std::atomic<int> most_{0};
  mutable std::atomic<int> reads_{0};
};

class ThrowingProvider final : public ThermalProvider {
 public:
  ThermalReading read() const override { throw std::runtime_error("sensor driver exploded"); }
};

// The subscriber: records what it is told, as the scheduler will receive it.
struct GetChanges {
  Reply<std::vector<ThermalStateChanged>> reply;
};
class ThermalRecorder : public Actor<ThermalRecorder, std::variant<ThermalStateChanged, GetChanges>> {
 public:
  void on(ThermalStateChanged m) { changes_.push_back(std::move(m)); }
  void on(GetChanges m) { m.reply(changes_); }

 private:
  std::vector<ThermalStateChanged> changes_;
};

std::vector<ThermalState> states_of(const std::vector<ThermalStateChanged>& changes) {
  std::vector<ThermalState> states;
  for (const auto& c : changes) states.push_back(c.state);
  return states;
}

class ThermalMonitorActorTest : public ::testing::Test {
 protected:
  // The monitor is stopped, and the read pool drained, before the pool and the io_context go away: a
  // timer of a still-stopping monitor must not post to a destroyed pool.
  ~ThermalMonitorActorTest() override {
    if (monitor_) monitor_.async_stop(asio::use_future).wait_for(5s);
    reads_.join();
    recorder_.stop();
  }

  void start(std::shared_ptr<const ThermalProvider> provider) {
    // The engine's wiring: the sink tells the subscriber actor.
    ThermalSink sink = [to = recorder_.address()](ThermalStateChanged change) { to.tell(std::move(change)); };
    monitor_ = spawn<ThermalMonitorActor>(ctx_.executor(), {.name = "thermal_monitor"}, std::move(provider),
                                          std::move(sink), reads_.get_executor(),
                                          ThermalMonitorConfig{.interval = 2ms});
  }
  ThermalStatus status() { return monitor_.address().ask(GetThermalStatus{}, 5s, asio::use_future).get(); }
  std::vector<ThermalStateChanged> changes() { return recorder_.address().ask(GetChanges{}, 5s, asio::use_future).get(); }
  bool reads_at_least(std::uint64_t n) {
    return eventually([&] { return status().reads >= n; });
  }

  asio::thread_pool reads_{1};  // the blocking-work pool the engine would give
  RunningContext ctx_{2};
  ActorHandle<std::variant<ThermalStateChanged, GetChanges>> recorder_ = spawn<ThermalRecorder>(ctx_.executor(), {.name = "recorder"});
  ActorHandle<ThermalMonitorProtocol> monitor_;
};

TEST_F(ThermalMonitorActorTest, EachStateChangeIsToldOnceInOrder) {
  // Default thresholds: 60 nominal (told: the first reading), 72 fair, 74 fair, 85 serious, 95 critical,
  // 91 and 88 critical (above 85), 80 serious (left critical, reaches 80), 50 nominal, then 50 repeated.
  auto provider = std::make_shared<ScriptedProvider>(std::vector<ThermalReading>{
      Celsius{60}, Celsius{60}, Celsius{72}, Celsius{74}, Celsius{85}, Celsius{95}, Celsius{91}, Celsius{88},
      Celsius{80}, Celsius{50}});
  start(provider);
  ASSERT_TRUE(reads_at_least(14));  // the script and a few repeats of its end
  const auto told = changes();
  EXPECT_EQ(states_of(told), (std::vector<ThermalState>{ThermalState::nominal, ThermalState::fair, ThermalState::serious,
                                                        ThermalState::critical, ThermalState::serious,
                                                        ThermalState::nominal}));
  const std::vector<double> celsius = {60, 72, 85, 95, 80, 50};
  for (std::size_t i = 0; i < told.size() && i < celsius.size(); ++i) {
    EXPECT_EQ(told[i].celsius, celsius[i]) << i;
    EXPECT_NE(told[i].reason.find("temperature"), std::string::npos) << told[i].reason;
  }
  const auto s = status();
  EXPECT_EQ(s.state, ThermalState::nominal);
  EXPECT_EQ(s.last_celsius, 50.0);
  EXPECT_EQ(s.errors, 0u);
  EXPECT_LE(s.reads, provider->reads());  // a read may be under way
}

TEST_F(ThermalMonitorActorTest, ASlowSensorIsNeverReadTwiceAtOnce) {
  // Each read takes 5 ms, the interval is 1 ms and the pool has two threads: ticks that find a read under
  // way must be skipped, or two reads would overlap.
  auto provider = std::make_shared<SlowProvider>();
  ThermalSink sink = [](ThermalStateChanged) {};
  asio::thread_pool two_threads{2};
  auto monitor = spawn<ThermalMonitorActor>(ctx_.executor(), {.name = "slow_monitor"}, provider, sink,
                                            two_threads.get_executor(), ThermalMonitorConfig{.interval = 1ms});
  ASSERT_TRUE(eventually([&] { return provider->reads() >= 5; }));
  ASSERT_EQ(monitor.async_stop(asio::use_future).wait_for(5s), std::future_status::ready);
  two_threads.join();
  EXPECT_EQ(provider->most_at_once(), 1);
}

TEST_F(ThermalMonitorActorTest, AReadErrorIsNominalAndCounted) {
  // critical (named), two errors (nominal, told once), 72 from nominal: fair, then named nominal.
  auto provider = std::make_shared<ScriptedProvider>(std::vector<ThermalReading>{
      ThermalState::critical, ThermalReadError{"sensor gone"}, ThermalReadError{"sensor gone"}, Celsius{72},
      ThermalState::nominal});
  start(provider);
  ASSERT_TRUE(reads_at_least(8));
  const auto told = changes();
  EXPECT_EQ(states_of(told), (std::vector<ThermalState>{ThermalState::critical, ThermalState::nominal,
                                                        ThermalState::fair, ThermalState::nominal}));
  ASSERT_EQ(told.size(), 4u);
  EXPECT_FALSE(told[0].celsius.has_value());  // a named state has no temperature
  EXPECT_NE(told[1].reason.find("read error, taken as nominal: sensor gone"), std::string::npos) << told[1].reason;
  EXPECT_EQ(told[2].celsius, 72.0);
  const auto s = status();
  EXPECT_EQ(s.errors, 2u);
  EXPECT_EQ(s.last_error, "sensor gone");
  EXPECT_EQ(s.last_celsius, 72.0);
}

TEST_F(ThermalMonitorActorTest, AThrowingProviderIsAReadErrorNotACrash) {
  start(std::make_shared<ThrowingProvider>());
  ASSERT_TRUE(reads_at_least(3));
  const auto s = status();
  EXPECT_EQ(s.errors, s.reads);
  EXPECT_EQ(s.state, ThermalState::nominal);
  EXPECT_NE(s.last_error.find("sensor driver exploded"), std::string::npos) << s.last_error;
  EXPECT_EQ(monitor_.metrics().failed, 0u);
  EXPECT_EQ(states_of(changes()), std::vector<ThermalState>{ThermalState::nominal});  // told once, at start
}

TEST_F(ThermalMonitorActorTest, AnOperatorSwitchesTheStateThroughAFile) {
  TempDir dir;
  const auto file = dir.path() / "thermal_state";
  write_file(file, "critical\n");
  start(std::make_shared<FileThermalProvider>(file));
  ASSERT_TRUE(eventually([&] { return changes().size() == 1; }));
  write_file(file, "nominal\n");
  ASSERT_TRUE(eventually([&] { return changes().size() == 2; }));
  write_file(file, "91\n");
  ASSERT_TRUE(eventually([&] { return changes().size() == 3; }));
  const auto told = changes();
  EXPECT_EQ(states_of(told), (std::vector<ThermalState>{ThermalState::critical, ThermalState::nominal,
                                                        ThermalState::critical}));
  EXPECT_EQ(told[2].celsius, 91.0);
  EXPECT_EQ(status().errors, 0u);  // the renames never exposed a half-written file
}

TEST_F(ThermalMonitorActorTest, StopIsCleanAndEndsTheReads) {
  auto provider = std::make_shared<ScriptedProvider>(std::vector<ThermalReading>{Celsius{95}});
  start(provider);
  ASSERT_TRUE(reads_at_least(3));
  ASSERT_EQ(monitor_.async_stop(asio::use_future).wait_for(5s), std::future_status::ready);
  // A read posted just before the stop may still run: let the pool's one thread finish what it holds.
  std::promise<void> drained;
  asio::post(reads_, [&] { drained.set_value(); });
  ASSERT_EQ(drained.get_future().wait_for(5s), std::future_status::ready);
  const auto reads_after_stop = provider->reads();
  const auto told_after_stop = changes().size();
  // Several intervals later: no timer fired, nothing more was read or told.
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(provider->reads(), reads_after_stop);
  EXPECT_EQ(changes().size(), told_after_stop);
  EXPECT_EQ(told_after_stop, 1u);  // 95 throughout: critical, told once
  EXPECT_EQ(monitor_.metrics().failed, 0u);
}

TEST(ThermalMonitorConfigTest, BadArgumentsAreRefusedByName) {
  asio::thread_pool pool{1};
  auto provider = std::make_shared<FixedThermalProvider>(ThermalState::nominal);
  ThermalSink sink = [](ThermalStateChanged) {};
  auto message_of = [&](std::shared_ptr<const ThermalProvider> p, ThermalSink s, asio::any_io_executor e,
                        ThermalMonitorConfig c) {
    try {
      ThermalMonitorActor monitor(std::move(p), std::move(s), std::move(e), c);
    } catch (const std::invalid_argument& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message_of(provider, sink, pool.get_executor(), {}), "no error");
  EXPECT_NE(message_of(nullptr, sink, pool.get_executor(), {}).find("provider is null"), std::string::npos);
  EXPECT_NE(message_of(provider, {}, pool.get_executor(), {}).find("sink is empty"), std::string::npos);
  EXPECT_NE(message_of(provider, sink, {}, {}).find("read executor is empty"), std::string::npos);
  EXPECT_NE(message_of(provider, sink, pool.get_executor(), {.interval = 0ms}).find("at least 1 ms"), std::string::npos);
  EXPECT_NE(message_of(provider, sink, pool.get_executor(), {.thresholds = {.hysteresis = -2}}).find("hysteresis"),
            std::string::npos);
}

}  // namespace
}  // namespace loom::actors
