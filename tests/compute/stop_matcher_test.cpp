// StopMatcher: matches inside one push and across several, false starts released, the rule between
// several stops (first completed wins, then the longest), held text returned by finish(), nothing after a
// match, and, against a plain whole-text search written here, the same outcome however the text is split.
#include "loom/compute/text/stop_matcher.hpp"

#include <gtest/gtest.h>

#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace loom::compute {
namespace {

TEST(StopMatcher, MatchInsideOnePush) {
  StopMatcher matcher({"</s>"});
  const auto result = matcher.push("Hello</s>world");
  EXPECT_EQ(result.text, "Hello");
  EXPECT_TRUE(result.stopped);
  EXPECT_EQ(result.stop_index, 0u);
}

TEST(StopMatcher, MatchAcrossPushesHoldsThePossibleStart) {
  StopMatcher matcher({"</s>"});
  auto r = matcher.push("Hel");
  EXPECT_EQ(r.text, "Hel");
  EXPECT_FALSE(r.stopped);
  r = matcher.push("lo<");
  EXPECT_EQ(r.text, "lo");  // "<" could begin "</s>"
  r = matcher.push("/s");
  EXPECT_EQ(r.text, "");
  EXPECT_FALSE(r.stopped);
  r = matcher.push(">tail");
  EXPECT_EQ(r.text, "");
  EXPECT_TRUE(r.stopped);
}

TEST(StopMatcher, MatchAcrossThreePushesWithTextBefore) {
  StopMatcher matcher({"STOP"});
  EXPECT_EQ(matcher.push("go S").text, "go ");
  EXPECT_EQ(matcher.push("T").text, "");
  const auto r = matcher.push("OPped");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "");
}

TEST(StopMatcher, FalseStartIsReleased) {
  StopMatcher matcher({"</s>"});
  EXPECT_EQ(matcher.push("a</").text, "a");
  const auto r = matcher.push("b>");
  EXPECT_EQ(r.text, "</b>");
  EXPECT_FALSE(r.stopped);
  // A false start whose tail begins the stop again keeps only that tail.
  EXPECT_EQ(matcher.push("<<").text, "<");
  EXPECT_EQ(matcher.push("/x").text, "</x");
  EXPECT_EQ(matcher.finish(), "");
}

TEST(StopMatcher, TwoStopsReportWhichOne) {
  StopMatcher matcher({"STOP", "END"});
  const auto r = matcher.push("xxENDyySTOP");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.stop_index, 1u);
  EXPECT_EQ(r.text, "xx");
}

TEST(StopMatcher, TheFirstCompletedStopWins) {
  {  // "ab" is complete before "abc" could be: no waiting for one more byte.
    StopMatcher matcher({"abc", "ab"});
    const auto r = matcher.push("xab");
    EXPECT_TRUE(r.stopped);
    EXPECT_EQ(r.stop_index, 1u);
    EXPECT_EQ(r.text, "x");
  }
  {  // "b" ends before "abc" does, though "abc" starts earlier.
    StopMatcher matcher({"abc", "b"});
    const auto r = matcher.push("xabc");
    EXPECT_EQ(r.stop_index, 1u);
    EXPECT_EQ(r.text, "xa");
  }
  {  // Both end at the same byte: the longer one, so less text is shown.
    StopMatcher matcher({"bc", "abc"});
    const auto r = matcher.push("xabc");
    EXPECT_EQ(r.stop_index, 1u);
    EXPECT_EQ(r.text, "x");
  }
  {  // Equal stop strings: the first in the list.
    StopMatcher matcher({"q", "end", "end"});
    EXPECT_EQ(matcher.push("the end").stop_index, 1u);
  }
}

TEST(StopMatcher, AHeldPrefixOfTheLongerStopIsReleasedWhenItFails) {
  StopMatcher matcher({"abc", "abd"});
  EXPECT_EQ(matcher.push("zab").text, "z");
  const auto r = matcher.push("e");
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(r.text, "abe");
}

