// Helpers of the reply-parser tests: assembling stream deltas into a ParsedReply while checking that each
// delta is well formed, readable failure output, and deterministic call ids.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "loom/compute/text/reply_parser.hpp"

namespace loom::compute {

inline std::string show(const ParsedReply& r) {
  std::string s = "content=[" + r.content + "] reasoning=[" + r.reasoning + "]";
  for (const auto& c : r.tool_calls) s += " call(" + c.id + "," + c.name + "," + c.arguments + ")";
  return s;
}

// gtest prints a ParsedReply with this (found by argument-dependent lookup).
inline void PrintTo(const ParsedReply& r, std::ostream* os) { *os << show(r); }

namespace reply_test {

// Ids "call_0", "call_1", ... in the order calls are announced. The counter lives in the function object,
// so each parser (which copies its options) counts from 0.
inline void use_counting_ids(ReplyParseOptions& o) {
  o.id_generator = [n = 0](ToolCallFormat) mutable { return "call_" + std::to_string(n++); };
}

// Whether `s` is whole UTF-8 characters (the samples are valid UTF-8, so every piece must be).
inline bool whole_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (std::size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

// The deltas put together as OpenAI's client would; `problem` names the first malformed delta.
inline ParsedReply assemble(const std::vector<ReplyDelta>& deltas, std::string& problem) {
  ParsedReply r;
  auto fail = [&](const std::string& why) { if (problem.empty()) problem = why; };
  for (const auto& d : deltas) {
    if (!whole_utf8(d.content) || !whole_utf8(d.reasoning) || (d.tool_call && !whole_utf8(d.tool_call->arguments))) {
      fail("a delta cuts a UTF-8 character");
    }
    const int kinds = !d.content.empty() + !d.reasoning.empty() + d.tool_call.has_value();
    if (kinds != 1) fail("a delta with " + std::to_string(kinds) + " kinds");
    r.content += d.content;
    r.reasoning += d.reasoning;
    if (!d.tool_call) continue;
    const auto& t = *d.tool_call;
    if (t.id.has_value() != t.name.has_value()) fail("id without name or name without id");
    if (t.id) {
      if (t.index != static_cast<int>(r.tool_calls.size())) fail("new call with index " + std::to_string(t.index));
      r.tool_calls.push_back({*t.id, *t.name, ""});
    }
    if (t.index < 0 || t.index >= static_cast<int>(r.tool_calls.size())) {
      fail("arguments for an unannounced call");
      continue;
    }
    if (t.index + 1 != static_cast<int>(r.tool_calls.size())) fail("arguments for a call that is not the last");
    r.tool_calls[t.index].arguments += t.arguments;
  }
  return r;
}

// Streams `pieces` then finishes; checks the deltas are well formed, assemble into `expected`, and equal
// result().

// Every piece, then the end: all the deltas the parser gave, in order.
inline std::vector<ReplyDelta> feed_all(ReplyStreamParser& parser, const std::vector<std::string_view>& pieces) {
  std::vector<ReplyDelta> deltas;
  for (auto piece : pieces) {
    auto d = parser.feed(piece);
    deltas.insert(deltas.end(), d.begin(), d.end());
  }
  auto d = parser.finish();
  deltas.insert(deltas.end(), d.begin(), d.end());
  return deltas;
}

inline void check_stream(const ReplyFormat& format, const ReplyParseOptions& options,
                         const std::vector<std::string_view>& pieces, const ParsedReply& expected,
                         const std::string& label) {
  ReplyStreamParser parser(format, options);
  const std::vector<ReplyDelta> deltas = feed_all(parser, pieces);
  std::string problem;
  const ParsedReply assembled = assemble(deltas, problem);
  ASSERT_EQ(problem, "") << label;
  ASSERT_EQ(assembled, expected) << label;
  ASSERT_EQ(parser.result(), assembled) << label;
}

// Every split into two pieces, then byte by byte.
inline void check_every_split(const ReplyFormat& format, const ReplyParseOptions& options, std::string_view text,
                              const ParsedReply& expected, const std::string& label) {
  for (std::size_t cut = 0; cut <= text.size(); ++cut) {
    check_stream(format, options, {text.substr(0, cut), text.substr(cut)}, expected,
                 label + " split at " + std::to_string(cut));
    if (::testing::Test::HasFatalFailure()) return;
  }
  std::vector<std::string_view> bytes;
  for (std::size_t i = 0; i < text.size(); ++i) bytes.push_back(text.substr(i, 1));
  check_stream(format, options, bytes, expected, label + " byte by byte");
}

}  // namespace reply_test
}  // namespace loom::compute
