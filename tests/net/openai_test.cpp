// The OpenAI-compatible routes: the pure translation (openai_translate.hpp) unit by unit, then
// POST /v1/completions and /v1/chat/completions end to end through a real socket, whole and streamed.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <regex>
#include <string>
#include <variant>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "gateway_fixture.hpp"
#include "openai_translate.hpp"

namespace loom::net::test {
namespace {

using nlohmann::json;

// ------------------------------------------------------------------------------------------------
// The translation, without a server.

proto::ParseOptions parse_options() {
  proto::ParseOptions options;
  options.max_tokens_limit = 4096;
  return options;
}

openai::Request translated(const json& body, OpenAiRoute route = OpenAiRoute::completions) {
  auto result = openai::translate_request(body.dump(), route, "cmpl-1", parse_options());
  if (auto* error = std::get_if<openai::Error>(&result)) {
    ADD_FAILURE() << "refused: " << error->message;
    return {};
  }
  return std::get<openai::Request>(std::move(result));
}

openai::Error refused(const std::string& body, OpenAiRoute route = OpenAiRoute::completions) {
  auto result = openai::translate_request(body, route, "cmpl-1", parse_options());
  if (auto* error = std::get_if<openai::Error>(&result)) return *error;
  ADD_FAILURE() << "accepted: " << body;
  return {};
}

TEST(OpenAiTranslate, CompletionFieldsBecomeTheProtoRequest) {
  const auto request = translated({{"model", "whatever"},
                                   {"prompt", "Once"},
                                   {"max_tokens", 7},
                                   {"temperature", 0.5},
                                   {"top_p", 0.9},
                                   {"presence_penalty", 0.25},
                                   {"frequency_penalty", -0.5},
                                   {"seed", 42},
                                   {"stop", "\n"},
                                   {"stream", true},
                                   {"stream_options", {{"include_usage", true}}}});
  EXPECT_EQ(request.generate.id, "cmpl-1");
  EXPECT_EQ(std::get<std::string>(request.generate.input), "Once");
  EXPECT_TRUE(request.stream);
  EXPECT_TRUE(request.include_usage);
  const auto& params = request.generate.params;
  EXPECT_EQ(params.max_tokens, 7);
  EXPECT_DOUBLE_EQ(params.temperature, 0.5);
  EXPECT_DOUBLE_EQ(params.top_p, 0.9);
  EXPECT_DOUBLE_EQ(params.presence_penalty, 0.25);
  EXPECT_DOUBLE_EQ(params.frequency_penalty, -0.5);
  EXPECT_EQ(params.seed, 42u);
  EXPECT_EQ(params.stop, std::vector<std::string>{"\n"});
}

TEST(OpenAiTranslate, AbsentSamplingFieldsTakeLoomsDefaults) {
  const auto request = translated({{"prompt", "Once"}});
  EXPECT_FALSE(request.stream);
  EXPECT_FALSE(request.include_usage);
  // An absent max_tokens is the server's ceiling: generation runs until the context ends.
  proto::SamplingParams expected;
  expected.max_tokens = parse_options().max_tokens_limit;
  EXPECT_EQ(request.generate.params, expected);
}

TEST(OpenAiTranslate, LlamaCppExtensionsAreMapped) {
  const auto request = translated({{"prompt", "Once"},
                                   {"top_k", 5},
                                   {"min_p", 0.1},
                                   {"repeat_penalty", 1.3},
                                   {"repeat_last_n", 32},
                                   {"ignore_eos", true},
                                   {"seed", -1}});
  const auto& params = request.generate.params;
  EXPECT_EQ(params.top_k, 5);
  EXPECT_DOUBLE_EQ(params.min_p, 0.1);
  EXPECT_DOUBLE_EQ(params.repetition_penalty, 1.3);
  EXPECT_EQ(params.repetition_last_n, 32);
  EXPECT_TRUE(params.ignore_eos);
  EXPECT_FALSE(params.seed.has_value()) << "llama.cpp's seed -1 means random";
}

TEST(OpenAiTranslate, PromptMayBeAnArrayOfOneString) {
  EXPECT_EQ(std::get<std::string>(translated({{"prompt", {"Once"}}}).generate.input), "Once");
}

TEST(OpenAiTranslate, UnknownAndNullFieldsAreIgnored) {
  const auto request = translated({{"prompt", "Once"},
                                   {"user", "someone"},
                                   {"metadata", {{"a", "b"}}},
                                   {"cache_prompt", true},
                                   {"temperature", nullptr},
                                   {"n", 1},
                                   {"logprobs", nullptr},
                                   {"echo", false}});
  EXPECT_DOUBLE_EQ(request.generate.params.temperature, proto::SamplingParams{}.temperature);
}

TEST(OpenAiTranslate, ChatMessagesWithTextPartsAndOpenAiRoles) {
  const auto request = translated(
      {{"messages",
        {{{"role", "developer"}, {"content", "Be brief."}},
         {{"role", "user"},
          {"content", {{{"type", "text"}, {"text", "Hello, "}}, {{"type", "text"}, {"text", "there"}}}},
          {"name", "ann"}},
         {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", json::array()}}}},
       {"max_tokens", 9},
       {"max_completion_tokens", 5}},
      OpenAiRoute::chat_completions);
  const auto& messages = std::get<std::vector<proto::ChatMessage>>(request.generate.input);
  ASSERT_EQ(messages.size(), 3u);
  EXPECT_EQ(messages[0].role, proto::ChatRole::system);
  EXPECT_EQ(messages[0].content, "Be brief.");
  EXPECT_EQ(messages[1].role, proto::ChatRole::user);
  EXPECT_EQ(messages[1].content, "Hello, there");
  EXPECT_EQ(messages[2].role, proto::ChatRole::assistant);
  EXPECT_EQ(messages[2].content, "");
  EXPECT_EQ(request.generate.params.max_tokens, 5) << "max_completion_tokens wins over max_tokens";
}

TEST(OpenAiTranslate, InvalidJsonIsABadRequestWithoutParam) {
  const auto error = refused("{\"prompt\": ");
  EXPECT_EQ(error.status, 400);
  EXPECT_EQ(error.type, "invalid_request_error");
  EXPECT_FALSE(error.param.has_value());
  EXPECT_NE(error.message.find("not valid JSON"), std::string::npos) << error.message;
  EXPECT_EQ(refused("[1, 2]").status, 400);
}

TEST(OpenAiTranslate, ANulByteAndWhatFollowsItIsNotJson) {
  using namespace std::string_literals;
  for (const std::string& body : {"{\"prompt\":\"x\"}\0garbage"s, "{\"prompt\":\"x\"}\0"s, "{\"prompt\":\"x\0y\"}"s}) {
    const auto error = refused(body);
    EXPECT_EQ(error.status, 400);
    EXPECT_NE(error.message.find("NUL byte"), std::string::npos) << error.message;
  }
}

TEST(OpenAiTranslate, DeepNestingIsRefusedWhileParsing) {
  const std::string deep = "{\"prompt\":\"x\",\"extra\":" + std::string(10000, '[') + std::string(10000, ']') + "}";
  const auto error = refused(deep);
  EXPECT_EQ(error.status, 400);
  EXPECT_NE(error.message.find("nested"), std::string::npos) << error.message;
}

TEST(OpenAiTranslate, ParseErrorsDoNotEchoALongBody) {
  const auto error = refused("{\"prompt\": \"" + std::string(100000, 'a'));
  EXPECT_LT(error.message.size(), 300u);
}

TEST(OpenAiTranslate, OutOfRangeValuesNameTheClientsField) {
  struct Case {
    json body;
    std::string param;
  };
  const std::vector<Case> cases = {
      {{{"prompt", "x"}, {"temperature", 150}}, "temperature"},
      {{{"prompt", "x"}, {"top_p", 0}}, "top_p"},
      {{{"prompt", "x"}, {"repeat_penalty", 0}}, "repeat_penalty"},
      {{{"prompt", "x"}, {"repeat_last_n", -5}}, "repeat_last_n"},
      {{{"prompt", "x"}, {"max_tokens", 5000}}, "max_tokens"},
      {{{"prompt", "x"}, {"max_tokens", "ten"}}, "max_tokens"},
      {{{"prompt", "x"}, {"seed", -7}}, "seed"},
      {{{"prompt", "x"}, {"stop", {"a", ""}}}, "stop[1]"},
      {{{"prompt", "x"}, {"n", 17}}, "n"},
      {{{"prompt", "x"}, {"n", 2}, {"best_of", 3}}, "best_of"},
      {{{"prompt", "x"}, {"user", 5}}, "user"},
      {{{"prompt", "x"}, {"stream", "yes"}}, "stream"},
      {{{"prompt", "x"}, {"model", 3}}, "model"},
      {{{"prompt", {1, 2, 3}}}, "prompt"},
      {{{"prompt", {"a", "b"}}}, "prompt"},
      {{{"temperature", 1}}, "prompt"},
      {{{"prompt", "x"}, {"logprobs", 6}}, "logprobs"},
      {{{"prompt", "x"}, {"echo", true}}, "echo"},
  };
  for (const auto& c : cases) {
    const auto error = refused(c.body.dump());
    EXPECT_EQ(error.status, 400) << c.body.dump();
    EXPECT_EQ(error.type, "invalid_request_error") << c.body.dump();
    EXPECT_EQ(error.param, c.param) << c.body.dump() << " -> " << error.message;
  }
}

TEST(OpenAiTranslate, ChatRefusalsNameTheField) {
  struct Case {
    json body;
    std::string param;
  };
  const json user = {{"role", "user"}, {"content", "hi"}};
  const std::vector<Case> cases = {
      {{{"model", "m"}}, "messages"},
      {{{"messages", json::array()}}, "messages"},
      {{{"messages", {{{"role", "wizard"}, {"content", "hi"}}}}}, "messages[0].role"},
      {{{"messages", {user, {{"role", "user"}, {"content", 5}}}}}, "messages[1].content"},
      {{{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}, {"image_url", {{"url", "x"}}}}}}}}}},
       "messages[0].content[0].type"},
      {{{"messages", {user}}, {"max_completion_tokens", 0}}, "max_completion_tokens"},
      {{{"messages", {user}}, {"logprobs", "yes"}}, "logprobs"},
      {{{"messages", {user}}, {"tools", {{{"type", "function"}}}}}, "tools[0].function"},
      {{{"messages", {user}}, {"response_format", {{"type", "xml"}}}}, "response_format.type"},
      {{{"messages", {user}}, {"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", 3}}}}}},
       "response_format.json_schema.schema"},
      {{{"messages", {user}}, {"grammar", "root ::= \"a\""}, {"response_format", {{"type", "json_object"}}}},
       "response_format"},
      {{{"messages", {user}}, {"json_schema", "{}"}}, "json_schema"},
  };
  for (const auto& c : cases) {
    const auto error = refused(c.body.dump(), OpenAiRoute::chat_completions);
    EXPECT_EQ(error.status, 400) << c.body.dump();
    EXPECT_EQ(error.param, c.param) << c.body.dump() << " -> " << error.message;
  }
}