TEST(StopMatcher, FinishReturnsTheHeldText) {
  StopMatcher matcher({"</s>"});
  EXPECT_FALSE(matcher.holding());
  EXPECT_EQ(matcher.push("ok </").text, "ok ");
  EXPECT_TRUE(matcher.holding());
  EXPECT_EQ(matcher.finish(), "</");
  EXPECT_FALSE(matcher.holding());
  EXPECT_EQ(matcher.finish(), "");
}

TEST(StopMatcher, NothingAfterAMatch) {
  StopMatcher matcher({"END", "</"});
  const auto first = matcher.push("doneEND and </");
  ASSERT_TRUE(first.stopped);
  EXPECT_EQ(first.text, "done");
  const auto later = matcher.push("more text");
  EXPECT_EQ(later.text, "");
  EXPECT_TRUE(later.stopped);
  EXPECT_EQ(later.stop_index, 0u);
  EXPECT_TRUE(matcher.stopped());
  EXPECT_EQ(matcher.finish(), "");
}

TEST(StopMatcher, MultiByteStopStringsMatchByteByByte) {
  const std::string full_stop = "\xE3\x80\x82";  // U+3002 IDEOGRAPHIC FULL STOP
  const std::string good = "\xE5\xA5\xBD";       // U+597D
  StopMatcher matcher({full_stop});
  // The first byte of the stop is held back; the whole character before it is released.
  EXPECT_EQ(matcher.push(good + full_stop.substr(0, 1)).text, good);
  EXPECT_EQ(matcher.push(full_stop.substr(1, 1)).text, "");
  const auto r = matcher.push(full_stop.substr(2) + "tail");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "");
}

TEST(StopMatcher, EmptyStopStringIsRefusedNoStopsPassEverything) {
  EXPECT_THROW(StopMatcher({"ok", ""}), std::invalid_argument);
  StopMatcher none({});
  const auto r = none.push("anything </s> at all");
  EXPECT_EQ(r.text, "anything </s> at all");
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(none.finish(), "");
}

// The rule applied to the whole text at once: the smallest end position with a match, then the longest
// stop ending there, then the first in the list.
struct Outcome {
  std::string text;
  bool stopped = false;
  std::size_t stop_index = 0;
  bool operator==(const Outcome&) const = default;
};

Outcome reference_outcome(const std::string& text, const std::vector<std::string>& stops) {
  for (std::size_t end = 1; end <= text.size(); ++end) {
    bool found = false;
    std::size_t best = 0;
    for (std::size_t i = 0; i < stops.size(); ++i) {
      const std::string& stop = stops[i];
      if (stop.size() > end || text.compare(end - stop.size(), stop.size(), stop) != 0) continue;
      if (!found || stop.size() > stops[best].size()) best = i;
      found = true;
    }
    if (found) return {text.substr(0, end - stops[best].size()), true, best};
  }
  return {text, false, 0};
}

TEST(StopMatcher, AnySplitGivesTheWholeTextOutcome) {
  // Small alphabets make overlapping stops and partial matches common.
  std::mt19937 rng(2024);
  const auto random_string = [&](std::size_t min_length, std::size_t max_length) {
    std::uniform_int_distribution<std::size_t> length(min_length, max_length);
    std::uniform_int_distribution<int> letter(0, 2);
    std::string s(length(rng), 'a');
    for (char& c : s) c = static_cast<char>('a' + letter(rng));
    return s;
  };
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<std::string> stops;
    const int stop_count = 1 + trial % 3;
    for (int i = 0; i < stop_count; ++i) stops.push_back(random_string(1, 5));
    const std::string text = random_string(0, 24);
    const Outcome expected = reference_outcome(text, stops);

    StopMatcher matcher(stops);
    Outcome got;
    std::size_t at = 0;
    std::uniform_int_distribution<std::size_t> piece(0, 4);
    while (at < text.size() && !got.stopped) {
      const std::size_t length = std::min(piece(rng), text.size() - at);
      const auto r = matcher.push(std::string_view(text).substr(at, length));
      at += length;
      got.text += r.text;
      got.stopped = r.stopped;
      got.stop_index = r.stop_index;
    }
    if (!got.stopped) got.text += matcher.finish();
    ASSERT_EQ(got, expected) << "text '" << text << "', stops[0] '" << stops[0] << "'";
  }
}

}  // namespace
}  // namespace loom::compute
