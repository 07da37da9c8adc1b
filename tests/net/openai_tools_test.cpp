// Tool calling and reasoning on the OpenAI-compatible routes (issue 22), the pure translation: a body's
// tools, tool_choice, parallel_tool_calls, chat_template_kwargs, reasoning_format and tool messages into
// the proto request (each error naming the client's field), and the engine's reasoning and tool calls into
// OpenAI's message and stream chunks, compared with the JSON OpenAI sends.
#include <gtest/gtest.h>

#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "openai_translate.hpp"

namespace loom::net::test {
namespace {

using nlohmann::json;

std::variant<openai::Request, openai::Error> translate(const std::string& body,
                                                       OpenAiRoute route = OpenAiRoute::chat_completions) {
  return openai::translate_request(body, route, "chatcmpl-1", proto::ParseOptions{});
}

openai::Request tools_accepted(const std::string& body, OpenAiRoute route = OpenAiRoute::chat_completions) {
  auto result = translate(body, route);
  if (auto* error = std::get_if<openai::Error>(&result)) {
    ADD_FAILURE() << "refused: " << error->message << "\n" << body;
    return {};
  }
  return std::get<openai::Request>(std::move(result));
}

openai::Error tools_refused(const std::string& body, OpenAiRoute route = OpenAiRoute::chat_completions) {
  auto result = translate(body, route);
  if (auto* error = std::get_if<openai::Error>(&result)) return *error;
  ADD_FAILURE() << "accepted: " << body;
  return {};
}

const std::vector<proto::ChatMessage>& messages_of(const openai::Request& request) {
  static const std::vector<proto::ChatMessage> none;
  const auto* messages = std::get_if<std::vector<proto::ChatMessage>>(&request.generate.input);
  return messages != nullptr ? *messages : none;
}

const std::string kUser = R"({"role":"user","content":"What is the weather in Paris?"})";
const std::string kWeatherTool =
    R"({"type":"function","function":{"name":"get_weather","description":"The weather in a city",)"
    R"("parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["c","f"]}},)"
    R"("required":["city"],"additionalProperties":false},"strict":true}})";

std::string chat(const std::string& fields) { return R"({"model":"m","messages":[)" + kUser + "]," + fields + "}"; }

// ---- The request ----

TEST(OpenAiTools, ToolsAndTheirFieldsReachTheRequestInTheClientsOrder) {
  const auto request = tools_accepted(chat(R"("tools":[)" + kWeatherTool + R"(],"tool_choice":"required",)"
                                     R"("parallel_tool_calls":false,"chat_template_kwargs":{"enable_thinking":false,"a":1},)"
                                     R"("reasoning_format":"none")"));
  const auto& g = request.generate;
  ASSERT_EQ(g.tools.size(), 1u);
  EXPECT_EQ(g.tools[0].name, "get_weather");
  EXPECT_EQ(g.tools[0].description, "The weather in a city");
  // The client's key order, not nlohmann's sorted one.
  EXPECT_EQ(g.tools[0].parameters,
            R"({"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["c","f"]}},)"
            R"("required":["city"],"additionalProperties":false})");
  EXPECT_EQ(g.tool_choice.mode, proto::ToolChoice::Mode::required);
  EXPECT_FALSE(g.parallel_tool_calls);
  EXPECT_EQ(g.chat_template_kwargs, R"({"enable_thinking":false,"a":1})");
  EXPECT_EQ(g.reasoning_format, proto::ReasoningFormat::none);
}

