// The streaming property over generated replies: for every family, replies made of (reasoning or not) x
// (content before the calls or not) x (one or two calls) x (argument texts with nesting, escapes, markers of
// other families inside strings and non-ASCII), written in the family's syntax. Each must parse whole into
// exactly those parts, and stream into the same for every split into two pieces and byte by byte.
#include <cctype>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "loom/compute/text/reply_parser.hpp"
#include "reply_test_support.hpp"

namespace loom::compute {
namespace {

using F = ToolCallFormat;
using Call = std::pair<std::string, std::string>;

struct Family {
  const char* label;
  ReplyFormat format;
  // Writes the reply: reasoning ("" for none), content before the calls, the calls.
  std::function<std::string(const std::string&, const std::string&, const std::vector<Call>&)> write;
};

std::string join(const std::vector<Call>& calls, const std::string& sep,
                 const std::function<std::string(const Call&, std::size_t)>& one) {
  std::string out;
  for (std::size_t k = 0; k < calls.size(); ++k) out += (k ? sep : "") + one(calls[k], k);
  return out;
}

std::string think(const std::string& r) { return r.empty() ? "" : "<think>" + r + "</think>\n\n"; }
std::string name_args(const Call& c, std::size_t) {
  return "{\"name\": \"" + c.first + "\", \"arguments\": " + c.second + "}";
}

ReplyFormat fmt(F tools, std::string open = "", std::string close = "", bool starts = false, bool nta = false) {
  ReplyFormat f;
  f.tools = tools;
  f.reasoning_open = std::move(open);
  f.reasoning_close = std::move(close);
  f.starts_in_reasoning = starts;
  f.name_then_args = nta;
  return f;
}

std::vector<Family> families() {
  return {
      {"hermes", fmt(F::hermes, "<think>", "</think>"),
       [](auto& r, auto& before, auto& calls) {
         return think(r) + before + join(calls, "\n", [](auto& c, auto k) { return "<tool_call>\n" + name_args(c, k) + "\n</tool_call>"; });
       }},
      {"llama3", fmt(F::llama3),
       [](auto&, auto& before, auto& calls) {
         auto one = [](const Call& c, std::size_t) { return "{\"name\": \"" + c.first + "\", \"parameters\": " + c.second + "}"; };
         return before.empty() ? join(calls, "\n", one) : before + "<|python_tag|>" + join(calls, " ", one);
       }},
      {"mistral list", fmt(F::mistral),
       [](auto&, auto& before, auto& calls) { return before + "[TOOL_CALLS][" + join(calls, ", ", name_args) + "]"; }},
      {"mistral small", fmt(F::mistral, "", "", false, true),
       [](auto&, auto& before, auto& calls) {
         return before + join(calls, "", [](auto& c, auto k) {
           return "[TOOL_CALLS]" + c.first + (k ? "[CALL_ID]x1y2z3w4v" : "") + "[ARGS]" + c.second;
         });
       }},
      {"command_r", fmt(F::command_r, "<|START_THINKING|>", "<|END_THINKING|>"),
       [](auto& r, auto& before, auto& calls) {
         return (r.empty() ? "" : "<|START_THINKING|>" + r + "<|END_THINKING|>") + before + "<|START_ACTION|>[\n    " +
                join(calls, ",\n    ", [](auto& c, auto k) {
                  return "{\"tool_call_id\": \"" + std::to_string(k) + "\", \"tool_name\": \"" + c.first + "\", \"parameters\": " + c.second + "}";
                }) + "\n]<|END_ACTION|>";
       }},
      {"functionary", fmt(F::functionary_v3_1),
       [](auto&, auto& before, auto& calls) {
         return before + join(calls, "\n", [](auto& c, auto) { return "<function=" + c.first + ">" + c.second + "</function>"; });
       }},
      {"deepseek", fmt(F::deepseek, "<think>", "</think>"),
       [](auto& r, auto& before, auto& calls) {
         return think(r) + before + "<｜tool▁calls▁begin｜>" + join(calls, "\n", [](auto& c, auto) {
           return "<｜tool▁call▁begin｜>function<｜tool▁sep｜>" + c.first + "\n```json\n" + c.second + "\n```<｜tool▁call▁end｜>";
         }) + "<｜tool▁calls▁end｜>";
       }},
      {"deepseek r1", fmt(F::deepseek, "<think>", "</think>", true),
       [](auto& r, auto& before, auto& calls) {
         return r + "</think>\n\n" + before + join(calls, "", [](auto& c, auto) {
           return "<｜tool▁call▁begin｜>function<｜tool▁sep｜>" + c.first + "\n" + c.second + "<｜tool▁call▁end｜>";
         });
       }},
      {"granite", fmt(F::granite, "<think>", "</think>"),
       [](auto& r, auto& before, auto& calls) { return think(r) + before + "<|tool_call|>[" + join(calls, ",", name_args) + "]"; }},
      {"gpt_oss", fmt(F::gpt_oss),
       [](auto& r, auto& before, auto& calls) {
         std::string out;
         if (!r.empty()) out += "<|channel|>analysis<|message|>" + r + "<|end|><|start|>assistant";
         if (!before.empty()) out += "<|channel|>commentary<|message|>" + before + "<|end|><|start|>assistant";
         return out + join(calls, "<|start|>assistant", [](auto& c, auto) {
           return "<|channel|>commentary to=functions." + c.first + " <|constrain|>json<|message|>" + c.second + "<|call|>";
         });
       }},
  };
}

const std::vector<std::string>& argument_texts() {
  static const std::vector<std::string> args = {
      "{}",
      R"({"a": [1, {"b": "x}]"}], "t": true, "n": null, "f": -1.5E+2})",
      R"({"s": "<tool_call></function>[ARGS]<|call|></think>\"\\\u00e9 São 🌧"})",
      "{\n  \"city\" : \"Paris\" ,\n  \"days\" : [ ]\n}",
  };
  return args;
}

