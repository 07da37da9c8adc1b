// Every wire type survives serialise-then-parse unchanged, with every field away from its default so a
// field the serialiser forgets (or the parser ignores) shows up as a difference.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "wire_test_support.hpp"
#include "loom/proto/cancel_request.hpp"
#include "loom/proto/chat_message.hpp"
#include "loom/proto/client_message.hpp"
#include "loom/proto/done_event.hpp"
#include "loom/proto/error_event.hpp"
#include "loom/proto/generate_request.hpp"
#include "loom/proto/sampling_params.hpp"
#include "loom/proto/session_open.hpp"
#include "loom/proto/session_opened.hpp"
#include "loom/proto/token_event.hpp"

namespace loom::proto {
namespace {

using wire_test::through_text;

using nlohmann::json;

SamplingParams non_default_params() {
  SamplingParams p;
  p.temperature = 0.25;
  p.top_k = 7;
  p.top_p = 0.5;
  p.min_p = 0.125;
  p.repetition_penalty = 1.3;
  p.frequency_penalty = -0.75;
  p.presence_penalty = 1.5;
  p.repetition_last_n = -1;
  p.logit_bias = {{0, -100.0}, {42, 2.5}, {2147483647, 100.0}};
  p.seed = 18446744073709551615ULL;  // needs all 64 bits: a double or int64 on the way would change it
  p.max_tokens = 77;
  p.stop = {"\n\n", "User:", "终"};
  p.stop_token_ids = {2, 128009};
  p.ignore_eos = true;
  p.logprobs = 5;
  return p;
}

TEST(RoundTrip, SamplingParamsWithEveryFieldSet) {
  const SamplingParams p = non_default_params();
  ASSERT_NE(p, SamplingParams{});
  EXPECT_EQ(through_text(p, parse_sampling_params), p);
}

TEST(RoundTrip, SamplingParamsWithEachKindOfConstraint) {
  for (const OutputConstraint& c :
       {OutputConstraint{OutputConstraint::Kind::grammar, "root ::= \"yes\" | \"no\"\n"},
        OutputConstraint{OutputConstraint::Kind::json_schema, R"({"properties":{"a":{"type":"integer"}},"type":"object"})"},
        OutputConstraint{OutputConstraint::Kind::json_object, ""}}) {
    SamplingParams p = non_default_params();
    p.constraint = c;
    EXPECT_EQ(through_text(p, parse_sampling_params), p) << json(p).dump();
  }
}

TEST(RoundTrip, ResponseFormatsBecomeConstraints) {
  const auto parse = [](const char* text) { return parse_sampling_params(json::parse(text)); };
  const auto text = parse(R"({"response_format":{"type":"text"}})");
  ASSERT_TRUE(text.ok());
  EXPECT_FALSE(text.value().constraint);
  const auto object = parse(R"({"response_format":{"type":"json_object"}})");
  ASSERT_TRUE(object.ok());
  EXPECT_EQ(object.value().constraint, (OutputConstraint{OutputConstraint::Kind::json_object, ""}));
  const auto schema = parse(
      R"({"response_format":{"type":"json_schema","json_schema":{"name":"n","strict":true,"schema":{"type":"string"}}}})");
  ASSERT_TRUE(schema.ok());
  EXPECT_EQ(schema.value().constraint, (OutputConstraint{OutputConstraint::Kind::json_schema, R"({"type":"string"})"}));
  const auto any = parse(R"({"response_format":{"type":"json_schema","json_schema":{"name":"n"}}})");
  ASSERT_TRUE(any.ok());
  EXPECT_EQ(any.value().constraint, (OutputConstraint{OutputConstraint::Kind::json_schema, "{}"}));
}

TEST(RoundTrip, ASchemaKeepsTheClientsKeyOrderFromAFrame) {
  for (const char* params :
       {R"({"json_schema":{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"integer"}}}})",
        R"({"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object",)"
        R"("properties":{"zeta":{"type":"string"},"alpha":{"type":"integer"}}}}}})"}) {
    const std::string frame = std::string(R"({"type":"generate","id":"r","prompt":"x","params":)") + params + "}";
    const auto parsed = parse_client_message(std::string_view(frame));
    ASSERT_TRUE(parsed.ok()) << to_string(parsed.error());
    const auto& text = std::get<GenerateRequest>(parsed.value()).params.constraint->text;
    EXPECT_EQ(text, R"({"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"integer"}}})");
  }
}

TEST(RoundTrip, SamplingParamsDefaultsWithoutSeed) {
  const SamplingParams p;
  const json j = p;
  EXPECT_FALSE(j.contains("seed"));  // absent means random; it must not turn into seed 0
  EXPECT_EQ(through_text(p, parse_sampling_params), p);
}

