// GrammarState: the recognizer accepts exactly the sentences of the grammar, however the bytes are split
// (a UTF-8 character over two tokens included), a refused step leaves the state as it was, and the run-time
// limits turn a runaway grammar into an error.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "grammar_test_grammars.hpp"
#include "loom/compute/grammar/grammar.hpp"
#include "loom/compute/grammar/grammar_state.hpp"

namespace loom::compute::grammar {
namespace {

using testing::matches;

// Whether `text` is a prefix of some sentence (the state stays viable).
bool viable(const std::shared_ptr<const Grammar>& g, const std::string& text) { return GrammarState(g).accept(text); }

TEST(GrammarState, JsonTable) {
  const auto g = parse_gbnf(testing::kJsonGrammar);
  const std::vector<std::string> good = {
      "{}",
      "{ }",
      R"({"a":1})",
      R"({"a": [1, 2.5, -3e10, true, false, null], "b": {"c": "d\n\u00e9\"x"}})",
      "{\n  \"k\": \"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"\n}",
      R"({"n": 0.25E-3})",
      R"({"a": [[], {}, [[1]]]})",
  };
  const std::vector<std::string> bad = {
      "",
      "[]",  // root is an object
      R"({"a":})",
      R"({"a":1,})",
      R"({"a":01})",
      R"({'a':1})",
      R"({"a":"\x"})",
      R"({"a":"\u12G4"})",
      "{\"a\":\"line\nbreak\"}",
      R"({"a":1}})",
      R"({"a":tru})",
      "{\"a\":\"\xc3\"}",  // a broken character
  };
  for (const auto& s : good) EXPECT_TRUE(matches(g, s)) << s;
  for (const auto& s : bad) EXPECT_FALSE(matches(g, s)) << s;
  // Prefixes of a sentence are viable but not complete.
  const std::string doc = R"({"a": [1, {"b": null}], "c": "x"})";
  for (std::size_t n = 0; n < doc.size(); ++n) {
    GrammarState state(g);
    ASSERT_TRUE(state.accept(doc.substr(0, n))) << n;
    EXPECT_FALSE(state.can_end()) << n;
  }
  EXPECT_FALSE(viable(g, R"({"a" 1)"));
  EXPECT_FALSE(viable(g, R"({"a":1]")"));
}

TEST(GrammarState, ArithmeticAndListTables) {
  const auto arithmetic = parse_gbnf(testing::kArithmeticGrammar);
  for (const std::string s : {"1+2= 3\n", "(a*b)/c= x_1\n", "x = y\n1=2\n", "( 1 +(2) ) = 3\n"}) {
    EXPECT_TRUE(matches(arithmetic, s)) << s;
  }
  for (const std::string s : {"1+2=3", "1++2=3\n", "(1=2\n", "A=1\n", "=1\n", ""}) EXPECT_FALSE(matches(arithmetic, s)) << s;

  const auto list = parse_gbnf(testing::kListGrammar);
  EXPECT_TRUE(matches(list, "- one\n"));
  EXPECT_TRUE(matches(list, "- a\n- b\n- c\n- d\n- e\n"));
  EXPECT_FALSE(matches(list, "- a\n- b\n- c\n- d\n- e\n- f\n"));  // {1,5}
  EXPECT_FALSE(matches(list, ""));
  EXPECT_FALSE(matches(list, "- \n"));
  EXPECT_FALSE(matches(list, "* a\n"));
}

TEST(GrammarState, RepetitionBoundsAreExact) {
  for (std::uint32_t min = 0; min <= 4; ++min) {
    for (std::uint32_t max = min; max <= 6; ++max) {
      const auto g = parse_gbnf("root ::= \"<\" (\"ab\"){" + std::to_string(min) + "," + std::to_string(max) + "} \">\"");
      for (std::uint32_t n = 0; n <= 8; ++n) {
        std::string s = "<";
        for (std::uint32_t i = 0; i < n; ++i) s += "ab";
        s += ">";
        EXPECT_EQ(matches(g, s), n >= min && n <= max) << min << "," << max << " n=" << n;
      }
    }
  }
  const auto at_least = parse_gbnf("root ::= [0-9]{3,}");
  EXPECT_FALSE(matches(at_least, "12"));
  EXPECT_TRUE(matches(at_least, "123"));
  EXPECT_TRUE(matches(at_least, std::string(500, '7')));
}

