#include "gateway_fixture.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <filesystem>
#include <future>
#include <mutex>
#include <stdexcept>

#include <boost/asio/connect.hpp>
#include <boost/asio/write.hpp>
#include <spdlog/spdlog.h>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>

namespace loom::net::test {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;

std::string shared_file(const std::string& relative) {
  const std::string path = std::string(LOOM_SHARED_DIR) + "/" + relative;
  if (!std::filesystem::exists(path)) {
    ADD_FAILURE() << "missing shared file: " << path << " (the tests need ../shared beside the repository)";
    throw std::runtime_error("missing shared file: " + path);
  }
  return path;
}

GatewayConfig test_config() {
  GatewayConfig config;
  config.model = shared_file("models/aidreams260K.gguf");
  config.host = "127.0.0.1";
  config.port = 0;
  config.threads = 2;
  config.compute_threads = 1;
  config.log_level = "warn";
  config.shutdown_grace = std::chrono::milliseconds(2000);
  return config;
}

GatewayUnderTest::GatewayUnderTest(GatewayConfig config) {
  spdlog::set_level(spdlog::level::from_str(config.log_level));
  gateway_ = std::make_unique<Gateway>(io_, config);
  std::promise<std::string> loaded;
  auto loaded_future = loaded.get_future();
  gateway_->start([&loaded](std::string error) { loaded.set_value(std::move(error)); });
  const int threads = std::max(1, config.threads);
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { io_.run(); });
  if (loaded_future.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    shutdown();
    throw std::runtime_error("the gateway's model did not load within 60 s");
  }
  if (std::string error = loaded_future.get(); !error.empty()) {
    shutdown();
    throw std::runtime_error("the gateway's model failed to load: " + error);
  }
}

GatewayUnderTest::~GatewayUnderTest() {
  if (!shutdown()) ADD_FAILURE() << "the gateway did not shut down within 30 s";
}

unsigned short GatewayUnderTest::port() const { return gateway_->local_endpoint().port(); }

bool GatewayUnderTest::shutdown(std::chrono::milliseconds limit) {
  if (shut_down_) return true;
  shut_down_ = true;
  std::promise<void> done;
  auto done_future = done.get_future();
  asio::post(io_, [this, &done] { gateway_->async_shutdown([&done] { done.set_value(); }); });
  const bool finished = done_future.wait_for(limit) == std::future_status::ready;
  io_.stop();
  for (auto& thread : threads_) thread.join();
  threads_.clear();
  gateway_.reset();
  return finished;
}

HttpResult http_request(unsigned short port, const std::string& method, const std::string& target,
                        const std::string& body, const std::map<std::string, std::string>& headers) {
  asio::io_context io;
  beast::tcp_stream stream(io);
  stream.expires_after(std::chrono::seconds(60));
  stream.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  http::request<http::string_body> request{http::string_to_verb(method), target, 11};
  request.set(http::field::host, "127.0.0.1:" + std::to_string(port));
  request.set(http::field::connection, "close");
  bool has_type = false;
  for (const auto& [name, value] : headers) {
    request.set(name, value);
    std::string lower = name;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    has_type = has_type || lower == "content-type";
  }
  if (!body.empty() && !has_type) request.set(http::field::content_type, "application/json");
  request.body() = body;
  request.prepare_payload();
  http::write(stream, request);

  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64u << 20);
  beast::error_code ec;
  http::read(stream, buffer, parser, ec);
  if (ec && ec != http::error::end_of_stream) throw beast::system_error(ec);
  HttpResult result;
  const auto& response = parser.get();
  result.status = static_cast<int>(response.result_int());
  for (const auto& field : response) {
    std::string name(field.name_string());
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    result.headers[name] = std::string(field.value());
  }
  result.body = response.body();
  stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  return result;
}

// The status of a WebSocket upgrade the server refused (0 when it was accepted).
int refused_upgrade_status(unsigned short port, const std::map<std::string, std::string>& headers,
                           const std::string& target) {
  try {
    WsClient client(port, headers, target);
    return 0;
  } catch (const boost::system::system_error& e) {
    if (e.code() != boost::beast::websocket::error::upgrade_declined) throw;
  }
  // Read the refusal itself over plain HTTP.
  std::map<std::string, std::string> upgrade = headers;
  upgrade["Connection"] = "Upgrade";
  upgrade["Upgrade"] = "websocket";
  upgrade["Sec-WebSocket-Version"] = "13";
  upgrade["Sec-WebSocket-Key"] = "dGhlIHNhbXBsZSBub25jZQ==";
  return http_request(port, "GET", target, {}, upgrade).status;
}

