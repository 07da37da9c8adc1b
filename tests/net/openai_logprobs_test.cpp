// Log-probabilities end to end: the OpenAI fields' bounds (translation alone), then through a real socket the
// values the gateway reports checked against an independent computation (the model's forward pass run here,
// its logits log-softmaxed in double), and the OpenAI routes' logprobs objects, whole and streamed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway_fixture.hpp"
#include "loom/compute/cpu/llama_model.hpp"
#include "loom/compute/cpu/thread_pool.hpp"
#include "loom/compute/model/model_loader.hpp"
#include "loom/compute/text/tokenizer.hpp"
#include "loom/compute/text/vocabulary.hpp"
#include "loom/proto/sampling_params.hpp"
#include "openai_logprobs.hpp"
#include "openai_translate.hpp"

namespace loom::net::test {
namespace {

using nlohmann::json;

// ------------------------------------------------------------------------------------------------
// The fields and their bounds, without a server.

std::variant<openai::Request, openai::Error> translate(const json& body, OpenAiRoute route) {
  proto::ParseOptions options;
  options.max_tokens_limit = 4096;
  return openai::translate_request(body.dump(), route, "id-1", options);
}

openai::Error refusal(const json& body, OpenAiRoute route) {
  auto result = translate(body, route);
  if (auto* error = std::get_if<openai::Error>(&result)) return *error;
  ADD_FAILURE() << "accepted: " << body.dump();
  return {};
}

openai::Request accepted(const json& body, OpenAiRoute route) {
  auto result = translate(body, route);
  if (auto* error = std::get_if<openai::Error>(&result)) {
    ADD_FAILURE() << "refused: " << error->message;
    return {};
  }
  return std::get<openai::Request>(std::move(result));
}

const json kMessages = json::array({{{"role", "user"}, {"content", "hi"}}});

TEST(OpenAiLogprobsFields, ChatTakesLogprobsAndTopLogprobsWithinBounds) {
  const auto chat = OpenAiRoute::chat_completions;
  const auto plain = accepted({{"messages", kMessages}}, chat);
  EXPECT_FALSE(plain.top_logprobs);
  EXPECT_EQ(plain.generate.params.logprobs, 0);

  const auto own_only = accepted({{"messages", kMessages}, {"logprobs", true}}, chat);
  ASSERT_TRUE(own_only.top_logprobs);
  EXPECT_EQ(*own_only.top_logprobs, 0);
  EXPECT_EQ(own_only.generate.params.logprobs, 1);  // the engine reports a token's logprob beside alternatives

  const auto top = accepted({{"messages", kMessages}, {"logprobs", true}, {"top_logprobs", 20}}, chat);
  EXPECT_EQ(*top.top_logprobs, 20);
  EXPECT_EQ(top.generate.params.logprobs, 20);
  EXPECT_FALSE(accepted({{"messages", kMessages}, {"logprobs", false}}, chat).top_logprobs);

  EXPECT_EQ(refusal({{"messages", kMessages}, {"logprobs", 1}}, chat).param, "logprobs");
  const auto too_many = refusal({{"messages", kMessages}, {"logprobs", true}, {"top_logprobs", 21}}, chat);
  EXPECT_EQ(too_many.status, 400);
  EXPECT_EQ(too_many.param, "top_logprobs");
  EXPECT_NE(too_many.message.find("[0, 20]"), std::string::npos) << too_many.message;
  EXPECT_EQ(refusal({{"messages", kMessages}, {"logprobs", true}, {"top_logprobs", -1}}, chat).param, "top_logprobs");
  EXPECT_EQ(refusal({{"messages", kMessages}, {"logprobs", true}, {"top_logprobs", 2.5}}, chat).param, "top_logprobs");
  const auto without = refusal({{"messages", kMessages}, {"top_logprobs", 3}}, chat);
  EXPECT_EQ(without.param, "top_logprobs");
  EXPECT_NE(without.message.find("logprobs: true"), std::string::npos) << without.message;
}

TEST(OpenAiLogprobsFields, CompletionsTakeLogprobsUpToFive) {
  const auto route = OpenAiRoute::completions;
  EXPECT_EQ(openai::max_top_logprobs(route), 5);
  EXPECT_FALSE(accepted({{"prompt", "x"}}, route).top_logprobs);
  EXPECT_FALSE(accepted({{"prompt", "x"}, {"logprobs", false}}, route).top_logprobs);
  const auto zero = accepted({{"prompt", "x"}, {"logprobs", 0}}, route);
  ASSERT_TRUE(zero.top_logprobs);
  EXPECT_EQ(*zero.top_logprobs, 0);
  EXPECT_EQ(zero.generate.params.logprobs, 1);
  EXPECT_EQ(accepted({{"prompt", "x"}, {"logprobs", 5}}, route).generate.params.logprobs, 5);
  const auto six = refusal({{"prompt", "x"}, {"logprobs", 6}}, route);
  EXPECT_EQ(six.status, 400);
  EXPECT_EQ(six.param, "logprobs");
  EXPECT_NE(six.message.find("[0, 5]"), std::string::npos) << six.message;
  EXPECT_EQ(refusal({{"prompt", "x"}, {"logprobs", true}}, route).param, "logprobs");
}

// ------------------------------------------------------------------------------------------------
// Through a real socket.

class Logprobs : public SharedChatmlGateway<Logprobs> {};

constexpr const char* kPrompt = "Once upon a time";

// The model run here, apart from the server: its forward pass over the prompt and then each given token,
// and the log-softmax of each position's raw logits in double.
class IndependentModel {
 public:
  IndependentModel()
      : loaded_(compute::LoadedModel::open(shared_file("models/aidreams260K.gguf"))),
        tokenizer_(compute::Vocabulary::from_gguf(*loaded_->gguf())),
        pool_(1),
        model_(loaded_->config(), loaded_->weights(), pool_, 512),
        cache_(model_.make_cache()) {}

