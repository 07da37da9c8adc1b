// The OpenAI routes' defaults and honesty through a real socket, on aidreams260K (a context of 128) in
// ChatML: no max_tokens generates until the context is full (HTTP and WebSocket) within the server's
// ceiling; fields loom cannot honour are refused naming them, or ignored and listed with "lenient": true;
// a conversation cut to fit the context says how many messages it lost (usage, a header, the done
// event); and /v1/models' meta.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway_fixture.hpp"

namespace loom::net::test {
namespace {

using nlohmann::json;

constexpr const char* kDefaultsCompletionsRoute = "/v1/completions";
constexpr const char* kDefaultsChatRoute = "/v1/chat/completions";
constexpr int kContext = 128;      // aidreams260K's
constexpr int kPromptTokens = 13;  // BOS and the 12 tokens of "Once upon a time"

class OpenAiDefaults : public SharedChatmlGateway<OpenAiDefaults> {};

json endless(json body) {
  body["temperature"] = 0;
  body["ignore_eos"] = true;  // nothing but the context (or a limit) ends it
  return body;
}

// The chunks' JSON of an SSE body, [DONE] left out.
std::vector<json> chunks_of(const HttpResult& result) {
  std::vector<json> chunks;
  for (const auto& data : sse_data(result.body)) {
    if (data != "[DONE]") chunks.push_back(json::parse(data));
  }
  return chunks;
}

TEST_F(OpenAiDefaults, NoMaxTokensGeneratesUntilTheContextIsFull) {
  const auto health = http_request(port(), "GET", "/health").json();
  ASSERT_EQ(health.at("context_length"), kContext);
  const auto whole = post(kDefaultsCompletionsRoute, endless({{"prompt", "Once upon a time"}}));
  ASSERT_EQ(whole.status, 200) << whole.body;
  const json answer = whole.json();
  EXPECT_EQ(answer["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(answer["usage"]["prompt_tokens"], kPromptTokens);
  EXPECT_EQ(answer["usage"]["completion_tokens"], kContext - kPromptTokens) << "not the old default of 256, nor less";

  // llama.cpp's name and its "no limit".
  EXPECT_EQ(post(kDefaultsCompletionsRoute, endless({{"prompt", "Once upon a time"}, {"n_predict", 5}})).json()["usage"]["completion_tokens"], 5);
  EXPECT_EQ(post(kDefaultsCompletionsRoute, endless({{"prompt", "Once upon a time"}, {"n_predict", -1}})).json()["usage"]["completion_tokens"],
            kContext - kPromptTokens);

  WsClient client(port());
  client.send(json{{"type", "generate"}, {"id", "w1"}, {"prompt", "Once upon a time"},
                   {"params", {{"temperature", 0}, {"ignore_eos", true}}}});
  const auto frames = client.receive_until_end("w1");
  ASSERT_EQ(frames.back().value("type", ""), "done") << frames.back().dump();
  EXPECT_EQ(frames.back()["finish_reason"], "length");
  EXPECT_EQ(frames.back()["usage"]["completion_tokens"], kContext - kPromptTokens);
}

TEST(OpenAiDefaultsCeiling, NoMaxTokensStopsAtTheServersCeilingAndMoreIsRefused) {
  GatewayConfig config = test_config();
  config.max_tokens_limit = 10;
  GatewayUnderTest gateway(config);
  const auto capped = http_request(gateway.port(), "POST", kDefaultsCompletionsRoute, endless({{"prompt", "Once upon a time"}}).dump());
  ASSERT_EQ(capped.status, 200) << capped.body;
  EXPECT_EQ(capped.json()["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(capped.json()["usage"]["completion_tokens"], 10);
  const auto above =
      http_request(gateway.port(), "POST", kDefaultsCompletionsRoute, endless({{"prompt", "x"}, {"max_tokens", 11}}).dump());
  EXPECT_EQ(above.status, 400) << above.body;
  EXPECT_EQ(above.json()["error"]["param"], "max_tokens");
}

TEST_F(OpenAiDefaults, FieldsLoomCannotHonourAreRefusedUnlessLenient) {
  const json chat = {{"messages", {{{"role", "user"}, {"content", "Once upon a time"}}}}, {"max_tokens", 2}};
  for (const auto& [field, value] : std::vector<std::pair<std::string, json>>{
           {"mirostat", 2}, {"dry_multiplier", 0.8}, {"xtc_probability", 0.5}, {"typical_p", 0.9}, {"tfs_z", 0.95},
           {"dynatemp_range", 0.5}, {"top_n_sigma", 1.0}, {"samplers", {"top_k", "temperature"}}, {"n_probs", 3},
           {"cache_prompt", false}, {"audio", {{"voice", "alloy"}}}, {"modalities", {"text", "audio"}}}) {
    json body = chat;
    body[field] = value;
    const auto refused = post(kDefaultsChatRoute, body);
    EXPECT_EQ(refused.status, 400) << field << ": " << refused.body;
    const json error = refused.json()["error"];
    EXPECT_EQ(error["type"], "invalid_request_error") << field;
    EXPECT_EQ(error["param"], field);
    EXPECT_NE(error["message"].get<std::string>().find("lenient"), std::string::npos) << error.dump();
  }
  // Their "off" values ask for nothing; a field that only tunes an off one changes nothing; unknown fields
  // are ignored as OpenAI's clients send extras.
  json off = chat;
  for (const auto& [field, value] : std::vector<std::pair<std::string, json>>{
           {"mirostat", 0}, {"dry_multiplier", 0}, {"xtc_probability", 0}, {"typical_p", 1}, {"tfs_z", 1.0},
           {"dynatemp_range", 0}, {"top_n_sigma", -1}, {"n_probs", 0}, {"cache_prompt", true},
           {"modalities", json::array({"text"})}, {"mirostat_tau", 3}, {"dry_base", 2}, {"xtc_threshold", 0.2},
           {"an_unknown_field", 1}}) {
    off[field] = value;
  }
  const auto accepted = post(kDefaultsChatRoute, off);
  EXPECT_EQ(accepted.status, 200) << accepted.body;
  EXPECT_EQ(accepted.headers.count("x-loom-ignored-fields"), 0u);

  json lenient = chat;
  lenient["lenient"] = true;
  lenient["mirostat"] = 2;
  lenient["typical_p"] = 0.5;
  const auto whole = post(kDefaultsChatRoute, lenient);
  ASSERT_EQ(whole.status, 200) << whole.body;
  EXPECT_EQ(whole.headers.at("x-loom-ignored-fields"), "mirostat, typical_p");
  lenient["stream"] = true;
  const auto streamed = post(kDefaultsChatRoute, lenient);
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  EXPECT_EQ(streamed.headers.at("x-loom-ignored-fields"), "mirostat, typical_p");
  EXPECT_FALSE(chunks_of(streamed).empty());

  lenient["lenient"] = "yes";
  const auto bad = post(kDefaultsChatRoute, lenient);
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.json()["error"]["param"], "lenient");
}

// A conversation longer than the context: the oldest exchanges go, and the answer says how many messages.
// The expected count comes from /apply-template: the fewest whole exchanges whose removal makes the
// rendering fit the prompt's room (the context less the one generated token).
TEST_F(OpenAiDefaults, ATrimmedConversationSaysHowManyMessagesItLost) {
  // No system message: ChatML's markers take many tokens of this small vocabulary, and with one only the
  // last turn would fit.
  json messages = json::array();
  for (int i = 0; i < 6; ++i) {
    messages.push_back({{"role", "user"}, {"content", "Who?"}});
    messages.push_back({{"role", "assistant"}, {"content", "A girl."}});
  }
  messages.push_back({{"role", "user"}, {"content", "What next?"}});
  const auto rendered_tokens = [&](std::size_t dropped) {
    json kept = json::array();
    for (std::size_t i = dropped; i < messages.size(); ++i) kept.push_back(messages[i]);
    const auto applied = post("/apply-template", {{"messages", kept}});
    EXPECT_EQ(applied.status, 200) << applied.body;
    return applied.json().at("prompt_tokens").get<int>();
  };
  std::size_t expected = 0;
  while (rendered_tokens(expected) > kContext - 1) expected += 2;
  ASSERT_GT(expected, 0u) << "the conversation must be longer than the context";
  ASSERT_LT(expected, messages.size() - 2) << "some of the history must fit";

  const json body = {{"messages", messages}, {"max_tokens", 1}, {"temperature", 0}};
  const auto whole = post(kDefaultsChatRoute, body);
  ASSERT_EQ(whole.status, 200) << whole.body;
  EXPECT_EQ(whole.json()["usage"]["trimmed_messages"], expected);
  EXPECT_EQ(whole.json()["usage"]["prompt_tokens"], rendered_tokens(expected));
  EXPECT_EQ(whole.headers.at("x-loom-trimmed-messages"), std::to_string(expected));

  json streamed_body = body;
  streamed_body["stream"] = true;
  streamed_body["stream_options"] = {{"include_usage", true}};
  const auto chunks = chunks_of(post(kDefaultsChatRoute, streamed_body));
  ASSERT_FALSE(chunks.empty());
  EXPECT_EQ(chunks.back()["usage"]["trimmed_messages"], expected) << chunks.back().dump();

  WsClient client(port());
  client.send(json{{"type", "generate"}, {"id", "t1"}, {"messages", messages}, {"params", {{"max_tokens", 1}}}});
  const auto frames = client.receive_until_end("t1");
  EXPECT_EQ(frames.back()["usage"]["trimmed_messages"], expected) << frames.back().dump();

  // Nothing trimmed: no field, no header.
  const auto short_chat = post(kDefaultsChatRoute, {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 1}});
  ASSERT_EQ(short_chat.status, 200) << short_chat.body;
  EXPECT_FALSE(short_chat.json()["usage"].contains("trimmed_messages"));
  EXPECT_EQ(short_chat.headers.count("x-loom-trimmed-messages"), 0u);
}

// llama.cpp's meta fields and loom's. aidreams260K.gguf is all F32: its weights' size is 4 bytes a parameter,
// and its parameters follow from its shape (dim 64, hidden 172, 4 layers, vocab 512; the llama2.c model's
// shared classifier is written out as output.weight in the GGUF).
TEST_F(OpenAiDefaults, ModelsListTheModelsMeta) {
  const auto models = http_request(port(), "GET", "/v1/models");
  ASSERT_EQ(models.status, 200) << models.body;
  const json meta = models.json()["data"][0].at("meta");
  EXPECT_EQ(meta.at("n_vocab"), 512);
  EXPECT_EQ(meta.at("n_ctx_train"), kContext);
  EXPECT_EQ(meta.at("context_length"), kContext);
  EXPECT_EQ(meta.at("n_embd"), 64);
  EXPECT_EQ(meta.at("n_layer"), 4);
  EXPECT_EQ(meta.at("architecture"), "llama");
  EXPECT_EQ(meta.at("vocab_type"), 1) << "SentencePiece";
  constexpr long dim = 64, hidden = 172, layers = 4, vocab = 512;
  constexpr long per_layer = 4 * dim * dim + 3 * dim * hidden + 2 * dim;  // attention, feed-forward, two norms
  constexpr long parameters = 2 * vocab * dim + layers * per_layer + dim;  // embeddings and output, layers, final norm
  EXPECT_EQ(meta.at("n_params"), parameters);
  EXPECT_EQ(meta.at("size"), 4 * parameters);
  EXPECT_EQ(meta.at("tensor_types"), json({{"f32", 3 + 9 * layers}}));
  EXPECT_LT(meta.at("size").get<long>(), static_cast<long>(std::filesystem::file_size(shared_file("models/aidreams260K.gguf"))));
}

}  // namespace
}  // namespace loom::net::test
