#include "loom/proto/sampling_params.hpp"

#include <algorithm>
#include <charconv>
#include <limits>

#include "readers.hpp"

namespace loom::proto {

void to_json(nlohmann::json& j, const SamplingParams& params) {
  j = nlohmann::json{
      {"temperature", params.temperature},
      {"top_k", params.top_k},
      {"top_p", params.top_p},
      {"min_p", params.min_p},
      {"repetition_penalty", params.repetition_penalty},
      {"frequency_penalty", params.frequency_penalty},
      {"presence_penalty", params.presence_penalty},
      {"repetition_last_n", params.repetition_last_n},
      {"max_tokens", params.max_tokens},
      {"stop", params.stop},
      {"stop_token_ids", params.stop_token_ids},
      {"ignore_eos", params.ignore_eos},
      {"logprobs", params.logprobs},
  };
  if (params.seed) j["seed"] = *params.seed;
  if (!params.logit_bias.empty()) {
    auto& bias = j["logit_bias"] = nlohmann::json::object();
    for (const auto& [token, value] : params.logit_bias) bias[std::to_string(token)] = value;
  }
  if (params.constraint) {
    const OutputConstraint& c = *params.constraint;
    switch (c.kind) {
      case OutputConstraint::Kind::grammar:
        j["grammar"] = c.text;
        break;
      case OutputConstraint::Kind::json_schema:
        // Parsed back from the text it was stored as; a text that is not JSON (built in code) stays a string
        // so that nothing is lost, and the reader refuses it with a message.
        j["json_schema"] = nlohmann::json::parse(c.text, nullptr, false);
        if (j["json_schema"].is_discarded()) j["json_schema"] = c.text;
        break;
      case OutputConstraint::Kind::json_object:
        j["response_format"] = nlohmann::json{{"type", "json_object"}};
        break;
    }
  }
}

void keep_schema_order(SamplingParams& params, const nlohmann::ordered_json& fields) {
  if (!params.constraint || params.constraint->kind != OutputConstraint::Kind::json_schema || !fields.is_object()) return;
  const nlohmann::ordered_json* schema = nullptr;
  if (const auto it = fields.find("json_schema"); it != fields.end()) {
    schema = &*it;
  } else if (const auto format = fields.find("response_format"); format != fields.end() && format->is_object()) {
    const auto inner = format->find("json_schema");
    if (inner != format->end() && inner->is_object()) {
      if (const auto s = inner->find("schema"); s != inner->end()) schema = &*s;
    }
  }
  if (schema == nullptr || !(schema->is_object() || schema->is_boolean())) return;
  // The same value in another order: the same bytes in all, so the size bound checked already holds.
  std::string text = schema->dump();
  if (text.size() == params.constraint->text.size()) params.constraint->text = std::move(text);
}

Parsed<SamplingParams> parse_sampling_params(const nlohmann::json& j, const ParseOptions& options) {
  return detail::guarded<SamplingParams>([&] { return detail::read_sampling_params(j, "", options); }, nullptr,
                                         options);
}

namespace detail {

namespace {

std::vector<std::string> read_stop_strings(const Json& value, const std::string& path, const ParseOptions& options) {
  if (!value.is_array()) fail(path, "must be an array of strings, got " + describe(value));
  if (value.size() > options.max_stop_strings) {
    fail(path, "must have at most " + std::to_string(options.max_stop_strings) + " entries, got " +
                   std::to_string(value.size()));
  }
  std::vector<std::string> stop;
  stop.reserve(value.size());
  for (std::size_t i = 0; i < value.size(); ++i) {
    const std::string item_path = index_path(path, i);
    std::string text = read_string(value[i], item_path);
    // An empty stop string would match at once, ending every request before its first token.
    if (text.empty()) fail(item_path, "must not be empty");
    check_max_bytes(text, item_path, options.max_stop_bytes);
    stop.push_back(std::move(text));
  }
  return stop;
}

std::vector<std::int32_t> read_stop_token_ids(const Json& value, const std::string& path, const ParseOptions& options) {
  if (!value.is_array()) fail(path, "must be an array of integers, got " + describe(value));
  if (value.size() > options.max_stop_token_ids) {
    fail(path, "must have at most " + std::to_string(options.max_stop_token_ids) + " entries, got " +
                   std::to_string(value.size()));
  }
  std::vector<std::int32_t> ids;
  ids.reserve(value.size());
  for (std::size_t i = 0; i < value.size(); ++i) {
    ids.push_back(static_cast<std::int32_t>(
        read_integer(value[i], index_path(path, i), 0, std::numeric_limits<std::int32_t>::max())));
  }
  return ids;
}

// An object of token id (a decimal string, as JSON keys are) to bias, OpenAI's form.
std::map<std::int32_t, double> read_logit_bias(const Json& value, const std::string& path, const ParseOptions& options) {
  if (!value.is_object()) fail(path, "must be an object of token id to bias, got " + describe(value));
  if (value.size() > options.max_logit_bias) {
    fail(path, "must have at most " + std::to_string(options.max_logit_bias) + " entries, got " +
                   std::to_string(value.size()));
  }
  std::map<std::int32_t, double> bias;
  for (const auto& [key, item] : value.items()) {
    const std::string item_path = child_path(path, key);
    std::int32_t token = 0;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), token);
    if (key.empty() || ec != std::errc{} || end != key.data() + key.size() || token < 0) {
      fail(item_path, "must be keyed by a token id, an integer in [0, 2147483647], got " + echo_text(key));
    }
    bias[token] = read_number(item, item_path, {-SamplingParams::kMaxAbsLogitBias, SamplingParams::kMaxAbsLogitBias});
  }
  return bias;
}

std::string read_schema_text(const Json& value, const std::string& path, const ParseOptions& options) {
  if (!value.is_object() && !value.is_boolean()) fail(path, "must be a JSON Schema (an object or a boolean), got " + describe(value));
  std::string text = value.dump();
  check_max_bytes(text, path, options.max_constraint_bytes);
  return text;
}

// OpenAI's form: {"type": "text"} (no constraint), {"type": "json_object"}, or {"type": "json_schema",
// "json_schema": {"name": .., "schema": {..}, "strict": .., "description": ..}}.
std::optional<OutputConstraint> read_response_format(const Json& value, const std::string& path,
                                                     const ParseOptions& options) {
  ObjectReader r(value, path, options);
  r.check_known({"type", "json_schema"});
  const std::string type = read_string(r.require("type"), r.path("type"));
  if (type == "text") return std::nullopt;
  if (type == "json_object") return OutputConstraint{OutputConstraint::Kind::json_object, {}};
  if (type != "json_schema") {
    fail(r.path("type"), "must be \"text\", \"json_object\" or \"json_schema\", got " + echo_text(type));
  }
  ObjectReader inner(r.require("json_schema"), r.path("json_schema"), options);
  inner.check_known({"name", "schema", "strict", "description"});
  if (const Json* v = inner.find("name")) check_max_bytes(read_string(*v, inner.path("name")), inner.path("name"), 64);
  if (const Json* v = inner.find("strict")) read_bool(*v, inner.path("strict"));
  if (const Json* v = inner.find("description")) read_string(*v, inner.path("description"));
  // OpenAI allows the schema to be left out (any JSON); the grammar of an empty schema is any JSON value.
  const Json* schema = inner.find("schema");
  return OutputConstraint{OutputConstraint::Kind::json_schema,
                          schema != nullptr ? read_schema_text(*schema, inner.path("schema"), options) : "{}"};
}

std::optional<OutputConstraint> read_constraint(const ObjectReader& r, const ParseOptions& options) {
  const Json* grammar = r.find("grammar");
  const Json* schema = r.find("json_schema");
  const Json* format = r.find("response_format");
  if ((grammar != nullptr) + (schema != nullptr) + (format != nullptr) > 1) {
    fail(r.path(grammar != nullptr && schema != nullptr ? "json_schema" : "response_format"),
         "only one of grammar, json_schema and response_format may be given");
  }
  if (grammar != nullptr) {
    std::string text = read_string(*grammar, r.path("grammar"));
    check_max_bytes(text, r.path("grammar"), options.max_constraint_bytes);
    if (text.empty()) fail(r.path("grammar"), "must not be empty (leave the field out for free text)");
    return OutputConstraint{OutputConstraint::Kind::grammar, std::move(text)};
  }
  if (schema != nullptr) {
    return OutputConstraint{OutputConstraint::Kind::json_schema, read_schema_text(*schema, r.path("json_schema"), options)};
  }
  if (format != nullptr) return read_response_format(*format, r.path("response_format"), options);
  return std::nullopt;
}

}  // namespace

