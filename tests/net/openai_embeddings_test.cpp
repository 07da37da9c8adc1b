// POST /v1/embeddings: the translation on its own (every input form, base64 against the float bytes) and
// the route through a real socket on the shared aidreams260K model: each input form answered in OpenAI's
// shape with unit vectors of the model's width, base64 carrying the same float32 bytes as the float answer,
// several inputs in order and equal to each alone, and the 400s naming their field.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gateway_fixture.hpp"
#include "openai_embeddings.hpp"

namespace loom::net {
namespace {

using nlohmann::json;
using test::GatewayUnderTest;
using test::http_request;

// An independent decoder (RFC 4648), then the bytes as little-endian float32.
std::vector<float> floats_from_base64(const std::string& text) {
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<unsigned char> bytes;
  std::uint32_t buffer = 0;
  int bits = 0;
  for (const char c : text) {
    if (c == '=') break;
    const auto value = alphabet.find(c);
    EXPECT_NE(value, std::string::npos) << "not base64: " << c;
    buffer = (buffer << 6) | static_cast<std::uint32_t>(value);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      bytes.push_back(static_cast<unsigned char>((buffer >> bits) & 0xFF));
    }
  }
  EXPECT_EQ(bytes.size() % 4, 0u);
  std::vector<float> out;
  for (std::size_t i = 0; i + 3 < bytes.size(); i += 4) {
    const std::uint32_t word = bytes[i] | (bytes[i + 1] << 8) | (bytes[i + 2] << 16) | (std::uint32_t{bytes[i + 3]} << 24);
    out.push_back(std::bit_cast<float>(word));
  }
  return out;
}

TEST(OpenAiEmbeddingsTranslate, EveryInputForm) {
  const auto inputs = [](const std::string& body) {
    auto translated = openai::translate_embeddings_request(body, 64);
    EXPECT_TRUE(std::holds_alternative<openai::EmbeddingsRequest>(translated)) << body;
    return std::get<openai::EmbeddingsRequest>(translated);
  };
  const auto one = inputs(R"({"input":"hello","model":"x","user":"u"})");
  EXPECT_TRUE(one.single);
  EXPECT_EQ(one.engine.inputs, (std::vector<actors::EmbedInput>{std::string("hello")}));
  EXPECT_FALSE(one.base64);
  const auto strings = inputs(R"({"input":["a","b"],"encoding_format":"base64"})");
  EXPECT_EQ(strings.engine.inputs, (std::vector<actors::EmbedInput>{std::string("a"), std::string("b")}));
  EXPECT_TRUE(strings.base64);
  const auto ids = inputs(R"({"input":[1,2,3],"dimensions":64})");
  EXPECT_TRUE(ids.single);
  EXPECT_EQ(ids.engine.inputs, (std::vector<actors::EmbedInput>{std::vector<std::int32_t>{1, 2, 3}}));
  const auto lists = inputs(R"({"input":[[1,2],[3]]})");
  EXPECT_FALSE(lists.single);
  EXPECT_EQ(lists.engine.inputs, (std::vector<actors::EmbedInput>{std::vector<std::int32_t>{1, 2}, std::vector<std::int32_t>{3}}));
}

TEST(OpenAiEmbeddingsTranslate, Base64IsTheLittleEndianFloatBytes) {
  const std::vector<float> values{1.0f, -0.5f, 3.25e-7f, 0.0f, 123456.789f};
  EXPECT_EQ(floats_from_base64(openai::base64_floats(values)), values);
  EXPECT_EQ(openai::base64_floats(std::vector<float>{1.0f}), "AACAPw==");  // 00 00 80 3f
}

class OpenAiEmbeddingsHttp : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { gateway_ = std::make_unique<GatewayUnderTest>(); }
  static void TearDownTestSuite() { gateway_.reset(); }

