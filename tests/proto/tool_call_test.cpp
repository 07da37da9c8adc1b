// Tool calling and reasoning on the wire (issue 22): the tool types round-trip, the new fields of generate,
// messages, token and done events round-trip and are left out at their defaults, the client's key order of
// a tool's parameters (and chat_template_kwargs, and arguments sent as an object) survives, and every rule
// is refused with its path, one table row per rule.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "wire_test_support.hpp"
#include "loom/proto/chat_message.hpp"
#include "loom/proto/client_message.hpp"
#include "loom/proto/done_event.hpp"
#include "loom/proto/generate_request.hpp"
#include "loom/proto/server_message.hpp"
#include "loom/proto/token_event.hpp"
#include "loom/proto/tool_call.hpp"

namespace loom::proto {
namespace {

using wire_test::as_generate;
using wire_test::generate;
using wire_test::through_text;

using nlohmann::json;

const std::string kUser = R"({"role":"user","content":"hi"})";
std::string chat(const std::string& fields) { return generate(R"("messages":[)" + kUser + "]," + fields); }
std::string message(const std::string& fields) { return generate(R"("messages":[{)" + fields + "}]"); }
std::string tool(const std::string& name, const std::string& extra = "") {
  return R"({"type":"function","function":{"name":")" + name + "\"" + extra + "}}";
}
std::string tools(const std::string& items) { return R"("tools":[)" + items + "]"; }
std::string call(const std::string& function, const std::string& extra = "") {
  return R"({"id":"call_1","type":"function","function":)" + function + extra + "}";
}


// ---- The tool types ----

TEST(ToolRoundTrip, ToolCallAndDelta) {
  const ToolCall c{"call_7", "get_weather", R"({"city":"Paris"})"};
  EXPECT_EQ(json(c), json::parse(R"({"id":"call_7","name":"get_weather","arguments":"{\"city\":\"Paris\"}"})"));
  EXPECT_EQ(through_text(c, parse_tool_call), c);

  const ToolCallDelta first{1, "call_7", "get_weather", ""};
  EXPECT_EQ(json(first), json::parse(R"({"index":1,"id":"call_7","name":"get_weather","arguments":""})"));
  EXPECT_EQ(through_text(first, parse_tool_call_delta), first);
  const ToolCallDelta piece{1, std::nullopt, std::nullopt, R"({"ci)"};
  EXPECT_EQ(json(piece), json::parse(R"({"index":1,"arguments":"{\"ci"})"));
  EXPECT_EQ(through_text(piece, parse_tool_call_delta), piece);
}

TEST(ToolRoundTrip, ToolDefinitionIsOpenAisShape) {
  const ToolDefinition full{"get_weather", "The weather in a city", R"({"type":"object"})"};
  EXPECT_EQ(json(full), json::parse(R"({"type":"function","function":{"name":"get_weather",
            "description":"The weather in a city","parameters":{"type":"object"}}})"));
  EXPECT_EQ(through_text(full, parse_tool_definition), full);
  const ToolDefinition bare{"ping", std::nullopt, std::nullopt};
  EXPECT_EQ(json(bare), json::parse(R"({"type":"function","function":{"name":"ping"}})"));
  EXPECT_EQ(through_text(bare, parse_tool_definition), bare);
  // OpenAI's `strict` is accepted and dropped.
  const auto strict = parse_tool_definition(json::parse(R"({"type":"function","function":{"name":"a","strict":true}})"));
  ASSERT_TRUE(strict.ok()) << to_string(strict.error());
  EXPECT_EQ(strict->name, "a");
}

TEST(ToolRoundTrip, EveryToolChoice) {
  EXPECT_EQ(json(ToolChoice{}), "auto");
  EXPECT_EQ(json(ToolChoice{ToolChoice::Mode::none, {}}), "none");
  EXPECT_EQ(json(ToolChoice{ToolChoice::Mode::required, {}}), "required");
  EXPECT_EQ(json(ToolChoice{ToolChoice::Mode::function, "f"}),
            json::parse(R"({"type":"function","function":{"name":"f"}})"));
  for (const ToolChoice& c : {ToolChoice{}, ToolChoice{ToolChoice::Mode::none, {}},
                              ToolChoice{ToolChoice::Mode::required, {}}, ToolChoice{ToolChoice::Mode::function, "f"}}) {
    EXPECT_EQ(through_text(c, parse_tool_choice), c);
  }
}

TEST(ToolNames, OpenAisRule) {
  EXPECT_TRUE(is_valid_tool_name("get_weather"));
  EXPECT_TRUE(is_valid_tool_name("a.b-c_D9"));
  EXPECT_TRUE(is_valid_tool_name(std::string(64, 'x')));
  EXPECT_FALSE(is_valid_tool_name(""));
  EXPECT_FALSE(is_valid_tool_name(std::string(65, 'x')));
  EXPECT_FALSE(is_valid_tool_name("get weather"));
  EXPECT_FALSE(is_valid_tool_name("wetter_für"));
}

TEST(ReasoningFormats, WireNames) {
  EXPECT_EQ(to_string(ReasoningFormat::auto_), "auto");
  EXPECT_EQ(to_string(ReasoningFormat::none), "none");
  EXPECT_EQ(parse_reasoning_format("auto"), ReasoningFormat::auto_);
  EXPECT_EQ(parse_reasoning_format("deepseek"), ReasoningFormat::auto_);  // llama.cpp's name
  EXPECT_EQ(parse_reasoning_format("none"), ReasoningFormat::none);
  EXPECT_EQ(parse_reasoning_format("None"), std::nullopt);
}

// ---- Messages ----

TEST(ToolRoundTrip, ChatMessagesWithTheNewFields) {
  ChatMessage assistant;
  assistant.role = ChatRole::assistant;
  assistant.content_null = true;
  assistant.tool_calls = {{"call_1", "get_weather", R"({"city":"Paris"})"}, {"", "ping", "{}"}};
  assistant.reasoning_content = "The user wants the weather.";
  assistant.name = "bot";
  const json j = assistant;
  EXPECT_TRUE(j.at("content").is_null());
  EXPECT_EQ(j.at("tool_calls"), json::parse(R"([
      {"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
      {"type":"function","function":{"name":"ping","arguments":"{}"}}])"));
  EXPECT_EQ(through_text(assistant, parse_chat_message), assistant);

  ChatMessage result;
  result.role = ChatRole::tool;
  result.content = R"({"temperature":21})";
  result.tool_call_id = "call_1";
  result.name = "get_weather";
  EXPECT_EQ(through_text(result, parse_chat_message), result);

  // The old form is written as it was.
  ChatMessage plain;
  plain.content = "hi";
  EXPECT_EQ(json(plain), json::parse(R"({"role":"user","content":"hi"})"));
}

TEST(ToolMessages, AnAssistantMayLeaveContentOutOrNull) {
  for (const char* content : {R"("role":"assistant")", R"("role":"assistant","content":null)"}) {
    const auto parsed = parse_client_message(message(content));
    ASSERT_TRUE(parsed.ok()) << to_string(parsed.error());
    const ChatMessage& m = std::get<std::vector<ChatMessage>>(as_generate(parsed).input)[0];
    EXPECT_TRUE(m.content_null);
    EXPECT_EQ(m.content, "");
  }
  const auto empty = parse_client_message(message(R"("role":"assistant","content":"")"));
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(std::get<std::vector<ChatMessage>>(as_generate(empty).input)[0].content_null);
}

TEST(ToolMessages, ArgumentsAreTakenAsAStringOrAnObjectAndTheIdMayBeLeftOut) {
  const auto parsed = parse_client_message(message(
      R"("role":"assistant","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{\"b\": 1, \"a\": 2}"}},
         {"id":"c2","function":{"name":"g","arguments":{"z":1,"y":{"x":2,"w":3}}}}])"));
  ASSERT_TRUE(parsed.ok()) << to_string(parsed.error());
  const auto& calls = std::get<std::vector<ChatMessage>>(as_generate(parsed).input)[0].tool_calls;
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0], (ToolCall{"", "f", R"({"b": 1, "a": 2})"}));  // a string verbatim
  EXPECT_EQ(calls[1], (ToolCall{"c2", "g", R"({"z":1,"y":{"x":2,"w":3}})"}));  // an object compact, client's order
}

