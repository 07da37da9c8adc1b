// GET /metrics and GET /: the Prometheus exposition rendered from hand-made stats and checked by a small
// parser of the text format written here (every sample typed, histograms cumulative, no duplicate series,
// label escaping), then both pages end to end through the gateway.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "chat_page.hpp"
#include "gateway_context.hpp"
#include "gateway_fixture.hpp"
#include "loom/engine.hpp"
#include "prometheus_metrics.hpp"

namespace loom::net {
namespace {

using namespace std::chrono_literals;

// ---- A parser of the Prometheus text format (0.0.4), enough to check what we write ----

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0.0;
};

struct Exposition {
  std::map<std::string, std::string> types;  // family -> counter | gauge | histogram | summary | untyped
  std::map<std::string, std::string> helps;
  std::vector<Sample> samples;
  std::vector<std::string> problems;  // everything that breaks the format's rules

  // The value of the one sample with this name and exactly these labels; nullopt when there is none.
  std::optional<double> value(const std::string& name, const std::map<std::string, std::string>& labels = {}) const {
    for (const auto& sample : samples) {
      if (sample.name == name && sample.labels == labels) return sample.value;
    }
    return std::nullopt;
  }
  bool has_family(const std::string& name) const { return types.count(name) != 0; }
};

bool valid_name(const std::string& name, bool allow_colon) {
  if (name.empty()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (allow_colon && c == ':');
    if (!letter && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

double parse_value(const std::string& text) {
  if (text == "+Inf") return INFINITY;
  if (text == "-Inf") return -INFINITY;
  if (text == "NaN") return NAN;
  std::size_t used = 0;
  const double value = std::stod(text, &used);
  if (used != text.size()) throw std::invalid_argument("trailing characters in value '" + text + "'");
  return value;
}

// One sample line: name, optional {labels}, value (no timestamps: we write none).
Sample parse_sample(const std::string& line) {
  Sample sample;
  std::size_t at = 0;
  while (at < line.size() && line[at] != '{' && line[at] != ' ') ++at;
  sample.name = line.substr(0, at);
  if (!valid_name(sample.name, true)) throw std::invalid_argument("bad metric name '" + sample.name + "'");
  if (at < line.size() && line[at] == '{') {
    ++at;
    while (true) {
      if (at >= line.size()) throw std::invalid_argument("unterminated labels");
      if (line[at] == '}') {
        ++at;
        break;
      }
      const std::size_t equals = line.find('=', at);
      if (equals == std::string::npos) throw std::invalid_argument("label without '='");
      const std::string key = line.substr(at, equals - at);
      if (!valid_name(key, false)) throw std::invalid_argument("bad label name '" + key + "'");
      at = equals + 1;
      if (at >= line.size() || line[at] != '"') throw std::invalid_argument("label value not quoted");
      ++at;
      std::string value;
      while (true) {
        if (at >= line.size()) throw std::invalid_argument("unterminated label value");
        const char c = line[at++];
        if (c == '"') break;
        if (c == '\n') throw std::invalid_argument("raw newline in a label value");
        if (c != '\\') {
          value += c;
          continue;
        }
        if (at >= line.size()) throw std::invalid_argument("dangling backslash");
        const char escaped = line[at++];
        if (escaped == 'n') {
          value += '\n';
        } else if (escaped == '\\' || escaped == '"') {
          value += escaped;
        } else {
          throw std::invalid_argument(std::string("unknown escape \\") + escaped);
        }
      }
      if (!sample.labels.emplace(key, value).second) throw std::invalid_argument("label '" + key + "' twice");
      if (at < line.size() && line[at] == ',') ++at;
    }
  }
  if (at >= line.size() || line[at] != ' ') throw std::invalid_argument("no space before the value");
  sample.value = parse_value(line.substr(at + 1));
  return sample;
}

// The family a sample belongs to: its own name, or a histogram's name without _bucket/_sum/_count.
std::string family_of(const Exposition& exposition, const std::string& name) {
  for (const std::string suffix : {"_bucket", "_sum", "_count"}) {
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      const std::string base = name.substr(0, name.size() - suffix.size());
      const auto type = exposition.types.find(base);
      if (type != exposition.types.end() && type->second == "histogram") return base;
    }
  }
  return name;
}

std::string series_key(const Sample& sample) {
  std::string key = sample.name + "{";
  for (const auto& [name, value] : sample.labels) key += name + "=" + value + ",";
  return key + "}";
}

void check_histograms(Exposition& exposition) {
  // Per histogram series (labels without le): its buckets in the order written.
  struct Series {
    std::vector<std::pair<double, double>> buckets;  // (le, cumulative count)
    std::optional<double> count;
    std::optional<double> sum;
  };
  std::map<std::string, Series> series;
  for (const auto& sample : exposition.samples) {
    const std::string family = family_of(exposition, sample.name);
    if (exposition.types[family] != "histogram") continue;
    auto labels = sample.labels;
    const auto le = labels.find("le");
    std::optional<std::string> le_text;
    if (le != labels.end()) {
      le_text = le->second;
      labels.erase(le);
    }
    Sample without_le{family, labels, 0};
    Series& entry = series[series_key(without_le)];
    if (sample.name == family + "_bucket") {
      if (!le_text) {
        exposition.problems.push_back(sample.name + ": a bucket without le");
        continue;
      }
      entry.buckets.emplace_back(parse_value(*le_text), sample.value);
    } else if (sample.name == family + "_count") {
      entry.count = sample.value;
    } else if (sample.name == family + "_sum") {
      entry.sum = sample.value;
    } else {
      exposition.problems.push_back(sample.name + ": a histogram sample that is no bucket, sum or count");
    }
  }
  for (const auto& [key, entry] : series) {
    if (entry.buckets.empty() || !entry.count || !entry.sum) {
      exposition.problems.push_back(key + ": a histogram needs buckets, _sum and _count");
      continue;
    }
    for (std::size_t i = 1; i < entry.buckets.size(); ++i) {
      if (!(entry.buckets[i].first > entry.buckets[i - 1].first)) {
        exposition.problems.push_back(key + ": bucket bounds not increasing");
      }
      if (entry.buckets[i].second < entry.buckets[i - 1].second) {
        exposition.problems.push_back(key + ": bucket counts not cumulative");
      }
    }
    if (!std::isinf(entry.buckets.back().first)) exposition.problems.push_back(key + ": no le=\"+Inf\" bucket");
    if (entry.buckets.back().second != *entry.count) {
      exposition.problems.push_back(key + ": the +Inf bucket differs from _count");
    }
  }
}

Exposition parse_exposition(const std::string& text) {
  Exposition exposition;
  std::set<std::string> series_seen;
  std::set<std::string> families_with_samples;
  std::istringstream lines(text);
  std::string line;
  int number = 0;
  if (!text.empty() && text.back() != '\n') exposition.problems.push_back("the text does not end with a newline");
  while (std::getline(lines, line)) {
    ++number;
    const std::string where = "line " + std::to_string(number) + ": ";
    if (line.empty()) continue;
    if (line[0] == '#') {
      std::istringstream words(line);
      std::string hash, keyword, name;
      words >> hash >> keyword >> name;
      if (keyword != "TYPE" && keyword != "HELP") continue;  // a plain comment
      if (!valid_name(name, true)) exposition.problems.push_back(where + "bad name in " + keyword);
      std::string rest;
      std::getline(words, rest);
      if (!rest.empty() && rest[0] == ' ') rest.erase(0, 1);
      if (keyword == "TYPE") {
        static const std::set<std::string> kTypes{"counter", "gauge", "histogram", "summary", "untyped"};
        if (!kTypes.count(rest)) exposition.problems.push_back(where + "unknown type '" + rest + "'");
        if (!exposition.types.emplace(name, rest).second) exposition.problems.push_back(where + "second TYPE for " + name);
        if (families_with_samples.count(name)) exposition.problems.push_back(where + "TYPE after samples of " + name);
      } else if (!exposition.helps.emplace(name, rest).second) {
        exposition.problems.push_back(where + "second HELP for " + name);
      }
      continue;
    }
    Sample sample;
    try {
      sample = parse_sample(line);
    } catch (const std::exception& error) {
      exposition.problems.push_back(where + error.what() + ": " + line);
      continue;
    }
    const std::string family = family_of(exposition, sample.name);
    families_with_samples.insert(family);
    const auto type = exposition.types.find(family);
    if (type == exposition.types.end()) {
      exposition.problems.push_back(where + sample.name + " has no # TYPE");
    } else if (type->second == "counter" && !(sample.value >= 0)) {
      exposition.problems.push_back(where + "a negative or NaN counter " + sample.name);
    }
    if (!series_seen.insert(series_key(sample)).second) exposition.problems.push_back(where + "duplicate series " + line);
    exposition.samples.push_back(std::move(sample));
  }
  check_histograms(exposition);
  return exposition;
}

std::string joined(const std::vector<std::string>& problems) {
  std::string all;
  for (const auto& problem : problems) all += problem + "\n";
  return all;
}

// ---- Rendering hand-made stats ----

// A context needs an engine; this one never loads a model.
struct RenderFixture : ::testing::Test {
  static GatewayConfig demo_config() {
    GatewayConfig config;
    config.model_is_demo = true;
    return config;
  }
  loom::Engine engine{[] {
    loom::Engine::Config config;
    config.io_threads = 1;
    return config;
  }()};
  GatewayContext context{engine, demo_config()};
};

TEST(PrometheusParser, FindsTheProblemsItChecksFor) {
  // The checker itself, on text that breaks each rule once: a test that could never fail proves nothing.
  const std::string bad =
      "# TYPE loom_a counter\n"
      "loom_a 1\n"
      "loom_a 2\n"                                  // duplicate series
      "loom_untyped 3\n"                            // no TYPE
      "# TYPE loom_h histogram\n"
      "loom_h_bucket{le=\"1\"} 5\n"
      "loom_h_bucket{le=\"2\"} 4\n"                 // not cumulative
      "loom_h_bucket{le=\"+Inf\"} 6\n"              // differs from _count
      "loom_h_sum 1\n"
      "loom_h_count 7\n"
      "# TYPE loom_b gauge\n"
      "loom_b{x=\"unterminated} 1\n";
  const Exposition parsed = parse_exposition(bad);
  const std::string problems = joined(parsed.problems);
  EXPECT_NE(problems.find("duplicate series"), std::string::npos) << problems;
  EXPECT_NE(problems.find("loom_untyped has no # TYPE"), std::string::npos) << problems;
  EXPECT_NE(problems.find("not cumulative"), std::string::npos) << problems;
  EXPECT_NE(problems.find("+Inf bucket differs"), std::string::npos) << problems;
  EXPECT_NE(problems.find("unterminated"), std::string::npos) << problems;
}

TEST_F(RenderFixture, HandMadeStatsRenderAsValidExpositionWithTheirValues) {
  context.model_id = "tiny \"quoted\" \\ model\nname";  // every character a label value must escape
  context.context_length = 128;
  context.phase.store(GatewayPhase::ready);

  actors::EngineStats engine_stats;
  engine_stats.model_loaded = true;
  engine_stats.sessions = 4;
  engine_stats.active_requests = 2;
  engine_stats.requests_accepted = 11;
  engine_stats.requests_refused = 3;
  engine_stats.requests_completed = 9;
  engine_stats.scheduler.running = 3;
  engine_stats.scheduler.waiting = 5;
  engine_stats.scheduler.generated_tokens = 1234;
  engine_stats.scheduler.prefill_tokens = 567;
  engine_stats.scheduler.tokens_per_second = 42.5;
  engine_stats.scheduler.preemptions = 17;
  engine_stats.scheduler.step_time.steps = 40;
  engine_stats.scheduler.step_time.forward = 2s;
  engine_stats.scheduler.step_time.executor = 20ms;
  engine_stats.scheduler.step_time.scheduler = 30ms;
  engine_stats.scheduler.step_time.gap = 5ms;
  const std::vector<std::chrono::nanoseconds> first_token_latencies{0ns, 7us, 1ms, 5ms, 5ms, 5ms, 2s, 500s};
  for (const auto latency : first_token_latencies) engine_stats.scheduler.time_to_first_token.record(latency);
  engine_stats.scheduler.inter_token_latency.record(3ms);
  engine_stats.cache.cache.block_size = 16;
  engine_stats.cache.cache.total_blocks = 100;
  engine_stats.cache.cache.used_blocks = 25;
  engine_stats.cache.cache.cached_blocks = 15;
  engine_stats.cache.cache.free_blocks = 60;
  engine_stats.thermal = actors::ThermalState::serious;
  engine_stats.bookkeeping.requests = 2;
  engine_stats.scheduler.bookkeeping.fairness_keys = 7;
  engine_stats.cache.cache.sequences = 3;
  engine_stats.executor.bookkeeping.sequences = 4;

  GatewayMetrics metrics;
  for (int i = 0; i < 3; ++i) metrics.request_finished(Endpoint::websocket, "eos");
  metrics.request_finished(Endpoint::chat_completions, "refused");
  metrics.request_finished(Endpoint::completions, "no such outcome");  // counts as error
  for (int i = 0; i < 7; ++i) metrics.http_response(200);
  metrics.http_response(418);
  metrics.http_response(299);
  for (int i = 0; i < 3; ++i) metrics.connection_opened();
  metrics.connection_closed();
  metrics.websocket_frame_in();
  metrics.websocket_frame_out();
  metrics.websocket_frame_out();
  metrics.slow_client_cancelled();

  const std::string text = render_prometheus(context, engine_stats, metrics.snapshot());
  const Exposition parsed = parse_exposition(text);
  ASSERT_TRUE(parsed.problems.empty()) << joined(parsed.problems) << "\n" << text;

  for (const auto& sample : parsed.samples) EXPECT_EQ(sample.name.rfind("loom_", 0), 0u) << sample.name;
  for (const auto& [family, type] : parsed.types) EXPECT_TRUE(parsed.helps.count(family)) << family << " has no HELP";

  using Labels = std::map<std::string, std::string>;
  EXPECT_EQ(parsed.types.at("loom_gateway_requests_total"), "counter");
  EXPECT_EQ(parsed.value("loom_gateway_requests_total", Labels{{"endpoint", "websocket"}, {"outcome", "eos"}}), 3);
  EXPECT_EQ(parsed.value("loom_gateway_requests_total", Labels{{"endpoint", "chat_completions"}, {"outcome", "refused"}}), 1);
  EXPECT_EQ(parsed.value("loom_gateway_requests_total", Labels{{"endpoint", "completions"}, {"outcome", "error"}}), 1);
  EXPECT_EQ(parsed.value("loom_gateway_requests_total", Labels{{"endpoint", "websocket"}, {"outcome", "cancelled"}}), 0);
  EXPECT_EQ(parsed.value("loom_http_responses_total", Labels{{"code", "200"}}), 7);
  EXPECT_EQ(parsed.value("loom_http_responses_total", Labels{{"code", "other"}}), 2);
  EXPECT_EQ(parsed.types.at("loom_connections_open"), "gauge");
  EXPECT_EQ(parsed.value("loom_connections_open"), 2);
  EXPECT_EQ(parsed.value("loom_connections_total"), 3);
  EXPECT_EQ(parsed.value("loom_websocket_frames_total", Labels{{"direction", "in"}}), 1);
  EXPECT_EQ(parsed.value("loom_websocket_frames_total", Labels{{"direction", "out"}}), 2);
  EXPECT_EQ(parsed.value("loom_slow_client_cancels_total"), 1);

  EXPECT_EQ(parsed.value("loom_gateway_phase", Labels{{"phase", "ready"}}), 1);
  EXPECT_EQ(parsed.value("loom_gateway_phase", Labels{{"phase", "loading"}}), 0);
  EXPECT_EQ(parsed.value("loom_model_info", Labels{{"model", context.model_id}, {"demo", "true"}}), 1)
      << "the model's name must survive escaping";
  EXPECT_EQ(parsed.value("loom_model_loaded"), 1);

  EXPECT_EQ(parsed.value("loom_engine_requests_accepted_total"), 11);
  EXPECT_EQ(parsed.value("loom_engine_requests_refused_total"), 3);
  EXPECT_EQ(parsed.value("loom_engine_requests_completed_total"), 9);
  EXPECT_EQ(parsed.value("loom_sessions_open"), 4);
  EXPECT_EQ(parsed.value("loom_sequences_running"), 3);
  EXPECT_EQ(parsed.value("loom_sequences_waiting"), 5);
  EXPECT_EQ(parsed.types.at("loom_generated_tokens_total"), "counter");
  EXPECT_EQ(parsed.value("loom_generated_tokens_total"), 1234);
  EXPECT_EQ(parsed.value("loom_prefill_tokens_total"), 567);
  EXPECT_EQ(parsed.value("loom_tokens_per_second"), 42.5);
  EXPECT_EQ(parsed.types.at("loom_scheduler_preemptions_total"), "counter");
  EXPECT_EQ(parsed.value("loom_scheduler_preemptions_total"), 17);

  // The step loop's phases, in seconds, one series each, and the steps they sum.
  EXPECT_EQ(parsed.types.at("loom_step_seconds_total"), "counter");
  EXPECT_NEAR(parsed.value("loom_step_seconds_total", Labels{{"phase", "forward"}}).value_or(-1.0), 2.0, 1e-12);
  EXPECT_NEAR(parsed.value("loom_step_seconds_total", Labels{{"phase", "executor"}}).value_or(-1.0), 0.02, 1e-12);
  EXPECT_NEAR(parsed.value("loom_step_seconds_total", Labels{{"phase", "scheduler"}}).value_or(-1.0), 0.03, 1e-12);
  EXPECT_NEAR(parsed.value("loom_step_seconds_total", Labels{{"phase", "gap"}}).value_or(-1.0), 0.005, 1e-12);
  EXPECT_EQ(parsed.value("loom_step_timed_total"), 40);

  EXPECT_EQ(parsed.value("loom_kv_blocks", Labels{{"state", "used"}}), 25);
  EXPECT_EQ(parsed.value("loom_kv_blocks", Labels{{"state", "cached"}}), 15);
  EXPECT_EQ(parsed.value("loom_kv_blocks", Labels{{"state", "free"}}), 60);
  EXPECT_EQ(parsed.value("loom_kv_usage_ratio"), 0.25);

  // One gauge per bookkeeping structure, named as EngineStats names them (a soak test reads these).
  EXPECT_EQ(parsed.types.at("loom_engine_bookkeeping_entries"), "gauge");
  EXPECT_EQ(parsed.value("loom_engine_bookkeeping_entries", Labels{{"map", "engine.requests"}}), 2);
  EXPECT_EQ(parsed.value("loom_engine_bookkeeping_entries", Labels{{"map", "scheduler.fairness_keys"}}), 7);
  EXPECT_EQ(parsed.value("loom_engine_bookkeeping_entries", Labels{{"map", "cache.sequences"}}), 3);
  EXPECT_EQ(parsed.value("loom_engine_bookkeeping_entries", Labels{{"map", "executor.sequences"}}), 4);
  EXPECT_EQ(parsed.value("loom_engine_bookkeeping_entries", Labels{{"map", "scheduler.sequences"}}), 0);
  for (const auto& entry : engine_stats.bookkeeping_entries()) {
    EXPECT_TRUE(parsed.value("loom_engine_bookkeeping_entries", Labels{{"map", entry.map}})) << entry.map;
  }

  for (const std::string state : {"nominal", "fair", "serious", "critical"}) {
    EXPECT_EQ(parsed.value("loom_thermal_state", Labels{{"state", state}}), state == "serious" ? 1 : 0) << state;
  }

  // The TTFT histogram in seconds: every bucket counts exactly the samples at or below its bound.
  EXPECT_EQ(parsed.types.at("loom_time_to_first_token_seconds"), "histogram");
  EXPECT_EQ(parsed.value("loom_time_to_first_token_seconds_count"), first_token_latencies.size());
  EXPECT_NEAR(*parsed.value("loom_time_to_first_token_seconds_sum"), 502.016007, 1e-6);
  int buckets = 0;
  for (const auto& sample : parsed.samples) {
    if (sample.name != "loom_time_to_first_token_seconds_bucket") continue;
    ++buckets;
    const double le = parse_value(sample.labels.at("le"));
    const auto expected = std::count_if(first_token_latencies.begin(), first_token_latencies.end(), [&](auto latency) {
      return std::isinf(le) || latency.count() <= std::llround(le * 1e9);
    });
    EXPECT_EQ(sample.value, expected) << "le=" << sample.labels.at("le");
  }
  EXPECT_GE(buckets, 20) << "too coarse for histogram_quantile";
  EXPECT_EQ(parsed.value("loom_time_to_first_token_seconds_bucket", Labels{{"le", "+Inf"}}), 8);
  EXPECT_EQ(parsed.value("loom_inter_token_latency_seconds_count"), 1);
  EXPECT_NEAR(*parsed.value("loom_inter_token_latency_seconds_sum"), 0.003, 1e-12);
}

TEST_F(RenderFixture, WhileLoadingThePhaseSaysSoAndNoModelIsNamed) {
  const std::string text = render_prometheus(context, actors::EngineStats{}, GatewayMetrics{}.snapshot());
  const Exposition parsed = parse_exposition(text);
  ASSERT_TRUE(parsed.problems.empty()) << joined(parsed.problems) << "\n" << text;
  EXPECT_EQ(parsed.value("loom_gateway_phase", {{"phase", "loading"}}), 1);
  EXPECT_EQ(parsed.value("loom_gateway_phase", {{"phase", "ready"}}), 0);
  EXPECT_FALSE(parsed.has_family("loom_model_info"));
  EXPECT_EQ(parsed.value("loom_model_loaded"), 0);
  EXPECT_EQ(parsed.value("loom_kv_usage_ratio"), 0);
  EXPECT_EQ(parsed.value("loom_time_to_first_token_seconds_bucket", {{"le", "+Inf"}}), 0);
  EXPECT_EQ(parsed.value("loom_time_to_first_token_seconds_count"), 0);
}

// ---- End to end: GET / and GET /metrics on a running gateway ----

class MetricsEndToEnd : public ::testing::Test {
 protected:
  test::GatewayUnderTest gateway;

  Exposition scrape() {
    test::HttpResult result = test::http_request(gateway.port(), "GET", "/metrics");
    EXPECT_EQ(result.status, 200);
    EXPECT_EQ(result.headers["content-type"], kPrometheusContentType);
    Exposition parsed = parse_exposition(result.body);
    EXPECT_TRUE(parsed.problems.empty()) << joined(parsed.problems) << "\n" << result.body;
    return parsed;
  }
};

TEST_F(MetricsEndToEnd, TheChatPageIsServedAtTheRoot) {
  test::HttpResult result = test::http_request(gateway.port(), "GET", "/");
  EXPECT_EQ(result.status, 200);
  EXPECT_EQ(result.headers["content-type"].rfind("text/html", 0), 0u) << result.headers["content-type"];
  EXPECT_EQ(result.body, chat_page_html());
  // Self-contained: nothing loaded from elsewhere.
  EXPECT_NE(result.body.find("/v1/ws"), std::string::npos);
  EXPECT_EQ(result.body.find("http://"), std::string::npos);
  EXPECT_EQ(result.body.find("https://"), std::string::npos);
  EXPECT_EQ(result.body.find("innerHTML"), std::string::npos) << "model text goes in with textContent";
}

TEST_F(MetricsEndToEnd, AfterStartupTheModelIsReadyAndLoaded) {
  const Exposition parsed = scrape();
  EXPECT_EQ(parsed.value("loom_gateway_phase", {{"phase", "ready"}}), 1);
  EXPECT_EQ(parsed.value("loom_model_loaded"), 1);
  EXPECT_EQ(parsed.value("loom_model_context_length_tokens"), 128);  // aidreams260K
  EXPECT_GT(*parsed.value("loom_kv_blocks", {{"state", "free"}}), 0);
  EXPECT_EQ(parsed.value("loom_kv_blocks", {{"state", "used"}}), 0);
  EXPECT_EQ(parsed.value("loom_engine_active_requests"), 0);
  EXPECT_EQ(parsed.value("loom_sequences_running"), 0);
  for (const std::string map : {"engine.requests", "scheduler.sequences", "scheduler.fairness_keys", "cache.sequences",
                                "executor.sequences"}) {
    EXPECT_EQ(parsed.value("loom_engine_bookkeeping_entries", {{"map", map}}), 0) << map;
  }
}

TEST_F(MetricsEndToEnd, ARequestOverTheWebSocketIsCounted) {
  std::string finish_reason;
  std::int64_t completion_tokens = 0;
  {
    test::WsClient client(gateway.port());
    client.send(nlohmann::json{{"type", "generate"},
                               {"id", "m1"},
                               {"prompt", "Once upon a time"},
                               {"params", {{"max_tokens", 12}, {"temperature", 0}}}});
    const auto events = client.receive_until_end("m1");
    ASSERT_FALSE(events.empty());
    ASSERT_EQ(events.back()["type"], "done") << events.back().dump();
    finish_reason = events.back()["finish_reason"];
    completion_tokens = events.back()["usage"]["completion_tokens"];
  }
  ASSERT_GT(completion_tokens, 0);

  // The gateway and the engine count a request once its done event has gone out, and a frame once its
  // write has completed, which may be just after the client read it: scrape until all show it (bounded).
  const std::map<std::string, std::string> websocket_outcome{{"endpoint", "websocket"}, {"outcome", finish_reason}};
  const std::map<std::string, std::string> frames_out{{"direction", "out"}};
  Exposition parsed;
  const auto deadline = std::chrono::steady_clock::now() + 20s;  // generous: under ASan at -j2 the writes can lag seconds behind
  do {
    parsed = scrape();
  } while ((parsed.value("loom_gateway_requests_total", websocket_outcome).value_or(0) < 1 ||
            parsed.value("loom_engine_requests_completed_total").value_or(0) < 1 ||
            parsed.value("loom_websocket_frames_total", frames_out).value_or(0) < completion_tokens + 1) &&
           std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(parsed.value("loom_gateway_requests_total", websocket_outcome), 1);
  EXPECT_GE(parsed.value("loom_generated_tokens_total").value_or(0), completion_tokens);
  EXPECT_EQ(parsed.value("loom_engine_requests_completed_total"), 1);
  // Its engine and scheduler entries went with it (the cache manager's and executor's follow by message).
  EXPECT_EQ(parsed.value("loom_engine_bookkeeping_entries", {{"map", "engine.requests"}}), 0);
  EXPECT_EQ(parsed.value("loom_engine_bookkeeping_entries", {{"map", "scheduler.fairness_keys"}}), 0);
  EXPECT_EQ(parsed.value("loom_time_to_first_token_seconds_count"), 1);
  if (completion_tokens > 1) {
    EXPECT_GE(parsed.value("loom_inter_token_latency_seconds_count").value_or(0), 1);
  }
  EXPECT_GE(parsed.value("loom_websocket_frames_total", {{"direction", "in"}}).value_or(0), 1);
  EXPECT_GE(parsed.value("loom_websocket_frames_total", {{"direction", "out"}}).value_or(0), completion_tokens + 1);
  EXPECT_GE(parsed.value("loom_http_responses_total", {{"code", "101"}}).value_or(0), 1);
  EXPECT_GE(parsed.value("loom_connections_total").value_or(0), 2);
}

TEST_F(MetricsEndToEnd, ACompletionOverHttpIsCounted) {
  const test::HttpResult result =
      test::http_request(gateway.port(), "POST", "/v1/completions",
                         R"({"model":"any","prompt":"Once upon a time","max_tokens":8,"temperature":0})",
                         {{"content-type", "application/json"}});
  ASSERT_EQ(result.status, 200) << result.body;
  const nlohmann::json body = result.json();
  const std::string finish_reason = body["choices"][0]["finish_reason"];
  const std::int64_t completion_tokens = body["usage"]["completion_tokens"];
  // OpenAI's "length" and "stop" are our outcomes of the same names; eos is reported as "stop" there.
  const std::string outcome = finish_reason == "stop" ? "eos" : finish_reason;

  const std::map<std::string, std::string> completions_outcome{{"endpoint", "completions"}, {"outcome", outcome}};
  Exposition parsed;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  do {
    parsed = scrape();
  } while ((parsed.value("loom_gateway_requests_total", completions_outcome).value_or(0) < 1 ||
            parsed.value("loom_engine_requests_completed_total").value_or(0) < 1) &&
           std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(parsed.value("loom_gateway_requests_total", completions_outcome), 1);
  EXPECT_GE(parsed.value("loom_generated_tokens_total").value_or(0), completion_tokens);
  EXPECT_EQ(parsed.value("loom_engine_requests_completed_total"), 1);
  EXPECT_EQ(parsed.value("loom_time_to_first_token_seconds_count"), 1);
  EXPECT_GE(parsed.value("loom_http_responses_total", {{"code", "200"}}).value_or(0), 1);
  EXPECT_EQ(parsed.value("loom_sequences_running"), 0);
}

}  // namespace
}  // namespace loom::net
