// The gateway core through a real socket: routing, status codes, auth, Origin, body limit, health,
// models, config parsing, and the graceful shutdown.
#include <gtest/gtest.h>

#include <future>
#include <stdexcept>
#include <thread>

#include <boost/beast/websocket.hpp>
#include <nlohmann/json.hpp>

#include "gateway_fixture.hpp"
#include "http_util.hpp"
#include "loom/net/gateway_config.hpp"

namespace loom::net::test {
namespace {

TEST(GatewayRoutes, HealthSaysReadyWithTheModelName) {
  GatewayUnderTest gateway;
  const auto health = http_request(gateway.port(), "GET", "/health");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.json()["status"], "ok");
  EXPECT_EQ(health.json()["phase"], "ready");
  EXPECT_EQ(health.json()["model"], "aidreams260K");
  EXPECT_EQ(health.json()["demo"], false);
}

TEST(GatewayRoutes, ModelsListsTheServedModel) {
  GatewayUnderTest gateway;
  const auto models = http_request(gateway.port(), "GET", "/v1/models");
  ASSERT_EQ(models.status, 200);
  const auto body = models.json();
  EXPECT_EQ(body["object"], "list");
  ASSERT_EQ(body["data"].size(), 1u);
  EXPECT_EQ(body["data"][0]["id"], "aidreams260K");
  EXPECT_EQ(body["data"][0]["object"], "model");
  EXPECT_EQ(http_request(gateway.port(), "GET", "/v1/models/aidreams260K").json()["id"], "aidreams260K");
  const auto missing = http_request(gateway.port(), "GET", "/v1/models/gpt-4");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.json()["error"]["code"], "model_not_found");
}

TEST(GatewayRoutes, UnknownPathIs404WithAnOpenAiErrorObject) {
  GatewayUnderTest gateway;
  const auto response = http_request(gateway.port(), "GET", "/v2/nothing");
  EXPECT_EQ(response.status, 404);
  const auto error = response.json()["error"];
  EXPECT_TRUE(error["message"].is_string());
  EXPECT_EQ(error["type"], "not_found_error");
  EXPECT_TRUE(error.contains("param"));
  EXPECT_TRUE(error.contains("code"));
}

TEST(GatewayRoutes, WrongMethodIs405WithAllow) {
  GatewayUnderTest gateway;
  const auto response = http_request(gateway.port(), "GET", "/v1/chat/completions");
  EXPECT_EQ(response.status, 405);
  EXPECT_EQ(response.headers.at("allow"), "POST");
  EXPECT_EQ(http_request(gateway.port(), "POST", "/health", "{}").status, 405);
}

TEST(GatewayRoutes, WebSocketPathWithoutUpgradeIs426) {
  GatewayUnderTest gateway;
  EXPECT_EQ(http_request(gateway.port(), "GET", "/v1/ws").status, 426);
}

TEST(GatewayRoutes, ServesTheChatPageAsHtml) {
  GatewayUnderTest gateway;
  const auto page = http_request(gateway.port(), "GET", "/");
  EXPECT_EQ(page.status, 200);
  EXPECT_EQ(page.headers.at("content-type"), "text/html; charset=utf-8");
  EXPECT_NE(page.body.find("<html"), std::string::npos) << page.body.substr(0, 200);
  EXPECT_NE(page.headers.at("content-security-policy").find("frame-ancestors 'none'"), std::string::npos);
}

