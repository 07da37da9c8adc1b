#include "prometheus_metrics.hpp"

#include <array>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <utility>

#include "loom/actors/engine/latency_histogram.hpp"
#include "loom/actors/engine/thermal_state.hpp"

namespace loom::net {

namespace {

using Label = std::pair<std::string_view, std::string_view>;
using Labels = std::initializer_list<Label>;

// Writes one exposition: a family's # HELP and # TYPE lines, then its samples. Every metric name is
// prefixed "loom_" here, so the callers name only what follows.
class Exposition {
 public:
  Exposition() { out_.reserve(16 * 1024); }

  void family(std::string_view name, std::string_view type, std::string_view help) {
    out_ += "# HELP loom_";
    out_ += name;
    out_ += ' ';
    append_escaped(help, /*quote=*/false);
    out_ += "\n# TYPE loom_";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
  }

  // `name` is the family's name, or the family's name with a histogram suffix (_bucket, _sum, _count).
  void sample(std::string_view name, Labels labels, std::uint64_t value) {
    begin_sample(name, labels);
    std::array<char, 24> buffer{};
    const auto result = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
    out_.append(buffer.data(), result.ptr);
    out_ += '\n';
  }
  void sample(std::string_view name, Labels labels, double value) {
    begin_sample(name, labels);
    append_double(value);
    out_ += '\n';
  }

  // A family of one sample with no labels.
  void counter(std::string_view name, std::string_view help, std::uint64_t value) {
    family(name, "counter", help);
    sample(name, {}, value);
  }
  void gauge(std::string_view name, std::string_view help, double value) {
    family(name, "gauge", help);
    sample(name, {}, value);
  }
  void gauge(std::string_view name, std::string_view help, std::uint64_t value) {
    family(name, "gauge", help);
    sample(name, {}, value);
  }

  // A latency histogram in seconds. The engine's histogram has 95 finite buckets a quarter octave apart;
  // /metrics shows every second bound (half an octave, 48 buckets): counts at any bound are exact
  // because the buckets are summed cumulatively, and half the series is plenty for histogram_quantile.
  void histogram(std::string_view name, std::string_view help, const actors::LatencyHistogram& histogram) {
    family(name, "histogram", help);
    const std::string bucket = std::string(name) + "_bucket";
    constexpr std::size_t kFinite = actors::LatencyHistogram::kBuckets - 1;
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < kFinite; ++i) {
      cumulative += histogram.bucket_count(i);
      if (i % 2 != 0) continue;
      const std::string le = format_double(seconds(actors::LatencyHistogram::bound(i)));
      sample(bucket, {{"le", le}}, cumulative);
    }
    sample(bucket, {{"le", "+Inf"}}, histogram.count());
    sample(std::string(name) + "_sum", {}, seconds(histogram.sum()));
    sample(std::string(name) + "_count", {}, histogram.count());
  }

  std::string take() && { return std::move(out_); }

  static std::string format_double(double value) {
    if (std::isnan(value)) return "NaN";
    if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
    std::array<char, 32> buffer{};
    const auto result = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
    return std::string(buffer.data(), result.ptr);
  }

 private:
  static double seconds(std::chrono::nanoseconds duration) {
    return std::chrono::duration<double>(duration).count();
  }

  void begin_sample(std::string_view name, Labels labels) {
    out_ += "loom_";
    out_ += name;
    if (labels.size() != 0) {
      out_ += '{';
      bool first = true;
      for (const auto& [key, value] : labels) {
        if (!first) out_ += ',';
        first = false;
        out_ += key;
        out_ += "=\"";
        append_escaped(value, /*quote=*/true);
        out_ += '"';
      }
      out_ += '}';
    }
    out_ += ' ';
  }

  void append_double(double value) { out_ += format_double(value); }

  // Label values escape backslash, double quote and newline; HELP text escapes backslash and newline.
  void append_escaped(std::string_view text, bool quote) {
    for (const char c : text) {
      if (c == '\\') {
        out_ += "\\\\";
      } else if (c == '\n') {
        out_ += "\\n";
      } else if (c == '"' && quote) {
        out_ += "\\\"";
      } else {
        out_ += c;
      }
    }
  }