// ---- The generate request ----

GenerateRequest tool_request() {
  GenerateRequest r;
  r.id = "r9";
  ChatMessage user;
  user.content = "Weather in Paris?";
  ChatMessage assistant;
  assistant.role = ChatRole::assistant;
  assistant.content_null = true;
  assistant.tool_calls = {{"call_1", "get_weather", R"({"city":"Paris"})"}};
  ChatMessage result;
  result.role = ChatRole::tool;
  result.content = "21 C";
  result.tool_call_id = "call_1";
  r.input = std::vector<ChatMessage>{user, assistant, result};
  r.tools = {{"get_weather", "The weather", R"({"properties":{"city":{"type":"string"}},"type":"object"})"},
             {"ping", std::nullopt, std::nullopt}};
  r.tool_choice = {ToolChoice::Mode::function, "get_weather"};
  r.parallel_tool_calls = false;
  r.chat_template_kwargs = R"({"enable_thinking":false})";
  r.reasoning_format = ReasoningFormat::none;
  return r;
}

TEST(ToolRoundTrip, GenerateRequestWithEveryToolField) {
  const GenerateRequest r = tool_request();
  EXPECT_EQ(through_text(r, parse_generate_request), r);
  const json j = r;
  EXPECT_EQ(j.at("tool_choice"), json::parse(R"({"type":"function","function":{"name":"get_weather"}})"));
  EXPECT_EQ(j.at("parallel_tool_calls"), false);
  EXPECT_EQ(j.at("chat_template_kwargs"), json::parse(R"({"enable_thinking":false})"));
  EXPECT_EQ(j.at("reasoning_format"), "none");
  EXPECT_FALSE(check_generate_request(r).has_value());
  // And as a whole frame.
  const auto frame = parse_client_message(serialize(ClientMessage{r}));
  ASSERT_TRUE(frame.ok()) << to_string(frame.error());
  EXPECT_EQ(as_generate(frame), r);
}

