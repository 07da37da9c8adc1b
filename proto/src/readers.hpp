// Internal to loom_proto: the reader behind each public parse_* function, callable at any path (a
// SamplingParams inside a request reads at "params") and inside a message envelope, whose "type" field
// the body then accepts. They throw Invalid; the public functions catch it. Not a public header.
#pragma once

#include <string>
#include <string_view>

#include "loom/proto/cancel_request.hpp"
#include "loom/proto/chat_message.hpp"
#include "loom/proto/done_event.hpp"
#include "loom/proto/error_event.hpp"
#include "loom/proto/generate_request.hpp"
#include "loom/proto/sampling_params.hpp"
#include "loom/proto/session_open.hpp"
#include "loom/proto/session_opened.hpp"
#include "loom/proto/timings.hpp"
#include "loom/proto/token_event.hpp"
#include "loom/proto/usage.hpp"
#include "object_reader.hpp"

namespace loom::proto::detail {

// `envelope_key` names one extra field the object may carry ("type" inside a message); empty for none.
SamplingParams read_sampling_params(const Json& j, const std::string& path, const ParseOptions& options);
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

}  // namespace loom::proto::detail
