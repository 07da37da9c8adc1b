// The OpenAI streaming client: POST /v1/completions or /v1/chat/completions with "stream": true and
// "stream_options": {"include_usage": true}, read as server-sent events (SseParser) until "data: [DONE]".
// Standard request fields only, plus "ignore_eos" unless --no-ignore-eos. A content chunk (non-empty
// "text", or "delta.content" on chat) is a streamed token for the latencies; the final usage chunk, when
// the server sends one, gives the token counts. One HTTP/1.1 keep-alive connection per stream.
#pragma once

#include <memory>
#include <string>

#include <boost/asio/any_io_executor.hpp>

#include "stream_client.hpp"

namespace loom::loadgen {

std::unique_ptr<StreamClient> make_openai_stream_client(boost::asio::any_io_executor executor,
                                                        const StreamContext& context);

// The JSON body of one request (exposed for the tests).
std::string openai_request_body(const Options& options, const RequestSpec& spec);

}  // namespace loom::loadgen
