// The WebSocket message forms: the exact JSON each server message is written as, client frames parsed into
// the right alternative, and the example exchange in PROTOCOL.md parsing as documented.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "loom/proto/client_message.hpp"
#include "loom/proto/server_message.hpp"

namespace loom::proto {
namespace {

using nlohmann::json;

TEST(ServerMessages, SessionOpenedIsWrittenWithTypeAndSessionId) {
  const ServerMessage m = SessionOpened{"s-1"};
  EXPECT_EQ(message_type(m), "session.opened");
  EXPECT_EQ(json::parse(serialize(m)), (json{{"type", "session.opened"}, {"session_id", "s-1"}}));
}

TEST(ServerMessages, TokenIsWrittenWithEveryField) {
  const ServerMessage with_logprob = TokenEvent{"r1", 9906, "Hello", 0, -0.5, {}, {}};
  EXPECT_EQ(
      json::parse(serialize(with_logprob)),
      (json{{"type", "token"}, {"id", "r1"}, {"token", 9906}, {"text", "Hello"}, {"index", 0}, {"logprob", -0.5}}));
  const ServerMessage without = TokenEvent{"r1", 11, "", 1, std::nullopt, {}, {}};
  EXPECT_FALSE(json::parse(serialize(without)).contains("logprob"));
}

TEST(ServerMessages, DoneIsWrittenWithUsageAndTimings) {
  DoneEvent d;
  d.request_id = "r1";
  d.finish_reason = FinishReason::stop;
  d.usage = {10, 3, 8};
  d.timings = {0.5, 12.0, 30.0, 14.5, 100.0};
  d.stop = "\n\n";
  const json expected = {
      {"type", "done"},
      {"id", "r1"},
      {"finish_reason", "stop"},
      {"reason", "stop"},
      {"usage", {{"prompt_tokens", 10}, {"completion_tokens", 3}, {"cached_tokens", 8}}},
      {"timings",
       {{"queue_ms", 0.5},
        {"prefill_ms", 12.0},
        {"decode_ms", 30.0},
        {"first_token_ms", 14.5},
        {"tokens_per_second", 100.0}}},
      {"stop", "\n\n"},
  };
  EXPECT_EQ(json::parse(serialize(ServerMessage{d})), expected);
}

TEST(ServerMessages, ErrorIsWrittenWithCodeAsSnakeCase) {
  const ServerMessage e = ErrorEvent{"r2", ErrorCode::not_found, "no session named s-9", ""};
  EXPECT_EQ(json::parse(serialize(e)),
            (json{{"type", "error"}, {"id", "r2"}, {"code", "not_found"}, {"message", "no session named s-9"}}));
}

TEST(ServerMessages, EveryKindParsesBackToTheSameAlternative) {
  const std::vector<ServerMessage> messages = {
      SessionOpened{"s-1"},
      TokenEvent{"r1", 1, "a", 0, -1.25, {}, {}},
      DoneEvent{"r1", FinishReason::length, {5, 6, 0}, {1, 2, 3, 4, 5}, std::nullopt, std::nullopt, {}},
      ErrorEvent{"r1", ErrorCode::overloaded, "queue full", ""},
  };
  for (const auto& m : messages) {
    const auto back = parse_server_message(serialize(m));
    ASSERT_TRUE(back.ok()) << to_string(back.error());
    EXPECT_EQ(back->index(), m.index());
    EXPECT_EQ(*back, m) << serialize(m);
  }
}

TEST(ServerMessages, InvalidUtf8InTokenTextIsReplacedNotThrown) {
  const ServerMessage m = TokenEvent{"r1", 7, std::string("ab\xE2\x82", 4), 0, std::nullopt, {}, {}};
  std::string text;
  ASSERT_NO_THROW(text = serialize(m));
  const auto back = parse_server_message(text);
  ASSERT_TRUE(back.ok()) << to_string(back.error());
  EXPECT_EQ(std::get<TokenEvent>(*back).text.substr(0, 2), "ab");
  EXPECT_NE(std::get<TokenEvent>(*back).text.find("\xEF\xBF\xBD"), std::string::npos);  // U+FFFD
}

TEST(ServerMessages, UnknownTypeIsRefused) {
  const auto parsed = parse_server_message(R"({"type":"tokens","id":"r1"})");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().field, "type");
  EXPECT_NE(parsed.error().message.find("must be one of hello, session.opened, token, progress, done, error"), std::string::npos);
}

TEST(ClientMessages, SessionOpenParses) {
  const auto parsed =
      parse_client_message(R"({"type":"session.open","session_id":"chat-1","system_prompt":"Be terse."})");
  ASSERT_TRUE(parsed.ok()) << to_string(parsed.error());
  ASSERT_TRUE(std::holds_alternative<SessionOpen>(*parsed));
  const auto& open = std::get<SessionOpen>(*parsed);
  EXPECT_EQ(open.session_id, "chat-1");
  EXPECT_EQ(open.system_prompt, "Be terse.");
  EXPECT_EQ(message_type(*parsed), "session.open");

  const auto bare = parse_client_message(R"({"type":"session.open"})");
  ASSERT_TRUE(bare.ok()) << to_string(bare.error());
  EXPECT_EQ(std::get<SessionOpen>(*bare), SessionOpen{});
}

TEST(ClientMessages, GenerateParsesIntoARequest) {
  const auto parsed = parse_client_message(
      R"({"type":"generate","id":"r7","session_id":"chat-1",
          "messages":[{"role":"user","content":"Hi"}],
          "params":{"temperature":0,"max_tokens":16,"stop":["\n"]},"priority":2,"stream":true})");
  ASSERT_TRUE(parsed.ok()) << to_string(parsed.error());
  ASSERT_TRUE(std::holds_alternative<GenerateRequest>(*parsed));
  const auto& r = std::get<GenerateRequest>(*parsed);
  EXPECT_EQ(r.id, "r7");
  EXPECT_EQ(r.session_id, "chat-1");
  ASSERT_TRUE(r.is_chat());
  const auto& messages = std::get<std::vector<ChatMessage>>(r.input);
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0], (ChatMessage{ChatRole::user, "Hi", false, {}, {}, {}, {}}));
  EXPECT_TRUE(r.params.greedy());
  EXPECT_EQ(r.params.max_tokens, 16);
  EXPECT_EQ(r.params.stop, std::vector<std::string>{"\n"});
  EXPECT_EQ(r.params.top_k, 40);  // unspecified params keep their defaults
  EXPECT_EQ(r.priority, 2);
  EXPECT_EQ(message_type(*parsed), "generate");
}

