// The WebSocket protocol's connection-level messages through a real gateway (aidreams260K): the hello that
// opens every connection, closing / resetting / listing sessions, prefill progress events, and the ids that
// let a client correlate the error answering a session message or an unreadable frame.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway_fixture.hpp"
#include "loom/proto/server_message.hpp"

namespace loom::net::test {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

json generate(const std::string& id, const std::string& prompt, int max_tokens) {
  return json{{"type", "generate"},
              {"id", id},
              {"prompt", prompt},
              {"params", {{"temperature", 0}, {"max_tokens", max_tokens}}}};
}

json in_session(json message, const std::string& session) {
  message["session_id"] = session;
  return message;
}

std::vector<int> token_ids(const std::vector<json>& frames) {
  std::vector<int> ids;
  for (const auto& frame : frames) {
    if (frame.value("type", "") == "token") ids.push_back(frame.at("token").get<int>());
  }
  return ids;
}

class WebSocketSessionTest : public ::testing::Test {
 protected:
  GatewayUnderTest gateway_{};
};

TEST_F(WebSocketSessionTest, TheFirstFrameIsAHelloWithTheModelItsContextAndTheLimits) {
  WsClient client(gateway_.port());
  const json& hello = client.hello();
  // What loom_proto reads back, so a client built on it can rely on the shape.
  const auto parsed = proto::parse_server_message(hello.dump());
  ASSERT_TRUE(parsed.ok()) << to_string(parsed.error()) << "\n" << hello.dump();
  EXPECT_EQ(hello.at("protocol_version"), 1);
  EXPECT_FALSE(hello.at("server_version").get<std::string>().empty());
  EXPECT_EQ(hello.at("model"), "aidreams260K");  // the file's stem
  EXPECT_EQ(hello.at("status"), "ready");
  EXPECT_EQ(hello.at("context_length"), 128);  // aidreams260K's context
  const GatewayConfig defaults = test_config();
  const json& limits = hello.at("limits");
  EXPECT_EQ(limits.at("max_frame_bytes"), defaults.max_frame_bytes);
  EXPECT_EQ(limits.at("max_tokens_limit"), defaults.max_tokens_limit);
  EXPECT_EQ(limits.at("max_requests_per_connection"), defaults.max_requests_per_connection);
  EXPECT_EQ(limits.at("max_sessions_per_connection"), defaults.max_sessions_per_connection);
  EXPECT_EQ(limits.at("max_prompt_bytes"), 1u << 20);
  EXPECT_EQ(limits.at("max_stop_strings"), 8);
  EXPECT_FALSE(limits.contains("max_prompt_tokens")) << "unset: the context bounds prompts";
  EXPECT_EQ(hello.at("features").at("progress"), true);
  EXPECT_EQ(hello.at("features").at("session_control"), true);
  EXPECT_EQ(hello.at("features").at("chat"), true);  // the ChatML fallback at least
}

TEST(WebSocketHello, ReportsTheConfiguredLimits) {
  GatewayConfig config = test_config();
  config.max_frame_bytes = 64u << 10;
  config.max_sessions_per_connection = 3;
  config.max_tokens_limit = 100;
  config.max_prompt_tokens = 90;
  GatewayUnderTest gateway(config);
  WsClient client(gateway.port());
  const json& limits = client.hello().at("limits");
  EXPECT_EQ(limits.at("max_frame_bytes"), 64u << 10);
  EXPECT_EQ(limits.at("max_sessions_per_connection"), 3);
  EXPECT_EQ(limits.at("max_tokens_limit"), 100);
  EXPECT_EQ(limits.at("max_prompt_tokens"), 90);
}

// On synth11M (a 2048-token context, some milliseconds a token): the running request is still running when
// the list and the reset arrive, however loaded the machine.
TEST(WebSocketSessions, AreClosedListedAndResetOnlyWhileIdle) {
  GatewayConfig config = test_config();
  config.model = shared_file("models/synth11M-q8_0.gguf");
  GatewayUnderTest gateway(config);
  WsClient client(gateway.port());
  for (const char* id : {"b", "a"}) {
    client.send(json{{"type", "session.open"}, {"session_id", id}});
    ASSERT_EQ(client.receive().value("type", ""), "session.opened");
  }
  client.send(json{{"type", "session.list"}});
  EXPECT_EQ(client.receive(), (json{{"type", "session.listed"},
                                    {"sessions", {{{"session_id", "a"}}, {{"session_id", "b"}}}}}));

  // A request running in `a` (to the end of the context): listed, and resetting `a` meanwhile is a conflict.
  json running = in_session(generate("long", "Once upon a time", 2000), "a");
  running["params"]["ignore_eos"] = true;
  client.send(running);
  ASSERT_EQ(client.receive().value("type", ""), "token");
  client.send(json{{"type", "session.list"}});
  client.send(json{{"type", "session.reset"}, {"session_id", "a"}});
  client.send(json{{"type", "cancel"}, {"id", "long"}});
  const auto frames = client.receive_until_end("long");
  ASSERT_EQ(frames.back().value("type", ""), "done");
  std::vector<json> others;  // the list and the reset's answer, kept aside by receive_until_end
  for (int i = 0; i < 2; ++i) others.push_back(client.receive());
  EXPECT_EQ(others[0], (json{{"type", "session.listed"},
                             {"sessions", {{{"session_id", "a"}, {"active_request", "long"}}, {{"session_id", "b"}}}}}));
  EXPECT_EQ(others[1].value("type", ""), "error");
  EXPECT_EQ(others[1].value("code", ""), "conflict") << others[1].dump();
  EXPECT_EQ(others[1].value("session_id", ""), "a");
  EXPECT_EQ(others[1].value("id", "-"), "");
  // Idle again: the reset is done.
  client.send(json{{"type", "session.reset"}, {"session_id", "a"}});
  EXPECT_EQ(client.receive(), (json{{"type", "session.reset_done"}, {"session_id", "a"}}));

  client.send(json{{"type", "session.close"}, {"session_id", "b"}});
  EXPECT_EQ(client.receive(), (json{{"type", "session.closed"}, {"session_id", "b"}}));
  client.send(in_session(generate("in-b", "Hi", 2), "b"));
  const json gone = client.receive();
  EXPECT_EQ(gone.value("code", ""), "not_found") << gone.dump();
  EXPECT_EQ(gone.value("id", ""), "in-b");
  for (const char* type : {"session.close", "session.reset"}) {
    client.send(json{{"type", type}, {"session_id", "b"}});
    const json unknown = client.receive();
    EXPECT_EQ(unknown.value("code", ""), "not_found") << type << ": " << unknown.dump();
    EXPECT_EQ(unknown.value("session_id", ""), "b") << type;
  }
  client.send(json{{"type", "session.list"}});
  EXPECT_EQ(client.receive(), (json{{"type", "session.listed"}, {"sessions", {{{"session_id", "a"}}}}}));
  // A closed id can be opened again at once.
  client.send(json{{"type", "session.open"}, {"session_id", "b"}});
  EXPECT_EQ(client.receive(), (json{{"type", "session.opened"}, {"session_id", "b"}}));
}

// After a reset the session has forgotten its history: the next turn's prompt and reply are exactly those of
// the same turn in a session just opened (greedy, so the reply is determined by the prompt).
TEST_F(WebSocketSessionTest, AResetSessionAnswersAsAFreshOne) {
  WsClient client(gateway_.port());
  for (const char* id : {"kept", "fresh"}) {
    client.send(json{{"type", "session.open"}, {"session_id", id}});
    ASSERT_EQ(client.receive().value("type", ""), "session.opened");
  }
  client.send(in_session(generate("t1", "Once upon a time", 8), "kept"));
  ASSERT_EQ(client.receive_until_end("t1").back().value("type", ""), "done");
  client.send(in_session(generate("t2", " there was", 8), "kept"));
  const auto continued = client.receive_until_end("t2");
  client.send(json{{"type", "session.reset"}, {"session_id", "kept"}});
  ASSERT_EQ(client.receive().value("type", ""), "session.reset_done");
  client.send(in_session(generate("t3", " there was", 8), "kept"));
  const auto after_reset = client.receive_until_end("t3");
  client.send(in_session(generate("f1", " there was", 8), "fresh"));
  const auto fresh = client.receive_until_end("f1");

  ASSERT_EQ(after_reset.back().value("type", ""), "done") << after_reset.back().dump();
  ASSERT_EQ(fresh.back().value("type", ""), "done") << fresh.back().dump();
  const int reset_prompt = after_reset.back().at("usage").at("prompt_tokens");
  EXPECT_EQ(reset_prompt, fresh.back().at("usage").at("prompt_tokens").get<int>());
  EXPECT_GT(continued.back().at("usage").at("prompt_tokens").get<int>(), reset_prompt) << "the history was there";
  EXPECT_EQ(token_ids(after_reset), token_ids(fresh));
  EXPECT_FALSE(token_ids(fresh).empty());
}

// With a prefill chunk of 4 tokens, a 13-token prompt is computed in 4 steps: progress events 4, 8, 12, 13
// of 13, all before the first token; a request that does not ask gets none.
TEST(WebSocketProgress, PrefillProgressCountsUpToThePromptBeforeTheFirstToken) {
  GatewayConfig config = test_config();
  config.max_batch_tokens = 4;
  GatewayUnderTest gateway(config);
  WsClient client(gateway.port());
  json request = generate("p1", "Once upon a time", 3);
  request["progress"] = true;
  client.send(request);
  const auto frames = client.receive_until_end("p1");
  ASSERT_EQ(frames.back().value("type", ""), "done") << frames.back().dump();
  const int prompt_tokens = frames.back().at("usage").at("prompt_tokens");
  EXPECT_EQ(prompt_tokens, 13);
  std::vector<int> computed;
  bool token_seen = false;
  for (const json& frame : frames) {
    const std::string type = frame.value("type", "");
    if (type == "token") token_seen = true;
    if (type != "progress") continue;
    EXPECT_FALSE(token_seen) << "progress after a token: " << frame.dump();
    EXPECT_EQ(frame.at("id"), "p1");
    EXPECT_EQ(frame.at("prompt_tokens"), prompt_tokens);
    computed.push_back(frame.at("prompt_tokens_computed").get<int>());
  }
  EXPECT_EQ(computed, (std::vector<int>{4, 8, 12, 13}));

  client.send(generate("p2", "The quick brown fox", 3));
  for (const json& frame : client.receive_until_end("p2")) EXPECT_NE(frame.value("type", ""), "progress");
}

TEST_F(WebSocketSessionTest, AnErrorAnsweringASessionMessageNamesTheSession) {
  WsClient client(gateway_.port());
  // Refused by the parser: the session id is still read back.
  client.send(json{{"type", "session.open"}, {"session_id", "s1"}, {"system_prompt", 5}});
  const json bad = client.receive();
  EXPECT_EQ(bad.value("code", ""), "invalid_request") << bad.dump();
  EXPECT_EQ(bad.value("field", ""), "system_prompt");
  EXPECT_EQ(bad.value("session_id", ""), "s1");
  EXPECT_EQ(bad.value("id", "-"), "");
  // Refused by the gateway: a conflict names the session too.
  client.send(json{{"type", "session.open"}, {"session_id", "s2"}});
  ASSERT_EQ(client.receive().value("type", ""), "session.opened");
  client.send(json{{"type", "session.open"}, {"session_id", "s2"}});
  const json conflict = client.receive();
  EXPECT_EQ(conflict.value("code", ""), "conflict") << conflict.dump();
  EXPECT_EQ(conflict.value("session_id", ""), "s2");
  // An unknown type still carries the id it had; a frame that is not JSON carries neither.
  client.send(std::string(R"({"type":"warp","id":"m1"})"));
  const json unknown = client.receive();
  EXPECT_EQ(unknown.value("id", ""), "m1") << unknown.dump();
  EXPECT_FALSE(unknown.contains("session_id"));
  client.send(std::string(R"({"type":"session.open","session_id":"s3")"));
  const json not_json = client.receive();
  EXPECT_EQ(not_json.value("id", "-"), "") << not_json.dump();
  EXPECT_FALSE(not_json.contains("session_id"));
}

}  // namespace
}  // namespace loom::net::test