TEST(GrammarState, AnySplitOfTheBytesGivesTheSameAnswer) {
  const auto g = parse_gbnf(testing::kJsonGrammar);
  const std::string doc = "{\"\xc3\xa9t\xc3\xa9\": [\"\xe2\x82\xac\", \"\xf0\x9f\x98\x80\"], \"n\": -1.5}";
  ASSERT_TRUE(matches(g, doc));
  for (std::size_t a = 0; a <= doc.size(); ++a) {
    for (std::size_t b = a; b <= doc.size(); b += 3) {
      GrammarState state(g);
      ASSERT_TRUE(state.accept(doc.substr(0, a))) << a;
      ASSERT_TRUE(state.accept(doc.substr(a, b - a))) << a << " " << b;
      ASSERT_TRUE(state.accept(doc.substr(b))) << b;
      EXPECT_TRUE(state.can_end());
    }
  }
}

// Found by the gbnf_parser fuzz target: the same text, whole or in pieces, left the same set of stacks in
// another order (by the arena's ids), so equal states compared unequal.
TEST(GrammarState, SplitsGiveEqualStates) {
  const auto g = parse_gbnf(R"g(root ::= ("ab" | [^x-zLu00e9]){2,5}*)g");
  const std::string text("\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0?\x05\0\0\0\0\0\0\0\n\0abab.A", 39);
  GrammarState whole(g);
  ASSERT_TRUE(whole.accept(text));
  for (std::size_t piece = 1; piece <= 5; ++piece) {
    GrammarState pieces(g);
    for (std::size_t at = 0; at < text.size(); at += piece) ASSERT_TRUE(pieces.accept(text.substr(at, piece)));
    EXPECT_EQ(pieces, whole) << "pieces of " << piece;
  }
}

TEST(GrammarState, CodePointSplitOverTwoTokens) {
  const auto g = parse_gbnf(R"g(root ::= "€" [α-ω] "!")g");
  GrammarState state(g);
  ASSERT_TRUE(state.accept("\xe2\x82"));  // first two bytes of U+20AC
  EXPECT_EQ(state.partial().needed, 1);
  EXPECT_FALSE(state.can_end());
  const GrammarState held = state;
  EXPECT_FALSE(state.accept("\x83"));  // U+20A3: not the euro
  EXPECT_EQ(state, held);
  EXPECT_FALSE(state.accept("a"));  // not a continuation byte
  ASSERT_TRUE(state.accept("\xac\xce"));  // the euro's last byte and the start of a Greek letter
  EXPECT_FALSE(state.accept("\x91"));     // U+0391 (Alpha) is outside [α-ω]
  ASSERT_TRUE(state.accept("\xb2"));      // U+03B2 beta
  ASSERT_TRUE(state.accept("!"));
  EXPECT_TRUE(state.can_end());

  // A lead byte whose code points no alternative allows is refused at once.
  GrammarState other(g);
  EXPECT_FALSE(other.accept("\xf0"));
  EXPECT_FALSE(other.accept("\xc3"));
  EXPECT_TRUE(other.accept("\xe2"));
  // Invalid UTF-8 is refused even where the class would take any code point.
  const auto any = parse_gbnf("root ::= .*");
  for (const std::string bad : {"\xc0\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\x80", "\xff"}) {
    EXPECT_FALSE(GrammarState(any).accept(bad)) << bad.size();
  }
  EXPECT_TRUE(GrammarState(any).accept("\xf4\x8f\xbf\xbf"));  // U+10FFFF
}

