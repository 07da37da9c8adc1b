// What the two clients send: an OpenAI streaming body with standard fields, and a generate frame that
// loom_proto's own parser accepts in strict mode.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "loom/proto/client_message.hpp"
#include "openai_stream_client.hpp"
#include "websocket_stream_client.hpp"

namespace loom::loadgen {
namespace {

using nlohmann::json;

RequestSpec spec_of(bool chat) {
  RequestSpec spec;
  spec.index = 7;
  spec.chat = chat;
  spec.prompt = "the time of the year";
  spec.prompt_tokens = spec.prompt_words = 5;
  spec.max_tokens = 12;
  return spec;
}

TEST(OpenAiBody, CompletionsStreamWithUsage) {
  Options options;
  options.temperature = 0.5;
  options.seed = 10;
  const json body = json::parse(openai_request_body(options, spec_of(false)));
  EXPECT_EQ(body["prompt"], "the time of the year");
  EXPECT_FALSE(body.contains("messages"));
  EXPECT_EQ(body["max_tokens"], 12);
  EXPECT_EQ(body["temperature"], 0.5);
  EXPECT_EQ(body["seed"], 17);
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"], (json{{"include_usage", true}}));
  EXPECT_EQ(body["ignore_eos"], true);
  EXPECT_FALSE(body.contains("model"));
}

TEST(OpenAiBody, ChatSendsAUserMessageAndTheModelWhenNamed) {
  Options options;
  options.model = "tiny";
  options.ignore_eos = false;
  const json body = json::parse(openai_request_body(options, spec_of(true)));
  EXPECT_EQ(body["messages"], json::parse(R"([{"role":"user","content":"the time of the year"}])"));
  EXPECT_FALSE(body.contains("prompt"));
  EXPECT_EQ(body["model"], "tiny");
  EXPECT_FALSE(body.contains("ignore_eos"));
}

TEST(WebSocketFrame, IsAGenerateRequestLoomAccepts) {
  Options options;
  options.seed = 3;
  for (const bool chat : {false, true}) {
    const std::string frame = websocket_generate_frame(options, spec_of(chat));
    proto::ParseOptions strict;
    strict.strict = true;
    const auto parsed = proto::parse_client_message(frame, strict);
    ASSERT_TRUE(parsed) << to_string(parsed.error()) << "\n" << frame;
    const auto& request = std::get<proto::GenerateRequest>(*parsed);
    EXPECT_EQ(request.id, "r7");
    EXPECT_EQ(request.params.max_tokens, 12);
    EXPECT_EQ(request.params.temperature, 0);
    EXPECT_EQ(request.params.seed, 10u);
    EXPECT_TRUE(request.params.ignore_eos);
    EXPECT_EQ(std::holds_alternative<std::string>(request.input), !chat);
  }
}

}  // namespace
}  // namespace loom::loadgen
