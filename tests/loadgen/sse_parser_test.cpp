// SseParser: events however the bytes are split, line endings, fields other than data, the line limit.
#include "sse_parser.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace loom::loadgen {
namespace {

std::vector<std::string> parse_all(const std::string& text, std::size_t limit = 1024) {
  SseParser parser(limit);
  std::vector<std::string> events;
  EXPECT_TRUE(parser.feed(text, events));
  return events;
}

TEST(SseParser, DataEventsEndAtBlankLines) {
  const auto events = parse_all("data: {\"a\":1}\n\ndata: [DONE]\n\n");
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0], "{\"a\":1}");
  EXPECT_EQ(events[1], "[DONE]");
}

TEST(SseParser, EverySplitOfTheBytesGivesTheSameEvents) {
  const std::string text = "data: one\r\n\r\n: a comment\nevent: x\nid: 3\ndata:two\ndata: lines\n\ndata: three\r\r";
  const std::vector<std::string> expected = {"one", "two\nlines", "three"};
  EXPECT_EQ(parse_all(text), expected);
  for (std::size_t split = 0; split <= text.size(); ++split) {
    SseParser parser(1024);
    std::vector<std::string> events;
    ASSERT_TRUE(parser.feed(text.substr(0, split), events));
    ASSERT_TRUE(parser.feed(text.substr(split), events));
    EXPECT_EQ(events, expected) << "split at " << split;
  }
  SseParser bytewise(1024);
  std::vector<std::string> events;
  for (const char byte : text) ASSERT_TRUE(bytewise.feed(std::string(1, byte), events));
  EXPECT_EQ(events, expected);
}

TEST(SseParser, AnUnfinishedEventIsHeldNotDelivered) {
  SseParser parser(1024);
  std::vector<std::string> events;
  ASSERT_TRUE(parser.feed("data: partial\n", events));
  EXPECT_TRUE(events.empty());
  EXPECT_TRUE(parser.has_partial_event());
  ASSERT_TRUE(parser.feed("\n", events));
  EXPECT_EQ(events, std::vector<std::string>{"partial"});
  EXPECT_FALSE(parser.has_partial_event());
}

TEST(SseParser, EventsWithoutDataAreSkipped) {
  EXPECT_TRUE(parse_all(": keep-alive\n\nevent: ping\n\n").empty());
}

TEST(SseParser, ALineOverTheLimitFailsAndStaysFailed) {
  SseParser parser(16);
  std::vector<std::string> events;
  EXPECT_TRUE(parser.feed("data: 0123456789\n\n", events));  // 16 bytes: at the limit
  EXPECT_FALSE(parser.feed("data: 01234567890\n\n", events));
  EXPECT_FALSE(parser.feed("data: ok\n\n", events));
  EXPECT_EQ(events.size(), 1u);
}

TEST(SseParser, AnEventOfManyDataLinesIsBoundedToo) {
  SseParser parser(16);
  std::vector<std::string> events;
  EXPECT_FALSE(parser.feed("data: 0123456789\ndata: 0123456789\n\n", events));
  EXPECT_TRUE(events.empty());
}

}  // namespace
}  // namespace loom::loadgen