TEST(GrammarState, RefusedBytesLeaveTheStateUnchanged) {
  const auto g = parse_gbnf(testing::kJsonGrammar);
  GrammarState state(g);
  ASSERT_TRUE(state.accept("{\"a\":"));
  const GrammarState before = state;
  EXPECT_FALSE(state.accept(" 1x"));
  EXPECT_EQ(state, before);
  EXPECT_TRUE(state.can_accept(" 1}"));
  EXPECT_EQ(state, before);
  GrammarState copy = state;  // a saved state goes its own way
  ASSERT_TRUE(copy.accept("2}"));
  EXPECT_TRUE(copy.can_end());
  EXPECT_FALSE(state.can_end());
  EXPECT_TRUE(state.accept("\"s\"}"));
  EXPECT_TRUE(state.can_end());
  EXPECT_FALSE(state.accept("x"));
}

TEST(GrammarState, CanEndOnlyAtTheEnd) {
  const auto g = parse_gbnf(R"g(root ::= "a"+ | "b" "c"?)g");
  GrammarState state(g);
  EXPECT_FALSE(state.can_end());
  EXPECT_TRUE(state.can_continue());
  ASSERT_TRUE(state.accept("b"));
  EXPECT_TRUE(state.can_end());
  EXPECT_TRUE(state.can_continue());
  ASSERT_TRUE(state.accept("c"));
  EXPECT_TRUE(state.can_end());
  EXPECT_FALSE(state.can_continue());
}

TEST(GrammarState, RuntimeLimitsAreErrors) {
  GrammarLimits few;
  few.max_stacks = 4;
  std::string text = "root ::= ";
  for (int i = 0; i < 10; ++i) text += std::string(i ? " | " : "") + "[a-z]* \"" + std::to_string(i) + "\"";
  const auto wide = parse_gbnf(text, few);
  try {
    GrammarState state(wide);
    state.accept("a");
    FAIL() << "more than 4 stacks accepted";
  } catch (const GrammarLimitError& e) {
    EXPECT_NE(std::string(e.what()).find("(max_stacks)"), std::string::npos) << e.what();
  }

  GrammarLimits shallow;
  shallow.max_stack_depth = 8;
  const auto nested = parse_gbnf(R"g(root ::= "(" root ")" | "x")g", shallow);
  GrammarState state(nested);
  EXPECT_TRUE(state.accept("(((("));
  try {
    state.accept("((((((((");
    FAIL() << "nesting past the limit accepted";
  } catch (const GrammarLimitError& e) {
    EXPECT_NE(std::string(e.what()).find("(max_stack_depth)"), std::string::npos) << e.what();
  }

  // Nullable rules referring to each other: 2^30 ways to match nothing. An error, not a hang.
  std::string chain = "root ::= r0 \"x\"\n";
  for (int i = 0; i < 30; ++i) {
    chain.append("r").append(std::to_string(i)).append(" ::= r").append(std::to_string(i + 1));
    chain.append(" r").append(std::to_string(i + 1)).append(" | \"\"\n");
  }
  chain += "r30 ::= \"\" | \"y\"\n";
  const auto exploding = parse_gbnf(chain);
  EXPECT_THROW(GrammarState{exploding}, GrammarLimitError);

  // The work of one accept (and of one mask: grammar_token_mask_test) is bounded as a whole.
  GrammarLimits little;
  little.max_match_steps = 200;
  const auto json = parse_gbnf(testing::kJsonGrammar, little);
  GrammarState small(json);
  EXPECT_TRUE(small.accept("{\"a\": 1}"));
  try {
    GrammarState big(json);
    big.accept(R"({"a": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23]})");
    FAIL() << "a long accept ran past max_match_steps";
  } catch (const GrammarLimitError& e) {
    EXPECT_NE(std::string(e.what()).find("(max_match_steps)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace loom::compute::grammar
