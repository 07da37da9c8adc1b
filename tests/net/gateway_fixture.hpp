// A gateway on 127.0.0.1 and a free port, serving a model from ../shared (aidreams260K by default), with
// small blocking Beast clients for the tests: one HTTP request, one WebSocket connection. The gateway's
// io_context runs on two threads of the fixture.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <nlohmann/json.hpp>

#include "loom/net/gateway.hpp"
#include "loom/net/gateway_config.hpp"

namespace loom::net::test {

// The shared data folder's path for `relative` ("models/aidreams260K.gguf"); fails the test (naming the
// path) when the file is missing.
std::string shared_file(const std::string& relative);

// Config for tests: aidreams260K.gguf, port 0, small limits where a test wants them it sets them itself.
GatewayConfig test_config();

class GatewayUnderTest {
 public:
  // Starts the gateway and waits (up to 60 s) for the model to load; throws if it fails.
  explicit GatewayUnderTest(GatewayConfig config = test_config());
  ~GatewayUnderTest();  // graceful shutdown, then joins the threads

  unsigned short port() const;
  Gateway& gateway() { return *gateway_; }
  // Starts the graceful shutdown and waits until it has completed (or `limit` passed: returns false).
  bool shutdown(std::chrono::milliseconds limit = std::chrono::seconds(30));

 private:
  boost::asio::io_context io_;
  std::unique_ptr<Gateway> gateway_;
  std::vector<std::thread> threads_;
  bool shut_down_ = false;
};

struct HttpResult {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  nlohmann::json json() const { return nlohmann::json::parse(body); }
};

// One request on a new connection (Connection: close); waits for the whole response (SSE too).
HttpResult http_request(unsigned short port, const std::string& method, const std::string& target,
                        const std::string& body = {}, const std::map<std::string, std::string>& headers = {});

// The status of a WebSocket upgrade the server refused (0 when it was accepted). `headers` may replace
// Host.
int refused_upgrade_status(unsigned short port, const std::map<std::string, std::string>& headers,
                           const std::string& target = "/v1/ws");

// A raw HTTP/1.1 connection for what http_request cannot do: keep-alive, pipelining, bytes as written.
class RawHttpConnection {
 public:
  explicit RawHttpConnection(unsigned short port);
  // Writes all of `bytes` (blocking); the error, if the write failed.
  boost::system::error_code send(std::string_view bytes);
  // The next response; `head` when it answers a HEAD request (no body follows).
  boost::beast::http::response<boost::beast::http::string_body> read_response(bool head = false);
  boost::beast::tcp_stream& stream() { return stream_; }

 private:
  boost::asio::io_context io_;
  boost::beast::tcp_stream stream_;
  boost::beast::flat_buffer buffer_;
};

// The "data: ..." payloads of a text/event-stream body, in order ("[DONE]" included).
std::vector<std::string> sse_data(const std::string& body);

// A blocking WebSocket client on /v1/ws. The constructor reads the server's first frame, its hello (and
// throws when the first frame is something else); hello() has it.
class WsClient {
 public:
  explicit WsClient(unsigned short port, const std::map<std::string, std::string>& headers = {},
                    const std::string& target = "/v1/ws");
  const nlohmann::json& hello() const { return hello_; }
  void send(const std::string& text);
  void send(const nlohmann::json& message) { send(message.dump()); }
  // The next text frame as JSON; throws on close or after `limit`.
  nlohmann::json receive(std::chrono::milliseconds limit = std::chrono::seconds(30));
  // Frames until (and including) the done or error event of request `id`; frames of other requests
  // are kept for later receive_until calls.
  std::vector<nlohmann::json> receive_until_end(const std::string& id,
                                                std::chrono::milliseconds limit = std::chrono::seconds(60));
  // Reads until the server closes; returns the close code (or nullopt if the read failed otherwise).
  std::optional<int> wait_close(std::chrono::milliseconds limit = std::chrono::seconds(30));
  boost::beast::websocket::stream<boost::beast::tcp_stream>& stream() { return ws_; }

 private:
  boost::asio::io_context io_;
  boost::beast::websocket::stream<boost::beast::tcp_stream> ws_;
  std::vector<nlohmann::json> pending_;
  nlohmann::json hello_;
};

// One gateway for all the tests of a suite, started before its first test: aidreams260K with the ChatML
// template (the model has none of its own, and chat requests need one). A suite derives from it with its own
// name, `class MySuite : public SharedChatmlGateway<MySuite> {};`, and so gets a gateway of its own.
template <class Suite>
class SharedChatmlGateway : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    GatewayConfig config = test_config();
    config.chat_template = "chatml";
    gateway_ = std::make_unique<GatewayUnderTest>(config);
  }
  static void TearDownTestSuite() { gateway_.reset(); }
  static unsigned short port() { return gateway_->port(); }
  static HttpResult post(const std::string& path, const nlohmann::json& body) {
    return http_request(port(), "POST", path, body.dump());
  }

  static inline std::unique_ptr<GatewayUnderTest> gateway_;
};

}  // namespace loom::net::test