TEST(ToolDefaults, LeftOutOnTheWireAndTakenWhenAbsent) {
  GenerateRequest r;
  r.id = "r1";
  r.input = std::vector<ChatMessage>{ChatMessage{}};
  const json j = r;
  for (const char* key : {"tools", "tool_choice", "parallel_tool_calls", "chat_template_kwargs", "reasoning_format"}) {
    EXPECT_FALSE(j.contains(key)) << key;
  }
  const auto parsed = parse_client_message(chat(R"("stream":true)"));
  ASSERT_TRUE(parsed.ok()) << to_string(parsed.error());
  const GenerateRequest& g = as_generate(parsed);
  EXPECT_TRUE(g.tools.empty());
  EXPECT_EQ(g.tool_choice, ToolChoice{});
  EXPECT_TRUE(g.parallel_tool_calls);
  EXPECT_FALSE(g.chat_template_kwargs.has_value());
  EXPECT_EQ(g.reasoning_format, ReasoningFormat::auto_);
}

TEST(ToolRequests, ChoicesWithoutToolsThatNeedNone) {
  for (const char* choice : {R"("tool_choice":"auto")", R"("tool_choice":"none")", R"("parallel_tool_calls":false)"}) {
    const auto parsed = parse_client_message(chat(choice));
    EXPECT_TRUE(parsed.ok()) << choice << ": " << (parsed.ok() ? "" : to_string(parsed.error()));
  }
  const auto deepseek = parse_client_message(chat(R"("reasoning_format":"deepseek")"));
  ASSERT_TRUE(deepseek.ok());
  EXPECT_EQ(as_generate(deepseek).reasoning_format, ReasoningFormat::auto_);
}

TEST(ToolKeyOrder, AFramesToolParametersKwargsAndObjectArgumentsKeepTheClientsOrder) {
  const std::string frame = generate(
      R"("messages":[{"role":"user","content":"hi"},
          {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function",
            "function":{"name":"f","arguments":{"zeta":1,"alpha":{"y":1,"b":2}}}}]},
          {"role":"tool","tool_call_id":"c1","content":"ok"}],
        "tools":[{"type":"function","function":{"name":"f","parameters":
          {"type":"object","properties":{"zeta":{"type":"integer"},"alpha":{"type":"object"}},"required":["zeta"]}}}],
        "chat_template_kwargs":{"zz":true,"aa":false})");
  const auto parsed = parse_client_message(frame);
  ASSERT_TRUE(parsed.ok()) << to_string(parsed.error());
  const GenerateRequest& r = as_generate(parsed);
  EXPECT_EQ(*r.tools[0].parameters,
            R"({"type":"object","properties":{"zeta":{"type":"integer"},"alpha":{"type":"object"}},"required":["zeta"]})");
  EXPECT_EQ(*r.chat_template_kwargs, R"({"zz":true,"aa":false})");
  EXPECT_EQ(std::get<std::vector<ChatMessage>>(r.input)[1].tool_calls[0].arguments, R"({"zeta":1,"alpha":{"y":1,"b":2}})");
  // Parsed from a json value (no text to read again), the keys come sorted: the order is the text's.
  const auto from_value = parse_client_message(json::parse(frame));
  ASSERT_TRUE(from_value.ok());
  EXPECT_EQ(*as_generate(from_value).chat_template_kwargs, R"({"aa":false,"zz":true})");
}

