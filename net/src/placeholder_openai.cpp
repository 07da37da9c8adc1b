// PLACEHOLDER until the OpenAI routes land (branch gw-openai deletes this file): answers 501.
#include <boost/beast/http/write.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "openai_routes.hpp"

namespace loom::net {
boost::asio::awaitable<bool> serve_openai(GatewayContext& context, TcpStream& stream, HttpRequest request, OpenAiRoute) {
  auto response = make_openai_error(request, http::status::not_implemented, "not built yet", "server_error");
  context.metrics.http_response(501);
  boost::system::error_code ec;
  co_await http::async_write(stream, response, boost::asio::redirect_error(boost::asio::use_awaitable, ec));
  co_return false;
}
}  // namespace loom::net
