// The gateway's HTTP edges through a real socket: the Host check against DNS rebinding (HTTP and the
// WebSocket upgrade), HEAD wherever GET is, transfer codings other than chunked, the 413 a client still
// writing its body must see, the Sec-WebSocket-Key's shape, the Bearer scheme in any case, and
// percent-encoded query parameters.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "gateway_fixture.hpp"
#include "http_util.hpp"
#include "loom/net/gateway_config.hpp"

namespace loom::net::test {
namespace {

using json = nlohmann::json;

const std::string kTinyCompletion = R"({"prompt":"Once","max_tokens":1})";

std::map<std::string, std::string> host_header(const std::string& host) { return {{"Host", host}}; }

// ------------------------------------------------------------------------------------------------
// DNS rebinding: without an API key only requests naming this server in Host are served.

TEST(GatewayHost, ForeignHostIsRefusedOnHttpRoutes) {
  GatewayUnderTest gateway;
  const std::string port = std::to_string(gateway.port());
  const auto foreign = http_request(gateway.port(), "POST", "/v1/completions", kTinyCompletion,
                                    {{"Host", "evil.example:" + port}, {"Origin", "http://evil.example:" + port}});
  EXPECT_EQ(foreign.status, 403) << foreign.body;
  EXPECT_EQ(foreign.json()["error"]["code"], "host_not_allowed");
  EXPECT_NE(foreign.json()["error"]["message"].get<std::string>().find("--allowed-hosts"), std::string::npos);
  EXPECT_EQ(http_request(gateway.port(), "GET", "/v1/models", {}, host_header("evil.example:" + port)).status, 403);
  EXPECT_EQ(http_request(gateway.port(), "GET", "/", {}, host_header("evil.example")).status, 403);
  // This server's own names: IP literals, localhost and names under .localhost, in any case.
  const std::vector<std::string> own_names = {"127.0.0.1:" + port, "127.0.0.1", "[::1]:" + port, "localhost:" + port,
                                             "LocalHost", "app.localhost:" + port, "localhost.:" + port};
  for (const std::string& host : own_names) {
    EXPECT_EQ(http_request(gateway.port(), "POST", "/v1/completions", kTinyCompletion, host_header(host)).status, 200)
        << host;
  }
  // Look-alikes are not localhost.
  EXPECT_EQ(http_request(gateway.port(), "GET", "/v1/models", {}, host_header("localhost.evil.example")).status, 403);
  EXPECT_EQ(http_request(gateway.port(), "GET", "/v1/models", {}, host_header("evillocalhost")).status, 403);
}

TEST(GatewayHost, AllowedHostsAndAnApiKeyLetOtherNamesIn) {
  auto config = test_config();
  config.allowed_hosts = {"chat.example"};
  GatewayUnderTest listed(config);
  EXPECT_EQ(http_request(listed.port(), "GET", "/v1/models", {}, host_header("Chat.Example:8080")).status, 200);
  EXPECT_EQ(http_request(listed.port(), "GET", "/v1/models", {}, host_header("evil.example")).status, 403);

  config = test_config();
  config.allowed_hosts = {"*"};
  GatewayUnderTest any(config);
  EXPECT_EQ(http_request(any.port(), "GET", "/v1/models", {}, host_header("evil.example")).status, 200);

  config = test_config();
  config.api_key = "sesame";
  GatewayUnderTest keyed(config);
  EXPECT_EQ(http_request(keyed.port(), "GET", "/v1/models", {},
                         {{"Host", "evil.example"}, {"Authorization", "Bearer sesame"}})
                .status,
            200);
}

TEST(GatewayHost, ForeignHostCannotUpgradeEvenWithAMatchingOrigin) {
  GatewayUnderTest gateway;
  const std::string port = std::to_string(gateway.port());
  EXPECT_EQ(refused_upgrade_status(gateway.port(), {{"Host", "evil.example:" + port},
                                                    {"Origin", "http://evil.example:" + port}}),
            403);
  EXPECT_EQ(refused_upgrade_status(gateway.port(), {{"Host", "evil.example:" + port}}), 403);
  // The own page, by its IP or by localhost.
  EXPECT_EQ(refused_upgrade_status(gateway.port(), {{"Host", "localhost:" + port},
                                                    {"Origin", "http://localhost:" + port}}),
            0);
  EXPECT_EQ(refused_upgrade_status(gateway.port(), {{"Origin", "http://127.0.0.1:" + port}}), 0);
}

TEST(GatewayHost, ListedHostMayUpgradeFromItsOwnOrigin) {
  auto config = test_config();
  config.allowed_hosts = {"chat.example"};
  GatewayUnderTest gateway(config);
  EXPECT_EQ(refused_upgrade_status(gateway.port(), {{"Host", "chat.example"}, {"Origin", "https://chat.example"}}), 0);
  EXPECT_EQ(refused_upgrade_status(gateway.port(), {{"Host", "evil.example"}, {"Origin", "https://evil.example"}}),
            403);
}

// ------------------------------------------------------------------------------------------------
// HEAD: GET's headers without a body, so a keep-alive connection stays framed.

TEST(GatewayHead, HeadIsGetWithoutABodyAndKeepsTheConnectionFramed) {
  GatewayUnderTest gateway;
  RawHttpConnection connection(gateway.port());
  const std::string host = "Host: 127.0.0.1\r\n";
  for (const std::string path : {"/health", "/v1/models", "/metrics", "/"}) {
    ASSERT_FALSE(connection.send("HEAD " + path + " HTTP/1.1\r\n" + host + "\r\n"));
    const auto head = connection.read_response(/*head=*/true);
    EXPECT_EQ(head.result_int(), 200u) << path;
    ASSERT_TRUE(head.has_content_length()) << path;
    EXPECT_GT(std::stoul(std::string(head[boost::beast::http::field::content_length])), 0u) << path;
    EXPECT_TRUE(head.body().empty()) << path;
  }
  // An error to HEAD carries no body either.
  ASSERT_FALSE(connection.send("HEAD /nowhere HTTP/1.1\r\n" + host + "\r\n"));
  EXPECT_EQ(connection.read_response(true).result_int(), 404u);
  ASSERT_FALSE(connection.send("HEAD /v1/completions HTTP/1.1\r\n" + host + "\r\n"));
  EXPECT_EQ(connection.read_response(true).result_int(), 405u);
  // The next response on the same connection starts where it should.
  ASSERT_FALSE(connection.send("GET /health HTTP/1.1\r\n" + host + "\r\n"));
  const auto get = connection.read_response();
  ASSERT_EQ(get.result_int(), 200u) << get.body();
  EXPECT_EQ(json::parse(get.body())["status"], "ok");
}

// ------------------------------------------------------------------------------------------------
// Transfer codings: chunked alone, or 501.

std::string chunked_post(const std::string& transfer_encoding, const std::string& body) {
  char size[16];
  std::snprintf(size, sizeof size, "%zx", body.size());
  return "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
         "Transfer-Encoding: " + transfer_encoding + "\r\n\r\n" + size + "\r\n" + body + "\r\n0\r\n\r\n";
}

TEST(GatewayTransferCoding, CodingsOtherThanChunkedAre501) {
  GatewayUnderTest gateway;
  {
    RawHttpConnection connection(gateway.port());
    ASSERT_FALSE(connection.send(chunked_post("chunked", kTinyCompletion)));
    EXPECT_EQ(connection.read_response().result_int(), 200u);
  }
  for (const std::string coding : {"gzip, chunked", "gzip", "chunked, chunked", "identity, chunked"}) {
    RawHttpConnection connection(gateway.port());
    ASSERT_FALSE(connection.send(chunked_post(coding, kTinyCompletion)));
    const auto response = connection.read_response();
    EXPECT_EQ(response.result_int(), 501u) << coding << ": " << response.body();
    EXPECT_FALSE(response.keep_alive()) << coding;
  }
}

// ------------------------------------------------------------------------------------------------
// 413 to a client that writes its whole body before reading (urllib, fetch): it must read the 413, not
// a reset. Several rounds: the reset came or not depending on timing.

TEST(GatewayLimits, A413ReachesAClientStillWritingItsBody) {
  auto config = test_config();
  config.max_body_bytes = 4096;
  GatewayUnderTest gateway(config);
  const std::string body(4u << 20, 'a');
  const std::string head = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                           "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  for (int round = 0; round < 5; ++round) {
    RawHttpConnection connection(gateway.port());
    ASSERT_FALSE(connection.send(head + body)) << "round " << round << ": the body could not be written";
    const auto response = connection.read_response();
    EXPECT_EQ(response.result_int(), 413u) << "round " << round;
    EXPECT_EQ(json::parse(response.body())["error"]["code"], "body_too_large");
  }
  EXPECT_EQ(http_request(gateway.port(), "GET", "/health").status, 200);
}

// ------------------------------------------------------------------------------------------------
// The WebSocket handshake's key.

TEST(GatewayWebSocketKey, AKeyThatIsNotBase64Of16BytesIs400) {
  GatewayUnderTest gateway;
  const auto upgrade = [&](const std::string& key) {
    return http_request(gateway.port(), "GET", "/v1/ws", {},
                        {{"Connection", "Upgrade"}, {"Upgrade", "websocket"}, {"Sec-WebSocket-Version", "13"},
                         {"Sec-WebSocket-Key", key}})
        .status;
  };
  EXPECT_EQ(upgrade("dGhlIHNhbXBsZSBub25jZQ=="), 101);
  EXPECT_EQ(upgrade("abc"), 400);
  EXPECT_EQ(upgrade("!!!!!!!!!!!!!!!!!!!!!!=="), 400);
  EXPECT_EQ(upgrade("dGhlIHNhbXBsZSBub25jZQ"), 400);     // no padding
  EXPECT_EQ(upgrade("dGhlIHNhbXBsZSBub25jZR=="), 400);   // stray bits: not 16 bytes exactly
  EXPECT_EQ(upgrade("dGhlIHNhbXBsZSBub25jZQdGhl"), 400);  // 19 bytes
}

// ------------------------------------------------------------------------------------------------
// Authentication details.

TEST(GatewayAuth, TheBearerSchemeIsCaseInsensitive) {
  auto config = test_config();
  config.api_key = "sesame";
  GatewayUnderTest gateway(config);
  for (const std::string scheme : {"Bearer", "bearer", "BEARER", "bEaReR"}) {
    EXPECT_EQ(http_request(gateway.port(), "GET", "/v1/models", {}, {{"Authorization", scheme + " sesame"}}).status,
              200)
        << scheme;
  }
  EXPECT_EQ(http_request(gateway.port(), "GET", "/v1/models", {}, {{"Authorization", "Basic sesame"}}).status, 401);
}

TEST(GatewayAuth, AnAccessTokenIsPercentDecoded) {
  auto config = test_config();
  config.api_key = "ab+c/d=";
  GatewayUnderTest gateway(config);
  // What the page's encodeURIComponent sends, and the raw key.
  EXPECT_EQ(refused_upgrade_status(gateway.port(), {}, "/v1/ws?access_token=ab%2Bc%2Fd%3D"), 0);
  EXPECT_EQ(refused_upgrade_status(gateway.port(), {}, "/v1/ws?access_token=ab%2bc%2fd%3d"), 0);
  EXPECT_EQ(refused_upgrade_status(gateway.port(), {}, "/v1/ws?access_token=ab+c/d="), 0);
  EXPECT_EQ(refused_upgrade_status(gateway.port(), {}, "/v1/ws?access_token=ab%2Bc%2Fd%3"), 401);
}

TEST(HttpUtil, QueryParametersArePercentDecoded) {
  EXPECT_EQ(query_parameter("/v1/ws?access_token=ab%2Bc%2Fd%3D", "access_token"), "ab+c/d=");
  EXPECT_EQ(query_parameter("/v1/ws?access%5Ftoken=k", "access_token"), "k");
  EXPECT_EQ(query_parameter("/v1/ws?access_token=%e2%82%AC", "access_token"), "\xe2\x82\xac");
  EXPECT_EQ(query_parameter("/v1/ws?access_token=a+b", "access_token"), "a+b");
  // Malformed escapes are no value.
  EXPECT_EQ(query_parameter("/v1/ws?access_token=%zz", "access_token"), std::nullopt);
  EXPECT_EQ(query_parameter("/v1/ws?access_token=ab%2", "access_token"), std::nullopt);
  EXPECT_EQ(query_parameter("/v1/ws?access_token=%", "access_token"), std::nullopt);
  EXPECT_EQ(percent_decode("%41%42c"), "ABc");
}

}  // namespace
}  // namespace loom::net::test
