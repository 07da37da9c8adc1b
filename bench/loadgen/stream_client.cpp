#include "stream_client.hpp"

#include "openai_stream_client.hpp"
#include "websocket_stream_client.hpp"

namespace loom::loadgen {

std::unique_ptr<StreamClient> make_stream_client(boost::asio::any_io_executor executor, const StreamContext& context) {
  if (context.options.target.protocol == Protocol::loom_websocket) {
    return make_websocket_stream_client(std::move(executor), context);
  }
  return make_openai_stream_client(std::move(executor), context);
}

std::string host_header(const Target& target) {
  const bool ipv6 = target.host.find(':') != std::string::npos;
  return (ipv6 ? "[" + target.host + "]" : target.host) + ":" + std::to_string(target.port);
}

}  // namespace loom::loadgen
