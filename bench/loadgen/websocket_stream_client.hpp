// The loom WebSocket client (proto/PROTOCOL.md): one connection to /v1/ws per stream, one `generate` frame
// per request (id "r<number>", a prompt or, with --endpoint chat, a user message; max_tokens, temperature,
// seed and ignore_eos in params), then its `token` events to its `done` (or an `error`). Every token event
// is one token, so the counts are exact; `done.usage` gives the server's counts too. Server frames are read
// with loom_proto's parser (lenient: a newer server may add fields).
#pragma once

#include <memory>
#include <string>

#include <boost/asio/any_io_executor.hpp>

#include "stream_client.hpp"

namespace loom::loadgen {

std::unique_ptr<StreamClient> make_websocket_stream_client(boost::asio::any_io_executor executor,
                                                           const StreamContext& context);

// The generate frame of one request (exposed for the tests).
std::string websocket_generate_frame(const Options& options, const RequestSpec& spec);

}  // namespace loom::loadgen
