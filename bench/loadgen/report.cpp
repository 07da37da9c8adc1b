#include "report.hpp"

#include <cstdio>

namespace loom::loadgen {

namespace {

using nlohmann::json;

json optional_number(const std::optional<double>& value) { return value ? json(*value) : json(nullptr); }

// Every whole percentile, 0 to 100: the distribution's shape (for a CDF plot) in 101 numbers, whatever the
// run's length; empty when nothing was recorded.
json quantiles(const LatencySamples& samples) {
  json values = json::array();
  if (samples.empty()) return values;
  for (int p = 0; p <= 100; ++p) values.push_back(*samples.percentile(p));
  return values;
}

json distribution(const LatencySamples& samples) {
  return {{"count", samples.count()},
          {"p50", optional_number(samples.percentile(50))},
          {"p90", optional_number(samples.percentile(90))},
          {"p99", optional_number(samples.percentile(99))},
          {"mean", optional_number(samples.mean())},
          {"min", optional_number(samples.min())},
          {"max", optional_number(samples.max())},
          {"sampled", samples.sampled()},
          {"quantiles", quantiles(samples)}};
}

double per_second(double amount, double seconds) { return seconds > 0 ? amount / seconds : 0; }

std::string format(const char* pattern, double value) {
  char text[64];
  std::snprintf(text, sizeof text, pattern, value);
  return text;
}

std::string cell(const std::optional<double>& value) { return value ? format("%10.2f", *value) : "         -"; }

std::string row(const char* name, const LatencySamples& samples) {
  char label[24];
  std::snprintf(label, sizeof label, "  %-16s", name);
  return label + cell(samples.percentile(50)) + cell(samples.percentile(90)) + cell(samples.percentile(99)) +
         cell(samples.mean()) + cell(samples.max()) + "\n";
}

bool uses_raw_prompts(const Options& options) { return options.endpoint != Endpoint::chat; }
bool uses_chat(const Options& options) { return options.endpoint != Endpoint::completions; }

// How prompts were sized: never exact (text, not token ids); per kind of prompt used, its scale.
json prompt_length(const RunInfo& info) {
  const auto scale_json = [](const PromptScale& scale) {
    return json{{"calibrated", scale.calibrated},
                {"tokens_per_word", scale.tokens_per_word},
                {"overhead_tokens", scale.overhead_tokens}};
  };
  json length = {{"exact", false}};
  bool calibrated = true;
  if (uses_raw_prompts(info.options)) {
    length["prompt"] = scale_json(info.prompt_scales.prompt);
    calibrated = calibrated && info.prompt_scales.prompt.calibrated;
  }
  if (uses_chat(info.options)) {
    length["chat"] = scale_json(info.prompt_scales.chat);
    calibrated = calibrated && info.prompt_scales.chat.calibrated;
  }
  length["calibrated"] = calibrated;
  return length;
}

}  // namespace

json json_report(const RunInfo& info, const RunResults& results) {
  const Options& options = info.options;
  const double wall = info.wall_seconds;
  json errors = json::object();
  json examples = json::object();
  for (int kind = 0; kind < kErrorKinds; ++kind) {
    const auto error_kind = static_cast<ErrorKind>(kind);
    errors[std::string(to_string(error_kind))] = results.errors(error_kind);
    if (!results.example(error_kind).empty()) examples[std::string(to_string(error_kind))] = results.example(error_kind);
  }
  json statuses = json::object();
  for (const auto& [status, count] : results.http_statuses()) statuses[std::to_string(status)] = count;
  const auto prompt_tokens = results.prompt_tokens();
  return {
      {"url", info.endpoint_text},
      {"protocol", options.target.protocol == Protocol::openai_http ? "openai_http" : "loom_websocket"},
      {"endpoint", to_string(options.endpoint)},
      {"concurrency", options.concurrency},
      {"requests", results.finished()},
      {"completed", results.completed()},
      {"failed", results.failed()},
      {"duration_s", wall},
      {"requests_per_s", per_second(static_cast<double>(results.completed()), wall)},
      {"output_tokens", results.output_tokens()},
      {"asked_output_tokens", results.asked_output_tokens()},
      {"output_tokens_per_s", per_second(static_cast<double>(results.output_tokens()), wall)},
      {"token_count_source", results.token_count_source()},
      {"prompt_tokens", prompt_tokens ? json(*prompt_tokens) : json(nullptr)},
      {"asked_prompt_tokens", results.asked_prompt_tokens()},
      {"prompt_tokens_per_s",
       prompt_tokens ? json(per_second(static_cast<double>(*prompt_tokens), wall)) : json(nullptr)},
      {"prompt_length", prompt_length(info)},
      {"shared_prefix_tokens", options.shared_prefix_tokens},
      {"ttft_ms", distribution(results.ttft_ms())},
      {"itl_ms", distribution(results.itl_ms())},
      {"tpot_ms", distribution(results.tpot_ms())},
      {"e2e_ms", distribution(results.e2e_ms())},
      {"errors", errors},
      {"http_statuses", statuses},
      {"error_examples", examples},
      {"seed", options.seed},
  };
}

std::string text_report(const RunInfo& info, const RunResults& results) {
  const double wall = info.wall_seconds;
  std::string text = "loom-loadgen: " + info.endpoint_text + ", " + std::to_string(info.options.concurrency) +
                     (info.options.concurrency == 1 ? " stream" : " streams") + ", " + format("%.2f s", wall) + "\n";
  text += "  completed " + std::to_string(results.completed()) + ", failed " + std::to_string(results.failed()) + "\n";
  text += "  requests/s        " + format("%.2f", per_second(static_cast<double>(results.completed()), wall)) + "\n";
  text += "  output tokens     " + std::to_string(results.output_tokens()) + " (asked " +
          std::to_string(results.asked_output_tokens()) + "; counted from " + results.token_count_source() + ")\n";
  text += "  output tokens/s   " + format("%.1f", per_second(static_cast<double>(results.output_tokens()), wall)) + "\n";
  if (const auto prompt = results.prompt_tokens()) {
    const PromptScale& scale = info.prompt_scales.of(info.options.endpoint == Endpoint::chat);
    text += "  prompt tokens     " + std::to_string(*prompt) + " (asked " + std::to_string(results.asked_prompt_tokens()) +
            "; the server's count" +
            (scale.calibrated ? format(", %.2f tokens per prompt word", scale.tokens_per_word) : std::string()) + ")\n";
    text += "  prompt tokens/s   " + format("%.1f", per_second(static_cast<double>(*prompt), wall)) + "\n";
  }
  text += "  latency (ms)             p50       p90       p99      mean       max\n";
  text += row("time to first", results.ttft_ms());
  text += row("inter-token", results.itl_ms());
  text += row("per output token", results.tpot_ms());
  text += row("end to end", results.e2e_ms());
  if (results.failed() == 0) return text + "  errors: none\n";
  text += "  errors:\n";
  for (int kind = 0; kind < kErrorKinds; ++kind) {
    const auto error_kind = static_cast<ErrorKind>(kind);
    if (results.errors(error_kind) == 0) continue;
    text += "    " + std::string(to_string(error_kind)) + " " + std::to_string(results.errors(error_kind));
    if (error_kind == ErrorKind::http_status) {
      text += " (";
      bool first = true;
      for (const auto& [status, count] : results.http_statuses()) {
        text += (first ? "" : ", ") + std::to_string(status) + ": " + std::to_string(count);
        first = false;
      }
      text += ")";
    }
    text += ", e.g. " + results.example(error_kind) + "\n";
  }
  return text;
}

}  // namespace loom::loadgen