  static test::HttpResult post(const json& body) {
    return http_request(gateway_->port(), "POST", "/v1/embeddings", body.dump(), {{"Content-Type", "application/json"}});
  }
  // The embeddings of an answer that must be a 200, checked for OpenAI's shape, unit length and width.
  static std::vector<std::vector<float>> vectors(const json& body) {
    const auto result = post(body);
    EXPECT_EQ(result.status, 200) << result.body;
    if (result.status != 200) return {};
    const json answer = result.json();
    EXPECT_EQ(answer.at("object"), "list");
    EXPECT_TRUE(answer.at("model").is_string());
    EXPECT_GT(answer.at("usage").at("prompt_tokens").get<int>(), 0);
    EXPECT_EQ(answer.at("usage").at("prompt_tokens"), answer.at("usage").at("total_tokens"));
    std::vector<std::vector<float>> out;
    for (std::size_t i = 0; i < answer.at("data").size(); ++i) {
      const json& item = answer.at("data")[i];
      EXPECT_EQ(item.at("object"), "embedding");
      EXPECT_EQ(item.at("index"), i);
      out.push_back(item.at("embedding").is_string() ? floats_from_base64(item.at("embedding").get<std::string>())
                                                     : item.at("embedding").get<std::vector<float>>());
      EXPECT_EQ(out.back().size(), 64u) << "the model's embedding length";
      double norm = 0.0;
      for (const float v : out.back()) norm += static_cast<double>(v) * v;
      EXPECT_NEAR(std::sqrt(norm), 1.0, 1e-5);
    }
    return out;
  }
  // Within rounding: a step's other rows may change the summation order of F32 weights (compute/README.md).
  static void expect_near(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
    ASSERT_EQ(a.size(), b.size()) << what;
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << what << " at " << i;
  }
  static void expect_400(const json& body, const std::string& param) {
    const auto result = post(body);
    EXPECT_EQ(result.status, 400) << body.dump() << " -> " << result.body;
    if (result.status == 400) {
      EXPECT_EQ(result.json().at("error").at("param"), param) << result.body;
    }
  }

  static inline std::unique_ptr<GatewayUnderTest> gateway_;
};

TEST_F(OpenAiEmbeddingsHttp, EachInputFormAndBase64) {
  const auto cat = vectors({{"input", "a cat on the mat"}, {"model", "anything"}, {"user", "someone"}});
  ASSERT_EQ(cat.size(), 1u);
  const auto both = vectors({{"input", {"a cat on the mat", "the moon"}}});
  ASSERT_EQ(both.size(), 2u);
  expect_near(both[0], cat[0], "an input of a list equals it alone");
  EXPECT_NE(both[1], cat[0]);
  const auto ids = vectors({{"input", {1, 40, 41, 42}}, {"dimensions", 64}});
  ASSERT_EQ(ids.size(), 1u);
  const auto lists = vectors({{"input", {{1, 40, 41, 42}, {1, 7}}}});
  ASSERT_EQ(lists.size(), 2u);
  expect_near(lists[0], ids[0], "a token list of a list equals it alone");
  const auto base64 = vectors({{"input", "a cat on the mat"}, {"encoding_format", "base64"}});
  ASSERT_EQ(base64.size(), 1u);
  EXPECT_EQ(base64[0], cat[0]) << "base64 carries the float answer's bytes";
}

TEST_F(OpenAiEmbeddingsHttp, RefusalsNameTheirField) {
  expect_400({{"input", "x"}, {"dimensions", 32}}, "dimensions");
  expect_400({{"input", "x"}, {"encoding_format", "hex"}}, "encoding_format");
  expect_400({{"input", ""}}, "input");
  expect_400({{"input", {"fine", ""}}}, "input[1]");
  expect_400({{"input", json::array()}}, "input");
  expect_400({{"model", "m"}}, "input");
  expect_400({{"input", "x"}, {"model", 5}}, "model");
  expect_400({{"input", {1, -2}}}, "input");
  expect_400({{"input", std::vector<int>(128, 5)}}, "input");                     // the context is 128
  expect_400({{"input", {std::vector<int>{5}, std::vector<int>{1, 9999}}}}, "input[1]");  // outside the vocabulary
  expect_400({{"input", std::vector<std::string>(openai::kMaxEmbeddingInputs + 1, "x")}}, "input");
  EXPECT_EQ(http_request(gateway_->port(), "GET", "/v1/embeddings").status, 405);
}

// /metrics' loom_gateway_requests_total for endpoint "embeddings" and `outcome`.
double embeddings_requests_counted(unsigned short port, const std::string& outcome) {
  const std::string sample =
      R"(loom_gateway_requests_total{endpoint="embeddings",outcome=")" + outcome + R"("} )";
  const std::string body = http_request(port, "GET", "/metrics").body;
  const auto at = body.find(sample);
  if (at == std::string::npos) {
    ADD_FAILURE() << "no " << sample << "in /metrics";
    return -1;
  }
  return std::stod(body.substr(at + sample.size()));
}

TEST_F(OpenAiEmbeddingsHttp, RequestsAreCountedByOutcome) {
  const unsigned short port = gateway_->port();
  const double stop = embeddings_requests_counted(port, "stop");
  const double refused = embeddings_requests_counted(port, "refused");
  ASSERT_EQ(vectors({{"input", "a cat on the mat"}}).size(), 1u);
  expect_400({{"input", ""}}, "input");
  EXPECT_EQ(embeddings_requests_counted(port, "stop"), stop + 1);
  EXPECT_EQ(embeddings_requests_counted(port, "refused"), refused + 1);
}

}  // namespace
}  // namespace loom::net
