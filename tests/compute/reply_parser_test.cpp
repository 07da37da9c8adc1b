// Reply parsing (reply_parser.hpp): a table of replies of every family, each with the content, reasoning and
// calls it must parse into as a whole; then the streaming property over the same table: for every split of
// the text into two pieces, and byte by byte, the deltas assemble into exactly the whole-text result and are
// well formed (one kind each; a call's first delta has its id and name). The one documented divergence
// (a call that breaks after it was announced) has its own test.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "loom/compute/text/reply_parser.hpp"
#include "reply_test_support.hpp"

namespace loom::compute {
namespace {

using F = ToolCallFormat;

struct ReplyCase {
  const char* name;
  F format;
  std::string text;
  ParsedReply expected;
  bool tools = true;
  bool extract_reasoning = true;
  bool parallel = true;
  bool starts_in_reasoning = false;
};

ReplyFormat format_of(const ReplyCase& c) {
  ReplyFormat f;
  f.tools = c.format;
  if (c.format == F::command_r) {
    f.reasoning_open = "<|START_THINKING|>";
    f.reasoning_close = "<|END_THINKING|>";
  } else if (c.format != F::gpt_oss && c.format != F::llama3 && c.format != F::mistral) {
    f.reasoning_open = "<think>";
    f.reasoning_close = "</think>";
  }
  f.starts_in_reasoning = c.starts_in_reasoning;
  return f;
}

// Ids "call_0", "call_1", ... in the order calls are announced.
ReplyParseOptions options_of(const ReplyCase& c) {
  ReplyParseOptions o;
  o.tools_offered = c.tools;
  o.extract_reasoning = c.extract_reasoning;
  o.parallel_tool_calls = c.parallel;
  reply_test::use_counting_ids(o);
  return o;
}

ToolCall call(int n, std::string name, std::string args) { return {"call_" + std::to_string(n), name, args}; }
ParsedReply content(std::string text) { return {std::move(text), "", {}}; }

const std::string kWeather = R"({"name": "get_weather", "arguments": {"city": "Paris"}})";
const std::string kTime = R"({"name": "get_time", "arguments": {"zone": "Asia/Tokyo", "fmt": [1, 2.5e3, true, null]}})";
const std::string kTimeArgs = R"({"zone": "Asia/Tokyo", "fmt": [1, 2.5e3, true, null]})";
const std::string kParis = R"({"city": "Paris"})";
const std::string kDsBegin = "<｜tool▁calls▁begin｜>", kDsEnd = "<｜tool▁calls▁end｜>";
std::string ds_call(const std::string& name, const std::string& args) {
  return "<｜tool▁call▁begin｜>function<｜tool▁sep｜>" + name + "\n```json\n" + args + "\n```<｜tool▁call▁end｜>";
}

const std::vector<ReplyCase>& cases() {
  static const std::vector<ReplyCase> table = {
    // hermes
    {"hermes single", F::hermes, "<tool_call>\n" + kWeather + "\n</tool_call>", {"", "", {call(0, "get_weather", kParis)}}},
    {"hermes parallel", F::hermes, "<tool_call>\n" + kWeather + "\n</tool_call>\n<tool_call>\n" + kTime + "\n</tool_call>",
     {"", "", {call(0, "get_weather", kParis), call(1, "get_time", kTimeArgs)}}},
    {"hermes content before", F::hermes, "Let me check é.\n<tool_call>\n" + kWeather + "\n</tool_call>",
     {"Let me check é.", "", {call(0, "get_weather", kParis)}}},
    {"hermes reasoning", F::hermes, "<think>\nThe user wants < weather.\n</think>\n\n<tool_call>\n" + kWeather + "\n</tool_call>",
     {"", "\nThe user wants < weather.\n", {call(0, "get_weather", kParis)}}},
    {"hermes reasoning then answer", F::hermes, "<think>hmm</think>\n\nIt is <b>sunny</b>.", {"It is <b>sunny</b>.", "hmm", {}}},
    {"hermes text after call", F::hermes, "<tool_call>" + kWeather + "</tool_call>\nDone.", {"Done.", "", {call(0, "get_weather", kParis)}}},
    {"hermes string arguments", F::hermes, R"(<tool_call>{"name": "f", "arguments": "{\"a\": [1, \"x\"]}"}</tool_call>)",
     {"", "", {call(0, "f", R"({"a": [1, "x"]})")}}},
    {"hermes keys reversed", F::hermes, R"(<tool_call>{"arguments": {"a": 1}, "name": "f"}</tool_call>)",
     {"", "", {call(0, "f", R"({"a": 1})")}}},
    {"hermes unterminated complete", F::hermes, "<tool_call>\n" + kWeather + "\n", {"", "", {call(0, "get_weather", kParis)}}},
    {"hermes unterminated partial close", F::hermes, "<tool_call>" + kWeather + "</tool_c", {"", "", {call(0, "get_weather", kParis)}}},
    {"hermes name not a string", F::hermes, R"(<tool_call>{"name": get_weather, "arguments": {}}</tool_call>)",
     content(R"(<tool_call>{"name": get_weather, "arguments": {}}</tool_call>)")},
    {"hermes unknown key", F::hermes, R"(Hi <tool_call>{"function": "f", "arguments": {}}</tool_call> bye)",
     content(R"(Hi <tool_call>{"function": "f", "arguments": {}}</tool_call> bye)")},
    {"hermes bad string arguments", F::hermes, R"(<tool_call>{"name": "f", "arguments": "{bad"}</tool_call>)",
     content(R"(<tool_call>{"name": "f", "arguments": "{bad"}</tool_call>)")},
    {"hermes empty name", F::hermes, R"(<tool_call>{"name": "", "arguments": {"a": 1}}</tool_call>)",
     content(R"(<tool_call>{"name": "", "arguments": {"a": 1}}</tool_call>)")},
    {"hermes duplicate name key", F::hermes, R"(<tool_call>{"name": "f", "name": "g", "arguments": {}}</tool_call>)",
     content(R"(<tool_call>{"name": "f", "name": "g", "arguments": {}}</tool_call>)")},
    {"hermes unterminated name", F::hermes, R"(<tool_call>{"name": "get_wea)", content(R"(<tool_call>{"name": "get_wea)")},
    {"hermes bad then good", F::hermes, "<tool_call>oops</tool_call><tool_call>" + kWeather + "</tool_call>",
     {"<tool_call>oops</tool_call>", "", {call(0, "get_weather", kParis)}}},
    {"hermes no tools", F::hermes, "<tool_call>\n" + kWeather + "\n</tool_call>", content("<tool_call>\n" + kWeather + "\n</tool_call>"), false},
    {"hermes reasoning kept", F::hermes, "<think>x</think>\n<tool_call>" + kWeather + "</tool_call>",
     {"<think>x</think>", "", {call(0, "get_weather", kParis)}}, true, false},
    {"hermes not parallel", F::hermes, "<tool_call>" + kWeather + "</tool_call>\n<tool_call>" + kTime + "</tool_call>",
     {"<tool_call>" + kTime + "</tool_call>", "", {call(0, "get_weather", kParis)}}, true, true, false},
    {"hermes marker prefix only", F::hermes, "a <tool_ b <tool_call", content("a <tool_ b <tool_call")},
    // llama3 (3.1 bare JSON, <|python_tag|>, Llama 4's <|python_start|>)
    {"llama3 bare", F::llama3, R"({"name": "get_weather", "parameters": {"city": "Paris"}})", {"", "", {call(0, "get_weather", kParis)}}},
    {"llama3 bare with type", F::llama3, R"( {"type": "function", "name": "get_weather", "parameters": {"city": "Paris"}})",
     {"", "", {call(0, "get_weather", kParis)}}},
    {"llama3 python tag", F::llama3, R"(Checking.<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}})",
     {"Checking.", "", {call(0, "get_weather", kParis)}}},
    {"llama4 parallel", F::llama3,
     R"(<|python_start|>{"name": "get_weather", "parameters": {"city": "Paris"}}<|python_end|>{"name": "get_time", "parameters": {}})",
     {"", "", {call(0, "get_weather", kParis), call(1, "get_time", "{}")}}},
    {"llama4 template shape", F::llama3,
     R"(<|python_start|><|python_end|>{"name": "get_weather", "parameters": {"city": "Paris"}}{"name": "get_time", "parameters": {}})",
     {"", "", {call(0, "get_weather", kParis), call(1, "get_time", "{}")}}},
    {"llama4 text in wrapper", F::llama3,
     R"(<|python_start|>Checking.<|python_end|>{"name": "get_weather", "parameters": {"city": "Paris"}})",
     {"<|python_start|>Checking.", "", {call(0, "get_weather", kParis)}}},
    {"llama3 json answer", F::llama3, R"({"answer": 42})", content(R"({"answer": 42})")},
    {"llama3 missing parameters", F::llama3, R"({"name": "f"} and more)", content(R"({"name": "f"} and more)")},
    {"llama3 brace later", F::llama3, R"(Use {"name": "f", "parameters": {}})", content(R"(Use {"name": "f", "parameters": {}})")},
    {"llama3 no tools", F::llama3, R"({"name": "f", "parameters": {}})", content(R"({"name": "f", "parameters": {}})"), false},
    // mistral
    {"mistral nemo", F::mistral, R"([TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "a1B2c3D4e"}])",
     {"", "", {call(0, "get_weather", kParis)}}},
    {"mistral nemo parallel", F::mistral, "[TOOL_CALLS][" + kWeather + ", " + kTime + "]",
     {"", "", {call(0, "get_weather", kParis), call(1, "get_time", kTimeArgs)}}},
    {"mistral small parallel", F::mistral, R"(Sure.[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_time[ARGS]{})",
     {"Sure.", "", {call(0, "get_weather", kParis), call(1, "get_time", "{}")}}},
    {"mistral call id", F::mistral, R"([TOOL_CALLS]get_weather[CALL_ID]a1B2c3D4e[ARGS]{"city": "Paris"})",
     {"", "", {call(0, "get_weather", kParis)}}},
    {"mistral bad name", F::mistral, R"([TOOL_CALLS]get weather[ARGS]{})", content(R"([TOOL_CALLS]get weather[ARGS]{})")},
    {"mistral no tools", F::mistral, R"([TOOL_CALLS]f[ARGS]{})", content(R"([TOOL_CALLS]f[ARGS]{})"), false},
    // command_r
    {"command_r thinking", F::command_r,
     "<|START_THINKING|>I should call it.<|END_THINKING|><|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}\n]<|END_ACTION|>",
     {"", "I should call it.", {call(0, "get_weather", kParis)}}},
    {"command_r parallel", F::command_r,
     R"(<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "a", "parameters": {}}, {"tool_call_id": "1", "tool_name": "b", "parameters": {"x": "}"}}]<|END_ACTION|>)",
     {"", "", {call(0, "a", "{}"), call(1, "b", R"({"x": "}"})")}}},
    {"command_r wrong keys", F::command_r, R"(<|START_ACTION|>[{"name": "a", "parameters": {}}]<|END_ACTION|>)",
     content(R"(<|START_ACTION|>[{"name": "a", "parameters": {}}]<|END_ACTION|>)")},
    {"command_r content before", F::command_r, R"(Checking.<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "a", "parameters": {}}]<|END_ACTION|>)",
     {"Checking.", "", {call(0, "a", "{}")}}},
    {"command_r no tools", F::command_r, R"(<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "a", "parameters": {}}]<|END_ACTION|>)",
     content(R"(<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "a", "parameters": {}}]<|END_ACTION|>)"), false},
    // functionary v3.1
    {"functionary single", F::functionary_v3_1, R"(<function=get_weather>{"city": "Paris"}</function>)", {"", "", {call(0, "get_weather", kParis)}}},
    {"functionary parallel with text", F::functionary_v3_1, "Two calls:\n<function=get_weather>{\"city\": \"Paris\"}</function>\n<function=get_time>" + kTimeArgs + "</function>",
     {"Two calls:", "", {call(0, "get_weather", kParis), call(1, "get_time", kTimeArgs)}}},
    {"functionary not an object", F::functionary_v3_1, R"(<function=f>[1]</function>)", content(R"(<function=f>[1]</function>)")},
    {"functionary no tools", F::functionary_v3_1, R"(<function=f>{}</function>)", content(R"(<function=f>{}</function>)"), false},
    {"functionary unterminated", F::functionary_v3_1, R"(<function=f>{"a": 1})", {"", "", {call(0, "f", R"({"a": 1})")}}},
    // deepseek (R1: the reply starts inside reasoning)
    {"deepseek r1", F::deepseek, "Let me think.\n</think>\n\n" + kDsBegin + ds_call("get_weather", kParis) + kDsEnd,
     {"", "Let me think.\n", {call(0, "get_weather", kParis)}}, true, true, true, true},
    {"deepseek parallel", F::deepseek, "Calling." + kDsBegin + ds_call("get_weather", kParis) + "\n" + ds_call("get_time", kTimeArgs) + kDsEnd,
     {"Calling.", "", {call(0, "get_weather", kParis), call(1, "get_time", kTimeArgs)}}},
    {"deepseek unclosed reasoning", F::deepseek, "still thinking <｜tool", {"", "still thinking <｜tool", {}}, true, true, true, true},
    {"deepseek not json", F::deepseek, kDsBegin + ds_call("f", "\"oops\"") + kDsEnd, content(kDsBegin + ds_call("f", "\"oops\"") + kDsEnd)},
    {"deepseek lone call", F::deepseek, ds_call("get_weather", kParis), {"", "", {call(0, "get_weather", kParis)}}},
    {"deepseek unclosed list", F::deepseek, kDsBegin + ds_call("get_weather", kParis) + "\n", {"", "", {call(0, "get_weather", kParis)}}},
    {"deepseek no tools", F::deepseek, kDsBegin + ds_call("f", "{}") + kDsEnd, content(kDsBegin + ds_call("f", "{}") + kDsEnd), false},
    // granite
    {"granite single", F::granite, "<|tool_call|>[" + kWeather + "]", {"", "", {call(0, "get_weather", kParis)}}},
    {"granite reasoning parallel", F::granite, "<think>two</think><|tool_call|>[" + kWeather + "," + kTime + "]",
     {"", "two", {call(0, "get_weather", kParis), call(1, "get_time", kTimeArgs)}}},
    {"granite not a list", F::granite, "<|tool_call|>" + kWeather, content("<|tool_call|>" + kWeather)},
    {"granite content before", F::granite, "Calling now. <|tool_call|>[" + kWeather + "]", {"Calling now.", "", {call(0, "get_weather", kParis)}}},
    {"hermes space before a broken call stays", F::hermes, "Hi \n<tool_call>nope</tool_call>",
     content("Hi \n<tool_call>nope</tool_call>")},
    {"granite no tools", F::granite, "<|tool_call|>[" + kWeather + "]", content("<|tool_call|>[" + kWeather + "]"), false},
    {"granite list kept whole when not parallel", F::granite, "<|tool_call|>[" + kWeather + "," + kTime + "]",
     {"", "", {call(0, "get_weather", kParis), call(1, "get_time", kTimeArgs)}}, true, true, false},
    // gpt-oss (harmony)
    {"gpt_oss call", F::gpt_oss,
     R"(<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|>)",
     {"", "Need weather.", {call(0, "get_weather", kParis)}}},
    {"gpt_oss parallel", F::gpt_oss,
     R"(<|channel|>commentary to=functions.a <|constrain|>json<|message|>{}<|call|><|start|>assistant<|channel|>commentary to=functions.b<|message|>{"x": 1}<|call|>)",
     {"", "", {call(0, "a", "{}"), call(1, "b", R"({"x": 1})")}}},
    {"gpt_oss not parallel", F::gpt_oss,
     R"(<|channel|>commentary to=functions.a <|constrain|>json<|message|>{}<|call|><|start|>assistant<|channel|>commentary to=functions.b<|message|>{"x": 1}<|call|>)",
     {R"({"x": 1})", "", {call(0, "a", "{}")}}, true, true, false},
    {"gpt_oss recipient first", F::gpt_oss, R"( to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Paris"}<|call|>)",
     {"", "", {call(0, "get_weather", kParis)}}},
    {"gpt_oss final", F::gpt_oss, "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>It is <sunny>.<|return|>",
     {"It is <sunny>.", "Think.", {}}},
    {"gpt_oss plain", F::gpt_oss, "Hello <|there", content("Hello <|there")},
    {"gpt_oss bad arguments", F::gpt_oss, "<|channel|>commentary to=functions.f <|constrain|>json<|message|>not json<|call|>", content("not json")},
    {"gpt_oss no tools", F::gpt_oss, "<|channel|>commentary to=functions.f<|message|>{}<|call|>", content("{}"), false},
    {"gpt_oss reasoning kept", F::gpt_oss, "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Hi",
     content("Think.Hi"), true, false},
    // non-ASCII text and arguments (the stream never cuts a character)
    {"hermes unicode", F::hermes, "<think>思考中…</think>Voilà 🌧 <tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"São Paulo 🌧\"}}</tool_call>",
     {"Voilà 🌧", "思考中…", {call(0, "get_weather", R"({"city": "São Paulo 🌧"})")}}},
    {"deepseek unicode", F::deepseek, "天气？" + kDsBegin + ds_call("get_weather", R"({"city": "東京"})") + kDsEnd,
     {"天气？", "", {call(0, "get_weather", R"({"city": "東京"})")}}},
    {"gpt_oss unicode", F::gpt_oss, R"(<|channel|>analysis<|message|>Ünïcödé 🤔<|end|><|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{"q": "ça"}<|call|>)",
     {"", "Ünïcödé 🤔", {call(0, "f", R"({"q": "ça"})")}}},
    {"functionary escapes", F::functionary_v3_1, R"(<function=f>{"s": "a\"}</function>\\\u00e9", "n": -0.5e-3}</function>)",
     {"", "", {call(0, "f", R"({"s": "a\"}</function>\\\u00e9", "n": -0.5e-3})")}}},
    // none
    {"none", F::none, "<tool_call>" + kWeather + "</tool_call>", content("<tool_call>" + kWeather + "</tool_call>")},
  };
  return table;
}