TEST(OpenAiTranslate, ConstraintsReachTheParams) {
  const json user = {{"role", "user"}, {"content", "hi"}};
  const auto constraint_of = [&](json body) {
    body["messages"] = json::array({user});
    auto result = openai::translate_request(body.dump(), OpenAiRoute::chat_completions, "chatcmpl-1", {});
    EXPECT_TRUE(std::holds_alternative<openai::Request>(result)) << body.dump();
    return std::holds_alternative<openai::Request>(result) ? std::get<openai::Request>(result).generate.params.constraint
                                                          : std::nullopt;
  };
  using Kind = proto::OutputConstraint::Kind;
  EXPECT_EQ(constraint_of({{"response_format", {{"type", "text"}}}}), std::nullopt);
  EXPECT_EQ(constraint_of({{"response_format", {{"type", "json_object"}}}}), (proto::OutputConstraint{Kind::json_object, ""}));
  EXPECT_EQ(constraint_of({{"response_format",
                            {{"type", "json_schema"},
                             {"json_schema", {{"name", "n"}, {"strict", true}, {"schema", {{"type", "integer"}}}}}}}}),
            (proto::OutputConstraint{Kind::json_schema, R"({"type":"integer"})"}));
  EXPECT_EQ(constraint_of({{"json_schema", {{"type", "boolean"}}}}),
            (proto::OutputConstraint{Kind::json_schema, R"({"type":"boolean"})"}));
  EXPECT_EQ(constraint_of({{"grammar", "root ::= [0-9]+"}}), (proto::OutputConstraint{Kind::grammar, "root ::= [0-9]+"}));
}

