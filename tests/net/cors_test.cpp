// CORS through a real socket: the preflight a browser sends before a cross-origin JSON POST, and the
// Access-Control-* headers on the actual responses (whole, streamed, errors, a 503's Retry-After), for an
// origin listed in cors_origins, for "*", for an unlisted origin and with nothing listed (the default: no
// CORS header at all). The WebSocket admits a CORS origin too. The browser side: browser/cors_test.mjs.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "gateway_fixture.hpp"
#include "loom/net/gateway_config.hpp"

namespace loom::net::test {
namespace {

const std::string kApp = "http://app.example:3000";
const std::string kCorsChatBody = R"({"messages":[{"role":"user","content":"Hi"}],"max_tokens":2})";
const std::string kStreamedChat = R"({"messages":[{"role":"user","content":"Hi"}],"max_tokens":2,"stream":true})";

GatewayConfig cors_config(std::vector<std::string> origins) {
  GatewayConfig config = test_config();
  config.cors_origins = std::move(origins);
  return config;
}

std::string header(const HttpResult& result, const std::string& name) {
  const auto it = result.headers.find(name);
  return it == result.headers.end() ? std::string("<absent>") : it->second;
}

HttpResult preflight(unsigned short port, const std::string& origin, const std::string& method = "POST",
                     const std::string& headers = "authorization, content-type, x-stainless-os, x-request-id") {
  return http_request(port, "OPTIONS", "/v1/chat/completions", {},
                      {{"Origin", origin}, {"Access-Control-Request-Method", method},
                       {"Access-Control-Request-Headers", headers}});
}

TEST(GatewayCors, APreflightFromAListedOriginIsAnsweredWithoutTheApiKey) {
  GatewayConfig config = cors_config({"https://other.example", kApp});
  config.api_key = "secret";  // the preflight carries no key and needs none
  GatewayUnderTest gateway(config);
  const auto answer = preflight(gateway.port(), kApp);
  EXPECT_EQ(answer.status, 204);
  EXPECT_EQ(header(answer, "access-control-allow-origin"), kApp);
  EXPECT_NE(header(answer, "access-control-allow-methods").find("POST"), std::string::npos);
  EXPECT_EQ(header(answer, "access-control-allow-headers"),
            "authorization, content-type, x-stainless-os, x-request-id");
  EXPECT_EQ(header(answer, "access-control-max-age"), "600");
  EXPECT_NE(header(answer, "vary").find("Origin"), std::string::npos);
  EXPECT_TRUE(answer.body.empty());

  // The actual request still wants the key; its answer (error or not) carries the CORS headers so the page
  // can read it.
  const auto without_key = http_request(gateway.port(), "POST", "/v1/chat/completions", kCorsChatBody, {{"Origin", kApp}});
  EXPECT_EQ(without_key.status, 401);
  EXPECT_EQ(header(without_key, "access-control-allow-origin"), kApp);
  const auto with_key = http_request(gateway.port(), "POST", "/v1/chat/completions", kCorsChatBody,
                                     {{"Origin", kApp}, {"Authorization", "Bearer secret"}});
  EXPECT_EQ(with_key.status, 200) << with_key.body;
  EXPECT_EQ(header(with_key, "access-control-allow-origin"), kApp);
  EXPECT_EQ(header(with_key, "access-control-expose-headers"), "X-Request-Id, Retry-After, X-Loom-Ignored-Fields, X-Loom-Trimmed-Messages");
  EXPECT_EQ(header(with_key, "vary"), "Origin");
}

TEST(GatewayCors, APreflightForAnotherMethodOrTooManyHeadersIsRefused) {
  GatewayUnderTest gateway(cors_config({kApp}));
  const auto put = preflight(gateway.port(), kApp, "PUT");
  EXPECT_EQ(put.status, 403);
  EXPECT_EQ(header(put, "access-control-allow-origin"), "<absent>");
  std::string many;
  for (int i = 0; i < 65; ++i) many += (i ? ", x-h" : "x-h") + std::to_string(i);
  EXPECT_EQ(preflight(gateway.port(), kApp, "POST", many).status, 403);
  EXPECT_EQ(preflight(gateway.port(), kApp, "POST", "content-type, bad header").status, 403);
}

TEST(GatewayCors, StreamedResponsesAndOtherRoutesCarryTheHeaders) {
  GatewayUnderTest gateway(cors_config({kApp}));
  const auto streamed = http_request(gateway.port(), "POST", "/v1/chat/completions", kStreamedChat, {{"Origin", kApp}});
  EXPECT_EQ(streamed.status, 200);
  EXPECT_EQ(header(streamed, "content-type"), "text/event-stream");
  EXPECT_EQ(header(streamed, "access-control-allow-origin"), kApp);
  EXPECT_EQ(header(streamed, "access-control-expose-headers"), "X-Request-Id, Retry-After, X-Loom-Ignored-Fields, X-Loom-Trimmed-Messages");
  EXPECT_EQ(sse_data(streamed.body).back(), "[DONE]");
  for (const std::string target : {"/health", "/v1/models", "/metrics", "/no/such/route"}) {
    const auto answer = http_request(gateway.port(), "GET", target, {}, {{"Origin", kApp}});
    EXPECT_EQ(header(answer, "access-control-allow-origin"), kApp) << target;
  }
  const auto bad =
      http_request(gateway.port(), "POST", "/v1/chat/completions", R"({"messages":3})", {{"Origin", kApp}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(header(bad, "access-control-allow-origin"), kApp);
}

// A full gateway's 503: the page can read Retry-After (exposed) to know when to come back.
TEST(GatewayCors, A503ExposesRetryAfterToThePage) {
  namespace asio = boost::asio;
  namespace beast = boost::beast;
  namespace http = beast::http;
  GatewayConfig config = cors_config({kApp});
  config.model = shared_file("models/synth11M-f16.gguf");  // milliseconds per token: 2000 of them take seconds
  config.max_requests_total = 1;
  GatewayUnderTest gateway(config);

  asio::io_context io;
  beast::tcp_stream stream(io);
  stream.expires_after(std::chrono::seconds(30));
  stream.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), gateway.port()));
  const nlohmann::json long_request = {
      {"prompt", "Once"}, {"max_tokens", 2000}, {"ignore_eos", true}, {"stream", true}};
  http::request<http::string_body> request{http::verb::post, "/v1/completions", 11};
  request.set(http::field::host, "127.0.0.1");
  request.set(http::field::content_type, "application/json");
  request.body() = long_request.dump();
  request.prepare_payload();
  http::write(stream, request);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  http::read_header(stream, buffer, parser);  // the place is taken
  ASSERT_EQ(parser.get().result_int(), 200u);

