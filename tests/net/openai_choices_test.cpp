// n > 1 through a real socket, on the WebSocket (token events under their choice, one done event with every
// choice's end) and on the OpenAI routes: n choices (index 0..n-1) whole and streamed, each chunk
// under its choice's index, the same texts both ways, choice 0 equal to the n = 1 answer with the same seed,
// usage counting the prompt once; and the bounds of n, best_of and user.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway_fixture.hpp"

namespace loom::net::test {
namespace {

using nlohmann::json;

class OpenAiChoices : public SharedChatmlGateway<OpenAiChoices> {};

// Each choice's text from a stream's chunks, and how many finish chunks each had.
struct Streamed {
  std::vector<std::string> texts;
  std::vector<int> finishes;
  std::vector<int> roles;
};

Streamed gather(const HttpResult& result, std::size_t n, bool chat) {
  Streamed out{std::vector<std::string>(n), std::vector<int>(n), std::vector<int>(n)};
  EXPECT_EQ(result.status, 200) << result.body;
  for (const std::string& data : sse_data(result.body)) {
    if (data == "[DONE]") break;
    const json chunk = json::parse(data);
    for (const json& choice : chunk["choices"]) {
      const auto index = choice["index"].get<std::size_t>();
      if (index >= n) {
        ADD_FAILURE() << "a chunk for choice " << index;
        continue;
      }
      if (chat) {
        out.texts[index] += choice["delta"].value("content", "");
        out.roles[index] += choice["delta"].contains("role") ? 1 : 0;
      } else {
        out.texts[index] += choice["text"].get<std::string>();
      }
      out.finishes[index] += choice["finish_reason"].is_string() ? 1 : 0;
    }
  }
  return out;
}

TEST_F(OpenAiChoices, ThreeCompletionChoicesWholeAndStreamed) {
  json body = {{"prompt", "Once upon a time"}, {"max_tokens", 12}, {"temperature", 1.0}, {"seed", 9}, {"n", 3},
               {"best_of", 3}, {"user", "someone"}};
  const auto whole = post("/v1/completions", body);
  ASSERT_EQ(whole.status, 200) << whole.body;
  const json answer = whole.json();
  ASSERT_EQ(answer["choices"].size(), 3u);
  std::vector<std::string> texts;
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(answer["choices"][i]["index"], i);
    EXPECT_EQ(answer["choices"][i]["finish_reason"], "length");
    texts.push_back(answer["choices"][i]["text"]);
  }
  EXPECT_EQ(answer["usage"]["completion_tokens"], 3 * 12);

  body["stream"] = true;
  const auto streamed = gather(post("/v1/completions", body), 3, false);
  EXPECT_EQ(streamed.texts, texts);
  EXPECT_EQ(streamed.finishes, (std::vector<int>{1, 1, 1}));

  body.erase("stream");
  body.erase("best_of");
  body["n"] = 1;
  const json single = post("/v1/completions", body).json();
  EXPECT_EQ(single["choices"][0]["text"], texts[0]) << "choice 0 is the n = 1 answer with the same seed";
  EXPECT_EQ(single["usage"]["prompt_tokens"], answer["usage"]["prompt_tokens"]) << "the prompt is counted once";
}

TEST_F(OpenAiChoices, ThreeChatChoicesWholeAndStreamed) {
  json body = {{"messages", {{{"role", "user"}, {"content", "Tell me a story"}}}},
               {"max_tokens", 10},
               {"temperature", 1.0},
               {"seed", 3},
               {"n", 3}};
  const auto whole = post("/v1/chat/completions", body);
  ASSERT_EQ(whole.status, 200) << whole.body;
  const json answer = whole.json();
  ASSERT_EQ(answer["choices"].size(), 3u);
  std::vector<std::string> texts;
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(answer["choices"][i]["index"], i);
    EXPECT_EQ(answer["choices"][i]["message"]["role"], "assistant");
    texts.push_back(answer["choices"][i]["message"]["content"]);
  }
  body["stream"] = true;
  const auto streamed = gather(post("/v1/chat/completions", body), 3, true);
  EXPECT_EQ(streamed.texts, texts);
  EXPECT_EQ(streamed.finishes, (std::vector<int>{1, 1, 1}));
  EXPECT_EQ(streamed.roles, (std::vector<int>{1, 1, 1})) << "each choice's first chunk names the role";
}

TEST_F(OpenAiChoices, WebSocketTokensCarryTheirChoiceAndOneDoneEndsAll) {
  WsClient client(gateway_->port());
  client.send(json{{"type", "generate"},
                   {"id", "two"},
                   {"prompt", "Once upon a time"},
                   {"n", 2},
                   {"params", {{"temperature", 1.0}, {"seed", 4}, {"max_tokens", 6}, {"ignore_eos", true}}}});
  std::vector<int> tokens(2);
  std::vector<json> dones;
  for (const json& frame : client.receive_until_end("two")) {
    if (frame["type"] == "token") {
      const int choice = frame.value("choice", 0);
      ASSERT_TRUE(choice == 0 || choice == 1) << frame.dump();
      EXPECT_EQ(frame["index"], tokens[static_cast<std::size_t>(choice)]) << "each choice counts its own tokens";
      ++tokens[static_cast<std::size_t>(choice)];
    } else if (frame["type"] == "done") {
      dones.push_back(frame);
    }
  }
  EXPECT_EQ(tokens, (std::vector<int>{6, 6}));
  ASSERT_EQ(dones.size(), 1u);
  ASSERT_EQ(dones[0]["choices"].size(), 2u) << dones[0].dump();
  EXPECT_EQ(dones[0]["choices"][1]["index"], 1);
  EXPECT_EQ(dones[0]["choices"][1]["finish_reason"], "length");
  EXPECT_EQ(dones[0]["usage"]["completion_tokens"], 12);

  client.send(json{{"type", "generate"}, {"id", "in-session"}, {"session", "s"}, {"prompt", "x"}, {"n", 2}});
  const auto refused = client.receive_until_end("in-session");
  ASSERT_FALSE(refused.empty());
  EXPECT_EQ(refused.back()["type"], "error") << refused.back().dump();
  EXPECT_EQ(refused.back()["field"], "n") << refused.back().dump();
}

TEST_F(OpenAiChoices, BoundsAre400sNamingTheField) {
  const json base = {{"prompt", "x"}, {"max_tokens", 1}};
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"n", 17}}, "n"},
      {{{"n", 0}}, "n"},
      {{{"n", 1.5}}, "n"},
      {{{"n", 2}, {"best_of", 4}}, "best_of"},
      {{{"best_of", 2}}, "best_of"},
      {{{"user", std::string(257, 'u')}}, "user"},
  };
  for (const auto& [extra, param] : cases) {
    json body = base;
    body.update(extra);
    const auto result = post("/v1/completions", body);
    EXPECT_EQ(result.status, 400) << body.dump();
    EXPECT_EQ(result.json()["error"]["param"], param) << result.body;
  }
}

}  // namespace
}  // namespace loom::net::test
