// POST /tokenize, /detokenize and /apply-template through a real socket, on a model with the real Llama-2
// SentencePiece vocabulary (synth11M) and Qwen 2.5's chat template: token ids against the reference
// implementation's vectors (../shared/vocab), the round trip back to the text, the template's rendering
// against transformers' (../shared/templates) and its token count against a chat request's usage; and the
// refusals (bad ids, sizes, types, methods).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway_fixture.hpp"
#include "llama_routes.hpp"

namespace loom::net::test {
namespace {

using nlohmann::json;

std::string read_text(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// The reference vectors: inputs split on the separator line, one line of ids per input.
struct VocabCase {
  std::string input;
  std::vector<int> ids;
};
std::vector<VocabCase> spm_cases() {
  const std::string inputs = read_text(shared_file("vocab/ggml-vocab-llama-spm.gguf.inp"));
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<VocabCase> cases;
  for (std::size_t start = 0;;) {
    const auto end = inputs.find(separator, start);
    cases.push_back({inputs.substr(start, end == std::string::npos ? std::string::npos : end - start), {}});
    if (end == std::string::npos) break;
    start = end + separator.size();
  }
  std::istringstream outputs(read_text(shared_file("vocab/ggml-vocab-llama-spm.gguf.out")));
  std::string line;
  for (auto& c : cases) {
    if (!std::getline(outputs, line)) break;
    std::istringstream ids(line);
    for (int id = 0; ids >> id;) c.ids.push_back(id);
  }
  return cases;
}

class LlamaRoutes : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    GatewayConfig config = test_config();
    config.model = shared_file("models/synth11M-q4_0.gguf");
    config.kv_cache_mb = 16;
    config.chat_template_file = shared_file("templates/templates/Qwen-Qwen2.5-7B-Instruct.jinja");
    gateway_ = new GatewayUnderTest(config);
  }
  static void TearDownTestSuite() {
    delete gateway_;
    gateway_ = nullptr;
  }
  static HttpResult post(const std::string& path, const json& body) {
    return http_request(gateway_->port(), "POST", path, body.dump());
  }
  static void expect_refused(const HttpResult& result, const std::string& param) {
    EXPECT_EQ(result.status, 400) << result.body;
    const json error = result.json().at("error");
    EXPECT_EQ(error.at("type"), "invalid_request_error") << result.body;
    EXPECT_EQ(error.at("param"), param) << result.body;
  }