TEST(OpenAiTools, EveryToolChoice) {
  const std::string tools = R"("tools":[)" + kWeatherTool + "],";
  EXPECT_EQ(tools_accepted(chat(tools + R"("tool_choice":"auto")")).generate.tool_choice, proto::ToolChoice{});
  EXPECT_EQ(tools_accepted(chat(tools + R"("tool_choice":"none")")).generate.tool_choice.mode, proto::ToolChoice::Mode::none);
  EXPECT_EQ(tools_accepted(chat(tools + R"("tool_choice":{"type":"function","function":{"name":"get_weather"}})")).generate.tool_choice,
            (proto::ToolChoice{proto::ToolChoice::Mode::function, "get_weather"}));
  // Without tools: defaults, and "none" is harmless.
  const auto plain = tools_accepted(chat(R"("tool_choice":"none","tools":[])"));
  EXPECT_TRUE(plain.generate.tools.empty());
  EXPECT_TRUE(plain.generate.parallel_tool_calls);
  EXPECT_EQ(plain.generate.reasoning_format, proto::ReasoningFormat::auto_);
  EXPECT_EQ(tools_accepted(chat(R"("reasoning_format":"deepseek")")).generate.reasoning_format, proto::ReasoningFormat::auto_);
}

TEST(OpenAiTools, AToolConversationBecomesProtoMessages) {
  const std::string body = R"({"messages":[)" + kUser + R"(,
      {"role":"assistant","content":null,"refusal":null,"annotations":[],"audio":null,"function_call":null,
       "reasoning_content":"Paris, so get_weather.",
       "tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
                     {"id":"call_2","type":"function","function":{"name":"get_weather","arguments":{"zeta":1,"alpha":2}}}]},
      {"role":"tool","tool_call_id":"call_1","name":"get_weather","content":"21 C"},
      {"role":"tool","tool_call_id":"call_2","content":[{"type":"text","text":"19 C"}]},
      {"role":"assistant","tool_calls":[]},
      {"role":"user","name":"ann","content":"Thanks"}],
    "tools":[)" + kWeatherTool + "]}";
  const auto request = tools_accepted(body);
  const auto& m = messages_of(request);
  ASSERT_EQ(m.size(), 6u);
  EXPECT_EQ(m[1].role, proto::ChatRole::assistant);
  EXPECT_TRUE(m[1].content_null);
  EXPECT_EQ(m[1].content, "");
  EXPECT_EQ(m[1].reasoning_content, "Paris, so get_weather.");
  ASSERT_EQ(m[1].tool_calls.size(), 2u);
  EXPECT_EQ(m[1].tool_calls[0], (proto::ToolCall{"call_1", "get_weather", R"({"city":"Paris"})"}));
  // Arguments sent as an object: its JSON text, in the client's order.
  EXPECT_EQ(m[1].tool_calls[1], (proto::ToolCall{"call_2", "get_weather", R"({"zeta":1,"alpha":2})"}));
  EXPECT_EQ(m[2].role, proto::ChatRole::tool);
  EXPECT_EQ(m[2].tool_call_id, "call_1");
  EXPECT_EQ(m[2].name, "get_weather");
  EXPECT_EQ(m[2].content, "21 C");
  EXPECT_EQ(m[3].content, "19 C");
  EXPECT_TRUE(m[4].content_null) << "content left out";
  EXPECT_TRUE(m[4].tool_calls.empty());
  EXPECT_EQ(m[5].name, "ann");
  EXPECT_FALSE(m[5].content_null);
}

TEST(OpenAiTools, LegacyFunctionsAreRefusedClearly) {
  auto error = tools_refused(chat(R"("functions":[{"name":"f","parameters":{}}])"));
  EXPECT_EQ(error.status, 400);
  EXPECT_EQ(error.param, "functions");
  EXPECT_EQ(error.code, "unsupported");
  EXPECT_NE(error.message.find("send them as tools"), std::string::npos) << error.message;
  error = tools_refused(chat(R"("function_call":{"name":"f"})"));
  EXPECT_EQ(error.param, "function_call");
  EXPECT_EQ(error.code, "unsupported");
  // What says "no functions" is harmless.
  tools_accepted(chat(R"("functions":[],"function_call":"none")"));
  tools_accepted(chat(R"("function_call":"auto")"));
}

