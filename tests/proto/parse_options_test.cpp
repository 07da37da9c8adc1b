// ParseOptions: strict versus lenient handling of unknown fields, and every configurable limit moving the
// point where input is refused.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "wire_test_support.hpp"
#include "loom/proto/client_message.hpp"
#include "loom/proto/server_message.hpp"

namespace loom::proto {
namespace {

using wire_test::as_generate;
using wire_test::generate;
using wire_test::with_params;

using nlohmann::json;

ParseOptions lenient() {
  ParseOptions o;
  o.strict = false;
  return o;
}

// A user message with the given content.
std::string user(const std::string& content) { return R"({"role":"user","content":")" + content + R"("})"; }

TEST(ParseOptions, DocumentedDefaults) {
  const ParseOptions o;
  EXPECT_TRUE(o.strict);
  EXPECT_EQ(o.max_message_bytes, 4u * 1024 * 1024);
  EXPECT_EQ(o.max_json_depth, 32u);
  EXPECT_EQ(o.max_id_bytes, 128u);
  EXPECT_EQ(o.max_prompt_bytes, 1024u * 1024);
  EXPECT_EQ(o.max_messages, 256u);
  EXPECT_EQ(o.max_tokens_limit, 4096);
  EXPECT_EQ(o.max_top_k, 1000);
  EXPECT_EQ(o.max_stop_strings, 8u);
  EXPECT_EQ(o.max_stop_bytes, 256u);
  EXPECT_EQ(o.max_stop_token_ids, 32u);
}

TEST(StrictMode, UnknownFieldsAreRefusedAtEveryLevelWhenStrict) {
  const std::string top = R"({"type":"generate","id":"r1","prompt":"hi","extra":1})";
  const std::string nested = R"({"type":"generate","id":"r1","prompt":"hi","params":{"temprature":2}})";
  const std::string in_message = R"({"type":"generate","id":"r1","messages":[{"role":"user","content":"a","x":1}]})";
  for (const auto& [frame, field] :
       {std::pair{top, "extra"}, std::pair{nested, "params.temprature"}, std::pair{in_message, "messages[0].x"}}) {
    const auto parsed = parse_client_message(frame);
    ASSERT_FALSE(parsed.ok()) << frame;
    EXPECT_EQ(parsed.error().field, field);
    EXPECT_NE(parsed.error().message.find("is not a known field"), std::string::npos);
  }
}

TEST(StrictMode, TheErrorListsTheKnownFields) {
  const auto parsed = parse_client_message(R"({"type":"cancel","id":"r1","reason":"x"})");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().message, "is not a known field (strict mode); known fields: type, id");
}

TEST(LenientMode, UnknownFieldsAreIgnoredAtEveryLevel) {
  const auto parsed = parse_client_message(
      R"({"type":"generate","id":"r1","extra":{"deep":[1,2]},
          "messages":[{"role":"user","content":"a","name":"bob"}],
          "params":{"temprature":2,"top_k":5}})",
      lenient());
  ASSERT_TRUE(parsed.ok()) << to_string(parsed.error());
  const GenerateRequest& r = as_generate(parsed);
  EXPECT_EQ(r.params.top_k, 5);
  EXPECT_DOUBLE_EQ(r.params.temperature, 0.8);  // the misspelt field did not set anything
}

TEST(LenientMode, KnownFieldsAreStillValidated) {
  const auto parsed = parse_client_message(with_params(R"("top_p":2)"), lenient());
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().field, "params.top_p");
}

TEST(LenientMode, AppliesToServerMessagesToo) {
  const std::string frame = R"({"type":"session.opened","session_id":"s1","model":"qwen3"})";
  EXPECT_FALSE(parse_server_message(frame).ok());
  const auto parsed = parse_server_message(frame, lenient());
  ASSERT_TRUE(parsed.ok()) << to_string(parsed.error());
  EXPECT_EQ(std::get<SessionOpened>(*parsed).session_id, "s1");
}

TEST(Limits, MaxTokensLimitIsConfigurable) {
  ParseOptions o;
  o.max_tokens_limit = 100;
  const auto at = parse_client_message(with_params(R"("max_tokens":100)"), o);
  ASSERT_TRUE(at.ok()) << to_string(at.error());
  EXPECT_EQ(as_generate(at).params.max_tokens, 100);
  const auto above = parse_client_message(with_params(R"("max_tokens":101)"), o);
  ASSERT_FALSE(above.ok());
  EXPECT_EQ(above.error().field, "params.max_tokens");
  EXPECT_NE(above.error().message.find("[1, 100], got 101"), std::string::npos) << above.error().message;
  o.max_tokens_limit = 10000;
  EXPECT_TRUE(parse_client_message(with_params(R"("max_tokens":5000)"), o).ok());
}

TEST(Limits, TheDefaultMaxTokensRespectsALowerLimit) {
  ParseOptions o;
  o.max_tokens_limit = 64;
  for (const std::string frame :
       {R"({"type":"generate","id":"r1","prompt":"x"})", R"({"type":"generate","id":"r1","prompt":"x","params":{}})"}) {
    const auto parsed = parse_client_message(frame, o);
    ASSERT_TRUE(parsed.ok()) << to_string(parsed.error());
    EXPECT_EQ(as_generate(parsed).params.max_tokens, 64) << frame;
  }
}

