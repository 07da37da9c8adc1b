// The messages added for clients that manage sessions and follow a long prefill: hello, progress,
// session.close / .reset / .list and their replies survive serialise-then-parse unchanged (every field away
// from its default), and a refused message's error carries what the client needs to correlate it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "loom/proto/client_message.hpp"
#include "loom/proto/server_message.hpp"

namespace loom::proto {
namespace {

using nlohmann::json;

template <class Message>
Message server_round_trip(const Message& message) {
  const auto back = parse_server_message(serialize(ServerMessage{message}));
  EXPECT_TRUE(back.ok()) << (back.ok() ? "" : to_string(back.error())) << "\n" << serialize(ServerMessage{message});
  if (!back.ok()) return {};
  EXPECT_TRUE(std::holds_alternative<Message>(*back));
  return std::holds_alternative<Message>(*back) ? std::get<Message>(*back) : Message{};
}

template <class Message>
Message client_round_trip(const Message& message) {
  const auto back = parse_client_message(serialize(ClientMessage{message}));
  EXPECT_TRUE(back.ok()) << (back.ok() ? "" : to_string(back.error())) << "\n" << serialize(ClientMessage{message});
  if (!back.ok()) return {};
  EXPECT_TRUE(std::holds_alternative<Message>(*back));
  return std::holds_alternative<Message>(*back) ? std::get<Message>(*back) : Message{};
}

TEST(SessionMessages, HelloRoundTripsWithLimitsAndFeatures) {
  Hello hello;
  hello.protocol_version = 3;
  hello.server_version = "9.8.7";
  hello.model = "qwen3-0.6b";
  hello.status = "draining";
  hello.context_length = 40960;
  hello.limits = {{"max_frame_bytes", 4u << 20}, {"max_tokens_limit", 4096}, {"max_sessions_per_connection", 16}};
  hello.features = {{"chat", true}, {"tool_calls", false}};
  EXPECT_EQ(server_round_trip(hello), hello);
  const json j = json::parse(serialize(ServerMessage{hello}));
  EXPECT_EQ(j.at("type"), "hello");
  EXPECT_EQ(j.at("limits").at("max_frame_bytes"), 4u << 20);
}

TEST(SessionMessages, HelloWithoutAContextLengthWhileLoading) {
  Hello hello;
  hello.server_version = "0.1.0";
  hello.model = "m";
  hello.status = "loading";
  const json j = json::parse(serialize(ServerMessage{hello}));
  EXPECT_FALSE(j.contains("context_length"));
  EXPECT_EQ(j.at("protocol_version"), Hello::kProtocolVersion);
  EXPECT_EQ(server_round_trip(hello), hello);
}

TEST(SessionMessages, HelloAcceptsLimitsAndFeaturesItDoesNotKnowButNotWrongTypes) {
  const auto newer = parse_server_message(
      R"({"type":"hello","protocol_version":1,"server_version":"x","model":"m","status":"ready",)"
      R"("limits":{"max_future_thing":5},"features":{"teleport":true}})");
  ASSERT_TRUE(newer.ok()) << to_string(newer.error());
  EXPECT_EQ(std::get<Hello>(*newer).limits.at("max_future_thing"), 5u);
  const auto negative = parse_server_message(
      R"({"type":"hello","protocol_version":1,"server_version":"x","model":"m","status":"ready",)"
      R"("limits":{"max_frame_bytes":-1},"features":{}})");
  ASSERT_FALSE(negative.ok());
  EXPECT_EQ(negative.error().field, "limits.max_frame_bytes");
}

TEST(SessionMessages, ProgressRoundTripsAndCannotExceedThePrompt) {
  const ProgressEvent progress{"r7", 96, 300};
  EXPECT_EQ(server_round_trip(progress), progress);
  const auto over = parse_server_message(R"({"type":"progress","id":"r7","prompt_tokens_computed":301,"prompt_tokens":300})");
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().field, "prompt_tokens_computed");
}

TEST(SessionMessages, CloseResetListAndTheirRepliesRoundTrip) {
  EXPECT_EQ(client_round_trip(SessionClose{"chat-1"}), SessionClose{"chat-1"});
  EXPECT_EQ(client_round_trip(SessionReset{"chat-2"}), SessionReset{"chat-2"});
  EXPECT_EQ(json::parse(serialize(ClientMessage{SessionList{}})), json({{"type", "session.list"}}));
  EXPECT_TRUE(std::holds_alternative<SessionList>(*parse_client_message(R"({"type":"session.list"})")));
  EXPECT_EQ(server_round_trip(SessionClosed{"chat-1"}), SessionClosed{"chat-1"});
  EXPECT_EQ(server_round_trip(SessionResetDone{"chat-2"}), SessionResetDone{"chat-2"});
  const SessionListed listed{{{"a", std::nullopt}, {"b", std::string("r9")}}};
  EXPECT_EQ(server_round_trip(listed), listed);
  EXPECT_EQ(server_round_trip(SessionListed{}), SessionListed{});
}

TEST(SessionMessages, GenerateCarriesProgress) {
  const auto parsed = parse_client_message(R"({"type":"generate","id":"r1","prompt":"x","progress":true})");
  ASSERT_TRUE(parsed.ok()) << to_string(parsed.error());
  const auto& request = std::get<GenerateRequest>(*parsed);
  EXPECT_TRUE(request.progress);
  EXPECT_EQ(client_round_trip(request), request);
  EXPECT_FALSE(json::parse(serialize(ClientMessage{GenerateRequest{}})).contains("progress"));  // only when set
}

// A refused session message names its session in `session_id` (its `id` is empty: it has none); a refused
// generate names its request in `id` only; a frame that is not JSON has neither.
TEST(SessionMessages, ARefusedSessionMessageCarriesItsSessionId) {
  const auto open = parse_client_message(R"({"type":"session.open","session_id":"s1","system_prompt":5})");
  ASSERT_FALSE(open.ok());
  const ErrorEvent open_error = to_error_event(open.error());
  EXPECT_EQ(open_error.request_id, "");
  EXPECT_EQ(open_error.session_id, "s1");
  EXPECT_EQ(open_error.field, "system_prompt");
  EXPECT_EQ(json::parse(serialize(ServerMessage{open_error})).at("session_id"), "s1");

  const auto reset = parse_client_message(R"({"type":"session.reset","session_id":"s2","id":"x"})");
  ASSERT_FALSE(reset.ok());
  EXPECT_EQ(to_error_event(reset.error()).session_id, "s2");
  EXPECT_EQ(to_error_event(reset.error()).request_id, "");  // session messages have no `id`

  const auto generate = parse_client_message(R"({"type":"generate","id":"r1","session_id":"s3","prompt":1})");
  ASSERT_FALSE(generate.ok());
  EXPECT_EQ(to_error_event(generate.error()).request_id, "r1");
  EXPECT_FALSE(to_error_event(generate.error()).session_id.has_value());

  const auto not_json = parse_client_message(R"({"type":"session.close","session_id":"s4")");
  ASSERT_FALSE(not_json.ok());
  const json j = json::parse(serialize(ServerMessage{to_error_event(not_json.error())}));
  EXPECT_EQ(j.at("id"), "");
  EXPECT_FALSE(j.contains("session_id"));
}

TEST(SessionMessages, ErrorEventSessionIdRoundTrips) {
  ErrorEvent error{"", ErrorCode::not_found, "no open session 'x' on this connection", "session_id"};
  error.session_id = "x";
  EXPECT_EQ(server_round_trip(error), error);
}

}  // namespace
}  // namespace loom::proto