TEST(OpenAiTranslate, ASchemaKeepsTheClientsPropertyOrder) {
  const std::string body =
      R"({"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":)"
      R"({"name":"n","schema":{"type":"object","properties":{"reasoning":{"type":"string"},"answer":{"type":"integer"}}}}}})";
  auto result = openai::translate_request(body, OpenAiRoute::chat_completions, "chatcmpl-1", {});
  ASSERT_TRUE(std::holds_alternative<openai::Request>(result));
  EXPECT_EQ(std::get<openai::Request>(result).generate.params.constraint->text,
            R"({"type":"object","properties":{"reasoning":{"type":"string"},"answer":{"type":"integer"}}})");
}

TEST(OpenAiTranslate, ASchemaTheEngineRefusesIsNamedAsTheClientSentIt) {
  const json body = {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                     {"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", {{"type", "set"}}}}}}}};
  auto result = openai::translate_request(body.dump(), OpenAiRoute::chat_completions, "chatcmpl-1", {});
  ASSERT_TRUE(std::holds_alternative<openai::Request>(result));
  const auto& names = std::get<openai::Request>(result).client_names;
  const proto::ErrorEvent refused{"chatcmpl-1", proto::ErrorCode::invalid_request, "at : keyword type: ...",
                                  "params.json_schema"};
  EXPECT_EQ(openai::from_error_event(refused, names).param, "response_format.json_schema.schema");
  EXPECT_EQ(openai::from_error_event(refused).param, "json_schema");  // llama.cpp's own field
}

TEST(OpenAiTranslate, EngineErrorsBecomeStatuses) {
  const auto status = [](proto::ErrorCode code) {
    return openai::from_error_event(proto::ErrorEvent{"cmpl-1", code, "m", ""}).status;
  };
  EXPECT_EQ(status(proto::ErrorCode::invalid_request), 400);
  EXPECT_EQ(status(proto::ErrorCode::unsupported), 400);
  EXPECT_EQ(status(proto::ErrorCode::not_found), 404);
  EXPECT_EQ(status(proto::ErrorCode::conflict), 409);
  EXPECT_EQ(status(proto::ErrorCode::overloaded), 503);
  EXPECT_EQ(status(proto::ErrorCode::unavailable), 503);
  EXPECT_EQ(status(proto::ErrorCode::internal), 500);
  const auto error = openai::from_error_event(
      proto::ErrorEvent{"cmpl-1", proto::ErrorCode::invalid_request, "too long", "params.max_tokens"});
  EXPECT_EQ(error.param, "max_tokens");
}

TEST(OpenAiTranslate, FinishReasons) {
  EXPECT_EQ(openai::finish_reason(proto::FinishReason::eos), "stop");
  EXPECT_EQ(openai::finish_reason(proto::FinishReason::stop), "stop");
  EXPECT_EQ(openai::finish_reason(proto::FinishReason::length), "length");
  EXPECT_FALSE(openai::finish_reason(proto::FinishReason::cancelled));
  EXPECT_FALSE(openai::finish_reason(proto::FinishReason::error));
  EXPECT_FALSE(openai::finish_reason(proto::FinishReason::timeout));
  proto::DoneEvent done;
  done.finish_reason = proto::FinishReason::timeout;
  EXPECT_EQ(openai::from_failed_done(done).status, 504);
  done.finish_reason = proto::FinishReason::error;
  EXPECT_EQ(openai::from_failed_done(done).status, 500);
}