TEST(RoundTrip, SamplingParamsGreedyAndZeroSeed) {
  SamplingParams p;
  p.temperature = 0.0;
  p.seed = 0;
  EXPECT_TRUE(p.greedy());
  const SamplingParams back = through_text(p, parse_sampling_params);
  EXPECT_EQ(back, p);
  ASSERT_TRUE(back.seed.has_value());
  EXPECT_EQ(*back.seed, 0u);
}

TEST(RoundTrip, ChatMessageEveryRole) {
  for (const ChatRole role : {ChatRole::system, ChatRole::user, ChatRole::assistant, ChatRole::tool}) {
    const ChatMessage m{role, std::string("content of ") + std::string(to_string(role)) + " \"quoted\"\n\t",
                        false, {}, {}, {}, {}};
    EXPECT_EQ(through_text(m, parse_chat_message), m) << to_string(role);
  }
}

TEST(RoundTrip, GenerateRequestWithPrompt) {
  GenerateRequest r;
  r.id = "req-42";
  r.session_id = "sess-7";
  r.input = std::string("Once upon a time");
  r.params = non_default_params();
  r.priority = -3;
  r.stream = false;
  EXPECT_EQ(through_text(r, parse_generate_request), r);
}

TEST(RoundTrip, GenerateRequestWithMessages) {
  GenerateRequest r;
  r.id = "req-43";
  r.session_id = "sess-8";
  const auto message = [](ChatRole role, std::string content) {
    ChatMessage m;
    m.role = role;
    m.content = std::move(content);
    return m;
  };
  r.input = std::vector<ChatMessage>{message(ChatRole::system, "Be brief."), message(ChatRole::user, "Hi"),
                                     message(ChatRole::assistant, ""), message(ChatRole::tool, "{\"ok\":true}")};
  r.params = non_default_params();
  r.priority = 10;
  r.stream = false;
  const GenerateRequest back = through_text(r, parse_generate_request);
  EXPECT_TRUE(back.is_chat());
  EXPECT_EQ(back, r);
}

TEST(RoundTrip, GenerateRequestEmptyPromptIsKept) {
  GenerateRequest r;
  r.id = "r";
  r.input = std::string();
  EXPECT_FALSE(r.is_chat());
  EXPECT_EQ(through_text(r, parse_generate_request), r);
}

TEST(RoundTrip, TokenEvent) {
  const TokenEvent t{"req-1", 31337, " wörld", 12, -0.6931471805599453, {}, {}};
  EXPECT_EQ(through_text(t, parse_token_event), t);
  const TokenEvent split{"req-1", 5, "", 13, std::nullopt, {}, {}};  // a token that ends mid-character has no text
  EXPECT_EQ(through_text(split, parse_token_event), split);
}

TEST(RoundTrip, TokenEventWithLogprobsAndAlternatives) {
  TokenEvent t;
  t.request_id = "req-2";
  t.token = 40;
  t.text = "";  // held back: its piece is half of a character
  t.index = 3;
  t.logprob = -1.5;
  t.piece = "\xEF\xBF\xBD";  // the lossy text of a lone lead byte
  t.bytes = {0xE2};
  t.top_logprobs = {{7, " the", {0x20, 0x74, 0x68, 0x65}, -0.25}, {40, "\xEF\xBF\xBD", {0xE2}, -1.5}};
  EXPECT_EQ(through_text(t, parse_token_event), t);
}

TEST(RoundTrip, TokenEventLogprobFieldsNeedALogprob) {
  const json j = {{"id", "r"}, {"token", 1}, {"text", "a"}, {"index", 0}, {"top_logprobs", json::array()}};
  const auto parsed = parse_token_event(j);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().field, "top_logprobs");
  json too_many = {{"id", "r"}, {"token", 1}, {"text", "a"}, {"index", 0}, {"logprob", -0.1}};
  for (int i = 0; i <= SamplingParams::kMaxLogprobs; ++i) {
    too_many["top_logprobs"].push_back({{"token", i}, {"text", "x"}, {"bytes", {120}}, {"logprob", -1.0}});
  }
  const auto refused = parse_token_event(too_many);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().field, "top_logprobs");
  json bad_byte = {{"id", "r"}, {"token", 1}, {"text", "a"}, {"index", 0}, {"logprob", -0.1}, {"bytes", {256}}};
  const auto refused_byte = parse_token_event(bad_byte);
  ASSERT_FALSE(refused_byte.ok());
  EXPECT_EQ(refused_byte.error().field, "bytes[0]");
}