TEST(GatewayRoutes, MetricsAreServedAsPrometheusText) {
  GatewayUnderTest gateway;
  const auto metrics = http_request(gateway.port(), "GET", "/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_EQ(metrics.headers.at("content-type"), "text/plain; version=0.0.4; charset=utf-8");
}

TEST(GatewayLimits, BodyOverTheLimitIs413) {
  auto config = test_config();
  config.max_body_bytes = 4096;
  GatewayUnderTest gateway(config);
  const std::string body = R"({"prompt":")" + std::string(8000, 'a') + R"("})";
  const auto response = http_request(gateway.port(), "POST", "/v1/completions", body);
  EXPECT_EQ(response.status, 413);
  EXPECT_EQ(response.json()["error"]["code"], "body_too_large");
  // The server is still there.
  EXPECT_EQ(http_request(gateway.port(), "GET", "/health").status, 200);
}

TEST(GatewayLimits, OversizeHeadersAre431) {
  GatewayUnderTest gateway;
  const auto response = http_request(gateway.port(), "GET", "/health", {}, {{"X-Big", std::string(20000, 'x')}});
  EXPECT_EQ(response.status, 431);
}

TEST(GatewayAuth, ApiKeyGuardsTheV1RoutesOnly) {
  auto config = test_config();
  config.api_key = "sesame";
  GatewayUnderTest gateway(config);
  const auto anonymous = http_request(gateway.port(), "GET", "/v1/models");
  EXPECT_EQ(anonymous.status, 401);
  EXPECT_EQ(anonymous.json()["error"]["type"], "authentication_error");
  EXPECT_EQ(http_request(gateway.port(), "GET", "/v1/models", {}, {{"Authorization", "Bearer wrong"}}).status, 401);
  EXPECT_EQ(http_request(gateway.port(), "GET", "/v1/models", {}, {{"Authorization", "Bearer sesame"}}).status, 200);
  EXPECT_EQ(http_request(gateway.port(), "POST", "/v1/completions", R"({"prompt":"x"})").status, 401);
  // Health, metrics and the page stay open (load balancers and scrapers carry no key).
  EXPECT_EQ(http_request(gateway.port(), "GET", "/health").status, 200);
  EXPECT_EQ(http_request(gateway.port(), "GET", "/metrics").status, 200);
  EXPECT_EQ(http_request(gateway.port(), "GET", "/").status, 200);
}

TEST(GatewayAuth, WebSocketUpgradeNeedsTheKeyInAHeaderOrTheQuery) {
  auto config = test_config();
  config.api_key = "sesame";
  GatewayUnderTest gateway(config);
  EXPECT_EQ(refused_upgrade_status(gateway.port(), {}), 401);
  EXPECT_EQ(refused_upgrade_status(gateway.port(), {{"Authorization", "Bearer nope"}}), 401);
  EXPECT_EQ(refused_upgrade_status(gateway.port(), {}, "/v1/ws?access_token=nope"), 401);
  EXPECT_EQ(refused_upgrade_status(gateway.port(), {{"Authorization", "Bearer sesame"}}), 0);
  EXPECT_EQ(refused_upgrade_status(gateway.port(), {}, "/v1/ws?access_token=sesame"), 0);
}

TEST(GatewayOrigin, ForeignBrowserOriginsAreRefusedUnlessListed) {
  auto config = test_config();
  config.allowed_origins = {"https://chat.example"};
  GatewayUnderTest gateway(config);
  const std::string self = "http://127.0.0.1:" + std::to_string(gateway.port());
  EXPECT_EQ(refused_upgrade_status(gateway.port(), {{"Origin", "https://evil.example"}}), 403);
  EXPECT_EQ(refused_upgrade_status(gateway.port(), {{"Origin", "https://chat.example"}}), 0);
  EXPECT_EQ(refused_upgrade_status(gateway.port(), {{"Origin", self}}), 0);
  EXPECT_EQ(refused_upgrade_status(gateway.port(), {}), 0);  // not a browser
}

TEST(GatewayShutdown, RefusesNewWorkThenStops) {
  GatewayUnderTest gateway;
  const auto port = gateway.port();
  ASSERT_TRUE(gateway.shutdown());
  // Nothing listens any more.
  EXPECT_THROW(http_request(port, "GET", "/health"), boost::system::system_error);
}

TEST(GatewayShutdown, ClosesIdleKeepAliveConnections) {
  GatewayUnderTest gateway;
  boost::asio::io_context io;
  boost::beast::tcp_stream stream(io);
  stream.connect(boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), gateway.port()));
  http::request<http::string_body> request{http::verb::get, "/health", 11};
  request.set(http::field::host, "127.0.0.1");
  http::write(stream, request);
  boost::beast::flat_buffer buffer;
  http::response<http::string_body> response;
  http::read(stream, buffer, response);
  ASSERT_EQ(response.result_int(), 200u);
  ASSERT_TRUE(response.keep_alive());
  // The connection stays open and idle; the shutdown must not wait for it to time out.
  const auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE(gateway.shutdown(std::chrono::seconds(10)));
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(4));
  boost::system::error_code ec;
  stream.expires_after(std::chrono::seconds(5));
  http::read(stream, buffer, response, ec);
  EXPECT_TRUE(ec == http::error::end_of_stream || ec == boost::asio::error::eof ||
              ec == boost::asio::error::connection_reset)
      << ec.message();
}