TEST(ToolKeyOrder, KeepKeyOrderLeavesATextWithoutACounterpartAlone) {
  GenerateRequest r = tool_request();
  const GenerateRequest before = r;
  keep_key_order(r, nlohmann::ordered_json::object());
  EXPECT_EQ(r, before);
  // A counterpart of another size is a different value: ignored.
  keep_key_order(r, nlohmann::ordered_json::parse(R"({"chat_template_kwargs":{"enable_thinking":true}})"));
  EXPECT_EQ(r, before);
  keep_key_order(r, nlohmann::ordered_json::parse(R"({"chat_template_kwargs":{"enable_thinking":false}})"));
  EXPECT_EQ(r, before);
}

// ---- Events ----

TEST(ToolRoundTrip, TokenEventWithReasoningAndToolCalls) {
  TokenEvent t;
  t.request_id = "r1";
  t.token = 7;
  t.index = 3;
  t.reasoning = "hmm";
  t.tool_calls = {{0, "call_1", "get_weather", "{\"ci"}, {1, std::nullopt, std::nullopt, "ty\"}"}};
  EXPECT_EQ(through_text(t, parse_token_event), t);
  const json j = t;
  EXPECT_EQ(j.at("reasoning"), "hmm");
  EXPECT_EQ(j.at("tool_calls").size(), 2u);
  // Left out when empty: a plain token is written as before.
  TokenEvent plain;
  plain.request_id = "r1";
  plain.text = "a";
  EXPECT_EQ(json(plain), json::parse(R"({"id":"r1","token":0,"text":"a","index":0})"));
}

TEST(ToolRoundTrip, DoneEventWithToolCalls) {
  DoneEvent d;
  d.request_id = "r1";
  d.finish_reason = FinishReason::tool_calls;
  d.tool_calls = {{"call_1", "get_weather", R"({"city":"Paris"})"}, {"call_2", "ping", "{}"}};
  EXPECT_EQ(through_text(d, parse_done_event), d);
  const json j = d;
  EXPECT_EQ(j.at("finish_reason"), "tool_calls");
  EXPECT_EQ(j.at("reason"), "tool_calls");
  EXPECT_EQ(j.at("tool_calls")[0], json::parse(R"({"id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"})"));
  DoneEvent plain;
  plain.request_id = "r1";
  EXPECT_FALSE(json(plain).contains("tool_calls"));
  EXPECT_EQ(parse_finish_reason("tool_calls"), FinishReason::tool_calls);
  EXPECT_EQ(to_string(FinishReason::tool_calls), "tool_calls");
}

TEST(ToolEvents, ServerFramesCarryTheNewFields) {
  const auto token = parse_server_message(
      R"({"type":"token","id":"r1","token":5,"text":"","index":0,"reasoning":"r","tool_calls":[{"index":0,"id":"c","name":"f","arguments":""}]})");
  ASSERT_TRUE(token.ok()) << to_string(token.error());
  const auto done = parse_server_message(
      R"({"type":"done","id":"r1","finish_reason":"tool_calls","usage":{"prompt_tokens":1,"completion_tokens":1,"cached_tokens":0},
          "timings":{"queue_ms":0,"prefill_ms":0,"decode_ms":0,"first_token_ms":0,"tokens_per_second":0},
          "tool_calls":[{"id":"c","name":"f","arguments":"{}"}]})");
  ASSERT_TRUE(done.ok()) << to_string(done.error());
}

// ---- Bounds ----

TEST(ToolLimits, ToolCountIsConfigurable) {
  ParseOptions options;
  options.max_tools = 2;
  const std::string three = chat(tools(tool("a") + "," + tool("b") + "," + tool("c")));
  const auto refused = parse_client_message(three, options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().field, "tools");
  EXPECT_EQ(refused.error().message, "must have at most 2 entries, got 3");
  options.max_tools = 3;
  EXPECT_TRUE(parse_client_message(three, options).ok());
  EXPECT_EQ(ParseOptions{}.max_tools, 128u);
}

