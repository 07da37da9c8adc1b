// Tool-call grammars (tool_call_grammar.hpp): for every family, the grammar compiles, accepts single and
// parallel calls written in the family's syntax, refuses unknown names, arguments the tool's schema refuses,
// a second call when not parallel and a call to another function than only_function; and parse_reply() of
// every accepted text gives back the calls.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "loom/compute/grammar/grammar.hpp"
#include "loom/compute/grammar/grammar_state.hpp"
#include "loom/compute/grammar/json_schema.hpp"
#include "loom/compute/text/reply_parser.hpp"
#include "loom/compute/text/tool_call_grammar.hpp"

namespace loom::compute {
namespace {

using F = ToolCallFormat;
using Call = std::pair<std::string, std::string>;  // name, arguments

const nlohmann::ordered_json& tools() {
  static const auto t = nlohmann::ordered_json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
      "required": ["city"], "additionalProperties": false}}},
    {"type": "function", "function": {"name": "get_time"}}
  ])");
  return t;
}

struct GrammarFamily {
  const char* label;
  ReplyFormat format;
};

std::vector<GrammarFamily> grammar_families() {
  auto f = [](F tools) { ReplyFormat r; r.tools = tools; return r; };
  ReplyFormat small = f(F::mistral);
  small.name_then_args = true;
  ReplyFormat r1 = f(F::deepseek);
  r1.reasoning_open = "<think>";
  r1.reasoning_close = "</think>";
  r1.starts_in_reasoning = true;
  return {{"hermes", f(F::hermes)},         {"llama3", f(F::llama3)},   {"mistral list", f(F::mistral)},
          {"mistral small", small},         {"command_r", f(F::command_r)}, {"functionary", f(F::functionary_v3_1)},
          {"deepseek", f(F::deepseek)},     {"deepseek r1", r1},        {"granite", f(F::granite)},
          {"gpt_oss", f(F::gpt_oss)}};
}

std::string q(const std::string& name) { return "\"" + name + "\""; }

// The calls written exactly as the family's grammar writes them.
std::string write(const ReplyFormat& f, const std::vector<Call>& calls) {
  std::string out = f.starts_in_reasoning ? f.reasoning_close + "\n\n" : "";
  auto each = [&](const std::string& open, const std::string& sep, const std::string& close, auto&& one) {
    out += open;
    for (std::size_t k = 0; k < calls.size(); ++k) out += (k ? sep : "") + one(calls[k], k);
    out += close;
  };
  auto name_args = [](const Call& c, std::size_t) { return "{\"name\": " + q(c.first) + ", \"arguments\": " + c.second + "}"; };
  switch (f.tools) {
    case F::hermes:
      each("", "\n", "", [&](const Call& c, std::size_t k) { return "<tool_call>\n" + name_args(c, k) + "\n</tool_call>"; });
      break;
    case F::llama3:
      each("", "", "", [](const Call& c, std::size_t) { return "{\"name\": " + q(c.first) + ", \"parameters\": " + c.second + "}"; });
      break;
    case F::mistral:
      if (f.name_then_args) each("", "", "", [](const Call& c, std::size_t) { return "[TOOL_CALLS]" + c.first + "[ARGS]" + c.second; });
      else each("[TOOL_CALLS][", ", ", "]", name_args);
      break;
    case F::command_r:
      each("<|START_ACTION|>[\n    ", ",\n    ", "\n]<|END_ACTION|>", [](const Call& c, std::size_t k) {
        return "{\"tool_call_id\": \"" + std::to_string(k) + "\", \"tool_name\": " + q(c.first) + ", \"parameters\": " + c.second + "}";
      });
      break;
    case F::functionary_v3_1:
      each("", "\n", "", [](const Call& c, std::size_t) { return "<function=" + c.first + ">" + c.second + "</function>"; });
      break;
    case F::deepseek:
      each("<｜tool▁calls▁begin｜>", "\n", "<｜tool▁calls▁end｜>", [](const Call& c, std::size_t) {
        return "<｜tool▁call▁begin｜>function<｜tool▁sep｜>" + c.first + "\n```json\n" + c.second + "\n```<｜tool▁call▁end｜>";
      });
      break;
    case F::granite: each("<|tool_call|>[", ", ", "]", name_args); break;
    case F::gpt_oss:
      each("", "<|start|>assistant", "", [](const Call& c, std::size_t) {
        return "<|channel|>commentary to=functions." + c.first + " <|constrain|>json<|message|>" + c.second + "<|call|>";
      });
      break;
    case F::none: break;
  }
  return out;
}