  std::string out_;
};

double as_double(std::size_t value) { return static_cast<double>(value); }

void render_gateway(Exposition& out, const GatewayContext& context, const GatewayMetrics::Snapshot& gateway) {
  const GatewayPhase phase = context.phase.load(std::memory_order_acquire);
  out.family("gateway_phase", "gauge", "The gateway's phase: 1 for the current one, 0 for the others.");
  for (const GatewayPhase each : {GatewayPhase::loading, GatewayPhase::ready, GatewayPhase::draining,
                                  GatewayPhase::failed}) {
    out.sample("gateway_phase", {{"phase", to_string(each)}}, std::uint64_t{each == phase ? 1u : 0u});
  }
  // model_id and the other model facts are written once before the phase becomes ready: read them only then.
  if (phase == GatewayPhase::ready) {
    out.family("model_info", "gauge", "The model being served (always 1); demo is true for random weights.");
    out.sample("model_info", {{"model", context.model_id}, {"demo", context.config.model_is_demo ? "true" : "false"}},
               std::uint64_t{1});
    out.gauge("model_context_length_tokens", "The model's context length in tokens.",
              static_cast<double>(context.context_length));
  }

  out.family("gateway_requests_total", "counter",
             "Requests the gateway finished, by endpoint and outcome (a finish reason, or refused; "
             "embeddings: stop when answered).");
  for (std::size_t e = 0; e < kEndpointNames.size(); ++e) {
    for (std::size_t o = 0; o < kOutcomeNames.size(); ++o) {
      out.sample("gateway_requests_total", {{"endpoint", kEndpointNames[e]}, {"outcome", kOutcomeNames[o]}},
                 gateway.requests[e][o]);
    }
  }
  out.gauge("gateway_requests_in_flight", "Requests in flight on the whole gateway.",
            as_double(context.budget.in_use()));
  out.gauge("gateway_requests_in_flight_limit", "The most requests the gateway runs at once.",
            as_double(context.budget.limit()));

  out.family("http_responses_total", "counter", "HTTP responses sent, by status code.");
  for (std::size_t i = 0; i < kCountedStatuses.size(); ++i) {
    const std::string code = std::to_string(kCountedStatuses[i]);
    out.sample("http_responses_total", {{"code", code}}, gateway.http_responses[i]);
  }
  out.sample("http_responses_total", {{"code", "other"}}, gateway.http_responses_other);

  out.gauge("connections_open", "TCP connections open now.", gateway.connections_open);
  out.counter("connections_total", "TCP connections accepted.", gateway.connections_total);
  out.family("websocket_frames_total", "counter", "WebSocket messages, by direction (in: from clients).");
  out.sample("websocket_frames_total", {{"direction", "in"}}, gateway.websocket_frames_in);
  out.sample("websocket_frames_total", {{"direction", "out"}}, gateway.websocket_frames_out);
  out.counter("slow_client_cancels_total",
              "WebSockets whose send queue overflowed (their requests were cancelled).",
              gateway.slow_client_cancels);
}

// The step loop's time by phase (step_timer.hpp): the overhead around the forward pass is
// sum(rate(loom_step_seconds_total{phase!="forward"})) / sum(rate(loom_step_seconds_total)).
void render_step_time(Exposition& out, const actors::StepTimeStats& time) {
  out.family("step_seconds_total", "counter",
             "The step loop's busy time by phase: forward (the backend's forward pass and sampling), executor "
             "(the executor around it), scheduler (planning, reserving, building the batch, applying tokens), "
             "gap (messages between the actors).");
  const auto seconds = [](std::chrono::nanoseconds d) { return std::chrono::duration<double>(d).count(); };
  out.sample("step_seconds_total", {{"phase", "forward"}}, seconds(time.forward));
  out.sample("step_seconds_total", {{"phase", "executor"}}, seconds(time.executor));
  out.sample("step_seconds_total", {{"phase", "scheduler"}}, seconds(time.scheduler));
  out.sample("step_seconds_total", {{"phase", "gap"}}, seconds(time.gap));
  out.counter("step_timed_total", "Steps whose phases loom_step_seconds_total sums.", time.steps);
}

void render_engine(Exposition& out, const actors::EngineStats& engine) {
  const auto& scheduler = engine.scheduler;
  const auto& cache = engine.cache.cache;

  out.gauge("model_loaded", "1 when the engine has a model loaded.", std::uint64_t{engine.model_loaded ? 1u : 0u});
  out.gauge("sessions_open", "Open sessions (stand-alone requests not counted).", as_double(engine.sessions));
  out.gauge("engine_active_requests", "Requests accepted by the engine and not yet done.",
            as_double(engine.active_requests));
  out.counter("engine_requests_accepted_total", "Requests that passed the engine's checks.",
              engine.requests_accepted);
  out.counter("engine_requests_refused_total", "Requests answered by an error event.", engine.requests_refused);
  out.counter("engine_requests_completed_total", "Requests ended by a done event, whatever the reason.",
              engine.requests_completed);

  out.gauge("sequences_running", "Sequences being generated.", as_double(scheduler.running));
  out.gauge("sequences_waiting", "Sequences queued for a place in the batch.", as_double(scheduler.waiting));
  out.gauge("sequences_paused", "Running sequences the thermal policy holds back.", as_double(scheduler.paused));
  out.gauge("batch_sequences", "Sequences in the last step.", as_double(scheduler.last_batch_sequences));
  out.gauge("batch_tokens", "Tokens in the last step.", as_double(scheduler.last_batch_tokens));
  out.counter("scheduler_steps_total", "Steps the scheduler ran.", scheduler.steps);
  out.counter("scheduler_steps_failed_total", "Steps that failed.", scheduler.steps_failed);
  out.counter("scheduler_preemptions_total", "Sequences preempted for KV space.", scheduler.preemptions);

  out.counter("prefill_tokens_total", "Prompt positions prefilled (recomputation included).",
              scheduler.prefill_tokens);
  out.counter("generated_tokens_total", "Tokens generated.", scheduler.generated_tokens);
  out.gauge("tokens_per_second", "Generated tokens per second over the last few seconds.",
            scheduler.tokens_per_second);
  out.histogram("time_to_first_token_seconds", "Time from a request's arrival to its first token.",
                scheduler.time_to_first_token);
  out.histogram("inter_token_latency_seconds", "Time between consecutive tokens of a request.",
                scheduler.inter_token_latency);

  out.family("kv_blocks", "gauge",
             "KV cache blocks by state: used (held by a sequence), cached (reusable prefixes), free.");
  out.sample("kv_blocks", {{"state", "used"}}, as_double(cache.used_blocks));
  out.sample("kv_blocks", {{"state", "cached"}}, as_double(cache.cached_blocks));
  out.sample("kv_blocks", {{"state", "free"}}, as_double(cache.free_blocks));
  out.gauge("kv_block_size_tokens", "Tokens per KV cache block.", as_double(cache.block_size));
  out.gauge("kv_usage_ratio", "KV blocks used (not merely cached) over all blocks, 0 to 1.", engine.kv_usage());
  out.counter("kv_evicted_blocks_total", "Cached KV blocks evicted to make room.", cache.evicted_blocks);
  out.counter("prompt_tokens_requested_total", "Prompt tokens of every sequence created.",
              cache.prompt_tokens_requested);
  out.counter("prompt_tokens_reused_total", "Prompt tokens found in the prefix cache (not prefilled again).",
              cache.prompt_tokens_reused);

  out.family("thermal_state", "gauge", "The device's thermal state: 1 for the current one, 0 for the others.");
  for (const auto state : {actors::ThermalState::nominal, actors::ThermalState::fair, actors::ThermalState::serious,
                           actors::ThermalState::critical}) {
    out.sample("thermal_state", {{"state", actors::to_string(state)}},
               std::uint64_t{state == engine.thermal ? 1u : 0u});
  }

  // One series per structure, so a leak (a map that gains an entry per request and never loses it) shows
  // as a line that only climbs while the others follow the load.
  out.family("engine_bookkeeping_entries", "gauge",
             "Entries of the engine's per-request and per-session structures, by structure; each is back at "
             "its idle value once the requests have ended.");
  for (const actors::BookkeepingEntry& entry : engine.bookkeeping_entries()) {
    out.sample("engine_bookkeeping_entries", {{"map", entry.map}}, as_double(entry.entries));
  }

  render_step_time(out, scheduler.step_time);

  out.counter("executor_tokens_computed_total", "Positions run through the model by successful steps.",
              engine.executor.tokens_computed);
  out.family("executor_busy_seconds_total", "counter", "Time the compute thread spent on loads and steps.");
  out.sample("executor_busy_seconds_total", {},
             std::chrono::duration<double>(engine.executor.busy_time).count());
}

}  // namespace

std::string render_prometheus(const GatewayContext& context, const actors::EngineStats& engine,
                              const GatewayMetrics::Snapshot& gateway) {
  Exposition out;
  render_gateway(out, context, gateway);
  render_engine(out, engine);
  return std::move(out).take();
}

}  // namespace loom::net