TEST(ToolLimits, ParametersAndKwargsAreBoundedByTheConstraintBytes) {
  ParseOptions options;
  options.max_constraint_bytes = 20;
  const std::string params = chat(tools(tool("a", R"(,"parameters":{"type":"object","x":1})")));  // 26 bytes
  const auto refused = parse_client_message(params, options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().field, "tools[0].function.parameters");
  const auto kwargs = parse_client_message(chat(R"("chat_template_kwargs":{"enable_thinking":false})"), options);
  ASSERT_FALSE(kwargs.ok());
  EXPECT_EQ(kwargs.error().field, "chat_template_kwargs");
  options.max_constraint_bytes = 26;
  EXPECT_TRUE(parse_client_message(params, options).ok());
}

TEST(ToolLimits, UnboundedWidensTheToolCount) {
  EXPECT_EQ(ParseOptions::unbounded().max_tools, std::numeric_limits<std::size_t>::max());
}

TEST(ToolChecks, ABuiltRequestIsHeldToTheToolRules) {
  GenerateRequest r = tool_request();
  r.tool_choice.function = "nope";
  auto error = check_generate_request(r);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->field, "tool_choice.function.name");

  r = tool_request();
  r.tools[0].parameters = "not json";
  error = check_generate_request(r);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->field, "tools[0].function.parameters");

  r = tool_request();
  r.chat_template_kwargs = "[1]";
  error = check_generate_request(r);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->field, "chat_template_kwargs");

  r = tool_request();
  r.input = std::string("raw");
  error = check_generate_request(r);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->field, "tools");
}

// ---- Every rule, refused with its path ----

struct ToolMalformedCase {
  std::string name;
  std::string frame;
  std::string field;
  std::string message;
};

void PrintTo(const ToolMalformedCase& c, std::ostream* os) { *os << c.name; }