  static GatewayUnderTest* gateway_;
};
GatewayUnderTest* LlamaRoutes::gateway_ = nullptr;

TEST_F(LlamaRoutes, TokenizeGivesTheReferenceIdsAndDetokenizeGivesTheTextBack) {
  const auto cases = spm_cases();
  ASSERT_GT(cases.size(), 20u);
  for (const auto& c : cases) {
    const auto tokens = post("/tokenize", {{"content", c.input}, {"parse_special", false}});
    ASSERT_EQ(tokens.status, 200) << tokens.body;
    EXPECT_EQ(tokens.json().at("tokens").get<std::vector<int>>(), c.ids) << json(c.input).dump();
    const auto text = post("/detokenize", {{"tokens", c.ids}});
    ASSERT_EQ(text.status, 200) << text.body;
    EXPECT_EQ(text.json().at("content"), c.input);
  }
}

TEST_F(LlamaRoutes, TokenizeAddsBosOnlyWhenAskedAndGivesPiecesAsTextOrBytes) {
  const std::string content = " this is \xF0\x9F\xA6\x99.cpp";  // the llama emoji: byte-fallback tokens
  const auto plain = post("/tokenize", {{"content", content}}).json().at("tokens");
  const auto with_bos = post("/tokenize", {{"content", content}, {"add_special", true}}).json().at("tokens");
  ASSERT_EQ(with_bos.size(), plain.size() + 1);
  EXPECT_EQ(with_bos[0], 1) << "Llama-2's BOS";

  const auto pieces = post("/tokenize", {{"content", content}, {"with_pieces", true}});
  ASSERT_EQ(pieces.status, 200) << pieces.body;
  const json list = pieces.json().at("tokens");
  ASSERT_EQ(list.size(), plain.size());
  std::string joined;
  bool some_bytes = false;
  for (std::size_t i = 0; i < list.size(); ++i) {
    EXPECT_EQ(list[i].at("id"), plain[i]);
    const json& piece = list[i].at("piece");
    if (piece.is_string()) {
      joined += piece.get<std::string>();
    } else {
      some_bytes = true;  // a character split over tokens: its bytes, as llama.cpp gives them
      for (const json& byte : piece) joined += static_cast<char>(byte.get<int>());
    }
  }
  EXPECT_TRUE(some_bytes) << list.dump();
  EXPECT_EQ(joined, " " + content) << "SentencePiece's pieces: the text after the space it adds";
}

TEST_F(LlamaRoutes, TokenizeAndDetokenizeRefuseBadInput) {
  expect_refused(post("/tokenize", json::object()), "content");
  expect_refused(post("/tokenize", {{"content", 5}}), "content");
  expect_refused(post("/tokenize", {{"content", "hi"}, {"add_special", "yes"}}), "add_special");
  expect_refused(post("/tokenize", {{"content", std::string((1u << 20) + 1, 'a')}}), "content");
  expect_refused(post("/detokenize", {{"tokens", "1 2"}}), "tokens");
  expect_refused(post("/detokenize", {{"tokens", {1, -1}}}), "tokens[1]");
  expect_refused(post("/detokenize", {{"tokens", {32000}}}), "tokens[0]");
  expect_refused(post("/detokenize", {{"tokens", {1.5}}}), "tokens[0]");
  expect_refused(post("/detokenize", {{"tokens", std::vector<int>(kMaxDetokenizeTokens + 1, 0)}}), "tokens");
  const auto body_error = http_request(gateway_->port(), "POST", "/tokenize", "{");
  EXPECT_EQ(body_error.status, 400) << body_error.body;
  const auto get = http_request(gateway_->port(), "GET", "/tokenize");
  EXPECT_EQ(get.status, 405);
  EXPECT_EQ(get.headers.at("allow"), "POST");
}

// transformers' rendering of a conversation (../shared/templates), and the tokens a chat request counts.
TEST_F(LlamaRoutes, ApplyTemplateRendersAsTheSessionDoes) {
  const json conversation = json::parse(read_text(shared_file("templates/conversations/04-multi-turn-system.json")));
  const std::string expected =
      read_text(shared_file("templates/expected/Qwen-Qwen2.5-7B-Instruct/04-multi-turn-system.txt"));
  const auto applied = post("/apply-template", {{"messages", conversation.at("messages")}});
  ASSERT_EQ(applied.status, 200) << applied.body;
  EXPECT_EQ(applied.json().at("prompt"), expected);

  const auto chat = post("/v1/chat/completions",
                         {{"messages", conversation.at("messages")}, {"max_tokens", 1}, {"temperature", 0}});
  ASSERT_EQ(chat.status, 200) << chat.body;
  const int prompt_tokens = chat.json().at("usage").at("prompt_tokens");
  EXPECT_EQ(applied.json().at("prompt_tokens"), prompt_tokens);
  // The same count from the rendered text through /tokenize, as a prompt is tokenized (BOS, special tokens).
  const auto tokens = post("/tokenize", {{"content", expected}, {"add_special", true}});
  EXPECT_EQ(tokens.json().at("tokens").size(), static_cast<std::size_t>(prompt_tokens));
}

TEST_F(LlamaRoutes, ApplyTemplateRefusesWhatAChatRequestRefuses) {
  expect_refused(post("/apply-template", json::object()), "messages");
  expect_refused(post("/apply-template", {{"messages", json::array()}}), "messages");
  expect_refused(post("/apply-template", {{"messages", {{{"role", "robot"}, {"content", "x"}}}}}), "messages[0].role");
  const auto get = http_request(gateway_->port(), "GET", "/apply-template");
  EXPECT_EQ(get.status, 405);
}

}  // namespace
}  // namespace loom::net::test
