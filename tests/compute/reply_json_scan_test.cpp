// The reply parser's JSON scanners (compute/src/text/reply_scan.hpp, white-box): scan_json_value() on valid,
// cut-off and invalid texts, and the resumable JsonCursor giving exactly its verdicts on every prefix of
// every sample and whatever pieces it is fed in, so that the stream parser's memo changes nothing but time.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "text/reply_scan.hpp"

namespace loom::compute::reply_detail {
namespace {

const std::vector<std::string>& samples() {
  static const std::vector<std::string> s = {
      R"({"a": [1, -0.5e+3, 2E9, 0, true, false, null, "x\"\\\/\b\f\n\r\t\u00e9"], "b": {}, "c": []})",
      R"([ 1 , [ [ ] ] , { "k" : { } } ])", R"("São 🌧")", "-12.5e-3", "0", "true", "nul", "{\"a\":1}x",
      R"({"a" 1})", R"({"a":})", R"({,})", R"([1,])", R"({"a":1,})", "01", "-", "1.", "1e", "1e+", ".5", "+1",
      "\"a\nb\"", R"("\x")", R"("\u12G4")", R"({"a":1}})", "[}", "{]", "  1", "{\"a\": tru}", R"({"a": [1 2]})",
      R"({"key": "va)", R"({"a": {"b": {"c": [1, 2, {"d": "e"}]}}})", std::string(129, '[') + std::string(129, ']'),
      std::string(130, '[') + std::string(130, ']'), "{\n  \"a\" :\t1\r\n}", R"(["\ud800"])", "[1]]", "nulll",
  };
  return s;
}

TEST(ReplyJsonScan, VerdictsOnSamples) {
  EXPECT_EQ(scan_json_value(R"({"a": [1, 2]} tail)", 0).status, Scan::complete);
  EXPECT_EQ(scan_json_value(R"({"a": [1, 2]} tail)", 0).end, 13u);
  EXPECT_EQ(scan_json_value(R"({"a": [1, 2)", 0).status, Scan::incomplete);
  EXPECT_EQ(scan_json_value(R"({"a": [1, 2}])", 0).status, Scan::invalid);
  EXPECT_EQ(scan_json_value("12", 0).status, Scan::incomplete) << "a number at the end could go on";
  EXPECT_EQ(scan_json_value("12 ", 0).end, 2u);
  EXPECT_EQ(scan_json_value(" 1", 0).status, Scan::invalid) << "no space before the value";
  EXPECT_EQ(scan_json_value(std::string(129, '[') + std::string(129, ']'), 0).status, Scan::complete);
  EXPECT_EQ(scan_json_value(std::string(130, '[') + std::string(130, ']'), 0).status, Scan::invalid);
}

void expect_same(const JsonScan& want, const JsonScan& got, const std::string& text, const std::string& how) {
  ASSERT_EQ(got.status, want.status) << how << " on [" << text << "]";
  if (want.status != Scan::invalid) {
    ASSERT_EQ(got.end, want.end) << how << " on [" << text << "]";
  }
}

TEST(ReplyJsonScan, CursorMatchesOnEveryPrefixFedInAnyPieces) {
  std::mt19937 rng(7);
  for (const auto& text : samples()) {
    for (std::size_t begin : {std::size_t{0}, std::size_t{3}}) {
      const std::string padded = std::string(begin, 'x') + text;
      JsonCursor byte_by_byte(begin);
      for (std::size_t n = begin; n <= padded.size(); ++n) {
        const std::string_view prefix = std::string_view(padded).substr(0, n);
        const JsonScan want = scan_json_value(prefix, begin);
        JsonCursor fresh(begin);
        expect_same(want, fresh.scan(prefix), padded, "fresh, prefix " + std::to_string(n));
        // Fed prefix after prefix: a decided verdict stays, as it does for the longer prefixes.
        expect_same(want, byte_by_byte.scan(prefix), padded, "resumed, prefix " + std::to_string(n));
        if (HasFatalFailure()) return;
      }
      for (int round = 0; round < 20; ++round) {  // random pieces, verdict at the end
        JsonCursor cursor(begin);
        JsonScan last{Scan::incomplete, 0};
        for (std::size_t n = begin; n < padded.size() && last.status == Scan::incomplete;) {
          n = std::min(padded.size(), n + 1 + rng() % 9);
          last = cursor.scan(std::string_view(padded).substr(0, n));
        }
        const JsonScan want = scan_json_value(padded, begin);
        if (padded.size() > begin) expect_same(want, last, padded, "random pieces");
      }
    }
  }
}

TEST(ReplyJsonScan, MemoRemembersCompleteValuesAndResumesTheOpenOne) {
  JsonMemo memo;
  const std::string text = R"({"a": 1} {"b": [1, 2, 3]})";
  EXPECT_EQ(memo.scan(std::string_view(text).substr(0, 5), 0).status, Scan::incomplete);
  EXPECT_EQ(memo.scan(text, 0).end, 8u);
  EXPECT_EQ(memo.scan(std::string_view(text).substr(0, 15), 9).status, Scan::incomplete);
  EXPECT_EQ(memo.scan(text, 0).end, 8u);  // remembered
  EXPECT_EQ(memo.scan(text, 9).end, text.size());
  memo.clear();
  EXPECT_EQ(memo.scan("[1", 0).status, Scan::incomplete);
}

}  // namespace
}  // namespace loom::compute::reply_detail