TEST(OpenAiTranslate, ResponseObjectsHaveOpenAisShape) {
  const openai::ResponseIdentity completion{OpenAiRoute::completions, "cmpl-3", 1700000000, "tiny"};
  const openai::ResponseIdentity chat{OpenAiRoute::chat_completions, "chatcmpl-3", 1700000000, "tiny"};
  const proto::Usage usage{5, 3, 2};

  const json whole = openai::completion_object(completion, "abc", "length", usage);
  EXPECT_EQ(whole["object"], "text_completion");
  EXPECT_EQ(whole["choices"][0]["text"], "abc");
  EXPECT_EQ(whole["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(whole["usage"]["total_tokens"], 8);
  EXPECT_EQ(whole["usage"]["prompt_tokens_details"]["cached_tokens"], 2);

  const json chat_whole = openai::completion_object(chat, "abc", "stop", usage);
  EXPECT_EQ(chat_whole["object"], "chat.completion");
  EXPECT_EQ(chat_whole["choices"][0]["message"], (json{{"role", "assistant"}, {"content", "abc"}}));

  EXPECT_EQ(openai::role_chunk(chat)["choices"][0]["delta"], (json{{"role", "assistant"}, {"content", ""}}));
  EXPECT_EQ(openai::text_chunk(chat, "x")["object"], "chat.completion.chunk");
  EXPECT_EQ(openai::text_chunk(chat, "x")["choices"][0]["delta"], (json{{"content", "x"}}));
  EXPECT_TRUE(openai::text_chunk(chat, "x")["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(openai::finish_chunk(chat, "stop")["choices"][0]["delta"], json::object());
  EXPECT_EQ(openai::finish_chunk(completion, "stop")["choices"][0]["text"], "");
  EXPECT_EQ(openai::usage_chunk(chat, usage)["choices"], json::array());
  EXPECT_EQ(openai::usage_chunk(chat, usage)["usage"]["completion_tokens"], 3);
}

TEST(OpenAiTranslate, SseEventsAreOneDataLineAndSurviveBadUtf8) {
  const openai::ResponseIdentity completion{OpenAiRoute::completions, "cmpl-3", 1, "tiny"};
  const std::string event = openai::sse_event(openai::text_chunk(completion, "a\nb\xff"));
  ASSERT_EQ(event.rfind("data: ", 0), 0u);
  ASSERT_EQ(event.substr(event.size() - 2), "\n\n");
  EXPECT_EQ(event.find('\n'), event.size() - 2) << "a newline in the text must stay escaped";
  const json parsed = json::parse(event.substr(6));
  EXPECT_EQ(parsed["choices"][0]["text"], "a\nb\xEF\xBF\xBD");
}

// ------------------------------------------------------------------------------------------------
// End to end.

class OpenAiRoutes : public SharedChatmlGateway<OpenAiRoutes> {};

constexpr const char* kCompletions = "/v1/completions";
constexpr const char* kChat = "/v1/chat/completions";

// What the reference implementation generates greedily after "Once upon a time".
std::string reference_continuation() {
  std::ifstream file(shared_file("reference/aidreams260K.llama2c-greedy.txt"));
  std::stringstream text;
  text << file.rdbuf();
  const std::string all = text.str();
  const std::string prompt = "Once upon a time";
  EXPECT_EQ(all.rfind(prompt, 0), 0u);
  return all.substr(prompt.size());
}

json greedy_completion(int max_tokens) {
  return {{"model", "aidreams260K"}, {"prompt", "Once upon a time"}, {"max_tokens", max_tokens}, {"temperature", 0}};
}

json greedy_chat(int max_tokens) {
  return {{"model", "aidreams260K"},
          {"messages", {{{"role", "user"}, {"content", "Once upon a time"}}}},
          {"max_tokens", max_tokens},
          {"temperature", 0}};
}

// Every payload but the last is a JSON chunk, the last is [DONE]; returns the chunks.
std::vector<json> parse_stream(const HttpResult& result) {
  EXPECT_EQ(result.status, 200) << result.body;
  EXPECT_EQ(result.headers.count("content-type") ? result.headers.at("content-type") : "", "text/event-stream");
  EXPECT_EQ(result.headers.count("cache-control") ? result.headers.at("cache-control") : "", "no-cache");
  const auto payloads = sse_data(result.body);
  std::vector<json> chunks;
  if (payloads.empty()) {
    ADD_FAILURE() << "no data lines in " << result.body;
    return chunks;
  }
  EXPECT_EQ(payloads.back(), "[DONE]");
  for (std::size_t i = 0; i + 1 < payloads.size(); ++i) {
    EXPECT_NE(payloads[i], "[DONE]") << "[DONE] before the end";
    chunks.push_back(json::parse(payloads[i]));
  }
  return chunks;
}

void expect_usage(const json& usage) {
  ASSERT_TRUE(usage.is_object()) << usage.dump();
  EXPECT_GT(usage["prompt_tokens"].get<int>(), 0);
  EXPECT_EQ(usage["total_tokens"].get<int>(),
            usage["prompt_tokens"].get<int>() + usage["completion_tokens"].get<int>());
}

TEST_F(OpenAiRoutes, CompletionAnswersOneObjectWithTheGreedyText) {
  const auto result = post(kCompletions, greedy_completion(12));
  ASSERT_EQ(result.status, 200) << result.body;
  EXPECT_EQ(result.headers.at("content-type"), "application/json");
  const json body = result.json();
  EXPECT_EQ(body["id"].get<std::string>().rfind("cmpl-", 0), 0u) << body["id"];
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_TRUE(body["created"].is_number_integer());
  EXPECT_EQ(body["model"], "aidreams260K");
  ASSERT_EQ(body["choices"].size(), 1u);
  const json& choice = body["choices"][0];
  EXPECT_EQ(choice["index"], 0);
  EXPECT_EQ(choice["finish_reason"], "length");
  EXPECT_TRUE(choice["logprobs"].is_null());
  const std::string text = choice["text"];
  EXPECT_FALSE(text.empty());
  EXPECT_EQ(reference_continuation().rfind(text, 0), 0u) << "'" << text << "' is not where the reference begins";
  expect_usage(body["usage"]);
  EXPECT_EQ(body["usage"]["completion_tokens"], 12);
}

TEST_F(OpenAiRoutes, ChatAnswersOneAssistantMessage) {
  const auto result = post(kChat, greedy_chat(8));
  ASSERT_EQ(result.status, 200) << result.body;
  const json body = result.json();
  EXPECT_EQ(body["id"].get<std::string>().rfind("chatcmpl-", 0), 0u) << body["id"];
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["model"], "aidreams260K");
  ASSERT_EQ(body["choices"].size(), 1u);
  const json& choice = body["choices"][0];
  EXPECT_EQ(choice["message"]["role"], "assistant");
  EXPECT_TRUE(choice["message"]["content"].is_string());
  const std::set<std::string> reasons{"stop", "length"};
  EXPECT_TRUE(reasons.count(choice["finish_reason"].get<std::string>())) << choice["finish_reason"];
  expect_usage(body["usage"]);
}

TEST_F(OpenAiRoutes, StreamedCompletionEqualsTheWholeOne) {
  const std::string whole = post(kCompletions, greedy_completion(24)).json()["choices"][0]["text"];
  json request = greedy_completion(24);
  request["stream"] = true;
  const auto chunks = parse_stream(post(kCompletions, request));
  std::string streamed;
  int finished = 0;
  std::set<std::string> ids;
  for (const auto& chunk : chunks) {
    EXPECT_EQ(chunk["object"], "text_completion");
    EXPECT_EQ(chunk["model"], "aidreams260K");
    ids.insert(chunk["id"].get<std::string>());
    ASSERT_EQ(chunk["choices"].size(), 1u) << chunk.dump();
    const json& choice = chunk["choices"][0];
    streamed += choice["text"].get<std::string>();
    if (!choice["finish_reason"].is_null()) {
      ++finished;
      EXPECT_EQ(choice["finish_reason"], "length");
    } else {
      EXPECT_FALSE(choice["text"].get<std::string>().empty()) << "an empty text chunk was sent";
    }
  }
  EXPECT_EQ(streamed, whole);
  EXPECT_EQ(finished, 1);
  EXPECT_EQ(ids.size(), 1u);
  EXPECT_FALSE(chunks.back().contains("usage")) << "usage only when stream_options.include_usage";
}

TEST_F(OpenAiRoutes, StreamedChatEqualsTheWholeOne) {
  const std::string whole = post(kChat, greedy_chat(24)).json()["choices"][0]["message"]["content"];
  json request = greedy_chat(24);
  request["stream"] = true;
  const auto chunks = parse_stream(post(kChat, request));
  ASSERT_FALSE(chunks.empty());
  EXPECT_EQ(chunks.front()["choices"][0]["delta"]["role"], "assistant");
  std::string streamed;
  int finished = 0;
  for (const auto& chunk : chunks) {
    EXPECT_EQ(chunk["object"], "chat.completion.chunk");
    ASSERT_EQ(chunk["choices"].size(), 1u) << chunk.dump();
    const json& choice = chunk["choices"][0];
    if (choice["delta"].contains("content")) streamed += choice["delta"]["content"].get<std::string>();
    if (!choice["finish_reason"].is_null()) {
      ++finished;
      EXPECT_EQ(choice["delta"], json::object());
    }
  }
  EXPECT_EQ(streamed, whole);
  EXPECT_EQ(finished, 1);
}

TEST_F(OpenAiRoutes, IncludeUsageAddsALastChunkWithUsageAndNoChoices) {
  for (const char* path : {kCompletions, kChat}) {
    json request = std::string(path) == kChat ? greedy_chat(6) : greedy_completion(6);
    request["stream"] = true;
    request["stream_options"] = {{"include_usage", true}};
    const auto chunks = parse_stream(post(path, request));
    ASSERT_GE(chunks.size(), 2u) << path;
    const json& last = chunks.back();
    EXPECT_EQ(last["choices"], json::array()) << path;
    expect_usage(last["usage"]);
    EXPECT_FALSE(chunks[chunks.size() - 2]["choices"][0]["finish_reason"].is_null()) << path;
  }
}

TEST_F(OpenAiRoutes, StopStringEndsTheTextBeforeIt) {
  const std::string reference = reference_continuation();
  const std::string stop = "petals";
  ASSERT_NE(reference.find(stop), std::string::npos);
  json request = greedy_completion(64);
  request["stop"] = stop;
  const auto result = post(kCompletions, request);
  ASSERT_EQ(result.status, 200) << result.body;
  const json choice = result.json()["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "stop");
  EXPECT_EQ(choice["text"], reference.substr(0, reference.find(stop)));
}

TEST_F(OpenAiRoutes, LlamaCppExtensionsAreAccepted) {
  const json request = {{"prompt", "Once upon a time"}, {"max_tokens", 20},  {"ignore_eos", true},
                        {"top_k", 8},                   {"min_p", 0.02},     {"repeat_penalty", 1.1},
                        {"repeat_last_n", 16},          {"seed", 1234}};
  const auto first = post(kCompletions, request);
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.json()["usage"]["completion_tokens"], 20);
  EXPECT_EQ(first.json()["choices"][0]["finish_reason"], "length");
  const auto second = post(kCompletions, request);
  EXPECT_EQ(second.json()["choices"][0]["text"], first.json()["choices"][0]["text"]) << "same seed, same text";
}

TEST_F(OpenAiRoutes, InvalidJsonIsA400WithOpenAisErrorObject) {
  const auto result = http_request(port(), "POST", kCompletions, "{\"prompt\": oops}");
  ASSERT_EQ(result.status, 400);
  const json body = result.json();
  EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  EXPECT_TRUE(body["error"]["message"].is_string());
  EXPECT_TRUE(body["error"].contains("param"));
  EXPECT_TRUE(body["error"].contains("code"));
}

TEST_F(OpenAiRoutes, BadFieldsAre400sNamingTheParam) {
  json temperature = greedy_completion(4);
  temperature["temperature"] = 1000;
  json n = greedy_chat(4);
  n["n"] = 0;
  json max_tokens = greedy_completion(4);
  max_tokens["max_tokens"] = 4097;
  json stream_temperature = greedy_chat(4);
  stream_temperature["temperature"] = -1;
  stream_temperature["stream"] = true;
  const std::vector<std::tuple<const char*, json, std::string>> cases = {
      {kCompletions, temperature, "temperature"},
      {kChat, n, "n"},
      {kCompletions, max_tokens, "max_tokens"},
      {kChat, stream_temperature, "temperature"},
  };
  for (const auto& [path, body, param] : cases) {
    const auto result = post(path, body);
    EXPECT_EQ(result.status, 400) << body.dump();
    EXPECT_EQ(result.headers.at("content-type"), "application/json") << "a refused stream is not a stream";
    EXPECT_EQ(result.json()["error"]["param"], param) << result.body;
    EXPECT_EQ(result.json()["error"]["type"], "invalid_request_error");
  }
}

// A request with tools and an assistant turn that only called a tool is accepted end to end, whole and
// streamed. Until the session parses replies (issue 22) the answer is text; the built-in templates cannot
// render a tool message yet (the session refuses it as unsupported), so the result comes as a user turn.
// X-Request-Id: a client's own is echoed on whole and streamed responses; without one (or with one that is
// too long or holds other characters) the server makes one, different each time.
TEST_F(OpenAiRoutes, XRequestIdIsEchoedOrMade) {
  const json body = greedy_chat(2);
  const auto echoed = http_request(port(), "POST", kChat, body.dump(), {{"X-Request-Id", "trace-42.a:b_c"}});
  ASSERT_EQ(echoed.status, 200) << echoed.body;
  EXPECT_EQ(echoed.headers.at("x-request-id"), "trace-42.a:b_c");
  json streamed_body = body;
  streamed_body["stream"] = true;
  const auto streamed = http_request(port(), "POST", kChat, streamed_body.dump(), {{"X-Request-Id", "s-1"}});
  EXPECT_EQ(streamed.headers.at("x-request-id"), "s-1");
  const auto refused = http_request(port(), "POST", kChat, "{", {{"X-Request-Id", "bad id"}});
  EXPECT_EQ(refused.status, 400);
  EXPECT_TRUE(refused.headers.at("x-request-id").starts_with("req-")) << refused.headers.at("x-request-id");
  const auto first = http_request(port(), "GET", "/v1/models");
  const auto second = http_request(port(), "GET", "/v1/models", {}, {{"X-Request-Id", std::string(129, 'a')}});
  EXPECT_TRUE(first.headers.at("x-request-id").starts_with("req-"));
  EXPECT_TRUE(second.headers.at("x-request-id").starts_with("req-"));
  EXPECT_NE(first.headers.at("x-request-id"), second.headers.at("x-request-id"));
}

// logit_bias as OpenAI sends it: +100 on a token makes greedy decoding pick it, so two different tokens give
// two different answers, each the same every time; a bias out of range and a token outside the vocabulary are
// 400s naming the field and the id.
TEST_F(OpenAiRoutes, LogitBiasIsHonouredAndChecked) {
  const auto answer = [&](int token) {
    const json body{{"prompt", "Once upon a time"}, {"max_tokens", 1}, {"temperature", 0},
                    {"logit_bias", {{std::to_string(token), 100}}}};
    const auto result = post(kCompletions, body);
    EXPECT_EQ(result.status, 200) << result.body;
    return result.status == 200 ? result.json()["choices"][0]["text"].get<std::string>() : std::string();
  };
  const std::string a = answer(300);
  const std::string b = answer(301);
  EXPECT_NE(a, b) << "each bias forces its own token";
  EXPECT_EQ(answer(300), a);

  json bad{{"prompt", "x"}, {"max_tokens", 1}, {"logit_bias", {{"5", 101}}}};
  const auto out_of_range = post(kCompletions, bad);
  EXPECT_EQ(out_of_range.status, 400);
  EXPECT_EQ(out_of_range.json()["error"]["param"].get<std::string>().rfind("logit_bias", 0), 0u) << out_of_range.body;
  bad["logit_bias"] = json{{"99999999", 5}};
  const auto outside = post(kCompletions, bad);
  EXPECT_EQ(outside.status, 400);
  EXPECT_NE(outside.body.find("99999999"), std::string::npos) << outside.body;
}

// Response ids are random (OpenAI's shape), not a per-process counter that restarts at 1.
TEST_F(OpenAiRoutes, ResponseIdsAreRandom) {
  const auto a = post(kChat, greedy_chat(1));
  const auto b = post(kChat, greedy_chat(1));
  const auto c = post(kCompletions, json{{"prompt", "Once"}, {"max_tokens", 1}});
  ASSERT_EQ(a.status, 200);
  const std::regex chat_id("chatcmpl-[A-Za-z0-9]{24}");
  EXPECT_TRUE(std::regex_match(a.json()["id"].get<std::string>(), chat_id)) << a.json()["id"];
  EXPECT_NE(a.json()["id"], b.json()["id"]);
  EXPECT_TRUE(std::regex_match(c.json()["id"].get<std::string>(), std::regex("cmpl-[A-Za-z0-9]{24}"))) << c.json()["id"];
}

// A conversation with a call and its result, on a gateway given a tool template (Qwen 2.5's, from
// ../shared/templates) with --chat-template-file: the template renders the assistant's call and the tool
// turn, the reply comes as an ordinary answer (tool_choice none), whole and streamed, with no empty deltas.
TEST(OpenAiRoutesWithToolTemplate, AConversationWithACallAndItsResultIsAnswered) {
  GatewayConfig config = test_config();
  config.model = shared_file("models/synth11M-q8_0.gguf");  // aidreams260K's context of 128 is too short
  config.kv_cache_mb = 16;
  config.chat_template_file = shared_file("templates/templates/Qwen-Qwen2.5-7B-Instruct.jinja");
  GatewayUnderTest gateway(config);
  json body = json::parse(R"({"max_tokens": 4, "temperature": 0, "tool_choice": "none", "parallel_tool_calls": false,
      "messages": [{"role": "user", "content": "Weather in Paris?"}]})");
  body["tools"] = json::parse(R"([{"type":"function","function":{"name":"get_weather","description":"The weather",
      "parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}])");
  body["messages"].push_back(json::parse(R"({"role":"assistant","content":null,"tool_calls":[{"id":"call_1",
      "type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]})"));
  body["messages"].push_back(json::parse(R"({"role":"tool","tool_call_id":"call_1","content":"21 C"})"));
  const auto whole = http_request(gateway.port(), "POST", kChat, body.dump());
  ASSERT_EQ(whole.status, 200) << whole.body;
  const json answer = whole.json();
  const json& choice = answer["choices"][0];
  EXPECT_EQ(choice["message"]["role"], "assistant");
  EXPECT_TRUE(choice["message"]["content"].is_string()) << choice.dump();
  EXPECT_FALSE(choice["message"].contains("tool_calls")) << choice.dump();
  EXPECT_EQ(choice["finish_reason"], "length");
  EXPECT_GT(answer["usage"]["prompt_tokens"].get<int>(), 100) << "the tools and the call are in the prompt";

  body["stream"] = true;
  const auto chunks = parse_stream(http_request(gateway.port(), "POST", kChat, body.dump()));
  ASSERT_FALSE(chunks.empty());
  std::string streamed;
  for (std::size_t i = 1; i < chunks.size(); ++i) {
    const json& c = chunks[i]["choices"][0];
    // Only the role chunk and the last one may have an empty delta.
    if (c["finish_reason"].is_null()) {
      EXPECT_FALSE(c["delta"].empty()) << chunks[i].dump();
    }
    streamed += c["delta"].value("content", "");
  }
  EXPECT_EQ(streamed, choice["message"]["content"].get<std::string>());
}

// Chunked SSE on a kept-alive connection, then an ordinary request on the same connection: the stream's
// framing must end exactly where it says.
TEST_F(OpenAiRoutes, AStreamLeavesTheConnectionUsable) {
  namespace asio = boost::asio;
  namespace beast = boost::beast;
  namespace http = beast::http;
  asio::io_context io;
  beast::tcp_stream stream(io);
  stream.expires_after(std::chrono::seconds(30));
  stream.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port()));
  beast::flat_buffer buffer;
  const auto exchange = [&](const json& body) {
    http::request<http::string_body> request{http::verb::post, kCompletions, 11};
    request.set(http::field::host, "127.0.0.1");
    request.set(http::field::content_type, "application/json");
    request.body() = body.dump();
    request.prepare_payload();
    http::write(stream, request);
    http::response<http::string_body> response;
    http::read(stream, buffer, response);
    return response;
  };
  json streamed = greedy_completion(8);
  streamed["stream"] = true;
  const auto first = exchange(streamed);
  EXPECT_EQ(first.result_int(), 200u);
  EXPECT_TRUE(first.chunked());
  EXPECT_TRUE(first.keep_alive());
  EXPECT_EQ(sse_data(first.body()).back(), "[DONE]");
  const auto second = exchange(greedy_completion(8));
  EXPECT_EQ(second.result_int(), 200u);
  EXPECT_EQ(json::parse(second.body())["object"], "text_completion");
}

