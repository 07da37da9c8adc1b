// ParseOptions: the limits every parser applies to client input, and whether unknown fields are refused.
// Each value a client controls is bounded, because a request that asks for a million stop strings or a
// gigabyte prompt must be refused at the door rather than discovered by the scheduler. The defaults suit
// a public server; a deployment loosens or tightens them in one place and passes the struct to the parsers.
#pragma once

#include <cstddef>
#include <cstdint>

namespace loom::proto {

struct ParseOptions {
  // Strict mode refuses fields the protocol does not define, so a typo such as "temprature" is reported
  // instead of silently ignored. Lenient mode ignores them, for clients written against a newer protocol.
  bool strict = true;

  // Size of one whole message text (a WebSocket frame), checked before any JSON parsing.
  std::size_t max_message_bytes = 4u << 20;
  // Nesting of objects and arrays in one message text; the protocol itself needs 3 levels.
  std::size_t max_json_depth = 32;

  // Request and session ids.
  std::size_t max_id_bytes = 128;
  // A raw prompt, one chat message's content, the sum of all contents of a request, and a system prompt.
  std::size_t max_prompt_bytes = 1u << 20;
  // Chat messages in one request.
  std::size_t max_messages = 256;

  // Upper bound of params.max_tokens (a larger value is refused, not clamped). A request that omits
  // max_tokens gets this: it generates until an end of sequence, a stop or the end of the context, at
  // most this many tokens.
  std::int32_t max_tokens_limit = 4096;
  // Upper bound of params.top_k: bounds the sampler's partial sort.
  std::int32_t max_top_k = 1000;
  // params.stop: how many strings, and the byte length of each.
  std::size_t max_stop_strings = 8;
  std::size_t max_stop_bytes = 256;
  // params.stop_token_ids: how many.
  std::size_t max_stop_token_ids = 32;
  // params.logit_bias: how many tokens.
  std::size_t max_logit_bias = 1024;
  // params.grammar (GBNF text) or params.json_schema (its compact JSON text): how many bytes. The grammar
  // compiler bounds what the text may expand to on its own (GrammarLimits, SchemaLimits).
  std::size_t max_constraint_bytes = 256u << 10;
  // Tools offered in one request, and tool calls in one chat message or one done event. A tool's
  // parameters schema, and chat_template_kwargs, are bounded by max_constraint_bytes; the tools' text in
  // all, and tool call arguments (with the messages' content), by max_prompt_bytes.
  std::size_t max_tools = 128;

  // Every size and count limit at its widest, the fixed ranges kept: what the engine holds a request built
  // in code to (a deployment's limits are the gateway's, applied when it parses).
  static ParseOptions unbounded() noexcept;
};

}  // namespace loom::proto