bool accepts(const std::string& gbnf, const std::string& text) {
  grammar::GrammarState state(grammar::parse_gbnf(gbnf));
  return state.accept(text) && state.can_end();
}

const Call kParisCall{"get_weather", R"({"city": "Paris"})"};
const Call kTokyo{"get_weather", R"({"city":"Tokyo","unit":"celsius"})"};
const Call kTimeCall{"get_time", R"({"any": [1, {"x": null}]})"};

TEST(ToolCallGrammar, AcceptsTheFamilysCallsAndParsesThemBack) {
  for (const auto& [label, f] : grammar_families()) {
    const std::string g = tool_call_grammar(f, tools(), std::nullopt, true);
    for (const auto& calls : std::vector<std::vector<Call>>{{kParisCall}, {kTimeCall}, {kParisCall, kTokyo, kTimeCall}}) {
      const std::string text = write(f, calls);
      EXPECT_TRUE(accepts(g, text)) << label << ": " << text << "\n" << g;
      ReplyParseOptions o;
      o.tools_offered = true;
      const ParsedReply r = parse_reply(f, text, o);
      ASSERT_EQ(r.tool_calls.size(), calls.size()) << label << ": " << text;
      for (std::size_t k = 0; k < calls.size(); ++k) {
        EXPECT_EQ(r.tool_calls[k].name, calls[k].first) << label;
        EXPECT_EQ(r.tool_calls[k].arguments, calls[k].second) << label;
      }
      EXPECT_EQ(r.content, "") << label;
    }
  }
}

TEST(ToolCallGrammar, RefusesWrongNamesArgumentsAndCounts) {
  for (const auto& [label, f] : grammar_families()) {
    const std::string g = tool_call_grammar(f, tools(), std::nullopt, false);
    EXPECT_TRUE(accepts(g, write(f, {kParisCall}))) << label;
    EXPECT_FALSE(accepts(g, write(f, {kParisCall, kTokyo}))) << label << ": two calls, not parallel";
    EXPECT_FALSE(accepts(g, write(f, {{"get_wether", R"({"city": "Paris"})"}}))) << label << ": unknown name";
    EXPECT_FALSE(accepts(g, write(f, {{"get_weather", R"({"city": 5})"}}))) << label << ": city not a string";
    EXPECT_FALSE(accepts(g, write(f, {{"get_weather", R"({})"}}))) << label << ": city missing";
    EXPECT_FALSE(accepts(g, write(f, {{"get_weather", R"({"city": "P", "x": 1})"}}))) << label << ": extra key";
    EXPECT_FALSE(accepts(g, write(f, {{"get_time", R"([1])"}}))) << label << ": not an object";
    if (!f.starts_in_reasoning) {  // there, text first is reasoning
      EXPECT_FALSE(accepts(g, "Sure! " + write(f, {kParisCall}))) << label << ": text before the call";
    }
    const std::string only = tool_call_grammar(f, tools(), "get_time", false);
    EXPECT_TRUE(accepts(only, write(f, {kTimeCall}))) << label;
    EXPECT_FALSE(accepts(only, write(f, {kParisCall}))) << label << ": not the only function";
  }
}