TEST(ReplyStreamProperty, GeneratedRepliesOfEveryFamily) {
  std::size_t checked = 0;
  for (const auto& family : families()) {
    const bool has_reasoning = !family.format.reasoning_open.empty() || family.format.tools == F::gpt_oss;
    for (const std::string reasoning : {"", "Let me think <b>why</b> ✓"}) {
      if (!reasoning.empty() && !has_reasoning) continue;
      if (reasoning.empty() && family.format.starts_in_reasoning) continue;
      for (const std::string before : {"", "Sure — checking.\n"}) {
        for (const auto& args : argument_texts()) {
          for (std::size_t count : {1u, 2u}) {
            std::vector<Call> calls{{"get_weather", R"({"city": "Paris"})"}};
            if (count == 2) calls.push_back({"do.it-now_2", args});
            else calls[0].second = args;
            const std::string text = family.write(reasoning, before, calls);
            // Whitespace right before a call is dropped (harmony messages keep their text as written).
            std::string shown = before;
            if (family.format.tools != F::gpt_oss) {
              while (!shown.empty() && std::isspace(static_cast<unsigned char>(shown.back()))) shown.pop_back();
            }
            ParsedReply expected{shown, reasoning, {}};
            for (std::size_t k = 0; k < calls.size(); ++k) {
              expected.tool_calls.push_back({"call_" + std::to_string(k), calls[k].first, calls[k].second});
            }
            ReplyParseOptions options;
            options.tools_offered = true;
            reply_test::use_counting_ids(options);
            const std::string label = std::string(family.label) + ": " + text;
            ASSERT_EQ(parse_reply(family.format, text, options), expected) << label;
            reply_test::check_every_split(family.format, options, text, expected, label);
            if (HasFatalFailure()) return;
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GE(checked, 200u);
}

}  // namespace
}  // namespace loom::compute