  const compute::Tokenizer& tokenizer() const { return tokenizer_; }

  // The log-probabilities after the prompt and then after each of `generated` but the last.
  std::vector<std::vector<double>> logprobs(const std::string& prompt, const std::vector<std::int32_t>& generated) {
    const auto tokens = compute::encode_prompt(tokenizer_, prompt, false);
    const auto vocab = static_cast<std::size_t>(loaded_->config().vocab_size);
    std::vector<float> logits(vocab);
    model_.forward(tokens, 0, cache_, compute::LlamaModel::Logits::last, logits.data());
    std::vector<std::vector<double>> rows{log_softmax(logits)};
    auto position = static_cast<std::int64_t>(tokens.size());
    for (std::size_t i = 0; i + 1 < generated.size(); ++i) {
      model_.forward(std::span(&generated[i], 1), position++, cache_, compute::LlamaModel::Logits::last, logits.data());
      rows.push_back(log_softmax(logits));
    }
    return rows;
  }

 private:
  static std::vector<double> log_softmax(const std::vector<float>& logits) {
    const double max = *std::max_element(logits.begin(), logits.end());
    double sum = 0.0;
    for (const float l : logits) sum += std::exp(static_cast<double>(l) - max);
    const double log_sum = max + std::log(sum);
    std::vector<double> out;
    for (const float l : logits) out.push_back(static_cast<double>(l) - log_sum);
    return out;
  }