TEST(OpenAiTools, CompletionsRefuseTools) {
  const std::string prompt = R"({"prompt":"hi",)";
  auto error = tools_refused(prompt + R"("tools":[)" + kWeatherTool + "]}", OpenAiRoute::completions);
  EXPECT_EQ(error.status, 400);
  EXPECT_EQ(error.param, "tools");
  EXPECT_EQ(error.code, "unsupported");
  EXPECT_NE(error.message.find("/v1/chat/completions"), std::string::npos) << error.message;
  error = tools_refused(prompt + R"("functions":[{"name":"f"}]})", OpenAiRoute::completions);
  EXPECT_EQ(error.param, "functions");
  tools_accepted(prompt + R"("tools":[]})", OpenAiRoute::completions);
}

TEST(OpenAiTools, RefusalsNameTheClientsField) {
  struct Case {
    std::string body;
    std::string param;
    std::string message;  // a part of the message
  };
  const std::string tools = R"("tools":[)" + kWeatherTool + "],";
  const std::string assistant_call = R"({"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function",)";
  const std::vector<Case> cases = {
      {chat(R"("tools":[{"type":"custom","custom":{"name":"x"}}])"), "tools[0].type", "must be \"function\""},
      {chat(R"("tools":[{"type":"function","function":{"name":"get weather"}}])"), "tools[0].function.name",
       "must be 1 to 64 characters"},
      {chat(R"("tools":[{"type":"function","function":{"name":"f","parameters":[]}}])"), "tools[0].function.parameters",
       "must be a JSON object"},
      {chat(R"("tools":{"type":"function"})"), "tools", "must be an array"},
      {chat(R"("tools":[)" + kWeatherTool + "," + kWeatherTool + "]"), "tools[1].function.name", "must be unique"},
      {chat(R"("tool_choice":"required")"), "tool_choice", "without tools"},
      {chat(tools + R"("tool_choice":{"type":"function","function":{"name":"get_time"}})"), "tool_choice.function.name",
       "must name one of the tools, got \"get_time\""},
      {chat(tools + R"("tool_choice":"sometimes")"), "tool_choice", "must be \"auto\", \"none\", \"required\""},
      {chat(R"("parallel_tool_calls":"yes")"), "parallel_tool_calls", "must be true or false"},
      {chat(R"("chat_template_kwargs":[1])"), "chat_template_kwargs", "must be a JSON object"},
      {chat(R"("reasoning_format":"hidden")"), "reasoning_format", "must be \"auto\""},
      {R"({"messages":[)" + kUser + "," + assistant_call + R"("function":{"name":"f","arguments":5}}]}]})",
       "messages[1].tool_calls[0].function.arguments", "must be the arguments' JSON text"},
      {R"({"messages":[)" + kUser + "," + assistant_call + R"("function":{"arguments":"{}"}}]}]})",
       "messages[1].tool_calls[0].function.name", "is required"},
      {R"({"messages":[)" + kUser + "," + assistant_call + R"("type":"web","function":{"name":"f","arguments":"{}"}}]}]})",
       "messages[1].tool_calls[0].type", "must be \"function\""},
      {R"({"messages":[)" + kUser + R"(,{"role":"assistant","tool_calls":"f"}]})", "messages[1].tool_calls",
       "must be an array"},
      {R"({"messages":[)" + kUser + R"(,{"role":"tool","tool_call_id":"c1"}]})", "messages[1].content",
       "is required (only an assistant message may leave it out or null)"},
      {R"({"messages":[{"role":"user","content":null}]})", "messages[0].content", "is required"},
      {R"({"messages":[{"role":"user","content":"hi","tool_call_id":"c1"}]})", "messages[0].tool_call_id",
       "may only be given on a tool message"},
      {R"({"messages":[{"role":"user","content":"hi","tool_calls":[]}]})", "messages[0].tool_calls",
       "may only be given on an assistant message"},
      {R"({"messages":[{"role":"user","content":"hi","reasoning_content":"r"}]})", "messages[0].reasoning_content",
       "may only be given on an assistant message"},
      {R"({"messages":[{"role":"user","content":"hi","name":""}]})", "messages[0].name", "must not be empty"},
      {R"({"messages":[{"role":"function","name":"f","content":"hi"}]})", "messages[0].role", "must be one of"},
  };
  for (const auto& c : cases) {
    const auto error = tools_refused(c.body);
    EXPECT_EQ(error.status, 400) << c.body;
    EXPECT_EQ(error.type, "invalid_request_error") << c.body;
    EXPECT_EQ(error.param, c.param) << c.body << " -> " << error.message;
    EXPECT_NE(error.message.find(c.message), std::string::npos) << error.message;
    EXPECT_EQ(error.message.rfind(c.param + ": ", 0), 0u) << error.message;
  }
}