TEST(RoundTrip, ChoicesOfARequestWithSeveralTravelTheWire) {
  GenerateRequest r;
  r.id = "r";
  r.input = std::string("x");
  r.n = GenerateRequest::kMaxChoices;
  EXPECT_EQ(through_text(r, parse_generate_request), r);
  TokenEvent t{"r", 3, "a", 0, std::nullopt, {}, {}};
  t.choice = 15;
  EXPECT_EQ(through_text(t, parse_token_event), t);
  EXPECT_FALSE(json(TokenEvent{"r", 3, "a", 0, std::nullopt, {}, {}}).contains("choice"));  // choice 0: omitted

  DoneEvent d;
  d.request_id = "r";
  d.finish_reason = FinishReason::stop;
  d.stop = "\n";
  d.usage = Usage{10, 7, 0};
  d.choices = {{0, FinishReason::stop, "\n", {}, 3}, {1, FinishReason::length, std::nullopt, {}, 4}};
  d.choices[1].tool_calls.push_back({"call-1", "f", "{}"});
  EXPECT_EQ(through_text(d, parse_done_event), d);
}

TEST(RoundTrip, NIsBoundedAndStandAloneOnly) {
  const json base = {{"id", "r"}, {"prompt", "x"}};
  json too_many = base;
  too_many["n"] = GenerateRequest::kMaxChoices + 1;
  auto refused = parse_generate_request(too_many);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().field, "n");
  json zero = base;
  zero["n"] = 0;
  EXPECT_FALSE(parse_generate_request(zero).ok());
  json in_session = base;
  in_session["n"] = 2;
  in_session["session"] = "s";
  refused = parse_generate_request(in_session);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().field, "n");
  EXPECT_NE(refused.error().message.find("session"), std::string::npos);
  in_session["n"] = 1;
  EXPECT_TRUE(parse_generate_request(in_session).ok());
}

TEST(RoundTrip, DoneEventWithEveryFieldSet) {
  DoneEvent d;
  d.request_id = "req-9";
  d.finish_reason = FinishReason::timeout;
  d.usage = Usage{120, 34, 96, 4};
  d.timings = Timings{1.5, 20.25, 300.125, 22.0, 113.3};
  d.stop = "User:";
  d.error_message = "deadline of 30 s exceeded";
  EXPECT_EQ(through_text(d, parse_done_event), d);
  EXPECT_EQ(through_text(d.usage, parse_usage), d.usage);
  EXPECT_EQ(through_text(d.timings, parse_timings), d.timings);
}

TEST(RoundTrip, UsageSaysTrimmedMessagesOnlyWhenSome) {
  const json none = Usage{10, 2, 0, 0};
  EXPECT_FALSE(none.contains("trimmed_messages")) << none.dump();
  const json some = Usage{10, 2, 0, 3};
  EXPECT_EQ(some.at("trimmed_messages"), 3);
  EXPECT_EQ(parse_usage(some).value().trimmed_messages, 3);
  EXPECT_FALSE(parse_usage(json{{"prompt_tokens", 1}, {"completion_tokens", 1}, {"cached_tokens", 0},
                                {"trimmed_messages", -1}})
                   .ok());
}

TEST(RoundTrip, DoneEventEveryFinishReason) {
  for (const FinishReason reason : {FinishReason::eos, FinishReason::length, FinishReason::stop,
                                    FinishReason::cancelled, FinishReason::error, FinishReason::timeout,
                                    FinishReason::tool_calls}) {
    DoneEvent d;
    d.request_id = "r";
    d.finish_reason = reason;
    EXPECT_EQ(through_text(d, parse_done_event), d) << to_string(reason);
  }
}

TEST(RoundTrip, ErrorEventEveryCode) {
  for (const ErrorCode code :
       {ErrorCode::invalid_request, ErrorCode::not_found, ErrorCode::conflict, ErrorCode::overloaded,
        ErrorCode::unsupported, ErrorCode::unavailable, ErrorCode::internal}) {
    const ErrorEvent e{"req-3", code, "something about " + std::string(to_string(code)), "params.top_p"};
    EXPECT_EQ(through_text(e, parse_error_event), e) << to_string(code);
  }
}

TEST(RoundTrip, ErrorEventWithoutIdOrField) {
  const ErrorEvent e{"", ErrorCode::invalid_request, "invalid JSON at byte offset 3: ...", ""};
  const json j = e;
  EXPECT_FALSE(j.contains("field"));
  EXPECT_EQ(j.at("id"), "");
  EXPECT_EQ(through_text(e, parse_error_event), e);
}