RawHttpConnection::RawHttpConnection(unsigned short port) : stream_(io_) {
  stream_.expires_after(std::chrono::seconds(30));
  stream_.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
}

boost::system::error_code RawHttpConnection::send(std::string_view bytes) {
  beast::error_code ec;
  stream_.expires_after(std::chrono::seconds(30));
  asio::write(stream_, asio::buffer(bytes.data(), bytes.size()), ec);
  return ec;
}

http::response<http::string_body> RawHttpConnection::read_response(bool head) {
  http::response_parser<http::string_body> parser;
  parser.body_limit(64u << 20);
  parser.skip(head);
  stream_.expires_after(std::chrono::seconds(30));
  http::read(stream_, buffer_, parser);
  return parser.release();
}

std::vector<std::string> sse_data(const std::string& body) {
  std::vector<std::string> data;
  std::size_t start = 0;
  while (start < body.size()) {
    std::size_t end = body.find('\n', start);
    if (end == std::string::npos) end = body.size();
    std::string_view line(body.data() + start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.rfind("data:", 0) == 0) {
      line.remove_prefix(5);
      if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
      data.emplace_back(line);
    }
    start = end + 1;
  }
  return data;
}

WsClient::WsClient(unsigned short port, const std::map<std::string, std::string>& headers, const std::string& target)
    : ws_(io_) {
  beast::get_lowest_layer(ws_).expires_after(std::chrono::seconds(30));
  beast::get_lowest_layer(ws_).connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  beast::get_lowest_layer(ws_).expires_never();
  ws_.set_option(websocket::stream_base::decorator([headers](websocket::request_type& request) {
    for (const auto& [name, value] : headers) request.set(name, value);
  }));
  ws_.handshake("127.0.0.1:" + std::to_string(port), target);
  ws_.text(true);
  hello_ = receive();
  if (hello_.value("type", "") != "hello") throw std::runtime_error("the first frame is not a hello: " + hello_.dump());
}

void WsClient::send(const std::string& text) { ws_.write(asio::buffer(text)); }

nlohmann::json WsClient::receive(std::chrono::milliseconds limit) {
  if (!pending_.empty()) {
    auto front = std::move(pending_.front());
    pending_.erase(pending_.begin());
    return front;
  }
  beast::flat_buffer buffer;
  beast::get_lowest_layer(ws_).expires_after(limit);
  ws_.read(buffer);
  beast::get_lowest_layer(ws_).expires_never();
  return nlohmann::json::parse(beast::buffers_to_string(buffer.data()));
}

std::vector<nlohmann::json> WsClient::receive_until_end(const std::string& id, std::chrono::milliseconds limit) {
  std::vector<nlohmann::json> frames;
  std::vector<nlohmann::json> others;
  // Frames of this id kept earlier come first, in order.
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->value("id", "") == id) {
      frames.push_back(std::move(*it));
      it = pending_.erase(it);
      const auto type = frames.back().value("type", "");
      if (type == "done" || type == "error") return frames;
    } else {
      ++it;
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) throw std::runtime_error("no done/error event for request " + id + " in time");
    beast::flat_buffer buffer;
    beast::get_lowest_layer(ws_).expires_after(left);
    ws_.read(buffer);
    beast::get_lowest_layer(ws_).expires_never();
    auto frame = nlohmann::json::parse(beast::buffers_to_string(buffer.data()));
    if (frame.value("id", "") != id) {
      pending_.push_back(std::move(frame));
      continue;
    }
    frames.push_back(std::move(frame));
    const auto type = frames.back().value("type", "");
    if (type == "done" || type == "error") return frames;
  }
}

std::optional<int> WsClient::wait_close(std::chrono::milliseconds limit) {
  beast::get_lowest_layer(ws_).expires_after(limit);
  for (;;) {
    beast::flat_buffer buffer;
    beast::error_code ec;
    ws_.read(buffer, ec);
    if (ec == websocket::error::closed) return static_cast<int>(ws_.reason().code);
    if (ec) return std::nullopt;
  }
}

}  // namespace loom::net::test
