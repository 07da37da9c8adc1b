#include "websocket_hello.hpp"

namespace loom::net {

namespace {

std::map<std::string, std::uint64_t> limits_of(const GatewayContext& context) {
  const GatewayConfig& config = context.config;
  const proto::ParseOptions& parse = context.parse_options;
  std::map<std::string, std::uint64_t> limits{
      {"max_frame_bytes", config.max_frame_bytes},
      {"max_json_depth", parse.max_json_depth},
      {"max_id_bytes", parse.max_id_bytes},
      {"max_prompt_bytes", parse.max_prompt_bytes},
      {"max_messages", parse.max_messages},
      {"max_tokens_limit", static_cast<std::uint64_t>(config.max_tokens_limit)},
      {"max_top_k", static_cast<std::uint64_t>(parse.max_top_k)},
      {"max_stop_strings", parse.max_stop_strings},
      {"max_stop_bytes", parse.max_stop_bytes},
      {"max_stop_token_ids", parse.max_stop_token_ids},
      {"max_logit_bias", parse.max_logit_bias},
      {"max_tools", parse.max_tools},
      {"max_constraint_bytes", parse.max_constraint_bytes},
      {"max_requests_per_connection", config.max_requests_per_connection},
      {"max_sessions_per_connection", config.max_sessions_per_connection},
      {"ws_send_queue_bytes", config.ws_send_queue_bytes},
  };
  // Only when set: 0 means "no limit of its own" (the context bounds prompts; requests have no deadline).
  if (config.max_prompt_tokens > 0) limits["max_prompt_tokens"] = static_cast<std::uint64_t>(config.max_prompt_tokens);
  if (config.request_timeout.count() > 0) {
    limits["request_timeout_ms"] = static_cast<std::uint64_t>(config.request_timeout.count());
  }
  return limits;
}

}  // namespace

proto::Hello make_hello(const GatewayContext& context) {
  proto::Hello hello;
  hello.server_version = LOOM_NET_VERSION;
  const GatewayPhase phase = context.phase.load(std::memory_order_acquire);
  hello.status = std::string(to_string(phase));
  // The model's facts are written once before the phase becomes ready and only read after.
  const bool loaded = (phase == GatewayPhase::ready || phase == GatewayPhase::draining) && context.context_length > 0;
  hello.model = loaded ? context.model_id : model_id_for(context.config);
  if (loaded) hello.context_length = context.context_length;
  hello.limits = limits_of(context);
  hello.features = {
      {"chat", loaded && !context.chat_template.empty()},
      {"tool_calls", loaded && context.chat_tool_calls},
      {"reasoning", loaded && context.chat_reasoning},
      {"constrained_output", true},
      {"logprobs", true},
      {"progress", true},
      {"session_control", true},
  };
  return hello;
}

}  // namespace loom::net