TEST(RoundTrip, SessionAndCancelMessages) {
  const SessionOpen full{"my-session", "You are a pirate."};
  EXPECT_EQ(through_text(full, parse_session_open), full);
  const SessionOpen empty{};
  EXPECT_EQ(json(empty), json::object());
  EXPECT_EQ(through_text(empty, parse_session_open), empty);
  const SessionOpened opened{"s-0001"};
  EXPECT_EQ(through_text(opened, parse_session_opened), opened);
  const CancelRequest cancel{"req-5"};
  EXPECT_EQ(through_text(cancel, parse_cancel_request), cancel);
}

TEST(EnumNames, EveryEnumeratorHasADistinctNameThatParsesBack) {
  for (const ChatRole v : {ChatRole::system, ChatRole::user, ChatRole::assistant, ChatRole::tool}) {
    EXPECT_EQ(parse_chat_role(to_string(v)), v);
  }
  for (const FinishReason v : {FinishReason::eos, FinishReason::length, FinishReason::stop, FinishReason::cancelled,
                               FinishReason::error, FinishReason::timeout, FinishReason::tool_calls}) {
    EXPECT_EQ(parse_finish_reason(to_string(v)), v);
  }
  for (const ErrorCode v :
       {ErrorCode::invalid_request, ErrorCode::not_found, ErrorCode::conflict, ErrorCode::overloaded,
        ErrorCode::unsupported, ErrorCode::unavailable, ErrorCode::internal}) {
    EXPECT_EQ(parse_error_code(to_string(v)), v);
  }
  EXPECT_EQ(to_string(ErrorCode::invalid_request), "invalid_request");
  EXPECT_EQ(to_string(ErrorCode::not_found), "not_found");
  EXPECT_EQ(to_string(FinishReason::cancelled), "cancelled");
  EXPECT_EQ(parse_chat_role("User"), std::nullopt);  // exact, case-sensitive
  EXPECT_EQ(parse_finish_reason("max_tokens"), std::nullopt);
  EXPECT_EQ(parse_error_code(""), std::nullopt);
}

TEST(Defaults, AbsentFieldsTakeTheDocumentedDefaults) {
  const auto parsed = parse_sampling_params(json::object());
  ASSERT_TRUE(parsed.ok());
  const SamplingParams& p = parsed.value();
  // An absent max_tokens is the ceiling (generation runs until the context ends); the rest is the struct's.
  SamplingParams expected;
  expected.max_tokens = ParseOptions{}.max_tokens_limit;
  EXPECT_EQ(p, expected);
  EXPECT_DOUBLE_EQ(p.temperature, 0.8);
  EXPECT_EQ(p.top_k, 40);
  EXPECT_DOUBLE_EQ(p.top_p, 0.95);
  EXPECT_DOUBLE_EQ(p.min_p, 0.05);
  EXPECT_DOUBLE_EQ(p.repetition_penalty, 1.0);
  EXPECT_DOUBLE_EQ(p.frequency_penalty, 0.0);
  EXPECT_DOUBLE_EQ(p.presence_penalty, 0.0);
  EXPECT_FALSE(p.seed.has_value());
  EXPECT_EQ(p.max_tokens, 4096);
  EXPECT_TRUE(p.stop.empty());
  EXPECT_TRUE(p.stop_token_ids.empty());
  EXPECT_FALSE(p.ignore_eos);
  EXPECT_EQ(p.logprobs, 0);

  const auto request = parse_generate_request(json{{"id", "r1"}, {"prompt", "hi"}});
  ASSERT_TRUE(request.ok()) << to_string(request.error());
  EXPECT_FALSE(request->session_id.has_value());
  EXPECT_EQ(request->params, expected);
  EXPECT_EQ(request->priority, 0);
  EXPECT_TRUE(request->stream);
}

TEST(Defaults, NullMeansAbsent) {
  const auto parsed = parse_sampling_params(json{{"seed", nullptr}, {"temperature", nullptr}});
  ASSERT_TRUE(parsed.ok()) << to_string(parsed.error());
  EXPECT_FALSE(parsed->seed.has_value());
  EXPECT_DOUBLE_EQ(parsed->temperature, 0.8);
}

TEST(Defaults, IntegersAreAcceptedWhereNumbersAreExpected) {
  const auto parsed = parse_sampling_params(json{{"temperature", 1}, {"top_p", 1}});
  ASSERT_TRUE(parsed.ok()) << to_string(parsed.error());
  EXPECT_DOUBLE_EQ(parsed->temperature, 1.0);
  EXPECT_DOUBLE_EQ(parsed->top_p, 1.0);
}

}  // namespace
}  // namespace loom::proto