// Thinking stays possible before a forced call; nothing else does.
TEST(ToolCallGrammar, ReasoningMayComeFirst) {
  ReplyFormat qwen3;
  qwen3.tools = F::hermes;
  qwen3.reasoning_open = "<think>";
  qwen3.reasoning_close = "</think>";
  const std::string g = tool_call_grammar(qwen3, tools(), std::nullopt, false);
  const std::string call = write(qwen3, {kParisCall});
  const std::string thought = "<think>\nThe user wants <b>weather</b> in </thin Paris. 🌧\n</think>\n\n";
  EXPECT_TRUE(accepts(g, call));
  EXPECT_TRUE(accepts(g, thought + call));
  EXPECT_TRUE(accepts(g, "<think></think>" + call));
  EXPECT_FALSE(accepts(g, "<think>never closed " + call));
  EXPECT_FALSE(accepts(g, "<think>a</think>b</think>" + call)) << "the first close ends the reasoning";
  EXPECT_FALSE(accepts(g, "<think>a</think>Sure! " + call));
  ReplyParseOptions o;
  o.tools_offered = true;
  const ParsedReply r = parse_reply(qwen3, thought + call, o);
  EXPECT_EQ(r.reasoning, "\nThe user wants <b>weather</b> in </thin Paris. 🌧\n");
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.tool_calls.size(), 1u);

  ReplyFormat r1 = qwen3;
  r1.tools = F::deepseek;
  r1.starts_in_reasoning = true;
  const std::string g1 = tool_call_grammar(r1, tools(), std::nullopt, false);
  EXPECT_TRUE(accepts(g1, "Okay, weather.\n" + write(r1, {kParisCall})));
  EXPECT_FALSE(accepts(g1, write(ReplyFormat{F::deepseek, "", "", false, false}, {kParisCall}))) << "reasoning not closed";

  ReplyFormat oss;
  oss.tools = F::gpt_oss;
  const std::string g2 = tool_call_grammar(oss, tools(), std::nullopt, false);
  const std::string analysis = "<|channel|>analysis<|message|>Need <|the weather|>.<|end|><|start|>assistant";
  EXPECT_TRUE(accepts(g2, analysis + write(oss, {kParisCall})));
  EXPECT_FALSE(accepts(g2, "<|channel|>final<|message|>Hi<|end|><|start|>assistant" + write(oss, {kParisCall})));
  const ParsedReply r2 = parse_reply(oss, analysis + write(oss, {kParisCall}), o);
  EXPECT_EQ(r2.reasoning, "Need <|the weather|>.");
  ASSERT_EQ(r2.tool_calls.size(), 1u);
}

// reasoning_format none: the call comes first; a reply that starts inside reasoning closes it at once.
TEST(ToolCallGrammar, WithoutReasoningTheCallComesAtOnce) {
  ReplyFormat qwen3;
  qwen3.tools = F::hermes;
  qwen3.reasoning_open = "<think>";
  qwen3.reasoning_close = "</think>";
  const std::string g = tool_call_grammar(qwen3, tools(), std::nullopt, false, false);
  const std::string call = write(qwen3, {kParisCall});
  EXPECT_TRUE(accepts(g, call));
  EXPECT_FALSE(accepts(g, "<think>x</think>" + call));
  EXPECT_FALSE(accepts(g, "<think></think>" + call));

  ReplyFormat r1 = qwen3;
  r1.tools = F::deepseek;
  r1.starts_in_reasoning = true;
  const std::string g1 = tool_call_grammar(r1, tools(), std::nullopt, false, false);
  const std::string r1_call = write(ReplyFormat{F::deepseek, "", "", false, false}, {kParisCall});
  EXPECT_TRUE(accepts(g1, "</think>\n\n" + r1_call));
  EXPECT_FALSE(accepts(g1, "Okay.</think>" + r1_call)) << "no reasoning text";
  EXPECT_FALSE(accepts(g1, r1_call)) << "the open block must close";

  ReplyFormat oss;
  oss.tools = F::gpt_oss;
  const std::string g2 = tool_call_grammar(oss, tools(), std::nullopt, false, false);
  EXPECT_TRUE(accepts(g2, write(oss, {kParisCall})));
  EXPECT_FALSE(accepts(g2, "<|channel|>analysis<|message|>x<|end|><|start|>assistant" + write(oss, {kParisCall})));
}