TEST(ClientMessages, GenerateTakesTheSessionUnderEitherName) {
  const auto by_id = parse_client_message(R"({"type":"generate","id":"r1","session_id":"a","prompt":"x"})");
  ASSERT_TRUE(by_id.ok()) << to_string(by_id.error());
  EXPECT_EQ(std::get<GenerateRequest>(*by_id).session_id, "a");
  EXPECT_FALSE(std::get<GenerateRequest>(*by_id).open_session);

  const auto short_form = parse_client_message(R"({"type":"generate","id":"r1","session":"b","prompt":"x"})");
  ASSERT_TRUE(short_form.ok()) << to_string(short_form.error());
  EXPECT_EQ(std::get<GenerateRequest>(*short_form).session_id, "b");
  EXPECT_TRUE(std::get<GenerateRequest>(*short_form).open_session);
  // Written back under the name it came with.
  EXPECT_EQ(json::parse(serialize(*short_form)).value("session", ""), "b");
  EXPECT_FALSE(json::parse(serialize(*short_form)).contains("session_id"));

  const auto both = parse_client_message(R"({"type":"generate","id":"r1","session":"b","session_id":"b","prompt":"x"})");
  ASSERT_FALSE(both.ok());
  EXPECT_EQ(both.error().field, "session");
  const auto bad = parse_client_message(R"({"type":"generate","id":"r1","session":"","prompt":"x"})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().field, "session");
}

TEST(ServerMessages, DoneIsReadUnderEitherNameOfItsReason) {
  const std::string rest = R"("usage":{"prompt_tokens":1,"completion_tokens":1,"cached_tokens":0},)"
                           R"("timings":{"queue_ms":0,"prefill_ms":0,"decode_ms":0,"first_token_ms":0,"tokens_per_second":0}})";
  const auto short_only = parse_server_message(R"({"type":"done","id":"r1","reason":"eos",)" + rest);
  ASSERT_TRUE(short_only.ok()) << to_string(short_only.error());
  EXPECT_EQ(std::get<DoneEvent>(*short_only).finish_reason, FinishReason::eos);
  const auto long_only = parse_server_message(R"({"type":"done","id":"r1","finish_reason":"length",)" + rest);
  ASSERT_TRUE(long_only.ok()) << to_string(long_only.error());
  EXPECT_EQ(std::get<DoneEvent>(*long_only).finish_reason, FinishReason::length);
  const auto disagree =
      parse_server_message(R"({"type":"done","id":"r1","finish_reason":"length","reason":"eos",)" + rest);
  ASSERT_FALSE(disagree.ok());
  EXPECT_EQ(disagree.error().field, "reason");
  const auto neither = parse_server_message(R"({"type":"done","id":"r1",)" + rest);
  ASSERT_FALSE(neither.ok());
  EXPECT_EQ(neither.error().field, "finish_reason");
}

TEST(ClientMessages, CancelParses) {
  const auto parsed = parse_client_message(R"({"type":"cancel","id":"r7"})");
  ASSERT_TRUE(parsed.ok()) << to_string(parsed.error());
  ASSERT_TRUE(std::holds_alternative<CancelRequest>(*parsed));
  EXPECT_EQ(std::get<CancelRequest>(*parsed).request_id, "r7");
  EXPECT_EQ(message_type(*parsed), "cancel");
}

TEST(ClientMessages, SerializeAddsTheTypeAndParsesBack) {
  GenerateRequest g;
  g.id = "r8";
  g.input = std::string("2+2=");
  g.params.seed = 42;
  const std::vector<ClientMessage> messages = {SessionOpen{"s", "sys"}, g, CancelRequest{"r8"}};
  const std::vector<std::string> types = {"session.open", "generate", "cancel"};
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const std::string text = serialize(messages[i]);
    EXPECT_EQ(json::parse(text).at("type"), types[i]);
    const auto back = parse_client_message(text);
    ASSERT_TRUE(back.ok()) << to_string(back.error()) << "\n" << text;
    EXPECT_EQ(*back, messages[i]) << text;
  }
}