TEST(OpenAiTools, AnEngineErrorAboutAToolNamesTheClientsField) {
  const proto::ErrorEvent event{"chatcmpl-1", proto::ErrorCode::invalid_request, "at /properties: ...",
                                "tools[0].function.parameters"};
  const auto error = openai::from_error_event(event, tools_accepted(chat(R"("tools":[)" + kWeatherTool + "]")).client_names);
  EXPECT_EQ(error.param, "tools[0].function.parameters");
}

// ---- The response ----

const openai::ResponseIdentity kChatIdentity{OpenAiRoute::chat_completions, "chatcmpl-9", 1700000000, "tiny"};
const openai::ResponseIdentity kCompletionIdentity{OpenAiRoute::completions, "cmpl-9", 1700000000, "tiny"};
const proto::Usage kUsage{10, 5, 0};

TEST(OpenAiTools, FinishReasonToolCalls) {
  EXPECT_EQ(openai::finish_reason(proto::FinishReason::tool_calls), "tool_calls");
}

TEST(OpenAiTools, AWholeReplyThatOnlyCalledToolsHasNullContent) {
  const std::vector<proto::ToolCall> calls{{"call_1", "get_weather", R"({"city":"Paris"})"},
                                           {"call_2", "get_weather", R"({"city":"Rome"})"}};
  const json object = openai::completion_object(kChatIdentity, "", "tool_calls", kUsage, "", calls);
  EXPECT_EQ(object, json::parse(R"({
    "id": "chatcmpl-9", "object": "chat.completion", "created": 1700000000, "model": "tiny",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": null,
      "message": {"role": "assistant", "content": null, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
        {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Rome\"}"}}]}}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15,
              "prompt_tokens_details": {"cached_tokens": 0}}})"));
}

TEST(OpenAiTools, AWholeReplyCarriesItsReasoningAndContent) {
  const std::vector<proto::ToolCall> calls{{"call_1", "f", "{}"}};
  EXPECT_EQ(openai::completion_object(kChatIdentity, "Let me check.", "tool_calls", kUsage, "Think.", calls)["choices"][0]["message"],
            json::parse(R"({"role":"assistant","content":"Let me check.","reasoning_content":"Think.",
                            "tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]})"));
  EXPECT_EQ(openai::completion_object(kChatIdentity, "42", "stop", kUsage, "Think.")["choices"][0]["message"],
            json::parse(R"({"role":"assistant","content":"42","reasoning_content":"Think."})"));
  // No reasoning, no calls: the message is what it always was, an empty content included.
  EXPECT_EQ(openai::completion_object(kChatIdentity, "", "length", kUsage)["choices"][0]["message"],
            json::parse(R"({"role":"assistant","content":""})"));
}