void check_stream(const ReplyCase& c, const std::vector<std::string_view>& pieces, const std::string& how) {
  reply_test::check_stream(format_of(c), options_of(c), pieces, c.expected, std::string(c.name) + " " + how);
}

TEST(ReplyParser, WholeTextOfEveryFamily) {
  for (const auto& c : cases()) {
    const ParsedReply got = parse_reply(format_of(c), c.text, options_of(c));
    EXPECT_EQ(got, c.expected) << c.name;
  }
}

TEST(ReplyParser, StreamingEqualsWholeForEveryTwoPieceSplit) {
  for (const auto& c : cases()) {
    const std::string_view text = c.text;
    for (std::size_t cut = 0; cut <= text.size(); ++cut) {
      check_stream(c, {text.substr(0, cut), text.substr(cut)}, "split at " + std::to_string(cut));
    }
  }
}

TEST(ReplyParser, StreamingEqualsWholeByteByByte) {
  for (const auto& c : cases()) {
    std::vector<std::string_view> bytes;
    for (std::size_t i = 0; i < c.text.size(); ++i) bytes.push_back(std::string_view(c.text).substr(i, 1));
    check_stream(c, bytes, "byte by byte");
  }
}

TEST(ReplyParser, StreamingEqualsWholeForThreePieceSplits) {
  for (const auto& c : cases()) {
    const std::string_view text = c.text;
    const std::size_t step = text.size() > 120 ? 3 : 1;  // keeps the suite fast on the longest replies
    for (std::size_t a = 0; a <= text.size(); a += step) {
      for (std::size_t b = a; b <= text.size(); b += step) {
        check_stream(c, {text.substr(0, a), text.substr(a, b - a), text.substr(b)},
                     "split at " + std::to_string(a) + "," + std::to_string(b));
      }
    }
  }
}