  std::unique_ptr<compute::LoadedModel> loaded_;
  compute::Tokenizer tokenizer_;
  compute::ThreadPool pool_;
  compute::LlamaModel model_;
  compute::KvCache cache_;
};

// The ids of a row's k most likely tokens, most likely first.
std::vector<std::int32_t> top_ids(const std::vector<double>& row, std::size_t k) {
  std::vector<std::int32_t> ids(row.size());
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int32_t>(i);
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(),
                    [&](std::int32_t a, std::int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
  ids.resize(k);
  return ids;
}

std::vector<std::uint8_t> bytes_of(const std::string& piece) { return {piece.begin(), piece.end()}; }

// The WebSocket's token events carry ids, so each can be checked against the model run here: the
// log-probability of the sampled token and of the alternatives is the log-softmax of the raw logits
// (independent of temperature: the request samples at 0.7 with a seed), the alternatives are the most likely
// tokens in order, and each piece and its bytes are the vocabulary's.
TEST_F(Logprobs, WebSocketEventsMatchTheLogSoftmaxOfTheRawLogits) {
  constexpr int kTop = 5;
  WsClient client(port());
  client.send(json{{"type", "generate"},
                   {"id", "lp"},
                   {"prompt", kPrompt},
                   {"params", {{"temperature", 0.7}, {"seed", 7}, {"max_tokens", 6}, {"logprobs", kTop},
                               {"ignore_eos", true}}}});
  std::vector<json> tokens;
  for (const json& frame : client.receive_until_end("lp")) {
    if (frame["type"] == "token") tokens.push_back(frame);
  }
  ASSERT_EQ(tokens.size(), 6u);
  std::vector<std::int32_t> ids;
  for (const json& t : tokens) ids.push_back(t["token"].get<std::int32_t>());

  IndependentModel model;
  const auto rows = model.logprobs(kPrompt, ids);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const json& t = tokens[i];
    const auto& row = rows[i];
    SCOPED_TRACE("token " + std::to_string(i) + ": " + t.dump());
    EXPECT_NEAR(t["logprob"].get<double>(), row[static_cast<std::size_t>(ids[i])], 1e-3);
    const std::string piece = model.tokenizer().piece(ids[i], true);
    EXPECT_EQ(t["bytes"].get<std::vector<std::uint8_t>>(), bytes_of(piece));
    const auto& top = t["top_logprobs"];
    ASSERT_EQ(top.size(), static_cast<std::size_t>(kTop));
    const auto expected_ids = top_ids(row, kTop);
    double mass = 0.0;
    for (std::size_t k = 0; k < top.size(); ++k) {
      const auto id = top[k]["token"].get<std::int32_t>();
      EXPECT_EQ(id, expected_ids[k]);
      EXPECT_NEAR(top[k]["logprob"].get<double>(), row[static_cast<std::size_t>(id)], 1e-3);
      EXPECT_EQ(top[k]["bytes"].get<std::vector<std::uint8_t>>(), bytes_of(model.tokenizer().piece(id, true)));
      if (k > 0) {
        EXPECT_LE(top[k]["logprob"].get<double>(), top[k - 1]["logprob"].get<double>());
      }
      mass += std::exp(top[k]["logprob"].get<double>());
    }
    EXPECT_LE(mass, 1.0 + 1e-6);
  }
}

// Greedy: the sampled token is the most likely alternative, at every position.
void expect_greedy_chat_entries(const json& content, std::size_t top) {
  ASSERT_TRUE(content.is_array()) << content.dump();
  ASSERT_FALSE(content.empty());
  for (const json& entry : content) {
    ASSERT_EQ(entry["top_logprobs"].size(), top) << entry.dump();
    EXPECT_EQ(entry["top_logprobs"][0]["token"], entry["token"]) << entry.dump();
    EXPECT_DOUBLE_EQ(entry["top_logprobs"][0]["logprob"].get<double>(), entry["logprob"].get<double>());
    EXPECT_EQ(entry["top_logprobs"][0]["bytes"], entry["bytes"]);
    double mass = 0.0;
    for (const json& alternative : entry["top_logprobs"]) mass += std::exp(alternative["logprob"].get<double>());
    EXPECT_LE(mass, 1.0 + 1e-6);
    EXPECT_LE(entry["logprob"].get<double>(), 0.0);
  }
}

TEST_F(Logprobs, ChatReportsContentLogprobsWholeAndStreamed) {
  json body = {{"messages", {{{"role", "user"}, {"content", kPrompt}}}},
               {"max_tokens", 8},
               {"temperature", 0},
               {"logprobs", true},
               {"top_logprobs", 3}};
  const auto whole = post("/v1/chat/completions", body);
  ASSERT_EQ(whole.status, 200) << whole.body;
  const json answer = whole.json();
  const json& content = answer["choices"][0]["logprobs"]["content"];
  expect_greedy_chat_entries(content, 3);
  // One entry per token shown (an end-of-generation token is counted in usage, not shown).
  EXPECT_LE(content.size(), answer["usage"]["completion_tokens"].get<std::size_t>());

  body["stream"] = true;
  const auto streamed = post("/v1/chat/completions", body);
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  json gathered = json::array();
  for (const std::string& data : sse_data(streamed.body)) {
    if (data == "[DONE]") break;
    const json chunk = json::parse(data);
    for (const json& choice : chunk["choices"]) {
      if (choice["logprobs"].is_object()) {
        for (const json& entry : choice["logprobs"]["content"]) gathered.push_back(entry);
      }
    }
  }
  EXPECT_EQ(gathered, content);

  // Without logprobs: null, as before.
  body.erase("logprobs");
  body.erase("top_logprobs");
  body["stream"] = false;
  EXPECT_TRUE(post("/v1/chat/completions", body).json()["choices"][0]["logprobs"].is_null());
}

TEST_F(Logprobs, CompletionsReportTokensOffsetsAndAlternativesWholeAndStreamed) {
  json body = {{"prompt", kPrompt}, {"max_tokens", 8}, {"temperature", 0}, {"logprobs", 2}, {"ignore_eos", true}};
  const auto whole = post("/v1/completions", body);
  ASSERT_EQ(whole.status, 200) << whole.body;
  const json answer = whole.json();
  const json& logprobs = answer["choices"][0]["logprobs"];
  const std::string text = answer["choices"][0]["text"];
  ASSERT_EQ(logprobs["tokens"].size(), 8u) << logprobs.dump();
  ASSERT_EQ(logprobs["token_logprobs"].size(), 8u);
  ASSERT_EQ(logprobs["top_logprobs"].size(), 8u);
  ASSERT_EQ(logprobs["text_offset"].size(), 8u);
  std::size_t previous_offset = 0;
  for (std::size_t i = 0; i < 8; ++i) {
    const json& alternatives = logprobs["top_logprobs"][i];
    EXPECT_GE(alternatives.size(), 1u);
    EXPECT_LE(alternatives.size(), 2u);
    // Greedy: the token is the most likely alternative.
    ASSERT_TRUE(alternatives.contains(logprobs["tokens"][i].get<std::string>())) << alternatives.dump();
    EXPECT_DOUBLE_EQ(alternatives[logprobs["tokens"][i].get<std::string>()].get<double>(),
                     logprobs["token_logprobs"][i].get<double>());
    for (const auto& [piece, logprob] : alternatives.items()) {
      EXPECT_LE(logprob.get<double>(), logprobs["token_logprobs"][i].get<double>() + 1e-12) << piece;
    }
    const auto offset = logprobs["text_offset"][i].get<std::size_t>();
    EXPECT_GE(offset, previous_offset);
    EXPECT_LE(offset, text.size());
    previous_offset = offset;
  }

  body["stream"] = true;
  const auto streamed = post("/v1/completions", body);
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  json gathered = {{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()},
                   {"text_offset", json::array()}};
  for (const std::string& data : sse_data(streamed.body)) {
    if (data == "[DONE]") break;
    const json chunk = json::parse(data);
    for (const json& choice : chunk["choices"]) {
      if (!choice["logprobs"].is_object()) continue;
      for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"}) {
        for (const json& item : choice["logprobs"][key]) gathered[key].push_back(item);
      }
    }
  }
  EXPECT_EQ(gathered, logprobs);
}

}  // namespace
}  // namespace loom::net::test