std::vector<ToolMalformedCase> tool_malformed_cases() {
  std::string many_tools;
  for (int i = 0; i < 129; ++i) {
    if (i) many_tools += ',';
    many_tools += tool(std::string(1, 't') + std::to_string(i));
  }
  std::string many_calls;
  for (int i = 0; i < 129; ++i) many_calls += std::string(i ? "," : "") + call(R"({"name":"f","arguments":"{}"})");
  const std::string big(600 * 1024, 'd');
  const std::string f = R"({"name":"f","arguments":"{}"})";
  return {
      // tools
      {"ToolsWithPrompt", generate(R"("prompt":"hi",)" + tools(tool("a"))), "tools", "may only be given with messages"},
      {"ToolsNotAnArray", chat(R"("tools":{})"), "tools", "must be an array, got an object"},
      {"ToolsTooMany", chat(tools(many_tools)), "tools", "must have at most 128 entries, got 129"},
      {"ToolNotAnObject", chat(tools("1")), "tools[0]", "must be a JSON object, got 1"},
      {"ToolTypeMissing", chat(tools(R"({"function":{"name":"a"}})")), "tools[0].type", "is required"},
      {"ToolTypeNotFunction", chat(tools(R"({"type":"code_interpreter","function":{"name":"a"}})")), "tools[0].type",
       "must be \"function\""},
      {"ToolOfAnotherKind", chat(tools(R"({"type":"custom","custom":{"name":"a"}})")), "tools[0].type",
       "must be \"function\" (the only kind of tool), got \"custom\""},
      {"ToolFunctionMissing", chat(tools(R"({"type":"function"})")), "tools[0].function", "is required"},
      {"ToolUnknownField", chat(tools(R"({"type":"function","function":{"name":"a"},"x":1})")), "tools[0].x",
       "is not a known field"},
      {"ToolFunctionUnknownField", chat(tools(tool("a", R"(,"parameter":{})"))), "tools[0].function.parameter",
       "is not a known field"},
      {"ToolNameMissing", chat(tools(R"({"type":"function","function":{}})")), "tools[0].function.name", "is required"},
      {"ToolNameEmpty", chat(tools(tool(""))), "tools[0].function.name", "must be 1 to 64 characters"},
      {"ToolNameBadCharacter", chat(tools(tool("get weather"))), "tools[0].function.name",
       "must be 1 to 64 characters, each a letter, a digit, '_', '-' or '.', got \"get weather\""},
      {"ToolNameTooLong", chat(tools(tool(std::string(65, 'n')))), "tools[0].function.name", "must be 1 to 64"},
      {"ToolNameDuplicate", chat(tools(tool("a") + "," + tool("b") + "," + tool("a"))), "tools[2].function.name",
       "must be unique, got \"a\" again (first at tools[0])"},
      {"ToolDescriptionNotAString", chat(tools(tool("a", R"(,"description":1)"))), "tools[0].function.description",
       "must be a string, got 1"},
      {"ToolParametersNotAnObject", chat(tools(tool("a", R"(,"parameters":"{}")"))), "tools[0].function.parameters",
       "must be a JSON object, got \"{}\""},
      {"ToolParametersTooLong",
       chat(tools(tool("a", R"(,"parameters":{"x":")" + std::string(256 * 1024, 'x') + "\"}"))),
       "tools[0].function.parameters", "must be at most 262144 bytes"},
      {"ToolStrictNotABool", chat(tools(tool("a", R"(,"strict":"yes")"))), "tools[0].function.strict",
       "must be true or false"},
      {"ToolsTotalTooLong",
       chat(tools(tool("a", R"(,"description":")" + big + "\"") + "," + tool("b", R"(,"description":")" + big + "\""))),
       "tools", "must have at most 1048576 bytes of names, descriptions and parameters in total, got 1228802"},
      // tool_choice
      {"ToolChoiceUnknownString", chat(R"("tool_choice":"any")"), "tool_choice",
       R"(must be "auto", "none", "required" or {"type": "function", "function": {"name": ...}}, got "any")"},
      {"ToolChoiceNotAStringOrObject", chat(R"("tool_choice":1)"), "tool_choice", "got 1"},
      {"ToolChoiceRequiredWithoutTools", chat(R"("tool_choice":"required")"), "tool_choice",
       "cannot be \"required\" without tools"},
      {"ToolChoiceFunctionWithoutTools", chat(R"("tool_choice":{"type":"function","function":{"name":"a"}})"),
       "tool_choice", "cannot be a function without tools"},
      {"ToolChoiceFunctionNotATool",
       chat(tools(tool("a")) + R"(,"tool_choice":{"type":"function","function":{"name":"b"}})"),
       "tool_choice.function.name", "must name one of the tools, got \"b\""},
      {"ToolChoiceTypeNotFunction", chat(tools(tool("a")) + R"(,"tool_choice":{"type":"tool","function":{"name":"a"}})"),
       "tool_choice.type", "must be \"function\""},
      {"ToolChoiceFunctionMissing", chat(tools(tool("a")) + R"(,"tool_choice":{"type":"function"})"),
       "tool_choice.function", "is required"},
      {"ToolChoiceNameMissing", chat(tools(tool("a")) + R"(,"tool_choice":{"type":"function","function":{}})"),
       "tool_choice.function.name", "is required"},
      {"ToolChoiceUnknownField",
       chat(tools(tool("a")) + R"(,"tool_choice":{"type":"function","function":{"name":"a","x":1}})"),
       "tool_choice.function.x", "is not a known field"},
      // parallel_tool_calls, chat_template_kwargs, reasoning_format
      {"ParallelToolCallsNotABool", chat(R"("parallel_tool_calls":"yes")"), "parallel_tool_calls",
       "must be true or false"},
      {"ChatTemplateKwargsNotAnObject", chat(R"("chat_template_kwargs":"{}")"), "chat_template_kwargs",
       "must be a JSON object, got \"{}\""},
      {"ChatTemplateKwargsWithPrompt", generate(R"("prompt":"hi","chat_template_kwargs":{})"), "chat_template_kwargs",
       "may only be given with messages"},
      {"ChatTemplateKwargsTooLong", chat(R"("chat_template_kwargs":{"x":")" + std::string(256 * 1024, 'x') + "\"}"),
       "chat_template_kwargs", "must be at most 262144 bytes"},
      {"ReasoningFormatUnknown", chat(R"("reasoning_format":"think")"), "reasoning_format",
       "must be \"auto\" (or \"deepseek\", the same) or \"none\", got \"think\""},
      {"ReasoningFormatNotAString", chat(R"("reasoning_format":false)"), "reasoning_format",
       "must be a string, got false"},
      // messages
      {"MessageContentNullForUser", message(R"("role":"user","content":null)"), "messages[0].content",
       "is required (only an assistant message may leave it out or null)"},
      {"MessageContentMissingForTool", message(R"("role":"tool","tool_call_id":"c")"), "messages[0].content",
       "is required"},
      {"MessageToolCallsOnUser", message(R"("role":"user","content":"a","tool_calls":[])"), "messages[0].tool_calls",
       "may only be given on an assistant message, got role user"},
      {"MessageToolCallsNotAnArray", message(R"("role":"assistant","tool_calls":{})"), "messages[0].tool_calls",
       "must be an array, got an object"},
      {"MessageToolCallsTooMany", message(R"("role":"assistant","tool_calls":[)" + many_calls + "]"),
       "messages[0].tool_calls", "must have at most 128 entries, got 129"},
      {"MessageToolCallTypeNotFunction",
       message(R"("role":"assistant","tool_calls":[{"type":"tool","function":)" + f + "}]"),
       "messages[0].tool_calls[0].type", "must be \"function\", got \"tool\""},
      {"MessageToolCallFunctionMissing", message(R"("role":"assistant","tool_calls":[{"id":"c"}])"),
       "messages[0].tool_calls[0].function", "is required"},
      {"MessageToolCallUnknownField", message(R"("role":"assistant","tool_calls":[)" + call(f, R"(,"x":1)") + "]"),
       "messages[0].tool_calls[0].x", "is not a known field"},
      {"MessageToolCallNameInvalid",
       message(R"("role":"assistant","tool_calls":[)" + call(R"({"name":"a b","arguments":"{}"})") + "]"),
       "messages[0].tool_calls[0].function.name", "must be 1 to 64 characters"},
      {"MessageToolCallArgumentsMissing", message(R"("role":"assistant","tool_calls":[)" + call(R"({"name":"f"})") + "]"),
       "messages[0].tool_calls[0].function.arguments", "is required"},
      {"MessageToolCallArgumentsANumber",
       message(R"("role":"assistant","tool_calls":[)" + call(R"({"name":"f","arguments":1})") + "]"),
       "messages[0].tool_calls[0].function.arguments",
       "must be the arguments' JSON text (a string) or a JSON object, got 1"},
      {"MessageToolCallIdEmpty",
       message(R"("role":"assistant","tool_calls":[{"id":"","type":"function","function":)" + f + "}]"),
       "messages[0].tool_calls[0].id", "must not be empty"},
      {"MessageToolCallIdOnUser", message(R"("role":"user","content":"a","tool_call_id":"c")"),
       "messages[0].tool_call_id", "may only be given on a tool message, got role user"},
      {"MessageToolCallIdControlCharacter", message(R"("role":"tool","content":"a","tool_call_id":"c\n")"),
       "messages[0].tool_call_id", "must not contain control characters"},
      {"MessageNameEmpty", message(R"("role":"user","content":"a","name":"")"), "messages[0].name", "must not be empty"},
      {"MessageNameTooLong", message(R"("role":"user","content":"a","name":")" + std::string(65, 'n') + "\""),
       "messages[0].name", "must be at most 64 bytes"},
      {"MessageReasoningOnUser", message(R"("role":"user","content":"a","reasoning_content":"r")"),
       "messages[0].reasoning_content", "may only be given on an assistant message, got role user"},
      {"MessageReasoningNotAString", message(R"("role":"assistant","content":"a","reasoning_content":1)"),
       "messages[0].reasoning_content", "must be a string, got 1"},
      {"MessagesTotalCountsReasoning",
       generate(R"("messages":[{"role":"user","content":")" + big + R"("},{"role":"assistant","content":"",
                "reasoning_content":")" + big + R"("}])"),
       "messages", "bytes of content in total, got 1228800"},
      {"MessagesTotalCountsArguments",
       generate(R"("messages":[{"role":"user","content":")" + big + R"("},{"role":"assistant","tool_calls":[)" +
                call(R"({"name":"f","arguments":")" + big + R"("})") + "]}]"),
       "messages", "bytes of content in total, got 1228800"},
  };
}