TEST(GatewayLoad, AMissingModelFileFailsTheLoadAndHealthSaysSo) {
  auto config = test_config();
  config.model = "/nonexistent/model.gguf";
  EXPECT_THROW(GatewayUnderTest gateway(config), std::runtime_error);
}

TEST(GatewayConfigJson, AppliesKnownKeysAndRefusesUnknownOnes) {
  GatewayConfig config;
  apply_json(config, nlohmann::json::parse(R"({"port": 9000, "api_key": "k", "allowed_origins": ["https://a"],
                                               "shutdown_grace_ms": 1500, "kv_cache_mb": 64,
                                               "kv_cache_percent": 40})"));
  EXPECT_EQ(config.port, 9000);
  EXPECT_EQ(config.api_key, "k");
  EXPECT_EQ(config.allowed_origins, std::vector<std::string>{"https://a"});
  EXPECT_EQ(config.shutdown_grace, std::chrono::milliseconds(1500));
  EXPECT_EQ(config.kv_cache_mb, 64);
  EXPECT_EQ(config.kv_cache_percent, 40);
  try {
    apply_json(config, nlohmann::json::parse(R"({"prot": 1})"));
    FAIL() << "an unknown key was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("prot"), std::string::npos) << e.what();
  }
  EXPECT_THROW(apply_json(config, nlohmann::json::parse(R"({"port": "80"})")), std::invalid_argument);
  EXPECT_THROW(apply_json(config, nlohmann::json::parse(R"({"port": 70000})")), std::invalid_argument);
  apply_json(config, nlohmann::json::parse(R"({"threads": -1})"));  // in range for the type; validate() refuses it
  EXPECT_THROW(config.validate(), std::invalid_argument);
  EXPECT_THROW(apply_json(config, nlohmann::json::parse("[1]")), std::invalid_argument);
}

TEST(GatewayConfigJson, ValidateNamesTheField) {
  GatewayConfig config;
  config.host = "localhost:80";
  try {
    config.validate();
    FAIL() << "a bad host was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("host"), std::string::npos);
  }
  config = GatewayConfig{};
  config.device = "tpu";
  EXPECT_THROW(config.validate(), std::invalid_argument);
  config = GatewayConfig{};
  config.max_frame_bytes = 10;
  EXPECT_THROW(config.validate(), std::invalid_argument);
  for (const int percent : {0, 101}) {
    config = GatewayConfig{};
    config.kv_cache_percent = percent;
    EXPECT_THROW(config.validate(), std::invalid_argument) << percent;
  }
}

TEST(HttpUtil, QueryParametersAndPaths) {
  EXPECT_EQ(target_path("/v1/ws?access_token=x"), "/v1/ws");
  EXPECT_EQ(target_path("/health"), "/health");
  EXPECT_EQ(query_parameter("/v1/ws?a=1&access_token=k2&b", "access_token"), "k2");
  EXPECT_EQ(query_parameter("/v1/ws?a=1", "access_token"), std::nullopt);
  EXPECT_EQ(query_parameter("/v1/ws", "a"), std::nullopt);
  EXPECT_EQ(query_parameter("/v1/ws?flag", "flag"), "");
}

}  // namespace
}  // namespace loom::net::test