// The engine's own refusal (a prompt longer than the context) is an HTTP status with OpenAI's error
// object, streamed or not: nothing was sent before the engine answered.
TEST_F(OpenAiRoutes, AnEngineRefusalIsA400BeforeAnyStream) {
  std::string long_prompt;
  for (int i = 0; i < 200; ++i) long_prompt += "Once upon a time ";
  for (const bool stream : {false, true}) {
    const json request = {{"prompt", long_prompt}, {"max_tokens", 4}, {"stream", stream}};
    const auto result = post(kCompletions, request);
    EXPECT_EQ(result.status, 400) << result.body;
    EXPECT_EQ(result.headers.at("content-type"), "application/json");
    EXPECT_EQ(result.json()["error"]["type"], "invalid_request_error") << result.body;
    EXPECT_EQ(result.json()["error"]["param"], "prompt") << result.body;
  }
}

// HTTP/1.0 has no chunked encoding: the event stream is the raw body, ended by closing the connection.
TEST_F(OpenAiRoutes, AnHttp10StreamEndsWithTheConnection) {
  namespace asio = boost::asio;
  namespace beast = boost::beast;
  namespace http = beast::http;
  asio::io_context io;
  beast::tcp_stream stream(io);
  stream.expires_after(std::chrono::seconds(30));
  stream.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port()));
  json body = greedy_completion(8);
  body["stream"] = true;
  http::request<http::string_body> request{http::verb::post, kCompletions, 10};
  request.set(http::field::content_type, "application/json");
  request.body() = body.dump();
  request.prepare_payload();
  http::write(stream, request);
  beast::flat_buffer buffer;
  http::response<http::string_body> response;
  beast::error_code ec;
  http::read(stream, buffer, response, ec);
  ASSERT_TRUE(!ec || ec == http::error::end_of_stream) << ec.message();
  EXPECT_EQ(response.result_int(), 200u);
  EXPECT_FALSE(response.chunked());
  EXPECT_FALSE(response.keep_alive());
  const auto payloads = sse_data(response.body());
  ASSERT_GE(payloads.size(), 2u) << response.body();
  EXPECT_EQ(payloads.back(), "[DONE]");
}

