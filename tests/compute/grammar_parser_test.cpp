// The GBNF reader: valid grammars compile to what they say, malformed ones fail with the place and the
// expectation, limits are refused by name.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "grammar_test_grammars.hpp"
#include "loom/compute/grammar/grammar.hpp"
#include "loom/compute/grammar/grammar_state.hpp"

namespace loom::compute::grammar {
namespace {

using testing::kArithmeticGrammar;
using testing::kJsonGrammar;
using testing::kListGrammar;

using testing::matches;

TEST(GbnfParser, ParsesTheJsonArithmeticAndListGrammars) {
  for (const char* text : {kJsonGrammar, kArithmeticGrammar, kListGrammar}) {
    SCOPED_TRACE(text);
    const auto g = parse_gbnf(text);
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(g->rules()[g->root()].name, "root");
    EXPECT_GT(g->elements().size(), 5u);
  }
}

TEST(GbnfParser, LowersEveryConstruct) {
  struct Case {
    const char* grammar;
    std::vector<std::string> good;
    std::vector<std::string> bad;
  };
  const std::vector<Case> cases = {
      {R"g(root ::= "ab" | "c")g", {"ab", "c"}, {"", "a", "abc", "b"}},
      {R"g(root ::= "a" ("b" | "c")* "d")g", {"ad", "abd", "acbcd"}, {"a", "abx", "da"}},
      {R"g(root ::= "x"? "y"+)g", {"y", "xy", "xyyy"}, {"x", "", "xxy"}},
      {R"g(root ::= [a-c0-1]{2,3})g", {"a0", "ccb", "10"}, {"a", "abcd", "d0"}},
      {R"g(root ::= [^a-z]{3})g", {"ABC", "1 ?"}, {"aBC", "AB"}},
      {R"g(root ::= "a"{2,})g", {"aa", "aaaaa"}, {"a", ""}},
      {R"g(root ::= "a"{0})g", {""}, {"a"}},
      {R"g(root ::= "a"{0,2})g", {"", "a", "aa"}, {"aaa"}},
      {R"g(root ::= . "!")g", {"x!", "\xc3\xa9!", "\n!"}, {"!", "xy!"}},
      {R"g(root ::= "\x41\u00e9\U0001F600\n\t\r\\\"")g", {"A\xc3\xa9\xf0\x9f\x98\x80\n\t\r\\\""}, {"A"}},
      {R"g(root ::= [\]\-\\] [\x30-\x32])g", {"]0", "-1", "\\2"}, {"a0", "]3"}},
      {"root ::= a b\na ::= \"1\" # a comment\nb ::= (\n  \"2\"   # inside a group\n  | \"3\"\n)\n", {"12", "13"}, {"1", "23"}},
      {"root ::= \"a\"\n  | \"b\"\n", {"a", "b"}, {"c"}},
      {R"g(root ::= "é" [α-ω]+)g", {"\xc3\xa9\xce\xb1\xcf\x89"}, {"e\xce\xb1", "\xc3\xa9"}},
      {R"g(root ::= ("(" root ")")?)g", {"", "()", "((()))"}, {"(", "())"}},
      {R"g(root ::= ("a"{2}){2})g", {"aaaa"}, {"aaa", "aaaaa"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.grammar);
    const auto g = parse_gbnf(c.grammar);
    for (const auto& s : c.good) EXPECT_TRUE(matches(g, s)) << "should match: " << s;
    for (const auto& s : c.bad) EXPECT_FALSE(matches(g, s)) << "should not match: " << s;
  }
}

struct Malformed {
  std::string grammar;
  std::string expected;  // the whole what(): place and message start
};

TEST(GbnfParser, RefusesMalformedGrammarsWithPlaceAndExpectation) {
  const std::vector<Malformed> cases = {
      {"root ::= \"abc", "line 1, column 14: expected '\"' to close the string opened at line 1, column 10"},
      {"root ::= (\"a\"\n", "line 2, column 1: expected ')' to close the group opened at line 1, column 10"},
      {"root ::= x\nx ::= \"a\" (\n  \"b\" | \"c\"", "line 3, column 12: expected ')' to close the group opened at line 2, column 11"},
      {"root ::= [a-z", "line 1, column 14: expected ']' to close the character class opened at line 1, column 10"},
      {"root ::= foo", "line 1, column 10: undefined rule 'foo'"},
      {"item ::= \"a\"", "the grammar has no 'root' rule"},
      {"", "the grammar has no 'root' rule"},
      {"root \"a\"", "line 1, column 6: expected '::=' after the rule name 'root', found '\"'"},
      {"::= \"a\"", "line 1, column 1: expected a rule name, found ':'"},
      {"root ::= \"a\" | *", "line 1, column 16: '*' must follow something to repeat"},
      {"root ::= \"\\q\"", "line 1, column 11: unknown escape '\\q'"},
      {"root ::= \"\\x4\"", "line 1, column 14: expected 2 hex digits in the escape at line 1, column 11"},
      {"root ::= [z-a]", "line 1, column 11: the range in the character class is reversed"},
      {"root ::= \"a\"{3,2}", "line 1, column 13: the repetition's maximum 2 is below its minimum 3"},
      {"root ::= \"a\"{2000}", "line 1, column 14: the repetition count 2000 is over the limit of 1000 (max_repetition)"},
      {"root ::= \"a\"{", "line 1, column 14: expected a number in the repetition opened at line 1, column 13"},
      {"root ::= \"a\"{2,3", "line 1, column 17: expected '}' to close the repetition opened at line 1, column 13"},
      {"root ::= root \"a\"", "line 1, column 1: rule 'root' is left-recursive: root -> root"},
      {"root ::= a\na ::= b \"x\"\nb ::= a | \"y\"", "line 2, column 1: rule 'a' is left-recursive: a -> b -> a"},
      {"root ::= (\"a\"?)*", "is left-recursive"},
      {"root ::= \"a\"\nroot ::= \"b\"", "line 2, column 1: rule 'root' is defined twice (first at line 1, column 1)"},
      {"root ::= []", "line 1, column 10: empty character class"},
      {"root ::= \"\\uD800\"", "line 1, column 11: the escape names a UTF-16 surrogate"},
      {"root ::= \"\\U00110000\"", "line 1, column 11: the escape names no Unicode code point"},
      {"root ::= \"a\" )", "line 1, column 14: unexpected ')' with no group open"},
      {"root ::= \"a\" @", "line 1, column 14: unexpected '@' in the definition of rule 'root'"},
      {"root ::= \"\xff\"", "line 1, column 11: invalid UTF-8 in the grammar text"},
      {"root ::= \"a\"\n  \"b\"", "line 2, column 3: expected a rule name, found '\"'"},
  };
  for (const Malformed& c : cases) {
    SCOPED_TRACE(c.grammar);
    try {
      parse_gbnf(c.grammar);
      ADD_FAILURE() << "accepted a malformed grammar";
    } catch (const GrammarError& e) {
      const std::string what = e.what();
      if (c.expected.rfind("line ", 0) == 0) {
        EXPECT_EQ(what.substr(0, c.expected.size()), c.expected) << what;
      } else {
        EXPECT_NE(what.find(c.expected), std::string::npos) << what;
      }
    }
  }
}

TEST(GbnfParser, LongChainsOfRules) {
  // 4,000 rules each starting with the next: deep for the left-recursion search, which must not recurse.
  std::string chain = "root ::= r0\n";
  for (int i = 0; i < 4000; ++i) {
    chain.append("r").append(std::to_string(i)).append(" ::= r").append(std::to_string(i + 1)).append(" \"x\"\n");
  }
  GrammarLimits deep;
  deep.max_stack_depth = 5000;  // the default 1,024 refuses this grammar's first step (tested elsewhere)
  const auto g = parse_gbnf(chain + "r4000 ::= \"y\"\n", deep);
  EXPECT_THROW(GrammarState{parse_gbnf(chain + "r4000 ::= \"y\"\n")}, GrammarLimitError);
  GrammarState state(g);
  EXPECT_TRUE(state.accept("y" + std::string(4000, 'x')));
  EXPECT_TRUE(state.can_end());
  try {
    parse_gbnf(chain + "r4000 ::= r0\n");
    FAIL() << "a left-recursive cycle of 4,001 rules accepted";
  } catch (const GrammarError& e) {
    EXPECT_NE(std::string(e.what()).find("is left-recursive: r0 -> r1 -> r2 -> r3 -> ... (3993 more) -> r3997 -> r3998 -> r3999 -> r4000 -> r0"),
              std::string::npos)
        << e.what();
  }
}

TEST(GbnfParser, ErrorCarriesLineAndColumn) {
  try {
    parse_gbnf("root ::= a\n\na ::= \"x\" (\"y\" \"z\"");
    FAIL() << "accepted";
  } catch (const GrammarError& e) {
    EXPECT_EQ(e.line(), 3);
    EXPECT_EQ(e.column(), 19);
    EXPECT_EQ(e.message(), "expected ')' to close the group opened at line 3, column 11, found end of text");
  }
}

TEST(GbnfParser, RefusesGrammarsOverTheLimits) {
  GrammarLimits limits;
  limits.max_text_bytes = 64;
  EXPECT_THROW(
      {
        try {
          parse_gbnf("root ::= \"" + std::string(100, 'a') + "\"", limits);
        } catch (const GrammarError& e) {
          EXPECT_NE(std::string(e.what()).find("(max_text_bytes)"), std::string::npos) << e.what();
          throw;
        }
      },
      GrammarError);

  auto refuses = [](const std::string& text, const GrammarLimits& l, const std::string& name) {
    try {
      parse_gbnf(text, l);
      ADD_FAILURE() << "accepted: " << text.substr(0, 60);
    } catch (const GrammarError& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  };
  refuses("root ::= " + std::string(100, '(') + "\"a\"" + std::string(100, ')'), GrammarLimits{}, "(max_nesting)");
  std::string many = "root ::= r0\n";
  for (int i = 0; i < 5000; ++i) {
    many.append("r").append(std::to_string(i)).append(" ::= \"x\" r").append(std::to_string(i + 1)).append("\n");
  }
  refuses(many, GrammarLimits{}, "(max_rules)");
  refuses("root ::= \"" + std::string(300, 'a') + "\"{1000}", GrammarLimits{}, "(max_elements)");
  refuses("root ::= (\"ab\"{1000}){1000}{1000}", GrammarLimits{}, "(max_elements)");
  GrammarLimits small;
  small.max_repetition = 10;
  refuses("root ::= \"a\"{11}", small, "(max_repetition)");
  // Nested repetitions become rules, not copies: a million copies would be refused by elements, and this
  // grammar is small.
  EXPECT_NO_THROW(parse_gbnf("root ::= ((\"a\"{100}){100}){100}"));
}

}  // namespace
}  // namespace loom::compute::grammar