SamplingParams read_sampling_params(const Json& j, const std::string& path, const ParseOptions& options) {
  ObjectReader r(j, path, options);
  r.check_known({"temperature", "top_k", "top_p", "min_p", "repetition_penalty", "frequency_penalty",
                 "presence_penalty", "repetition_last_n", "seed", "max_tokens", "stop", "stop_token_ids", "ignore_eos", "logprobs", "logit_bias", "grammar", "json_schema", "response_format"});
  SamplingParams p;
  if (const Json* v = r.find("temperature")) {
    p.temperature = read_number(*v, r.path("temperature"), {0.0, SamplingParams::kMaxTemperature});
  }
  if (const Json* v = r.find("top_k")) {
    p.top_k = static_cast<std::int32_t>(read_integer(*v, r.path("top_k"), 0, options.max_top_k));
  }
  if (const Json* v = r.find("top_p")) {
    p.top_p = read_number(*v, r.path("top_p"), {0.0, 1.0, true, false});
  }
  if (const Json* v = r.find("min_p")) {
    p.min_p = read_number(*v, r.path("min_p"), {0.0, 1.0});
  }
  if (const Json* v = r.find("repetition_penalty")) {
    p.repetition_penalty =
        read_number(*v, r.path("repetition_penalty"), {0.0, SamplingParams::kMaxRepetitionPenalty, true, false});
  }
  const Interval penalty{-SamplingParams::kMaxAbsPenalty, SamplingParams::kMaxAbsPenalty};
  if (const Json* v = r.find("frequency_penalty")) {
    p.frequency_penalty = read_number(*v, r.path("frequency_penalty"), penalty);
  }
  if (const Json* v = r.find("presence_penalty")) {
    p.presence_penalty = read_number(*v, r.path("presence_penalty"), penalty);
  }
  if (const Json* v = r.find("repetition_last_n")) {
    p.repetition_last_n =
        static_cast<std::int32_t>(read_integer(*v, r.path("repetition_last_n"), -1, SamplingParams::kMaxRepetitionLastN));
  }
  if (const Json* v = r.find("logit_bias")) p.logit_bias = read_logit_bias(*v, r.path("logit_bias"), options);
  if (const Json* v = r.find("seed")) p.seed = read_unsigned(*v, r.path("seed"));
  // Absent: until the end of the context (the scheduler ends the sequence there, reason length) or an
  // end of sequence, capped by the deployment's ceiling, as the peer servers do; no short default that
  // cuts an answer off mid-sentence.
  p.max_tokens = options.max_tokens_limit;
  if (const Json* v = r.find("max_tokens")) {
    p.max_tokens = static_cast<std::int32_t>(read_integer(*v, r.path("max_tokens"), 1, options.max_tokens_limit));
  }
  if (const Json* v = r.find("stop")) p.stop = read_stop_strings(*v, r.path("stop"), options);
  if (const Json* v = r.find("stop_token_ids")) {
    p.stop_token_ids = read_stop_token_ids(*v, r.path("stop_token_ids"), options);
  }
  if (const Json* v = r.find("ignore_eos")) p.ignore_eos = read_bool(*v, r.path("ignore_eos"));
  if (const Json* v = r.find("logprobs")) {
    p.logprobs = static_cast<std::int32_t>(read_integer(*v, r.path("logprobs"), 0, SamplingParams::kMaxLogprobs));
  }
  p.constraint = read_constraint(r, options);
  return p;
}

}  // namespace detail

}  // namespace loom::proto
