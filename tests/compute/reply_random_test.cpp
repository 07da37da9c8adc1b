// Random replies for the reply parser: texts glued from fragments that matter to some family (markers,
// pieces of call JSON, partial markers, escapes, lone surrogates, bytes that are not UTF-8, plain words),
// fed whole, in random pieces and byte by byte. Whatever the text, parsing never throws, every delta is well
// formed and result() equals the deltas; and the stream gives the whole-text result exactly unless it
// announced a call the whole-text parse does not have (the one documented divergence, reply_parser.hpp).
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "loom/compute/text/reply_parser.hpp"
#include "reply_test_support.hpp"

namespace loom::compute {
namespace {

using F = ToolCallFormat;

const std::vector<std::string>& fragments() {
  static const std::vector<std::string> f = {
      "<tool_call>", "</tool_call>", "<tool_", "<think>", "</think>", "</thi", "<|python_tag|>", "<|python_start|>",
      "<|python_end|>", "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "<|START_ACTION|>", "<|END_ACTION|>",
      "<|START_THINKING|>", "<|END_THINKING|>", "<function=", "</function>", ">", "<｜tool▁calls▁begin｜>",
      "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>", "<｜tool",
      "<|tool_call|>", "<|channel|>", "analysis", "commentary to=functions.f", "final", "<|message|>", "<|end|>",
      "<|call|>", "<|return|>", "<|start|>assistant", " <|constrain|>json", "function", "get_weather", "\n```json\n",
      "\n```", "{\"name\": \"f\", \"arguments\": ", "{\"name\": \"f\", \"parameters\": ", "{\"tool_call_id\": \"0\", \"tool_name\": \"f\", \"parameters\": ",
      "{\"a\": 1}", "{}", "{", "}", "[", "]", ", ", ":", "\"", "\\", "\"\\ud800\"", "\"x\\u00e9\"", "\xff", "é", "🌧",
      "1.5e3", "true", "nul", " ", "\n", "hello", "<", "<|",
  };
  return f;
}

// Whole calls of each family, a third of the fragments drawn, so that calls (and calls broken by what
// follows them) are common.
const std::vector<std::string>& whole_calls() {
  static const std::vector<std::string> f = {
      "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": [1]}}</tool_call>", "<function=g>{\"b\": \"}\"}</function>",
      "[TOOL_CALLS]f[ARGS]{\"a\": 1}", "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}]", "<|tool_call|>[{\"name\": \"f\", \"arguments\": {}}]",
      "<|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": \"f\", \"parameters\": {}}]<|END_ACTION|>",
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
      "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": 1}<|call|>", "{\"name\": \"f\", \"parameters\": {}}",
  };
  return f;
}

std::vector<ReplyFormat> formats() {
  std::vector<ReplyFormat> out;
  for (F f : {F::none, F::hermes, F::llama3, F::mistral, F::command_r, F::functionary_v3_1, F::deepseek, F::granite,
              F::gpt_oss}) {
    ReplyFormat r;
    r.tools = f;
    if (f == F::command_r) {
      r.reasoning_open = "<|START_THINKING|>";
      r.reasoning_close = "<|END_THINKING|>";
    } else if (f != F::gpt_oss) {
      r.reasoning_open = "<think>";
      r.reasoning_close = "</think>";
    }
    out.push_back(r);
    r.starts_in_reasoning = !r.reasoning_open.empty();
    if (r.starts_in_reasoning) out.push_back(r);
  }
  return out;
}

std::vector<ReplyDelta> stream(const ReplyFormat& f, const ReplyParseOptions& o, const std::vector<std::string_view>& pieces,
                               ParsedReply& result) {
  ReplyStreamParser parser(f, o);
  std::vector<ReplyDelta> deltas = reply_test::feed_all(parser, pieces);
  result = parser.result();
  return deltas;
}

TEST(ReplyRandom, NeverThrowsAndStreamsAsWholeUnlessACallBrokeAfterAnnouncement) {
  std::mt19937 rng(20261127);
  const auto& frags = fragments();
  const auto& calls = whole_calls();
  std::size_t diverged = 0, runs = 0, with_calls = 0;
  for (const ReplyFormat& format : formats()) {
    for (int sample = 0; sample < 400; ++sample) {
      std::string text;
      const int count = 1 + static_cast<int>(rng() % 14);
      for (int k = 0; k < count; ++k) {
        const auto& from = rng() % 3 == 0 ? calls : frags;
        text += from[rng() % from.size()];
      }
      ReplyParseOptions options;
      options.tools_offered = rng() % 5 != 0;
      options.extract_reasoning = rng() % 4 != 0;
      options.parallel_tool_calls = rng() % 3 != 0;
      reply_test::use_counting_ids(options);
      ParsedReply whole;
      ASSERT_NO_THROW(whole = parse_reply(format, text, options)) << text;
      for (int split = 0; split < 6; ++split) {
        std::vector<std::string_view> pieces;
        for (std::size_t at = 0; at < text.size();) {
          const std::size_t n = split == 0 ? 1 : 1 + rng() % 7;
          pieces.push_back(std::string_view(text).substr(at, n));
          at += n;
        }
        ParsedReply result;
        std::vector<ReplyDelta> deltas;
        ASSERT_NO_THROW(deltas = stream(format, options, pieces, result)) << text;
        std::string problem;
        const ParsedReply assembled = reply_test::assemble(deltas, problem);
        // Input that is not UTF-8 may come out in pieces that are not whole characters; all else must hold.
        if (reply_test::whole_utf8(text) || problem != "a delta cuts a UTF-8 character") {
          ASSERT_EQ(problem, "") << text;
        }
        ASSERT_EQ(result, assembled) << text;
        ++runs;
        with_calls += !whole.tool_calls.empty();
        if (assembled == whole) continue;
        ++diverged;
        ASSERT_NE(assembled.tool_calls, whole.tool_calls)
            << name(format.tools) << " diverged without an extra call: " << text << "\nwhole:  " << show(whole);
      }
    }
  }
  EXPECT_GT(runs, 30000u);
  EXPECT_GT(with_calls, runs / 10);
  std::printf("random replies: %zu runs, %zu with calls, %zu with a call broken after announcement\n", runs,
              with_calls, diverged);
}

}  // namespace
}  // namespace loom::compute
