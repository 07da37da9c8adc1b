#include "loom/proto/parse_options.hpp"

#include <cstdint>
#include <limits>

namespace loom::proto {

ParseOptions ParseOptions::unbounded() noexcept {
  constexpr auto widest = std::numeric_limits<std::size_t>::max();
  ParseOptions options;
  options.max_message_bytes = widest;
  options.max_id_bytes = widest;
  options.max_prompt_bytes = widest;
  options.max_messages = widest;
  options.max_tokens_limit = std::numeric_limits<std::int32_t>::max();
  options.max_top_k = std::numeric_limits<std::int32_t>::max();
  options.max_stop_strings = widest;
  options.max_stop_bytes = widest;
  options.max_stop_token_ids = widest;
  options.max_logit_bias = widest;
  options.max_constraint_bytes = widest;
  options.max_tools = widest;
  return options;
}

}  // namespace loom::proto