TEST(Limits, PromptBytesAreConfigurable) {
  ParseOptions o;
  o.max_prompt_bytes = 10;
  EXPECT_TRUE(parse_client_message(R"({"type":"generate","id":"r1","prompt":"0123456789"})", o).ok());
  const auto prompt = parse_client_message(R"({"type":"generate","id":"r1","prompt":"0123456789A"})", o);
  ASSERT_FALSE(prompt.ok());
  EXPECT_EQ(prompt.error().field, "prompt");
  EXPECT_EQ(prompt.error().message, "must be at most 10 bytes, got 11");
  const auto content = parse_client_message(generate(R"("messages":[)" + user("01234567890") + "]"), o);
  ASSERT_FALSE(content.ok());
  EXPECT_EQ(content.error().field, "messages[0].content");
  const auto total = parse_client_message(generate(R"("messages":[)" + user("012345") + "," + user("6789A") + "]"), o);
  ASSERT_FALSE(total.ok());
  EXPECT_EQ(total.error().field, "messages");
  const auto system = parse_client_message(R"({"type":"session.open","system_prompt":"0123456789A"})", o);
  ASSERT_FALSE(system.ok());
  EXPECT_EQ(system.error().field, "system_prompt");
}

TEST(Limits, MessageCountIsConfigurable) {
  ParseOptions o;
  o.max_messages = 2;
  const std::string two = generate(R"("messages":[)" + user("a") + "," + user("b") + "]");
  const std::string three = generate(R"("messages":[)" + user("a") + "," + user("b") + "," + user("c") + "]");
  EXPECT_TRUE(parse_client_message(two, o).ok());
  const auto parsed = parse_client_message(three, o);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().field, "messages");
  EXPECT_EQ(parsed.error().message, "must have at most 2 entries, got 3");
}

TEST(Limits, StopListsAreConfigurable) {
  ParseOptions o;
  o.max_stop_strings = 1;
  o.max_stop_bytes = 3;
  o.max_stop_token_ids = 1;
  const auto ok = parse_client_message(with_params(R"("stop":["abc"],"stop_token_ids":[7])"), o);
  ASSERT_TRUE(ok.ok()) << to_string(ok.error());
  const auto strings = parse_client_message(with_params(R"("stop":["a","b"])"), o);
  ASSERT_FALSE(strings.ok());
  EXPECT_EQ(strings.error().field, "params.stop");
  const auto length = parse_client_message(with_params(R"("stop":["abcd"])"), o);
  ASSERT_FALSE(length.ok());
  EXPECT_EQ(length.error().field, "params.stop[0]");
  const auto ids = parse_client_message(with_params(R"("stop_token_ids":[1,2])"), o);
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(ids.error().field, "params.stop_token_ids");
}

TEST(Limits, TopKCapIsConfigurable) {
  ParseOptions o;
  o.max_top_k = 5000;
  EXPECT_FALSE(parse_client_message(with_params(R"("top_k":2000)")).ok());
  EXPECT_TRUE(parse_client_message(with_params(R"("top_k":2000)"), o).ok());
}

TEST(Limits, IdBytesAreConfigurable) {
  ParseOptions o;
  o.max_id_bytes = 4;
  EXPECT_TRUE(parse_client_message(R"({"type":"cancel","id":"abcd"})", o).ok());
  const auto parsed = parse_client_message(R"({"type":"cancel","id":"abcde"})", o);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().field, "id");
  EXPECT_EQ(parsed.error().message, "must be at most 4 bytes, got 5");
}

TEST(Limits, MessageBytesAreCheckedBeforeParsing) {
  ParseOptions o;
  o.max_message_bytes = 20;
  const std::string frame = R"({"type":"cancel","id":"r1"})";  // 27 bytes
  EXPECT_TRUE(parse_client_message(frame).ok());
  const auto parsed = parse_client_message(frame, o);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().field, "");
  EXPECT_EQ(parsed.error().message, "message must be at most 20 bytes, got 27");
  // Not even JSON: the size check comes first.
  const auto garbage = parse_client_message(std::string(21, '{'), o);
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.error().message.find("at most 20 bytes"), std::string::npos);
}

TEST(Limits, NestingDepthIsCheckedBeforeParsing) {
  ParseOptions o;
  o.strict = false;
  o.max_json_depth = 3;
  EXPECT_TRUE(parse_client_message(R"({"type":"cancel","id":"r1","x":[[1]]})", o).ok());
  const auto parsed = parse_client_message(R"({"type":"cancel","id":"r1","x":[[[1]]]})", o);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().field, "");
  EXPECT_EQ(parsed.error().message, "message must be nested at most 3 levels deep, exceeded at byte offset 33");
  // Brackets inside strings do not count.
  EXPECT_TRUE(parse_client_message(R"({"type":"cancel","id":"[[[[\"{{{{"})", o).ok());
}

TEST(Limits, DeepNestingAtTheDefaultLimitIsRefusedCheaply) {
  const std::string hostile = std::string(100000, '[') + std::string(100000, ']');
  const auto parsed = parse_client_message(hostile);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().message, "message must be nested at most 32 levels deep, exceeded at byte offset 32");
}

}  // namespace
}  // namespace loom::proto