// A gateway with room for one request: a second one is refused with 503 while the first streams, and a
// client that leaves mid-stream has its request cancelled, which gives its place back at once. synth11M
// takes milliseconds per token, so the 2000 tokens asked for would hold the place for seconds if the
// request ran on; the place must come back well before that.
TEST(OpenAiLimits, AFullGatewayRefusesAndALeavingClientGivesItsPlaceBack) {
  namespace asio = boost::asio;
  namespace beast = boost::beast;
  namespace http = beast::http;
  GatewayConfig config = test_config();
  config.model = shared_file("models/synth11M-f16.gguf");
  config.max_requests_total = 1;
  GatewayUnderTest gateway(config);
  const json small = {{"prompt", "Once"}, {"max_tokens", 2}};

  asio::io_context io;
  beast::tcp_stream stream(io);
  stream.expires_after(std::chrono::seconds(30));
  stream.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), gateway.port()));
  const json long_request = {{"prompt", "Once"}, {"max_tokens", 2000}, {"ignore_eos", true}, {"stream", true}};
  http::request<http::string_body> request{http::verb::post, kCompletions, 11};
  request.set(http::field::host, "127.0.0.1");
  request.set(http::field::content_type, "application/json");
  request.body() = long_request.dump();
  request.prepare_payload();
  http::write(stream, request);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64u << 20);
  http::read_header(stream, buffer, parser);
  ASSERT_EQ(parser.get().result_int(), 200u);
  while (parser.get().body().find("data:") == std::string::npos) http::read_some(stream, buffer, parser);

  const auto refused = http_request(gateway.port(), "POST", kCompletions, small.dump());
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_EQ(refused.json()["error"]["code"], "overloaded") << refused.body;
  EXPECT_EQ(refused.headers.count("retry-after"), 1u) << "a 503 tells the client when to come back";

  beast::error_code ignored;
  stream.socket().close(ignored);
  const auto left = std::chrono::steady_clock::now();
  HttpResult after;
  while (std::chrono::steady_clock::now() - left < std::chrono::seconds(3)) {
    after = http_request(gateway.port(), "POST", kCompletions, small.dump());
    if (after.status != 503) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polling: nothing to wait on from outside
  }
  EXPECT_EQ(after.status, 200) << "the place did not come back within 3 s of the client leaving: " << after.body;
}

}  // namespace
}  // namespace loom::net::test