  const auto refused = http_request(gateway.port(), "POST", "/v1/chat/completions", kCorsChatBody, {{"Origin", kApp}});
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_EQ(header(refused, "retry-after"), "1");
  EXPECT_EQ(header(refused, "access-control-allow-origin"), kApp);
  EXPECT_NE(header(refused, "access-control-expose-headers").find("Retry-After"), std::string::npos);
  beast::error_code ignored;
  stream.socket().close(ignored);  // the client leaves: its request is cancelled
}

TEST(GatewayCors, AnUnlistedOriginGetsNoCorsHeaders) {
  GatewayUnderTest gateway(cors_config({kApp}));
  const auto answer = preflight(gateway.port(), "http://evil.example");
  EXPECT_EQ(answer.status, 403);
  EXPECT_EQ(header(answer, "access-control-allow-origin"), "<absent>");
  const auto actual =
      http_request(gateway.port(), "POST", "/v1/chat/completions", kCorsChatBody, {{"Origin", "http://evil.example"}});
  EXPECT_EQ(actual.status, 200);  // served (a simple request is sent anyway), but the browser will not show it
  EXPECT_EQ(header(actual, "access-control-allow-origin"), "<absent>");
  EXPECT_EQ(header(actual, "vary"), "Origin");
}

TEST(GatewayCors, NothingListedMeansNoCorsHeaderAtAll) {
  GatewayUnderTest gateway;
  const auto answer = preflight(gateway.port(), kApp);
  EXPECT_EQ(answer.status, 403);
  EXPECT_EQ(header(answer, "access-control-allow-origin"), "<absent>");
  const auto actual = http_request(gateway.port(), "GET", "/health", {}, {{"Origin", kApp}});
  EXPECT_EQ(header(actual, "access-control-allow-origin"), "<absent>");
  EXPECT_EQ(header(actual, "vary"), "<absent>");
}

TEST(GatewayCors, AStarAllowsAnyOriginWithoutVary) {
  GatewayUnderTest gateway(cors_config({"*"}));
  const auto answer = preflight(gateway.port(), "http://anything.example:1234");
  EXPECT_EQ(answer.status, 204);
  EXPECT_EQ(header(answer, "access-control-allow-origin"), "*");
  const auto actual =
      http_request(gateway.port(), "GET", "/v1/models", {}, {{"Origin", "http://anything.example:1234"}});
  EXPECT_EQ(header(actual, "access-control-allow-origin"), "*");
  EXPECT_EQ(header(actual, "vary"), "<absent>");
}

TEST(GatewayCors, ACorsOriginMayOpenTheWebSocketAndAnUnlistedOneMayNot) {
  GatewayUnderTest gateway(cors_config({kApp}));
  EXPECT_EQ(refused_upgrade_status(gateway.port(), {{"Origin", kApp}}), 0);
  EXPECT_EQ(refused_upgrade_status(gateway.port(), {{"Origin", "http://evil.example"}}), 403);
}

TEST(GatewayCors, OriginsThatNoBrowserSendsAreRefusedInTheConfig) {
  for (const std::string bad : {"http://app.example/", "app.example", "http://app.example/path", "ftp://x"}) {
    GatewayConfig config = cors_config({bad});
    EXPECT_THROW(config.validate(), std::invalid_argument) << bad;
  }
  GatewayConfig config;
  apply_json(config,
             nlohmann::json::parse(R"({"cors_origins": ["http://[::1]:8080", "*"], "sse_ping_interval_ms": 0})"));
  EXPECT_NO_THROW(config.validate());
  EXPECT_EQ(config.cors_origins.size(), 2u);
  config.sse_ping_interval = std::chrono::milliseconds(5);
  EXPECT_THROW(config.validate(), std::invalid_argument);
}

}  // namespace
}  // namespace loom::net::test