class MalformedToolFrame : public ::testing::TestWithParam<ToolMalformedCase> {};

TEST_P(MalformedToolFrame, IsRefusedNamingTheFieldAndTheRule) {
  const ToolMalformedCase& c = GetParam();
  const auto parsed = parse_client_message(c.frame);
  ASSERT_FALSE(parsed.ok()) << "accepted: " << c.frame.substr(0, 300);
  EXPECT_EQ(parsed.error().field, c.field) << parsed.error().message;
  EXPECT_NE(parsed.error().message.find(c.message), std::string::npos)
      << "message: " << parsed.error().message << "\nexpected to contain: " << c.message;
  EXPECT_EQ(parsed.error().request_id, "r1");
}

INSTANTIATE_TEST_SUITE_P(Table, MalformedToolFrame, ::testing::ValuesIn(tool_malformed_cases()),
                         [](const ::testing::TestParamInfo<ToolMalformedCase>& param_info) {
                           return param_info.param.name;
                         });

// The rows' bases are valid, so each row is refused for its own reason.
TEST(MalformedToolFrame, TheBaseFramesAreValid) {
  const std::string f = R"({"name":"f","arguments":"{}"})";
  for (const std::string& frame :
       {chat(tools(tool("a") + "," + tool("b", R"(,"description":"d","parameters":{},"strict":true)"))),
        chat(tools(tool("a")) + R"(,"tool_choice":{"type":"function","function":{"name":"a"}})"),
        chat(tools(tool("a")) + R"(,"tool_choice":"required","parallel_tool_calls":false)"),
        chat(R"("chat_template_kwargs":{},"reasoning_format":"none")"),
        message(R"("role":"assistant","content":null,"reasoning_content":"r","name":"n","tool_calls":[)" + call(f) + "]"),
        message(R"("role":"tool","content":"a","tool_call_id":"c","name":"f")")}) {
    const auto parsed = parse_client_message(frame);
    EXPECT_TRUE(parsed.ok()) << frame << "\n" << (parsed.ok() ? "" : to_string(parsed.error()));
  }
}