// The one case the stream cannot match the whole-text parse: arguments break after the call was announced.
TEST(ReplyParser, CallBrokenAfterAnnouncementKeepsStreamedPartAndGivesTextAsContent) {
  const ReplyCase c{"broken", F::hermes, R"(<tool_call>{"name": "f", "arguments": {"a": 1</tool_call>)", {}};
  EXPECT_EQ(parse_reply(format_of(c), c.text, options_of(c)), content(c.text));
  ReplyStreamParser parser(format_of(c), options_of(c));
  const auto first = parser.feed(R"(<tool_call>{"name": "f", "arguments": {"a": 1)");
  ASSERT_EQ(first.size(), 1u);
  ASSERT_TRUE(first[0].tool_call);
  EXPECT_EQ(first[0].tool_call->name, "f");
  EXPECT_EQ(first[0].tool_call->arguments, R"({"a": 1)");
  parser.feed("</tool_call>");
  parser.finish();
  const ParsedReply r = parser.result();
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].arguments, R"({"a": 1)");
  EXPECT_EQ(r.content, c.text);
}

TEST(ReplyParser, MaxTokensInsideArgumentsIsTheSameDivergence) {
  const ReplyCase c{"cut", F::functionary_v3_1, R"(<function=f>{"a": [1, 2)", {}};
  const ParsedReply whole = parse_reply(format_of(c), c.text, options_of(c));
  EXPECT_EQ(whole, content(c.text));
}

