// Internal to loom_proto: the reader behind each public parse_* function, callable at any path (a
// SamplingParams inside a request reads at "params") and inside a message envelope, whose "type" field
// the body then accepts. They throw Invalid; the public functions catch it. Not a public header.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "loom/proto/cancel_request.hpp"
#include "loom/proto/chat_message.hpp"
#include "loom/proto/done_event.hpp"
#include "loom/proto/error_event.hpp"
#include "loom/proto/generate_request.hpp"
#include "loom/proto/hello.hpp"
#include "loom/proto/progress_event.hpp"
#include "loom/proto/sampling_params.hpp"
#include "loom/proto/session_control.hpp"
#include "loom/proto/session_open.hpp"
#include "loom/proto/session_opened.hpp"
#include "loom/proto/timings.hpp"
#include "loom/proto/token_event.hpp"
#include "loom/proto/tool_call.hpp"
#include "loom/proto/usage.hpp"
#include "object_reader.hpp"

namespace loom::proto::detail {

// `envelope_key` names one extra field the object may carry ("type" inside a message); empty for none.
SamplingParams read_sampling_params(const Json& j, const std::string& path, const ParseOptions& options);
// A tool's name (is_valid_tool_name), and a JSON object kept as its compact text, at most max_bytes.
std::string read_tool_name(const Json& value, const std::string& path);
std::string read_json_object_text(const Json& value, const std::string& path, std::size_t max_bytes);
ToolCall read_tool_call(const Json& j, const std::string& path, const ParseOptions& options);
ToolCallDelta read_tool_call_delta(const Json& j, const std::string& path, const ParseOptions& options);
ToolDefinition read_tool_definition(const Json& j, const std::string& path, const ParseOptions& options);
ToolChoice read_tool_choice(const Json& j, const std::string& path, const ParseOptions& options);
// An array of at most `max` items, each read by `read` at its index's path.
template <class T, class Read>
std::vector<T> read_array(const Json& value, const std::string& path, std::size_t max, Read read) {
  if (!value.is_array()) fail(path, "must be an array, got " + describe(value));
  if (value.size() > max) {
    fail(path, "must have at most " + std::to_string(max) + " entries, got " + std::to_string(value.size()));
  }
  std::vector<T> items;
  items.reserve(value.size());
  for (std::size_t i = 0; i < value.size(); ++i) items.push_back(read(value[i], index_path(path, i)));
  return items;
}
ChatMessage read_chat_message(const Json& j, const std::string& path, const ParseOptions& options);
GenerateRequest read_generate_request(const Json& j, const std::string& path, const ParseOptions& options,
                                      std::string_view envelope_key = {});
SessionOpen read_session_open(const Json& j, const std::string& path, const ParseOptions& options,
                              std::string_view envelope_key = {});
CancelRequest read_cancel_request(const Json& j, const std::string& path, const ParseOptions& options,
                                  std::string_view envelope_key = {});
SessionOpened read_session_opened(const Json& j, const std::string& path, const ParseOptions& options,
                                  std::string_view envelope_key = {});
TokenEvent read_token_event(const Json& j, const std::string& path, const ParseOptions& options,
                            std::string_view envelope_key = {});
Usage read_usage(const Json& j, const std::string& path, const ParseOptions& options);
Timings read_timings(const Json& j, const std::string& path, const ParseOptions& options);
DoneEvent read_done_event(const Json& j, const std::string& path, const ParseOptions& options,
                          std::string_view envelope_key = {});
ErrorEvent read_error_event(const Json& j, const std::string& path, const ParseOptions& options,
                            std::string_view envelope_key = {});
Hello read_hello(const Json& j, const std::string& path, const ParseOptions& options, std::string_view envelope_key = {});
ProgressEvent read_progress_event(const Json& j, const std::string& path, const ParseOptions& options,
                                  std::string_view envelope_key = {});
SessionClose read_session_close(const Json& j, const std::string& path, const ParseOptions& options,
                                std::string_view envelope_key = {});
SessionReset read_session_reset(const Json& j, const std::string& path, const ParseOptions& options,
                                std::string_view envelope_key = {});
SessionList read_session_list(const Json& j, const std::string& path, const ParseOptions& options,
                              std::string_view envelope_key = {});
SessionClosed read_session_closed(const Json& j, const std::string& path, const ParseOptions& options,
                                  std::string_view envelope_key = {});
SessionResetDone read_session_reset_done(const Json& j, const std::string& path, const ParseOptions& options,
                                         std::string_view envelope_key = {});
SessionListed read_session_listed(const Json& j, const std::string& path, const ParseOptions& options,
                                  std::string_view envelope_key = {});

}  // namespace loom::proto::detail