struct ServerMalformedCase {
  std::string name;
  std::string frame;
  std::string field;
  std::string message;
};

void PrintTo(const ServerMalformedCase& c, std::ostream* os) { *os << c.name; }

std::string token_with(const std::string& fields) {
  return R"({"type":"token","id":"r1","token":5,"text":"","index":0,)" + fields + "}";
}
std::string done_with(const std::string& fields) {
  return R"({"type":"done","id":"r1","finish_reason":"tool_calls","usage":{"prompt_tokens":1,"completion_tokens":1,
             "cached_tokens":0},"timings":{"queue_ms":0,"prefill_ms":0,"decode_ms":0,"first_token_ms":0,
             "tokens_per_second":0},)" +
         fields + "}";
}

class MalformedToolEvent : public ::testing::TestWithParam<ServerMalformedCase> {};

TEST_P(MalformedToolEvent, IsRefusedNamingTheFieldAndTheRule) {
  const ServerMalformedCase& c = GetParam();
  const auto parsed = parse_server_message(c.frame);
  ASSERT_FALSE(parsed.ok()) << "accepted: " << c.frame;
  EXPECT_EQ(parsed.error().field, c.field) << parsed.error().message;
  EXPECT_NE(parsed.error().message.find(c.message), std::string::npos) << parsed.error().message;
}

INSTANTIATE_TEST_SUITE_P(
    Table, MalformedToolEvent,
    ::testing::Values(
        ServerMalformedCase{"ReasoningNotAString", token_with(R"("reasoning":1)"), "reasoning", "must be a string"},
        ServerMalformedCase{"TokenToolCallsNotAnArray", token_with(R"("tool_calls":{})"), "tool_calls",
                            "must be an array"},
        ServerMalformedCase{"DeltaIndexNegative", token_with(R"("tool_calls":[{"index":-1,"arguments":""}])"),
                            "tool_calls[0].index", "must be an integer in [0, 2147483647], got -1"},
        ServerMalformedCase{"DeltaArgumentsMissing", token_with(R"("tool_calls":[{"index":0}])"),
                            "tool_calls[0].arguments", "is required"},
        ServerMalformedCase{"DeltaUnknownField", token_with(R"("tool_calls":[{"index":0,"arguments":"","type":"f"}])"),
                            "tool_calls[0].type", "is not a known field"},
        ServerMalformedCase{"DoneToolCallsNotAnArray", done_with(R"("tool_calls":"x")"), "tool_calls",
                            "must be an array"},
        ServerMalformedCase{"DoneToolCallIdMissing", done_with(R"("tool_calls":[{"name":"f","arguments":"{}"}])"),
                            "tool_calls[0].id", "is required"},
        ServerMalformedCase{"DoneToolCallArgumentsNotAString",
                            done_with(R"("tool_calls":[{"id":"c","name":"f","arguments":{}}])"),
                            "tool_calls[0].arguments", "must be a string"}),
    [](const ::testing::TestParamInfo<ServerMalformedCase>& param_info) { return param_info.param.name; });

}  // namespace
}  // namespace loom::proto