TEST(ToolCallGrammar, RefusesWhatCannotBeForced) {
  ReplyFormat none;
  EXPECT_THROW(tool_call_grammar(none, tools(), std::nullopt, false), std::invalid_argument);
  ReplyFormat hermes;
  hermes.tools = F::hermes;
  EXPECT_THROW(tool_call_grammar(hermes, tools(), "nope", false), std::invalid_argument);
  EXPECT_THROW(tool_call_grammar(hermes, nlohmann::ordered_json::array(), std::nullopt, false), std::invalid_argument);
  const auto bad = nlohmann::ordered_json::parse(
      R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "not": {}}}}])");
  EXPECT_THROW(tool_call_grammar(hermes, bad, std::nullopt, false), grammar::SchemaError);
  ReplyFormat functionary;
  functionary.tools = F::functionary_v3_1;
  const auto spaced = nlohmann::ordered_json::parse(R"([{"type": "function", "function": {"name": "a b"}}])");
  EXPECT_THROW(tool_call_grammar(functionary, spaced, std::nullopt, false), std::invalid_argument);
}

// Two tools whose schemas make rules of the same names (root, ws, a property "city") stay apart.
TEST(ToolCallGrammar, ToolsWithTheSameRuleNamesDoNotCollide) {
  const auto two = nlohmann::ordered_json::parse(R"([
    {"type": "function", "function": {"name": "a", "parameters": {"type": "object", "properties": {"city": {"type": "integer"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "b", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
  ])");
  ReplyFormat hermes;
  hermes.tools = F::hermes;
  const std::string g = tool_call_grammar(hermes, two, std::nullopt, false);
  EXPECT_TRUE(accepts(g, write(hermes, {{"a", R"({"city": 1})"}})));
  EXPECT_TRUE(accepts(g, write(hermes, {{"b", R"({"city": "x"})"}})));
  EXPECT_FALSE(accepts(g, write(hermes, {{"a", R"({"city": "x"})"}})));
  EXPECT_FALSE(accepts(g, write(hermes, {{"b", R"({"city": 1})"}})));
}

// A realistic request: a dozen tools with nested schemas compiles under the default limits, for every family.
TEST(ToolCallGrammar, ManyToolsCompileUnderDefaultLimits) {
  nlohmann::ordered_json many = nlohmann::ordered_json::array();
  for (int k = 0; k < 12; ++k) {
    many.push_back(nlohmann::ordered_json::parse(R"({"type": "function", "function": {"name": "tool_)" + std::to_string(k) +
        R"(", "parameters": {"type": "object", "properties": {
          "query": {"type": "string", "minLength": 1},
          "limit": {"type": "integer", "minimum": 1, "maximum": 100},
          "filters": {"type": "array", "items": {"type": "object", "properties": {
            "field": {"type": "string", "enum": ["a", "b", "c"]}, "value": {"type": ["string", "number", "null"]}},
            "required": ["field"]}},
          "when": {"type": "string", "format": "date"}},
          "required": ["query"]}}})"));
  }
  for (const auto& [label, f] : grammar_families()) {
    const std::string g = tool_call_grammar(f, many, std::nullopt, true);
    EXPECT_NO_THROW(grammar::parse_gbnf(g)) << label;
    const Call c{"tool_11", R"({"query": "x", "filters": [{"field": "b", "value": null}], "when": "2024-02-29"})"};
    EXPECT_TRUE(accepts(g, write(f, {c, c}))) << label;
    EXPECT_FALSE(accepts(g, write(f, {{"tool_11", R"({"query": "x", "when": "2023-02-29"})"}}))) << label;
  }
}

}  // namespace
}  // namespace loom::compute