TEST(ReplyParser, ArgumentsStreamBeforeTheCallEnds) {
  const ReplyCase c{"stream", F::hermes, "", {}};
  ReplyStreamParser parser(format_of(c), options_of(c));
  EXPECT_TRUE(parser.feed("<tool_call>\n{\"name\": \"get_").empty());  // name incomplete: nothing yet
  auto d = parser.feed("weather\", \"arguments\": {\"city\": \"Pa");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].tool_call, (ToolCallDelta{0, "call_0", "get_weather", R"({"city": "Pa)"}));
  d = parser.feed("ris\"}}\n</tool_call>");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].tool_call, (ToolCallDelta{0, std::nullopt, std::nullopt, R"(ris"})"}));
}

TEST(ReplyParser, HeldMarkerPrefixIsReleasedWhenItIsNotAMarker) {
  const ReplyCase c{"hold", F::hermes, "", {}};
  ReplyStreamParser parser(format_of(c), options_of(c));
  auto d = parser.feed("Hello <tool");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].content, "Hello") << "the space waits too: before a call it would be dropped";
  d = parser.feed("box>");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].content, " <toolbox>");
}

// A harmony header is at most 512 bytes: a longer one is plain text, decided alike whether the text comes
// whole or in pieces (found by the reply_parser fuzz target: the whole parse read a far-off <|message|>).
TEST(ReplyParser, AnOverlongHarmonyHeaderIsContentWholeOrStreamed) {
  ReplyFormat oss;
  oss.tools = F::gpt_oss;
  ReplyParseOptions options;
  options.tools_offered = true;
  reply_test::use_counting_ids(options);
  for (const std::size_t filler : {500u, 505u, 512u, 600u}) {
    const std::string text = "<|channel|>commentary to=functions.f " + std::string(filler, 'x') + "<|message|>{\"a\": 1}<|call|>";
    const ParsedReply whole = parse_reply(oss, text, options);
    reply_test::check_every_split(oss, options, text, whole, "filler " + std::to_string(filler));
  }
}

TEST(ReplyParser, DefaultIdsFollowOpenAIAndMistralShapes) {
  const std::string openai = random_tool_call_id(F::hermes);
  ASSERT_EQ(openai.size(), 29u);
  EXPECT_EQ(openai.substr(0, 5), "call_");
  const std::string mistral = random_tool_call_id(F::mistral);
  ASSERT_EQ(mistral.size(), 9u);
  for (char ch : openai.substr(5) + mistral) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(ch))) << ch;
  ReplyFormat f;
  f.tools = F::hermes;
  ReplyParseOptions o;
  o.tools_offered = true;
  const ParsedReply r = parse_reply(f, "<tool_call>" + kWeather + "</tool_call>", o);
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].id.size(), 29u);
}

}  // namespace
}  // namespace loom::compute