TEST(ClientMessages, TheJsonOverloadAgreesWithTheTextOne) {
  const json j = {{"type", "cancel"}, {"id", "r1"}};
  const auto from_json = parse_client_message(j);
  const auto from_text = parse_client_message(j.dump());
  ASSERT_TRUE(from_json.ok());
  ASSERT_TRUE(from_text.ok());
  EXPECT_EQ(*from_json, *from_text);
}

TEST(ClientMessages, ARefusedGenerateCarriesItsIdIntoTheErrorEvent) {
  const auto parsed = parse_client_message(R"({"type":"generate","id":"r9","prompt":"x","params":{"top_p":1.5}})");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().request_id, "r9");
  const ServerMessage reply = to_error_event(parsed.error());
  EXPECT_EQ(json::parse(serialize(reply)), (json{{"type", "error"},
                                                 {"id", "r9"},
                                                 {"code", "invalid_request"},
                                                 {"field", "params.top_p"},
                                                 {"message", "must be a number in (0, 1], got 1.5"}}));
}

TEST(ClientMessages, AMalformedIdIsNotEchoedAsTheRequestId) {
  const auto parsed = parse_client_message(R"({"type":"generate","id":"bad\u0007id","prompt":"x"})");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().field, "id");
  EXPECT_EQ(parsed.error().request_id, "");
}

TEST(ClientMessages, ARefusedCancelCarriesItsId) {
  const auto parsed = parse_client_message(R"({"type":"cancel","id":"r3","why":"bored"})");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().field, "why");
  EXPECT_EQ(parsed.error().request_id, "r3");
}

TEST(ValidationErrorText, NamesTheFieldThenTheRule) {
  EXPECT_EQ(to_string(ValidationError{"params.top_p", "must be a number in (0, 1], got 1.5", ""}),
            "params.top_p: must be a number in (0, 1], got 1.5");
  EXPECT_EQ(to_string(ValidationError{"", "invalid JSON at byte offset 0: x", ""}), "invalid JSON at byte offset 0: x");
}

// PROTOCOL.md's example exchange: every line "C: {...}" is a client frame, every "S: {...}" a server frame.
// An accepted client frame must survive a re-serialisation; a refused one must be followed by exactly the
// error event the code produces for it; server frames must be exactly what the server writes. So the
// document cannot drift from the code.
TEST(ProtocolDocument, EveryExampleFrameIsWhatTheCodeParsesAndWrites) {
  std::ifstream file(LOOM_PROTOCOL_MD);
  ASSERT_TRUE(file) << "cannot open " << LOOM_PROTOCOL_MD;
  std::string line;
  int accepted = 0;
  int refused = 0;
  int server_frames = 0;
  std::optional<ServerMessage> expected_reply;  // the error a refused client frame must be answered with
  while (std::getline(file, line)) {
    if (line.rfind("C: ", 0) == 0) {
      ASSERT_FALSE(expected_reply.has_value()) << "a refused frame is not followed by its error: " << line;
      const auto parsed = parse_client_message(line.substr(3));
      if (parsed.ok()) {
        // Clients may leave out fields that have defaults, so compare values rather than texts.
        const auto again = parse_client_message(serialize(*parsed));
        ASSERT_TRUE(again.ok()) << to_string(again.error());
        EXPECT_EQ(*again, *parsed) << line;
        ++accepted;
      } else {
        expected_reply = to_error_event(parsed.error());
        ++refused;
      }
    } else if (line.rfind("S: ", 0) == 0) {
      const auto parsed = parse_server_message(line.substr(3));
      ASSERT_TRUE(parsed.ok()) << to_string(parsed.error()) << "\n" << line;
      EXPECT_EQ(json::parse(serialize(*parsed)), json::parse(line.substr(3))) << line;
      if (expected_reply) {
        EXPECT_EQ(json::parse(line.substr(3)), json::parse(serialize(*expected_reply)))
            << "the documented error differs from the one the code produces";
        expected_reply.reset();
      }
      ++server_frames;
    }
  }
  EXPECT_FALSE(expected_reply.has_value());
  EXPECT_GE(accepted, 4);       // open, generate, another generate, cancel
  EXPECT_GE(refused, 3);        // out of range, unknown role, not JSON
  EXPECT_GE(server_frames, 9);  // opened, tokens, done, errors
}

}  // namespace
}  // namespace loom::proto