TEST(OpenAiTools, StreamedToolCallsHaveOpenAisDeltaShape) {
  const json first = openai::tool_calls_chunk(kChatIdentity, {{0, "call_1", "get_weather", ""}});
  EXPECT_EQ(first, json::parse(R"({"id":"chatcmpl-9","object":"chat.completion.chunk","created":1700000000,"model":"tiny",
      "choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function",
      "function":{"name":"get_weather","arguments":""}}]},"finish_reason":null,"logprobs":null}]})"));
  const json later = openai::tool_calls_chunk(kChatIdentity, {{0, std::nullopt, std::nullopt, "{\"city\""}});
  EXPECT_EQ(later["choices"][0]["delta"],
            json::parse(R"({"tool_calls":[{"index":0,"function":{"arguments":"{\"city\""}}]})"));
  const json reasoning = openai::reasoning_chunk(kChatIdentity, "Hmm");
  EXPECT_EQ(reasoning["choices"][0], json::parse(R"({"index":0,"delta":{"reasoning_content":"Hmm"},
                                                     "finish_reason":null,"logprobs":null})"));
  EXPECT_EQ(openai::finish_chunk(kChatIdentity, "tool_calls")["choices"][0],
            json::parse(R"({"index":0,"delta":{},"finish_reason":"tool_calls","logprobs":null})"));
}

TEST(OpenAiTools, ATokenMakesAChunkPerNonEmptyPart) {
  proto::TokenEvent token;
  token.request_id = "chatcmpl-9";
  EXPECT_TRUE(openai::token_chunks(kChatIdentity, token).empty()) << "nothing released, no empty delta";

  token.reasoning = "r";
  token.text = "t";
  token.tool_calls = {{0, "call_1", "f", "{"}};
  const auto chunks = openai::token_chunks(kChatIdentity, token);
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0]["choices"][0]["delta"], json::parse(R"({"reasoning_content":"r"})"));
  EXPECT_EQ(chunks[1]["choices"][0]["delta"], json::parse(R"({"content":"t"})"));
  EXPECT_EQ(chunks[2]["choices"][0]["delta"]["tool_calls"][0]["id"], "call_1");

  token.text.clear();
  token.tool_calls.clear();
  const auto only_reasoning = openai::token_chunks(kChatIdentity, token);
  ASSERT_EQ(only_reasoning.size(), 1u);
  EXPECT_FALSE(only_reasoning[0]["choices"][0]["delta"].contains("content"));

  // Completions carry text only.
  token.text = "t";
  const auto completion = openai::token_chunks(kCompletionIdentity, token);
  ASSERT_EQ(completion.size(), 1u);
  EXPECT_EQ(completion[0]["choices"][0]["text"], "t");
}

TEST(OpenAiTools, DeltasAddUpToTheCalls) {
  std::vector<proto::ToolCall> calls;
  openai::add_tool_call_deltas(calls, {{0, "call_1", "f", ""}});
  openai::add_tool_call_deltas(calls, {{0, std::nullopt, std::nullopt, "{\"a\":"}, {1, "call_2", "g", "{}"}});
  openai::add_tool_call_deltas(calls, {{0, std::nullopt, std::nullopt, "1}"}});
  openai::add_tool_call_deltas(calls, {{5, "call_6", "h", "{}"}, {-1, std::nullopt, std::nullopt, "x"}});  // ignored
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0], (proto::ToolCall{"call_1", "f", R"({"a":1})"}));
  EXPECT_EQ(calls[1], (proto::ToolCall{"call_2", "g", "{}"}));

  // A done event's calls that no delta streamed go out whole.
  const std::vector<proto::ToolCall> done{calls[0], calls[1], {"call_3", "h", "{\"x\":2}"}};
  const auto rest = openai::unstreamed_tool_calls(done, calls.size());
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0], (proto::ToolCallDelta{2, "call_3", "h", "{\"x\":2}"}));
  EXPECT_TRUE(openai::unstreamed_tool_calls(done, 3).empty());
  EXPECT_EQ(openai::tool_calls_chunk(kChatIdentity, rest)["choices"][0]["delta"],
            json::parse(R"({"tool_calls":[{"index":2,"id":"call_3","type":"function",
                            "function":{"name":"h","arguments":"{\"x\":2}"}}]})"));
}

}  // namespace
}  // namespace loom::net::test
